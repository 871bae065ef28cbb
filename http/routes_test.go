package http

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/plexus-gw/plexus"
)

func TestFallback(t *testing.T) {
	api := &stubAPI{}
	ts := mustServe(t, api, Options{})
	t.Run("NotFound", func(t *testing.T) {
		resp := ts.do(t, "GET", "/nope?token=x", nil, "")
		if resp.Status != 404 {
			t.Fatalf("status = %d", resp.Status)
		}
		b := errorOf(t, resp)
		if b.Code != plexus.CodeNotFound || b.Discovery != "/.well-known/plexus" {
			t.Errorf("body = %+v", b)
		}
		if ct := resp.Header.Get("Content-Type"); ct != "application/json" {
			t.Errorf("Content-Type = %q", ct)
		}
		if cc := resp.Header.Get("Cache-Control"); cc != "no-store" {
			t.Errorf("Cache-Control = %q", cc)
		}
	})
	t.Run("MethodNotAllowed", func(t *testing.T) {
		resp := ts.do(t, "DELETE", "/grants", nil, "")
		if resp.Status != 405 {
			t.Fatalf("status = %d (%s)", resp.Status, resp.Body)
		}
		if got := resp.Header.Get("Allow"); got != "GET, HEAD, PUT" {
			t.Errorf("Allow = %q", got)
		}
		if errorOf(t, resp).Code != plexus.CodeInvalidRequest {
			t.Errorf("body = %s", resp.Body)
		}
	})
	t.Run("MethodNotAllowedWildcard", func(t *testing.T) {
		resp := ts.do(t, "GET", "/admin/api/pending/p1/approve", nil, "")
		if resp.Status != 405 || resp.Header.Get("Allow") != "POST" {
			t.Errorf("got %d Allow %q", resp.Status, resp.Header.Get("Allow"))
		}
	})
	t.Run("InvokeWrongMethod", func(t *testing.T) {
		resp := ts.do(t, "GET", "/invoke", nil, "")
		if resp.Status != 405 {
			t.Fatalf("status = %d", resp.Status)
		}
		if ir := invokeOf(t, resp); ir.OK || ir.Error == nil {
			t.Errorf("body = %s", resp.Body)
		}
	})
	if calls := api.Calls(); len(calls) != 0 {
		t.Errorf("gateway called: %v", calls)
	}
}

// TestRegisterExtension: POST /extensions reaches the gateway with the
// session from the header and answers 202; other methods are 405.
func TestRegisterExtension(t *testing.T) {
	api := &stubAPI{}
	ts := mustServe(t, api, Options{})
	resp := ts.do(t, "POST", "/extensions", map[string]string{plexus.SessionHeader: "sess_1"},
		`{"manifest": {"manifest": "plexus-extension/0.1", "source": "notes"}}`)
	if resp.Status != 202 {
		t.Fatalf("status = %d, body %s", resp.Status, resp.Body)
	}
	name, _, arg := api.Last(t)
	if calls := api.Calls(); len(calls) != 1 || name != "RegisterExtension" {
		t.Fatalf("calls = %v", calls)
	}
	if req, ok := arg.(plexus.ExtensionRegisterRequest); !ok || req.SessionID != "sess_1" || req.Manifest.Source != "notes" {
		t.Errorf("request = %+v", arg)
	}
	if resp := ts.do(t, "GET", "/extensions", nil, ""); resp.Status != 405 {
		t.Errorf("GET /extensions: status %d", resp.Status)
	}
}

