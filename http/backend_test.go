package http

import (
	"testing"

	"github.com/plexus-gw/plexus"
)

// TestBackendGroups: a server serves the routes of the groups its backend
// sets and no other, so a handler test stubs only its own group; a group of
// the owner plane cannot be served without the connection-key check.
func TestBackendGroups(t *testing.T) {
	t.Run("OnlyItsGroup", func(t *testing.T) {
		api := &stubAPI{InvokeResp: plexus.InvokeResponse{ID: "x.echo", OK: true, AuditID: "evt_1"}}
		ts := mustServe(t, Backend{Invoke: stubInvoke{api}}, Options{})
		if resp := ts.do(t, "POST", "/invoke", nil, `{"id":"x.echo","input":{}}`); resp.Status != 200 {
			t.Errorf("POST /invoke: status %d (%s), want 200", resp.Status, resp.Body)
		}
		for _, path := range []string{"/events", "/manifest", "/admin/api/status"} {
			resp := ts.do(t, "GET", path, nil, "")
			if resp.Status != 404 || errorOf(t, resp).Code != plexus.CodeNotFound {
				t.Errorf("GET %s: status %d (%s), want 404 not_found", path, resp.Status, resp.Body)
			}
		}
		if got := api.Calls(); len(got) != 1 || got[0] != "Invoke" {
			t.Errorf("calls = %v, want [Invoke]", got)
		}
	})
	t.Run("ErrOwnerPlaneWithoutOwner", func(t *testing.T) {
		defer func() {
			if recover() == nil {
				t.Error("New served the admin group without Owner; want a panic at start-up")
			}
		}()
		New(Backend{Admin: stubAdmin{&stubAPI{}}}, Options{})
	})
}
