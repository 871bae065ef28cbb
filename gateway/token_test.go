package gateway

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/plexus-gw/plexus"
	"github.com/plexus-gw/plexus/internal/plexustest"
	"github.com/plexus-gw/plexus/journal"
)

func TestCheckRevokeRequest(t *testing.T) {
	tests := []struct {
		name  string
		req   plexus.RevokeRequest
		byJTI bool
		code  plexus.ErrorCode
	}{
		{name: "ByJTI", req: plexus.RevokeRequest{JTI: "tok_1"}, byJTI: true},
		{name: "ByScope", req: plexus.RevokeRequest{AgentID: "claude", CapabilityID: "fs.read"}},
		{name: "ErrBoth", req: plexus.RevokeRequest{JTI: "tok_1", AgentID: "claude", CapabilityID: "fs.read"}, code: plexus.CodeInvalidRequest},
		{name: "ErrNeither", req: plexus.RevokeRequest{Reason: "why"}, code: plexus.CodeInvalidRequest},
		{name: "ErrHalfScope", req: plexus.RevokeRequest{AgentID: "claude"}, code: plexus.CodeInvalidRequest},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			byJTI, err := checkRevokeRequest(tc.req)
			var code plexus.ErrorCode
			if err != nil {
				code = plexus.AsError(err).Code
			}
			if byJTI != tc.byJTI || code != tc.code {
				t.Errorf("checkRevokeRequest = %v, %v; want %v, code %q", byJTI, err, tc.byJTI, tc.code)
			}
		})
	}
}

// TestRevokeJTI, on a real journal: a token is revoked with its
// token.revoked row and token_revoked event; revoking it again is on record
// but revokes nothing; an agent revoking another agent's token learns
// nothing of it and writes nothing.
func TestRevokeJTI(t *testing.T) {
	now := time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC)
	db := plexustest.MustOpenJournal(t)
	mustUpdate(t, db, func(tx plexus.StateTx) error {
		if err := tx.PutAgent(&plexus.Agent{ID: "claude", CreatedAt: now}); err != nil {
			return err
		}
		return tx.PutToken(&plexus.TokenRecord{JTI: "tok_1", AgentID: "claude", SessionID: "sess_1", IssuedAt: now,
			ExpiresAt: now.Add(time.Hour), TraceID: "tr_tok"})
	})
	owner := revokeBy{actor: plexus.ActorHuman, via: plexus.ViaCLI, reason: "done", now: now, traceID: "tr_new"}
	revoke := func(rv revokeBy) (revoked, error) {
		var out revoked
		err := db.Update(context.Background(), true, func(tx plexus.StateTx) error {
			var err error
			out, err = revokeJTI(tx, rv, "tok_1")
			return err
		})
		return out, err
	}

	other := owner
	other.actor, other.agent = "codex", "codex"
	if out, err := revoke(other); plexus.AsError(err) == nil || plexus.AsError(err).Code != plexus.CodeNotFound {
		t.Fatalf("another agent's revoke = %+v, %v; want not_found", out, err)
	}
	out, err := revoke(owner)
	if err != nil || !out.resp.OK || !slices.Equal(out.resp.RevokedJTIs, []string{"tok_1"}) || len(out.events) != 1 || out.resp.AuditID == "" {
		t.Fatalf("revoke = %+v, %v; want tok_1 revoked with its row and event", out, err)
	}
	again, err := revoke(owner)
	if err != nil || again.resp.OK || len(again.resp.RevokedJTIs) != 0 || again.resp.RevokedJTIs == nil || len(again.events) != 0 {
		t.Fatalf("second revoke = %+v, %v; want nothing revoked (an empty list) and no event", again, err)
	}
	rows, err := db.Activity(context.Background(), journal.Filter{})
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != 2 || rows[0].ActionType != "token.revoked" || rows[0].TraceID != "tr_tok" || rows[1].ActionType != "token.revoked" {
		t.Errorf("rows = %+v; want two token.revoked rows in the token's trace", rows)
	}
}
