package mcpclient_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/plexus-gw/plexus"
	"github.com/plexus-gw/plexus/transports/mcpclient"
)

// flakyServer is a hand-written Streamable HTTP server answering in plain
// JSON at the protocol version it is made with. Its one tool fails its first
// call (a JSON-RPC error, or an HTTP 500 with no JSON-RPC body); ping is a
// method it does not know, as on 2026-07-28, where ping was removed.
type flakyServer struct {
	pv       string
	failHTTP bool // the first call fails with HTTP 500 instead of a JSON-RPC error

	mu      sync.Mutex
	methods []string // every method received, in order
	calls   int
}

func (f *flakyServer) seen(method string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	n := 0
	for _, m := range f.methods {
		if m == method {
			n++
		}
	}
	return n
}

func (f *flakyServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		w.WriteHeader(http.StatusMethodNotAllowed)
		return
	}
	var msg struct {
		ID     json.RawMessage `json:"id"`
		Method string          `json:"method"`
	}
	body, err := io.ReadAll(r.Body)
	if err != nil || json.Unmarshal(body, &msg) != nil {
		w.WriteHeader(http.StatusBadRequest)
		return
	}
	f.mu.Lock()
	f.methods = append(f.methods, msg.Method)
	if msg.Method == "tools/call" {
		f.calls++
	}
	first := f.calls == 1
	f.mu.Unlock()
	if msg.ID == nil {
		w.WriteHeader(http.StatusAccepted)
		return
	}
	reply := func(field, v string) {
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"jsonrpc":"2.0","id":%s,%q:%s}`, msg.ID, field, v)
	}
	switch {
	case msg.Method == "initialize":
		reply("result", fmt.Sprintf(`{"protocolVersion":%q,"capabilities":{"tools":{}},"serverInfo":{"name":"flaky","version":"1"}}`, f.pv))
	case msg.Method == "tools/list":
		reply("result", `{"tools":[{"name":"flaky","inputSchema":{"type":"object"}}]}`)
	case msg.Method == "tools/call" && first && f.failHTTP:
		http.Error(w, "upstream hiccup", http.StatusInternalServerError)
	case msg.Method == "tools/call" && first:
		reply("error", `{"code":-32603,"message":"flaky broke this once"}`)
	case msg.Method == "tools/call":
		reply("result", `{"content":[{"type":"text","text":"fine now"}]}`)
	default:
		reply("error", `{"code":-32601,"message":"Method not found"}`)
	}
}

// TestFailedCallKeepsALiveSession: a call that fails while the server is
// there reports the server's own error, and the session stays: the next
// call succeeds with no reconnect. A JSON-RPC error reply is an answer, so
// it needs no liveness check; a failure with no reply is checked with ping
// on versions that have it, where ping's error reply is also an answer; a
// 2026-07-28 session never sends ping.
func TestFailedCallKeepsALiveSession(t *testing.T) {
	for _, tc := range []struct {
		name      string
		pv        string
		failHTTP  bool
		wantCode  plexus.ErrorCode
		wantParts []string
		wantPings int
	}{
		{"2026-07-28 JSON-RPC error", "2026-07-28", false, plexus.CodeTransportError, []string{"flaky broke this once"}, 0},
		{"2025-11-25 JSON-RPC error", "2025-11-25", false, plexus.CodeTransportError, []string{"flaky broke this once"}, 0},
		{"2026-07-28 HTTP 500", "2026-07-28", true, plexus.CodeTransportError, []string{"tools/call"}, 0},
		{"2025-11-25 HTTP 500, ping refused", "2025-11-25", true, plexus.CodeTransportError, []string{"tools/call"}, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := &flakyServer{pv: tc.pv, failHTTP: tc.failHTTP}
			ts := httptest.NewServer(f)
			t.Cleanup(ts.Close)
			h := startClient(t, "flaky", mcpclient.ServerConfig{URL: ts.URL}, mcpclient.Options{})
			h.waitReady(t)

			wantErr(t, h.call(t, t.Context(), "mcp.flaky.flaky", nil, nil), tc.wantCode, tc.wantParts...)
			if got := firstText(t, h.ok(t, "mcp.flaky.flaky", nil)); got != "fine now" {
				t.Errorf("second call answered %q, want %q", got, "fine now")
			}
			if n := f.seen("initialize"); n != 1 {
				t.Errorf("the server saw %d initialize requests, want 1: a live session was dropped", n)
			}
			if n := f.seen("ping"); n != tc.wantPings {
				t.Errorf("the server saw %d pings, want %d", n, tc.wantPings)
			}
			if slices.ContainsFunc(h.healthLog(), func(hl plexus.Health) bool { return hl.Status == plexus.HealthUnavailable }) {
				t.Errorf("the source went unavailable: %v", h.healthLog())
			}
			h.stop()
		})
	}
}

// TestSessionlessServerGone: on 2026-07-28 a request that gets no HTTP reply
// at all means the server is gone: the call answers source_unavailable and
// the source goes unavailable, with no ping sent.
func TestSessionlessServerGone(t *testing.T) {
	f := &flakyServer{pv: "2026-07-28"}
	ts := httptest.NewServer(f)
	h := startClient(t, "flaky", mcpclient.ServerConfig{URL: ts.URL}, mcpclient.Options{})
	h.waitReady(t)
	ts.Close()

	wantErr(t, h.call(t, t.Context(), "mcp.flaky.flaky", nil, nil), plexus.CodeSourceUnavailable, "does not answer")
	eventually(t, 20*time.Second, "health goes unavailable", func() bool {
		return slices.ContainsFunc(h.healthLog(), func(hl plexus.Health) bool { return hl.Status == plexus.HealthUnavailable })
	})
	if n := f.seen("ping"); n != 0 {
		t.Errorf("the server saw %d pings on a 2026-07-28 session", n)
	}
	h.stop()
}
