package http

import (
	"fmt"
	"net"
	nethttp "net/http"
	"sync"
	"testing"
	"time"

	"github.com/plexus-gw/plexus"
)

// mcpRecorder is an MCP front door that records what reached it.
type mcpRecorder struct {
	mu      sync.Mutex
	methods []string
}

func (m *mcpRecorder) ServeHTTP(w nethttp.ResponseWriter, r *nethttp.Request) {
	m.mu.Lock()
	m.methods = append(m.methods, r.Method+" "+r.URL.Path)
	m.mu.Unlock()
	w.WriteHeader(nethttp.StatusTeapot)
}

func (m *mcpRecorder) seen() []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]string(nil), m.methods...)
}

// TestMCPRoute: /mcp reaches Options.MCP with every method, after the guard:
// a foreign Host or Origin never reaches it; without Options.MCP it is an
// unknown path.
func TestMCPRoute(t *testing.T) {
	rec := &mcpRecorder{}
	ts := mustServe(t, &stubAPI{}, Options{MCP: rec})
	for _, m := range []string{"GET", "POST", "DELETE", "PUT"} {
		if r := ts.do(t, m, "/mcp", nil, ""); r.Status != nethttp.StatusTeapot {
			t.Errorf("%s /mcp = %d, want the front door's answer", m, r.Status)
		}
	}
	if r := rawDo(t, ts.Addr, "POST", "/mcp", "attacker.example:"+fmt.Sprint(ts.Port), nil, "{}"); r.Status != nethttp.StatusForbidden ||
		errorOf(t, r).Code != plexus.CodeHostForbidden {
		t.Errorf("foreign Host = %d %s, want 403 host_forbidden", r.Status, r.Body)
	}
	if r := ts.do(t, "POST", "/mcp", map[string]string{"Origin": "https://attacker.example"}, "{}"); r.Status != nethttp.StatusForbidden {
		t.Errorf("foreign Origin = %d %s, want 403", r.Status, r.Body)
	}
	if got := rec.seen(); len(got) != 4 {
		t.Errorf("the front door saw %v, want only the 4 guarded requests", got)
	}

	bare := mustServe(t, &stubAPI{}, Options{})
	if r := bare.do(t, "POST", "/mcp", nil, "{}"); r.Status != nethttp.StatusNotFound {
		t.Errorf("/mcp without a front door = %d, want 404", r.Status)
	}
}

// streamingMCP holds a GET open, as the MCP event stream does, until its
// request's context ends.
type streamingMCP struct{ started chan struct{} }

func (s streamingMCP) ServeHTTP(w nethttp.ResponseWriter, r *nethttp.Request) {
	w.Header().Set("Content-Type", "text/event-stream")
	w.WriteHeader(nethttp.StatusOK)
	if err := nethttp.NewResponseController(w).Flush(); err != nil {
		return
	}
	close(s.started)
	<-r.Context().Done()
}

// TestMCPStreamEndsAtShutdown: an open GET /mcp stream ends when shutdown
// begins, so Serve returns cleanly (mustServe's cleanup fails the test if
// Shutdown has to give up on it).
func TestMCPStreamEndsAtShutdown(t *testing.T) {
	s := streamingMCP{started: make(chan struct{})}
	// Closed only after the server stopped (cleanups run last-in first-out):
	// a client that hangs up would end the stream by itself.
	var conn net.Conn
	t.Cleanup(func() {
		if conn != nil {
			if err := conn.Close(); err != nil {
				t.Logf("close: %v", err)
			}
		}
	})
	ts := mustServe(t, &stubAPI{}, Options{MCP: s, ShutdownTimeout: time.Second})
	var err error
	conn, err = net.Dial("tcp", ts.Addr)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := fmt.Fprintf(conn, "GET /mcp HTTP/1.1\r\nHost: %s\r\n\r\n", ts.Addr); err != nil {
		t.Fatal(err)
	}
	<-s.started
}
