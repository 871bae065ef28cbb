package e2e

import (
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/plexus-gw/plexus"
	"github.com/plexus-gw/plexus/daemon"
)

// TestConnectTypeScriptForm: the TypeScript implementation's connect body
// connects an agent here unchanged: reads stand, a write stands only when
// named in standing, the answer carries that form's ok/granted/skipped;
// what Plexus does not do (standing execute, ttlMs, unknown ids) is refused
// whole and changes nothing.
func TestConnectTypeScriptForm(t *testing.T) {
	td := startTestDaemon(t, daemon.Options{})
	addPortal(t, td, "notes")
	addEcho(t, td, "box", plexus.ProvenanceFirstParty)

	connect := func(t *testing.T, body map[string]any) (int, map[string]json.RawMessage) {
		t.Helper()
		st, raw := td.raw(t, http.MethodPost, "/admin/api/agents/connect", td.admin(), mustJSON(t, body))
		var out map[string]json.RawMessage
		if err := json.Unmarshal(raw, &out); err != nil {
			t.Fatalf("%d %s: %v", st, raw, err)
		}
		return st, out
	}
	granted := func(t *testing.T, out map[string]json.RawMessage) map[string][]plexus.Verb {
		t.Helper()
		var gs []plexus.StandingGrant
		if err := json.Unmarshal(out["granted"], &gs); err != nil {
			t.Fatal(err)
		}
		m := map[string][]plexus.Verb{}
		for _, g := range gs {
			m[g.CapabilityID] = g.Verbs
			if g.TrustWindow.Kind != plexus.Window7d && g.CapabilityID == "portal.notes.read" {
				t.Errorf("%s window %+v, want the body's 7d", g.CapabilityID, g.TrustWindow)
			}
		}
		return m
	}

	t.Run("OK", func(t *testing.T) {
		st, out := connect(t, map[string]any{"agentId": "ts-one", "agentType": "claude-code",
			"capabilities": []string{"portal.notes.read", "portal.notes.write", "box.echo.run"}, "trustWindow": map[string]any{"kind": "7d"}})
		if st != http.StatusCreated || string(out["ok"]) != "true" {
			t.Fatalf("%d %v", st, out)
		}
		if g := granted(t, out); len(g) != 1 || !slices.Equal(g["portal.notes.read"], []plexus.Verb{plexus.VerbRead}) {
			t.Errorf("granted %v, want portal.notes.read (read) only", g)
		}
		var skipped []string
		if err := json.Unmarshal(out["skipped"], &skipped); err != nil || !slices.Equal(skipped, []string{"portal.notes.write", "box.echo.run"}) {
			t.Errorf("skipped = %s, want the write and the execute", out["skipped"])
		}
		var code string
		if err := json.Unmarshal(out["code"], &code); err != nil || len(code) < len(plexus.PrefixEnrollCode) {
			t.Errorf("no enrollment code: %s", out["code"])
		}
	})
	t.Run("StandingWrite", func(t *testing.T) {
		st, out := connect(t, map[string]any{"agentId": "ts-two", "capabilities": []string{"portal.notes.write"}, "standing": []string{"portal.notes.write"}})
		if st != http.StatusCreated {
			t.Fatalf("%d %v", st, out)
		}
		if g := granted(t, out); !slices.Equal(g["portal.notes.write"], []plexus.Verb{plexus.VerbWrite}) {
			t.Errorf("granted %v, want portal.notes.write standing", g)
		}
	})
	for _, tt := range []struct {
		name string
		body map[string]any
		code plexus.ErrorCode
	}{
		{"ErrStandingExecute", map[string]any{"agentId": "ts-bad", "capabilities": []string{"box.echo.run"}, "standingExecute": []string{"box.echo.run"}}, plexus.CodeInvalidRequest},
		{"ErrStandingNotSelected", map[string]any{"agentId": "ts-bad", "capabilities": []string{"portal.notes.read"}, "standing": []string{"portal.notes.write"}}, plexus.CodeInvalidRequest},
		{"ErrUnknown", map[string]any{"agentId": "ts-bad", "capabilities": []string{"portal.notes.read", "nope.x"}}, plexus.CodeUnknownCapability},
		{"ErrTTL", map[string]any{"agentId": "ts-bad", "capabilities": []string{"portal.notes.read"}, "ttlMs": 60000}, plexus.CodeInvalidRequest},
	} {
		t.Run(tt.name, func(t *testing.T) {
			st, raw := td.raw(t, http.MethodPost, "/admin/api/agents/connect", td.admin(), mustJSON(t, tt.body))
			var env plexus.ErrorResponse
			if err := json.Unmarshal(raw, &env); err != nil || env.Error == nil || env.Error.Code != tt.code || st < 400 {
				t.Errorf("%d %s, want %s", st, raw, tt.code)
			}
		})
	}
	t.Run("ErrNoKey", func(t *testing.T) {
		// Without the connection-key the form changes nothing and tells
		// nothing about what a valid body would be, ttlMs included.
		for _, body := range []map[string]any{
			{"agentId": "ts-bad", "capabilities": []string{"portal.notes.read"}},
			{"agentId": "ts-bad", "capabilities": []string{"nope.x"}, "ttlMs": 1},
		} {
			st, raw := td.raw(t, http.MethodPost, "/admin/api/agents/connect", map[string]string{"Authorization": "Bearer plx_live_wrong"}, mustJSON(t, body))
			if st != http.StatusUnauthorized || strings.Contains(string(raw), "ttlMs") || strings.Contains(string(raw), "nope.x") {
				t.Errorf("%d %s, want 401 saying nothing of the body", st, raw)
			}
		}
	})
	t.Run("RefusalsChangedNothing", func(t *testing.T) {
		var agents struct {
			Agents []plexus.Agent `json:"agents"`
		}
		td.call(t, http.MethodGet, "/admin/api/agents", td.admin(), nil, &agents)
		for _, a := range agents.Agents {
			if a.ID == "ts-bad" {
				t.Errorf("a refused connect created agent %+v", a)
			}
		}
	})
}
