package mcpserver_test

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/plexus-gw/plexus/mcpserver"
)

// wireLog keeps the bodies of the front door's answers as they went over
// the wire.
type wireLog struct {
	base http.RoundTripper
	mu   sync.Mutex
	buf  bytes.Buffer
}

func (w *wireLog) RoundTrip(r *http.Request) (*http.Response, error) {
	resp, err := w.base.RoundTrip(r)
	if err != nil {
		return resp, err
	}
	// Teed as the client reads: the GET stream of a session never ends.
	resp.Body = struct {
		io.Reader
		io.Closer
	}{io.TeeReader(resp.Body, w), resp.Body}
	return resp, nil
}

func (w *wireLog) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.buf.Write(p)
}

func (w *wireLog) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.buf.String()
}

// TestSessionlessResultsSayComplete: a 2026-07-28 host's tools/call result
// says it is complete and its tools/list that only it may cache it, as
// that version requires; a 2025-11-25 host's results carry neither.
func TestSessionlessResultsSayComplete(t *testing.T) {
	f := newFixture(t, mcpserver.Options{})
	pat := f.agent("claude")
	for _, tc := range []struct {
		version string
		want    bool
	}{{"2026-07-28", true}, {"2025-11-25", false}} {
		t.Run(tc.version, func(t *testing.T) {
			wire := &wireLog{base: bearerTransport{pat: pat, base: f.hosts}}
			c := mcp.NewClient(&mcp.Implementation{Name: "codex", Version: "1"}, nil)
			cs, err := c.Connect(context.Background(), &mcp.StreamableClientTransport{Endpoint: f.url, HTTPClient: &http.Client{Transport: wire}},
				&mcp.ClientSessionOptions{ProtocolVersion: tc.version})
			if err != nil {
				t.Fatal(err)
			}
			defer func() {
				if err := cs.Close(); err != nil {
					t.Logf("close: %v", err)
				}
			}()
			if _, err := cs.ListTools(context.Background(), nil); err != nil {
				t.Fatal(err)
			}
			if res := call(t, cs, "portal__docs__read", map[string]any{"path": "hello.txt"}); res.IsError {
				t.Fatalf("read = %q", text(res))
			}
			got := wire.String()
			complete := strings.Contains(got, `"content":[{"type":"text","text":"hello from the portal"`) &&
				strings.Contains(got, `"resultType":"complete","content"`) || strings.Contains(got, `"resultType":"complete"}`)
			if tc.want && (!strings.Contains(got, `"cacheScope":"private"`) || !strings.Contains(got, `"resultType":"complete"`) || !complete) {
				t.Errorf("the answers lack resultType complete or cacheScope private:\n%s", got)
			}
			if !tc.want && strings.Contains(got, `"resultType"`) {
				t.Errorf("a 2025-11-25 answer carries resultType:\n%s", got)
			}
		})
	}
}
