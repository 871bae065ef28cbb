package mcpserver

import (
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
)

// TestPumpRoundTripper: the fast path's requests speak in the session of
// the bridge's client session (its id, its protocol version, the PAT), and
// a 404 marks the session gone.
func TestPumpRoundTripper(t *testing.T) {
	var mu sync.Mutex // guards got and status, shared with the handler
	var got []http.Header
	status := http.StatusOK
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		got = append(got, r.Header.Clone())
		w.WriteHeader(status)
	}))
	t.Cleanup(ts.Close)
	gone := &atomic.Bool{}
	c := &http.Client{Transport: bearerRoundTripper{pat: "plx_agent_x", base: http.DefaultTransport, session: "s-1", version: "2025-11-25", gone: gone}}
	do := func(method string) *http.Response {
		req, err := http.NewRequest(method, ts.URL, nil)
		if err != nil {
			t.Fatal(err)
		}
		resp, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		if err := resp.Body.Close(); err != nil {
			t.Fatal(err)
		}
		mu.Lock()
		defer mu.Unlock()
		return resp
	}
	seen := func() []http.Header {
		mu.Lock()
		defer mu.Unlock()
		return got
	}
	do(http.MethodPost)
	if h := seen(); len(h) != 1 || h[0].Get("Mcp-Session-Id") != "s-1" || h[0].Get("Mcp-Protocol-Version") != "2025-11-25" ||
		h[0].Get("Authorization") != "Bearer plx_agent_x" {
		t.Fatalf("POST headers = %v", h)
	}
	if gone.Load() {
		t.Fatal("gone after a 200")
	}
	mu.Lock()
	status = http.StatusNotFound
	mu.Unlock()
	do(http.MethodPost)
	if !gone.Load() {
		t.Error("a 404 did not mark the session gone")
	}
}