func TestRequestGrants(t *testing.T) {
	api := &stubAPI{}
	ts := mustServe(t, api, Options{})
	body := `{"grants":{"cap.read":"allow"}}`
	t.Run("Token", func(t *testing.T) {
		api.Token, api.Pending = &plexus.ScopedToken{Token: "eyJ", JTI: "tok_1"}, nil
		resp := ts.do(t, "PUT", "/grants", map[string]string{plexus.SessionHeader: "sess_1"}, body)
		if resp.Status != 200 {
			t.Fatalf("status = %d (%s)", resp.Status, resp.Body)
		}
		_, c, arg := api.Last(t)
		if req := arg.(plexus.GrantRequest); req.SessionID != "sess_1" || c.SessionID != "sess_1" {
			t.Errorf("session not carried from header: body %q creds %q", req.SessionID, c.SessionID)
		}
	})
	t.Run("Pending", func(t *testing.T) {
		api.Token, api.Pending = nil, &plexus.GrantPendingResponse{Status: plexus.CodeGrantPendingUser, PendingID: "pend_1"}
		resp := ts.do(t, "PUT", "/grants", nil, `{"sessionId":"sess_2","grants":{}}`)
		if resp.Status != 202 {
			t.Fatalf("status = %d (%s)", resp.Status, resp.Body)
		}
		var got plexus.GrantPendingResponse
		if err := json.Unmarshal(resp.Body, &got); err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(*api.Pending, got); diff != "" {
			t.Errorf("body (-want +got):\n%s", diff)
		}
		if _, c, _ := api.Last(t); c.SessionID != "sess_2" {
			t.Errorf("creds session = %q, want the body's", c.SessionID)
		}
	})
	t.Run("SessionMismatch", func(t *testing.T) {
		before := len(api.Calls())
		resp := ts.do(t, "PUT", "/grants", map[string]string{plexus.SessionHeader: "sess_1"}, `{"sessionId":"sess_2","grants":{}}`)
		if resp.Status != 400 || errorOf(t, resp).Code != plexus.CodeInvalidRequest {
			t.Errorf("got %d %s", resp.Status, resp.Body)
		}
		if len(api.Calls()) != before {
			t.Error("gateway called")
		}
	})
	t.Run("BadDecision", func(t *testing.T) {
		resp := ts.do(t, "PUT", "/grants", nil, `{"grants":{"cap":"maybe"}}`)
		if resp.Status != 400 || errorOf(t, resp).Code != plexus.CodeMalformed {
			t.Errorf("got %d %s", resp.Status, resp.Body)
		}
	})
}

func TestGrantStatus(t *testing.T) {
	api := &stubAPI{}
	ts := mustServe(t, api, Options{})
	if resp := ts.do(t, "GET", "/grants/status", nil, ""); resp.Status != 400 {
		t.Errorf("missing pendingId: status %d", resp.Status)
	}
	resp := ts.do(t, "GET", "/grants/status?pendingId=pend_7", nil, "")
	if resp.Status != 200 {
		t.Fatalf("status %d", resp.Status)
	}
	if _, _, arg := api.Last(t); arg != "pend_7" {
		t.Errorf("pendingId = %v", arg)
	}
}

func TestDecide(t *testing.T) {
	api := &stubAPI{}
	ts := mustServe(t, api, Options{})
	tests := []struct {
		name, path, body string
		status           int
		wantAction       string
	}{
		{"ApproveNoBody", "/admin/api/pending/p1/approve", "", 200, "approve"},
		{"DenyReason", "/admin/api/pending/p1/deny", `{"reason":"no"}`, 200, "deny"},
		{"ApproveAgreeing", "/admin/api/pending/p1/approve", `{"action":"approve"}`, 200, "approve"},
		{"ApproveContradicted", "/admin/api/pending/p1/approve", `{"action":"deny"}`, 400, ""},
		{"BareApprove", "/admin/api/pending/p1", `{"action":"approve"}`, 200, "approve"},
		{"BareDeny", "/admin/api/pending/p1", `{"action":"deny","reason":"r"}`, 200, "deny"},
		{"BareNoAction", "/admin/api/pending/p1", `{}`, 400, ""},
		{"BareBadAction", "/admin/api/pending/p1", `{"action":"maybe"}`, 400, ""},
		{"BareNoBody", "/admin/api/pending/p1", ``, 400, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp := ts.do(t, "POST", tt.path, map[string]string{"Authorization": "Bearer plx_live_k"}, tt.body)
			if resp.Status != tt.status {
				t.Fatalf("status = %d, want %d (%s)", resp.Status, tt.status, resp.Body)
			}
			name, c, arg := api.Last(t)
			if c.Bearer != "plx_live_k" {
				t.Errorf("bearer = %q", c.Bearer)
			}
			if tt.status != 200 {
				if name != "AdminCheck" {
					t.Errorf("last call = %s, want only AdminCheck", name)
				}
				return
			}
			args := arg.([]any)
			if args[0] != "p1" || args[1].(plexus.DecideRequest).Action != tt.wantAction {
				t.Errorf("AdminDecide(%v)", args)
			}
		})
	}
}

