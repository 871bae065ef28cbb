package http

import (
	"encoding/json"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/plexus-gw/plexus"
	"github.com/plexus-gw/plexus/gateway"
)

// TestConnectForms: POST /admin/api/agents/connect reads Plexus's body and
// the TypeScript implementation's, hands each to the gateway as what it
// says, and refuses ttlMs at the edge.
func TestConnectForms(t *testing.T) {
	week := &plexus.TrustWindow{Kind: plexus.Window7d}
	tests := []struct {
		name, body string
		status     int
		want       any // the gateway's argument; nil when the edge refuses
	}{
		{"Plexus", `{"agentId":"a","grants":[{"capabilityId":"x.read"}]}`, 201,
			plexus.ConnectRequest{AgentID: "a", Grants: []plexus.ConnectGrant{{CapabilityID: "x.read"}}}},
		{"TypeScript", `{"agentId":"a","agentType":"claude-code","capabilities":["x.read","x.write"],"standing":["x.write"],"trustWindow":{"kind":"7d"}}`, 201,
			[]any{plexus.ConnectRequest{AgentID: "a"}, gateway.Selection{Capabilities: []string{"x.read", "x.write"}, Standing: []string{"x.write"}, TrustWindow: week}}},
		{"LegacyStandingExecute", `{"agentId":"a","capabilities":["x.run"],"standingExecute":["x.run"]}`, 201,
			[]any{plexus.ConnectRequest{AgentID: "a"}, gateway.Selection{Capabilities: []string{"x.run"}, Standing: []string{"x.run"}}}},
		{"Both", `{"agentId":"a","grants":[{"capabilityId":"y.read"}],"capabilities":["x.read"]}`, 201,
			[]any{plexus.ConnectRequest{AgentID: "a", Grants: []plexus.ConnectGrant{{CapabilityID: "y.read"}}}, gateway.Selection{Capabilities: []string{"x.read"}}}},
		{"ErrTTL", `{"agentId":"a","capabilities":["x.read"],"ttlMs":60000}`, 400, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			api := &stubAPI{}
			ts := mustServe(t, api, Options{})
			resp := ts.do(t, "POST", "/admin/api/agents/connect", map[string]string{"Authorization": "Bearer plx_live_k"}, tt.body)
			if resp.Status != tt.status {
				t.Fatalf("status = %d, want %d (%s)", resp.Status, tt.status, resp.Body)
			}
			name, _, arg := api.Last(t)
			if tt.want == nil {
				if name != "AdminCheck" || errorOf(t, resp).Code != plexus.CodeInvalidRequest {
					t.Errorf("last call %s, body %s; want only AdminCheck and invalid_request", name, resp.Body)
				}
				return
			}
			if diff := cmp.Diff(tt.want, arg); diff != "" {
				t.Errorf("the gateway got (-want +got):\n%s", diff)
			}
			var out map[string]any
			if err := json.Unmarshal([]byte(resp.Body), &out); err != nil {
				t.Fatal(err)
			}
			if _, ts := tt.want.([]any); ts && (out["ok"] != true || out["granted"] == nil || !cmp.Equal(out["skipped"], []any{"skipped.cap"})) {
				t.Errorf("a TypeScript-form connect answered without ok, granted and skipped: %s", resp.Body)
			}
		})
	}
}
