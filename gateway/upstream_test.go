package gateway

import (
	"testing"
	"time"

	"github.com/plexus-gw/plexus"
	"github.com/plexus-gw/plexus/internal/plexustest"
)

// TestUpstreamRefusals: a completion or a subscription needs a live agent
// session and a capability the registry holds; each refusal is typed, and
// no transport is reached (the registry has none).
func TestUpstreamRefusals(t *testing.T) {
	now := time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC)
	home := plexustest.TempHome(t)
	db := plexustest.MustOpenHomeJournal(t, home, nil)
	mustUpdate(t, db, func(tx plexus.StateTx) error {
		if err := tx.PutAgent(&plexus.Agent{ID: "claude", CreatedAt: now}); err != nil {
			return err
		}
		for id, exp := range map[string]time.Time{"sess_live": now.Add(time.Hour), "sess_old": now.Add(-time.Hour)} {
			if err := tx.PutSession(&plexus.Session{ID: id, AgentID: "claude", Kind: plexus.SessionAgent, CreatedAt: now.Add(-2 * time.Hour), ExpiresAt: exp}); err != nil {
				return err
			}
		}
		return nil
	})
	g := mustGateway(t, home, db, func() time.Time { return now }, nil)
	for _, tc := range []struct {
		name, session, id string
		want              plexus.ErrorCode
	}{
		{"no session", "", "mcp.lib.prompt.greet", plexus.CodeSessionExpired},
		{"unknown session", "sess_nobody", "mcp.lib.prompt.greet", plexus.CodeSessionExpired},
		{"expired session", "sess_old", "mcp.lib.prompt.greet", plexus.CodeSessionExpired},
		{"unknown capability", "sess_live", "mcp.lib.prompt.greet", plexus.CodeUnknownCapability},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := Credentials{SessionID: tc.session}
			_, err := g.Complete(t.Context(), c, tc.id, []byte(`{"argument":{"name":"name","value":"A"}}`))
			if e := plexus.AsError(err); e == nil || e.Code != tc.want {
				t.Errorf("Complete = %v, want %s", err, tc.want)
			}
			unsub, err := g.SubscribeResource(t.Context(), c, tc.id, "notes://x", func() { t.Error("updated called") })
			if e := plexus.AsError(err); e == nil || e.Code != tc.want || unsub != nil {
				t.Errorf("SubscribeResource = %v, want %s", err, tc.want)
			}
		})
	}
}