func TestSources(t *testing.T) {
	api := &stubAPI{}
	ts := mustServe(t, api, Options{})
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	api.AddedSource = &plexus.SourceConfig{ID: "notes", Kind: "portal", Config: []byte(`{"path":"/tmp/n","alias":"notes"}`), CreatedAt: at}

	resp := ts.do(t, "POST", "/admin/api/sources", nil, `{"id":"notes","kind":"portal","config":{"path":"/tmp/n","alias":"notes"}}`)
	if resp.Status != 201 {
		t.Fatalf("status = %d (%s)", resp.Status, resp.Body)
	}
	_, _, arg := api.Last(t)
	cfg := arg.(plexus.SourceConfig)
	if cfg.ID != "notes" || cfg.Kind != "portal" || string(cfg.Config) != `{"path":"/tmp/n","alias":"notes"}` {
		t.Errorf("AddSource(%+v) config %s", cfg, cfg.Config)
	}
	want := `{"id":"notes","kind":"portal","config":{"path":"/tmp/n","alias":"notes"},"createdAt":"2026-01-02T03:04:05Z"}` + "\n"
	if string(resp.Body) != want {
		t.Errorf("body = %s, want %s", resp.Body, want)
	}

	api.SourceList = []plexus.SourceConfig{*api.AddedSource}
	resp = ts.do(t, "GET", "/admin/api/sources", nil, "")
	var list SourcesResponse
	if err := json.Unmarshal(resp.Body, &list); err != nil || len(list.Sources) != 1 || list.Sources[0].ID != "notes" {
		t.Errorf("list = %s (%v)", resp.Body, err)
	}

	resp = ts.do(t, "DELETE", "/admin/api/sources/notes", nil, "")
	if resp.Status != 200 {
		t.Errorf("delete status = %d", resp.Status)
	}
	if _, _, arg := api.Last(t); arg != "notes" {
		t.Errorf("RemoveSource(%v)", arg)
	}

	resp = ts.do(t, "GET", "/admin/api/agents", nil, "")
	if string(resp.Body) != `{"agents":[]}`+"\n" {
		t.Errorf("agents = %s", resp.Body)
	}
}

// TestEveryRouteReachesGateway checks each route calls the method it should.
func TestEveryRouteReachesGateway(t *testing.T) {
	api := &stubAPI{Token: &plexus.ScopedToken{}, InvokeResp: plexus.InvokeResponse{OK: true}, Events: make(chan plexus.Event)}
	close(api.Events)
	ts := mustServe(t, api, Options{})
	routes := []struct{ method, path, body, call string }{
		{"GET", "/.well-known/plexus", "", "WellKnown"},
		{"POST", "/agents/enroll", `{"code":"c"}`, "Enroll"},
		{"POST", "/link/handshake", `{}`, "Handshake"},
		{"PUT", "/grants", `{"grants":{}}`, "RequestGrants"},
		{"GET", "/grants", "", "StandingGrants"},
		{"GET", "/grants/status?pendingId=p", "", "GrantStatus"},
		{"POST", "/grants/refresh", `{"jti":"j"}`, "Refresh"},
		{"POST", "/grants/revoke", `{"jti":"j"}`, "Revoke"},
		{"POST", "/invoke", `{"id":"x"}`, "Invoke"},
		{"GET", "/manifest", "", "Manifest"},
		{"GET", "/events", "", "Subscribe"},
		{"POST", "/admin/api/agents/connect", `{"agentId":"a"}`, "ConnectAgent"},
		{"POST", "/admin/api/agents/revoke", `{"agentId":"a"}`, "RevokeAgent"},
		{"GET", "/admin/api/agents", "", "AdminAgents"},
		{"GET", "/admin/api/grants", "", "AdminGrants"},
		{"GET", "/admin/api/pending", "", "AdminPending"},
		{"GET", "/admin/api/pending/pend_1", "", "AdminShowPending"},
		{"POST", "/admin/api/pending/p/approve", "", "AdminDecide"},
		{"POST", "/admin/api/pending/p/deny", "", "AdminDecide"},
		{"POST", "/admin/api/pending/p", `{"action":"deny"}`, "AdminDecide"},
		{"POST", "/admin/api/key/rotate", "", "RotateKey"},
		{"GET", "/admin/api/status", "", "Status"},
		{"POST", "/admin/api/journal/prune", `{"before":"2026-01-01T00:00:00Z"}`, "PruneJournal"},
		{"GET", "/admin/api/sources", "", "Sources"},
		{"POST", "/admin/api/sources", `{"id":"s","kind":"portal","config":{}}`, "AddSource"},
		{"DELETE", "/admin/api/sources/s", "", "RemoveSource"},
		{"GET", "/integration/agent-1", "", "Integration"},
	}
	for _, rt := range routes {
		t.Run(rt.method+" "+rt.path, func(t *testing.T) {
			resp := ts.do(t, rt.method, rt.path, nil, rt.body)
			if resp.Status >= 300 {
				t.Errorf("status = %d (%s)", resp.Status, resp.Body)
			}
			if name, _, _ := api.Last(t); name != rt.call {
				t.Errorf("called %s, want %s", name, rt.call)
			}
		})
	}
}
