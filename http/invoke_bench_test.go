package http

import (
	"bytes"
	"context"
	"io"
	nethttp "net/http"
	"net/url"
	"testing"

	"github.com/plexus-gw/plexus"
	"github.com/plexus-gw/plexus/gateway"
)

// echoInvoke answers every call with its input as output, as the e2e
// benchmarks' echo capability does, and allocates nothing itself.
type echoInvoke struct{}

func (echoInvoke) Invoke(_ context.Context, _ gateway.Credentials, req plexus.InvokeRequest) plexus.InvokeResponse {
	return plexus.InvokeResponse{ID: req.ID, OK: true, Output: req.Input, AuditID: "act_01JBENCH"}
}

func (e echoInvoke) InvokeStream(ctx context.Context, c gateway.Credentials, req plexus.InvokeRequest, _ func(plexus.InvokeProgressEvent)) plexus.InvokeResponse {
	return e.Invoke(ctx, c, req)
}

// discardWriter is a ResponseWriter that keeps only the status, reusable
// across calls, so the benchmark counts the handler's allocations and not a
// recorder's.
type discardWriter struct {
	h      nethttp.Header
	status int
	n      int
}

func (w *discardWriter) Header() nethttp.Header      { return w.h }
func (w *discardWriter) WriteHeader(code int)        { w.status = code }
func (w *discardWriter) Write(b []byte) (int, error) { w.n += len(b); return len(b), nil }

// BenchmarkInvokeHandler: one /invoke through the whole handler chain
// (logRequests, guard, the mux, handleInvoke) with the echo gateway, no
// network: the edge's own allocations and CPU per call (-benchmem).
func BenchmarkInvokeHandler(b *testing.B) {
	s := New(Backend{Invoke: echoInvoke{}}, Options{Addr: "127.0.0.1:7777"})
	h := s.Handler()
	body := []byte(`{"id":"test.echo.read","input":{"msg":"hello, plexus","n":42}}`)
	rd := bytes.NewReader(body)
	r, err := nethttp.NewRequest(nethttp.MethodPost, "http://127.0.0.1:7777/invoke", nil)
	if err != nil {
		b.Fatal(err)
	}
	r.URL = &url.URL{Path: "/invoke"} // origin-form, as a server reads it
	r.RequestURI = "/invoke"
	r.Header.Set("Authorization", "Bearer tok")
	r.Header.Set("Content-Type", "application/json")
	r.ContentLength = int64(len(body))
	w := &discardWriter{h: nethttp.Header{}}
	b.ReportAllocs()
	for b.Loop() {
		rd.Reset(body)
		r.Body = io.NopCloser(rd)
		clear(w.h)
		w.status = 0
		h.ServeHTTP(w, r)
		if w.status != nethttp.StatusOK {
			b.Fatalf("status %d", w.status)
		}
	}
}
