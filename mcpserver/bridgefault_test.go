package mcpserver_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/plexus-gw/plexus/mcpserver"
)

// faultyDaemon is a reverse proxy to the daemon at target whose answer to
// a POST whose body contains match is onMatch's instead (next is the
// proxy, for an onMatch that only holds or changes the request); it returns
// the proxy's /mcp URL.
func faultyDaemon(t *testing.T, target, match string, onMatch func(w http.ResponseWriter, r *http.Request, next http.Handler)) string {
	t.Helper()
	u, err := url.Parse(target)
	if err != nil {
		t.Fatal(err)
	}
	rp := &httputil.ReverseProxy{Rewrite: func(r *httputil.ProxyRequest) {
		r.SetURL(&url.URL{Scheme: u.Scheme, Host: u.Host})
		r.Out.Host = u.Host
	}, FlushInterval: -1}
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(r.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		if r.Method == http.MethodPost && bytes.Contains(body, []byte(match)) {
			onMatch(w, r.WithContext(context.WithValue(r.Context(), bodyKey{}, body)), rp)
			return
		}
		rp.ServeHTTP(w, r)
	}))
	t.Cleanup(ts.Close)
	return ts.URL + "/mcp"
}

// bodyKey holds, in a request faultyDaemon hands on, the body it read.
type bodyKey struct{}

// answerSSE answers the POST r with one SSE event, the JSON-RPC response
// to r's request whose text content is text, under a long event id (the
// daemon's event lines count toward the bridge's bound too).
func answerSSE(t *testing.T, w http.ResponseWriter, r *http.Request, text string) {
	var req struct {
		ID json.RawMessage `json:"id"`
	}
	if err := json.Unmarshal(r.Context().Value(bodyKey{}).([]byte), &req); err != nil {
		t.Error(err)
		return
	}
	w.Header().Set("Content-Type", "text/event-stream")
	w.WriteHeader(http.StatusOK)
	if _, err := fmt.Fprintf(w, "event: message\nid: %s\ndata: {\"jsonrpc\":\"2.0\",\"id\":%s,\"result\":{\"content\":[{\"type\":\"text\",\"text\":%q}]}}\n\n", strings.Repeat("7", 2048), req.ID, text); err != nil {
		t.Log(err)
	}
}

// TestBridgeRefusedAnswer: an answer to a pumped call the bridge cannot
// take (beyond its bound, malformed) is that call's error, told as such;
// the daemon session goes on: a call running meanwhile completes, and so
// does the next call.
func TestBridgeRefusedAnswer(t *testing.T) {
	huge := strings.Repeat("x", 17<<20)
	cases := []struct {
		name, want string
		answer     http.HandlerFunc
	}{
		{"an oversized event", "larger than the 16 MiB", func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "text/event-stream")
			w.WriteHeader(http.StatusOK)
			_, _ = io.WriteString(w, "data: "+huge)
		}},
		{"an oversized JSON answer", "larger than the 16 MiB", func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusOK)
			_, _ = io.WriteString(w, `{"jsonrpc":"2.0","id":1,"result":"`+huge+`"}`)
		}},
		{"a malformed event", "decode the daemon's message", func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "text/event-stream")
			w.WriteHeader(http.StatusOK)
			_, _ = io.WriteString(w, "event: message\ndata: {\"jsonrpc\":\"2.0\",\n\n")
		}},
		{"an answer to another call", "on the stream of", func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "text/event-stream")
			w.WriteHeader(http.StatusOK)
			_, _ = io.WriteString(w, "event: message\ndata: {\"jsonrpc\":\"2.0\",\"id\":\"someone-else\",\"result\":{}}\n\n")
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, mcpserver.Options{})
			ep := faultyDaemon(t, f.base, "portal__docs__read", func(w http.ResponseWriter, r *http.Request, _ http.Handler) { tc.answer(w, r) })
			cs := bridgedVersion(t, mcpserver.BridgeOptions{Endpoint: ep, PAT: f.agent("desk")}, "desk", "2025-11-25", nil)
			held := make(chan error, 1)
			go func() {
				res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "mcp__up__count", Arguments: map[string]any{"n": 1, "hold": true}})
				if err == nil && res.IsError {
					err = fmt.Errorf("isError: %s", text(res))
				}
				held <- err
			}()
			waitCount(f, "count")
			_, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "portal__docs__read", Arguments: map[string]any{"path": "hello.txt"}})
			if err == nil || !strings.Contains(err.Error(), tc.want) || strings.Contains(err.Error(), "restart") {
				t.Fatalf("the refused call's error = %v, want its own, saying %q", err, tc.want)
			}
			if res := call(t, cs, "mcp__up__count", map[string]any{"n": 1}); res.IsError {
				t.Errorf("the next call = %q", text(res))
			}
			f.upstream.releaseHeld()
			if err := <-held; err != nil {
				t.Errorf("the call running meanwhile: %v", err)
			}
		})
	}
}

