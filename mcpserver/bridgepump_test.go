package mcpserver_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/plexus-gw/plexus"
	"github.com/plexus-gw/plexus/mcpserver"
)

// bridgeVersions are a host whose calls the bridge pumps (2025-11-25) and
// one whose calls go through the SDK's sessions (2026-07-28).
var bridgeVersions = []struct{ name, version string }{{"pumped", "2025-11-25"}, {"sessions", "2026-07-28"}}

// TestBridgeResultVerbatim: over stdio, a 2025-11-25 host reads an
// ingested tool's result, success or isError, as its server sent it (the
// pumped call passes it through); a 2026-07-28 host reads it reshaped, and
// both read the same content.
func TestBridgeResultVerbatim(t *testing.T) {
	for _, v := range bridgeVersions {
		t.Run(v.name, func(t *testing.T) {
			f := newFixture(t, mcpserver.Options{})
			f.ingest("verbatim", newVerbatim(t))
			pat := f.agent("desk", standing("mcp.verbatim.ok", plexus.VerbRead), standing("mcp.verbatim.fail", plexus.VerbRead))
			read := &syncBuffer{}
			cs := bridgedTee(t, mcpserver.BridgeOptions{Endpoint: f.url, PAT: pat}, "desk", v.version, nil, read)
			for tool, raw := range verbatimResults {
				res := call(t, cs, "mcp__verbatim__"+tool, map[string]any{})
				if res.IsError != (tool == "fail") || text(res) == "" {
					t.Errorf("%s: isError %v, text %q", tool, res.IsError, text(res))
				}
				want := v.version < "2026-07-28"
				if got := strings.Contains(read.String(), `"result":`+raw); got != want {
					t.Errorf("%s: the server's result verbatim in what the host read: %v, want %v\nread: %s", tool, got, want, read.String())
				}
			}
		})
	}
}

// TestBridgeCancel: a host's cancellation of a call through the bridge
// reaches the ingested server, the call ends, and the next call runs.
func TestBridgeCancel(t *testing.T) {
	for _, v := range bridgeVersions {
		t.Run(v.name, func(t *testing.T) {
			f := newFixture(t, mcpserver.Options{})
			cs := bridgedVersion(t, mcpserver.BridgeOptions{Endpoint: f.url, PAT: f.agent("desk")}, "desk", v.version, nil)
			ctx, cancel := context.WithCancel(context.Background())
			errc := make(chan error, 1)
			go func() {
				_, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "mcp__up__block", Arguments: map[string]any{}})
				errc <- err
			}()
			for f.upstream.count("block") == 0 {
				time.Sleep(5 * time.Millisecond)
			}
			cancel()
			if err := <-errc; err == nil {
				t.Fatal("a cancelled call answered no error")
			}
			select {
			case <-f.upstream.cancelled:
			case <-time.After(20 * time.Second):
				t.Fatal("the server never saw the call cancelled")
			}
			if res := call(t, cs, "portal__docs__read", map[string]any{"path": "hello.txt"}); res.IsError {
				t.Errorf("the call after the cancelled one = %q", text(res))
			}
		})
	}
}

// sessionSpy is a reverse proxy to the daemon that notes the MCP session
// the bridge speaks in, so that a test can end it as a restart would.
type sessionSpy struct {
	url string // the proxy's /mcp
	mu  sync.Mutex
	id  string
}

func newSessionSpy(t *testing.T, target string) *sessionSpy {
	u, err := url.Parse(target)
	if err != nil {
		t.Fatal(err)
	}
	s := &sessionSpy{}
	rp := &httputil.ReverseProxy{
		Rewrite: func(r *httputil.ProxyRequest) {
			r.SetURL(&url.URL{Scheme: u.Scheme, Host: u.Host})
			r.Out.Host = u.Host
		},
		ModifyResponse: func(resp *http.Response) error {
			if id := resp.Header.Get("Mcp-Session-Id"); id != "" {
				s.mu.Lock()
				s.id = id
				s.mu.Unlock()
			}
			return nil
		},
		FlushInterval: -1,
	}
	ts := httptest.NewServer(rp)
	t.Cleanup(ts.Close)
	s.url = ts.URL + "/mcp"
	return s
}

func (s *sessionSpy) session() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.id
}

// TestBridgeReconnects: when the daemon no longer knows the bridge's
// session (it restarted), the call is answered that the connection was
// lost and to call again, and the next call reconnects and runs.
func TestBridgeReconnects(t *testing.T) {
	for _, v := range bridgeVersions {
		t.Run(v.name, func(t *testing.T) {
			f := newFixture(t, mcpserver.Options{})
			pat := f.agent("desk")
			spy := newSessionSpy(t, f.base)
			cs := bridgedVersion(t, mcpserver.BridgeOptions{Endpoint: spy.url, PAT: pat}, "desk", v.version, nil)
			read := func() (*mcp.CallToolResult, error) {
				return cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "portal__docs__read", Arguments: map[string]any{"path": "hello.txt"}})
			}
			if res, err := read(); err != nil || res.IsError {
				t.Fatalf("first call: %v %+v", err, res)
			}
			f.endSession(pat, spy.session())
			if _, err := read(); err == nil || !strings.Contains(err.Error(), "call again to reconnect") {
				t.Fatalf("call on a session the daemon ended: %v, want the connection said lost", err)
			}
			if res, err := read(); err != nil || res.IsError || !strings.Contains(text(res), "hello from the portal") {
				t.Fatalf("call after reconnecting: %v %+v", err, res)
			}
			if opened := f.rows("session.opened"); len(opened) != 2 {
				t.Errorf("sessions opened = %d, want 2 (the second on reconnecting)", len(opened))
			}
		})
	}
}

// endSession ends the MCP session id of the agent whose PAT is pat, as
// its host's DELETE does: the daemon forgets it as a restart would.
func (f *fixture) endSession(pat, id string) {
	f.t.Helper()
	if id == "" {
		f.t.Fatal("no MCP session seen")
	}
	req, err := http.NewRequest(http.MethodDelete, f.url, nil)
	if err != nil {
		f.t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+pat)
	req.Header.Set("Mcp-Session-Id", id)
	req.Header.Set("Mcp-Protocol-Version", "2025-11-25")
	resp, err := (&http.Client{Transport: f.hosts}).Do(req)
	if err != nil {
		f.t.Fatal(err)
	}
	if err := resp.Body.Close(); err != nil {
		f.t.Log(err)
	}
	if resp.StatusCode/100 != 2 {
		f.t.Fatalf("DELETE the session: %s", resp.Status)
	}
}
