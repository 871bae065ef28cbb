package mcpserver

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
)

// TestPumpPost: the fast path's requests speak in the session of the
// bridge's client session (its id, its protocol version, the PAT), and a
// 404 marks the session gone; the SDK client's requests carry the PAT.
func TestPumpPost(t *testing.T) {
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
	pc := &pumpConn{client: bridgeClient(pumpRoundTripper{base: http.DefaultTransport, gone: gone}), endpoint: ts.URL,
		header: pumpHeader("plx_agent_x", "s-1", "2025-11-25"), gone: gone}
	post := func() {
		resp, err := pc.post(context.Background(), []byte(`{}`))
		if err != nil {
			t.Fatal(err)
		}
		if err := resp.Body.Close(); err != nil {
			t.Fatal(err)
		}
	}
	seen := func() []http.Header {
		mu.Lock()
		defer mu.Unlock()
		return got
	}
	post()
	post()
	for _, h := range seen() {
		if h.Get("Mcp-Session-Id") != "s-1" || h.Get("Mcp-Protocol-Version") != "2025-11-25" ||
			h.Get("Authorization") != "Bearer plx_agent_x" || h.Get("Content-Type") != "application/json" ||
			!strings.Contains(h.Get("Accept"), "text/event-stream") {
			t.Fatalf("POST headers = %v", h)
		}
	}
	if n := len(seen()); n != 2 {
		t.Fatalf("%d POSTs seen, want 2", n)
	}
	if gone.Load() {
		t.Fatal("gone after a 200")
	}
	mu.Lock()
	status = http.StatusNotFound
	mu.Unlock()
	post()
	if !gone.Load() {
		t.Error("a 404 did not mark the session gone")
	}

	// The SDK client's requests: the PAT, and nothing of the session the
	// SDK does not put there itself.
	c := &http.Client{Transport: bearerRoundTripper{pat: "plx_agent_x", base: http.DefaultTransport}}
	req, err := http.NewRequest(http.MethodPost, ts.URL, nil)
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
	if h := seen(); h[len(h)-1].Get("Authorization") != "Bearer plx_agent_x" || h[len(h)-1].Get("Mcp-Session-Id") != "" {
		t.Fatalf("the SDK client's headers = %v", h[len(h)-1])
	}
	if req.Header.Get("Authorization") != "" {
		t.Error("the SDK client's request was changed in place")
	}
}

// TestPumpHeader: without a session, no session id or version is sent.
func TestPumpHeader(t *testing.T) {
	h := pumpHeader("plx_agent_x", "", "2025-11-25")
	if _, ok := h["Mcp-Session-Id"]; ok {
		t.Errorf("header = %v, want no session id", h)
	}
	if _, ok := h["Mcp-Protocol-Version"]; ok {
		t.Errorf("header = %v, want no protocol version", h)
	}
}