// waitCount waits until the upstream saw a call of tool.
func waitCount(f *fixture, tool string) {
	for f.upstream.count(tool) == 0 {
		runtime.Gosched()
	}
}

// TestBridgeAnswerAtTheBound: a server's message of about 16 MiB, what
// the daemon takes, reaches the host though the daemon's event around it
// is larger than 16 MiB. (The host's SDK reads lines of 16 MiB at most.)
func TestBridgeAnswerAtTheBound(t *testing.T) {
	f := newFixture(t, mcpserver.Options{})
	text16 := strings.Repeat("y", mcp.DefaultMaxEventSize-1024)
	ep := faultyDaemon(t, f.base, "portal__docs__read", func(w http.ResponseWriter, r *http.Request, _ http.Handler) { answerSSE(t, w, r, text16) })
	cs := bridgedVersion(t, mcpserver.BridgeOptions{Endpoint: ep, PAT: f.agent("desk")}, "desk", "2025-11-25", nil)
	res := call(t, cs, "portal__docs__read", map[string]any{"path": "hello.txt"})
	if got := text(res); got != text16 {
		t.Errorf("the host read %d bytes, want %d", len(got), len(text16))
	}
}

// TestBridgeDaemonDiesMidCall: a daemon whose connection ends in the
// middle of a call's answer is told as lost, to call again.
func TestBridgeDaemonDiesMidCall(t *testing.T) {
	f := newFixture(t, mcpserver.Options{})
	ep := faultyDaemon(t, f.base, "tools/call", func(w http.ResponseWriter, r *http.Request, _ http.Handler) {
		w.Header().Set("Content-Type", "text/event-stream")
		w.WriteHeader(http.StatusOK)
		_, _ = io.WriteString(w, "event: message\ndata: {\"jsonrpc\":\"2.0\",")
		w.(http.Flusher).Flush()
		conn, _, err := http.NewResponseController(w).Hijack()
		if err != nil {
			t.Error(err)
			return
		}
		if err := conn.Close(); err != nil {
			t.Log(err)
		}
	})
	cs := bridgedVersion(t, mcpserver.BridgeOptions{Endpoint: ep, PAT: f.agent("desk")}, "desk", "2025-11-25", nil)
	_, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "portal__docs__read", Arguments: map[string]any{"path": "hello.txt"}})
	if err == nil || !strings.Contains(err.Error(), "call again to reconnect") {
		t.Fatalf("err = %v, want the connection said lost", err)
	}
}

// TestBridgeRefusesRedirect: the PAT goes to the endpoint and nowhere
// else: a redirect from the endpoint, of the connection's first request or
// of a call, is not followed, and the host is told so.
func TestBridgeRefusesRedirect(t *testing.T) {
	for _, at := range []string{"initialize", "tools/call"} {
		for _, v := range bridgeVersions {
			t.Run(at+"/"+v.name, func(t *testing.T) {
				f := newFixture(t, mcpserver.Options{})
				var leaked atomic.Int32
				elsewhere := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
					leaked.Add(1)
					w.WriteHeader(http.StatusBadGateway)
				}))
				t.Cleanup(elsewhere.Close)
				ep := faultyDaemon(t, f.base, `"method":"`+at+`"`, func(w http.ResponseWriter, r *http.Request, _ http.Handler) {
					http.Redirect(w, r, elsewhere.URL+"/collect", http.StatusTemporaryRedirect)
				})
				cs := bridgedVersion(t, mcpserver.BridgeOptions{Endpoint: ep, PAT: f.agent("desk")}, "desk", v.version, nil)
				_, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "portal__docs__read", Arguments: map[string]any{"path": "hello.txt"}})
				if n := leaked.Load(); n != 0 {
					t.Errorf("%d requests followed the redirect to another origin", n)
				}
				if err == nil || !strings.Contains(err.Error(), "answered with a redirect") {
					t.Errorf("err = %v, want the redirect refused", err)
				}
			})
		}
	}
}

