package http

import (
	"encoding/json"
	nethttp "net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/plexus-gw/plexus"
)

// FuzzInvokeBody: whatever bytes arrive on /invoke, the answer is one
// InvokeResponse (ok and auditId present), never a panic, and a body the
// gateway could not read never reaches it.
func FuzzInvokeBody(f *testing.F) {
	for _, seed := range []string{
		`{"id":"portal.notes.read","input":{"path":"a.md"}}`, `{"id":""}`, `{}`, `null`, `[]`, `{"id":1}`,
		`{"id":"x","input":[1]}`, `{"id":"x"} trailing`, `{"id":"x","input":{"a":{"b":[{}]}}}`, "\xff\xfe", ``,
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, body string) {
		api := &stubAPI{InvokeResp: plexus.InvokeResponse{ID: "x", OK: true, AuditID: "evt_1"}}
		srv := New(api.backend(), Options{Addr: "127.0.0.1:7077", MaxBodyBytes: 4096})
		req := httptest.NewRequest(nethttp.MethodPost, "/invoke", strings.NewReader(body))
		req.Host = "127.0.0.1:7077"
		req.Header.Set("Authorization", "Bearer tok")
		rec := httptest.NewRecorder()
		srv.Handler().ServeHTTP(rec, req)

		var shape map[string]json.RawMessage
		if err := json.Unmarshal(rec.Body.Bytes(), &shape); err != nil {
			t.Fatalf("status %d, body %q is not JSON: %v", rec.Code, rec.Body.Bytes(), err)
		}
		if _, ok := shape["ok"]; !ok {
			t.Fatalf("body %q lacks ok", rec.Body.Bytes())
		}
		if _, ok := shape["auditId"]; !ok {
			t.Fatalf("body %q lacks auditId", rec.Body.Bytes())
		}
		called := len(api.calls) > 0
		var parsed plexus.InvokeRequest
		readable := json.Unmarshal([]byte(body), &parsed) == nil && parsed.ID != ""
		if called && !readable {
			t.Fatalf("the gateway was called with an unreadable body %q", body)
		}
		if !called && rec.Code == nethttp.StatusOK {
			t.Fatalf("an edge denial answered 200: %q", rec.Body.Bytes())
		}
	})
}