// TestBridgeAnswersBeforeStreamEnds: the host has a pumped call's answer
// as soon as the daemon sent it, not once the daemon's stream after it
// ended: a stream held open after the answer (here until the host has
// it) is read to its end afterwards, and the connection it came on is not
// aborted (which the bridge does when a stream outlasts its wait).
func TestBridgeAnswersBeforeStreamEnds(t *testing.T) {
	f := newFixture(t, mcpserver.Options{})
	release := make(chan struct{})
	aborted := make(chan bool, 1)
	ep := faultyDaemon(t, f.base, "portal__docs__read", func(w http.ResponseWriter, r *http.Request, _ http.Handler) {
		answerSSE(t, w, r, "answered")
		w.(http.Flusher).Flush()
		select {
		case <-release:
			aborted <- false
		case <-r.Context().Done():
			aborted <- true
		}
	})
	cs := bridgedVersion(t, mcpserver.BridgeOptions{Endpoint: ep, PAT: f.agent("desk")}, "desk", "2025-11-25", nil)
	res := call(t, cs, "portal__docs__read", map[string]any{"path": "hello.txt"})
	close(release)
	if got := text(res); got != "answered" {
		t.Errorf("the host read %q", got)
	}
	if <-aborted {
		t.Error("the host's answer waited for the daemon's stream to end: the bridge gave up on it first")
	}
}

// TestBridgeClosesItsConnections: once the bridge ended, no connection it
// opened to the daemon is left open, idle ones included (a connection
// dialed for a call that then took another one would hold the daemon's
// graceful shutdown, which waits on a connection it counts new).
func TestBridgeClosesItsConnections(t *testing.T) {
	for _, v := range bridgeVersions {
		t.Run(v.name, func(t *testing.T) {
			f := newFixture(t, mcpserver.Options{})
			u, err := url.Parse(f.base)
			if err != nil {
				t.Fatal(err)
			}
			var mu sync.Mutex
			open := map[net.Conn]bool{}
			closed := make(chan struct{}, 1) // a connection closed since the last look
			proxy := httptest.NewUnstartedServer(&httputil.ReverseProxy{Rewrite: func(r *httputil.ProxyRequest) {
				r.SetURL(&url.URL{Scheme: u.Scheme, Host: u.Host})
				r.Out.Host = u.Host
			}, FlushInterval: -1})
			proxy.Config.ConnState = func(c net.Conn, s http.ConnState) {
				mu.Lock()
				defer mu.Unlock()
				switch s {
				case http.StateNew:
					open[c] = true
				case http.StateClosed, http.StateHijacked:
					delete(open, c)
					select {
					case closed <- struct{}{}:
					default:
					}
				}
			}
			proxy.Start()
			t.Cleanup(proxy.Close)
			hostR, bridgeW, err := os.Pipe()
			if err != nil {
				t.Fatal(err)
			}
			bridgeR, hostW, err := os.Pipe()
			if err != nil {
				t.Fatal(err)
			}
			done := make(chan error, 1)
			go func() {
				done <- mcpserver.Bridge(context.Background(), &mcp.IOTransport{Reader: bridgeR, Writer: bridgeW},
					mcpserver.BridgeOptions{Endpoint: proxy.URL + "/mcp", PAT: f.agent("desk")})
			}()
			cs, err := mcp.NewClient(&mcp.Implementation{Name: "desk", Version: "9.9"}, nil).Connect(context.Background(),
				&mcp.IOTransport{Reader: hostR, Writer: hostW}, &mcp.ClientSessionOptions{ProtocolVersion: v.version})
			if err != nil {
				t.Fatal(err)
			}
			var wg sync.WaitGroup
			for range 4 { // calls at once: the bridge opens several connections
				wg.Add(1)
				go func() {
					defer wg.Done()
					call(t, cs, "portal__docs__read", map[string]any{"path": "hello.txt"})
				}()
			}
			wg.Wait()
			if err := cs.Close(); err != nil {
				t.Logf("close host session: %v", err)
			}
			if err := <-done; err != nil && err != io.EOF {
				t.Logf("bridge: %v", err)
			}
			gaveUp := time.After(10 * time.Second)
			for {
				mu.Lock()
				n := len(open)
				mu.Unlock()
				if n == 0 {
					return
				}
				select {
				case <-closed:
				case <-gaveUp:
					t.Fatalf("%d connections of the bridge to the daemon still open after it ended", n)
				}
			}
		})
	}
}
