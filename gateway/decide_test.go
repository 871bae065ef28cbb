package gateway

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/plexus-gw/plexus"
	"github.com/plexus-gw/plexus/internal/plexustest"
	"github.com/plexus-gw/plexus/journal"
)

// TestCheckDecision: a decision that cannot apply to any request is refused
// with invalid_request before anything is read; who decided defaults to the
// owner.
func TestCheckDecision(t *testing.T) {
	tests := []struct {
		name string
		d    plexus.Decision
		code plexus.ErrorCode
	}{
		{name: "OK", d: plexus.Decision{Via: plexus.ViaCLI, Approve: true}},
		{name: "OKWithdraw", d: plexus.Decision{Via: plexus.ViaFile, Withdraw: true}},
		{name: "ErrNoChannel", d: plexus.Decision{Approve: true}, code: plexus.CodeInvalidRequest},
		{name: "ErrApproveAndWithdraw", d: plexus.Decision{Via: plexus.ViaCLI, Approve: true, Withdraw: true}, code: plexus.CodeInvalidRequest},
		{name: "ErrBadWindow", d: plexus.Decision{Via: plexus.ViaCLI, Approve: true, TrustWindow: &plexus.TrustWindow{Kind: "forever"}},
			code: plexus.CodeInvalidRequest},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			d := tc.d
			err := checkDecision(&d)
			var code plexus.ErrorCode
			if err != nil {
				code = plexus.AsError(err).Code
			}
			if code != tc.code {
				t.Fatalf("checkDecision = %v, want code %q", err, tc.code)
			}
			if err == nil && d.DecidedBy != plexus.ActorHuman {
				t.Errorf("DecidedBy = %q, want %q", d.DecidedBy, plexus.ActorHuman)
			}
		})
	}
}

// TestDecidable: only a request still pending and not yet expired takes a
// decision; the rest answer conflict.
func TestDecidable(t *testing.T) {
	now := time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC)
	tests := []struct {
		name  string
		state string
		exp   time.Time
		code  plexus.ErrorCode
	}{
		{name: "OK", state: plexus.StatePending, exp: now.Add(time.Second)},
		{name: "ErrDecided", state: plexus.StateApproved, exp: now.Add(time.Hour), code: plexus.CodeConflict},
		{name: "ErrExpired", state: plexus.StatePending, exp: now, code: plexus.CodeConflict},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := decidable(&plexus.Pending{ID: "pend_1", State: tc.state, ExpiresAt: tc.exp}, now)
			var code plexus.ErrorCode
			if err != nil {
				code = plexus.AsError(err).Code
			}
			if code != tc.code {
				t.Errorf("decidable = %v, want code %q", err, tc.code)
			}
		})
	}
}

// TestRefusal: a denial or a withdrawal sets the request's state and yields
// the row (its action named after the request's kind) and the
// grant_resolved event that carry it, without a token.
func TestRefusal(t *testing.T) {
	tests := []struct {
		name     string
		kind     string
		withdraw bool
		state    string
		action   string
	}{
		{name: "GrantDenied", kind: plexus.PendingGrant, state: plexus.StateDenied, action: "grant.denied"},
		{name: "GrantWithdrawn", kind: plexus.PendingGrant, withdraw: true, state: plexus.StateWithdrawn, action: "grant.withdrawn"},
		{name: "ExtensionDenied", kind: plexus.PendingExtension, state: plexus.StateDenied, action: "extension.denied"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p := &plexus.Pending{ID: "pend_1", Kind: tc.kind, AgentID: "claude", SessionID: "sess_1", TraceID: "tr_1",
				State: plexus.StatePending, Reason: "not now", Items: []plexus.PendingItem{{CapabilityID: "fs.write"}}}
			d := plexus.Decision{PendingID: "pend_1", Withdraw: tc.withdraw, DecidedBy: "ann", Via: plexus.ViaCLI}
			row, ev := refusal(p, d, deciderActor(d.Via))
			if p.State != tc.state {
				t.Errorf("state = %q, want %q", p.State, tc.state)
			}
			want := &plexus.Activity{TraceID: "tr_1", Actor: plexus.ActorHuman, AgentID: "claude", ActionType: tc.action, Target: "pend_1",
				Payload: map[string]any{"decidedBy": "ann", "via": plexus.ViaCLI, "reason": "not now", "capabilities": []string{"fs.write"}}}
			if diff := cmp.Diff(want, row); diff != "" {
				t.Errorf("row (-want +got):\n%s", diff)
			}
			var data plexus.GrantResolvedEvent
			if err := json.Unmarshal(ev.Data, &data); err != nil {
				t.Fatal(err)
			}
			wantData := plexus.GrantResolvedEvent{Type: plexus.EventGrantResolved, PendingID: "pend_1", Decision: tc.state}
			if ev.Type != plexus.EventGrantResolved || ev.AgentID != "claude" || ev.SessionID != "sess_1" || data != wantData || ev.Secret != nil {
				t.Errorf("event = %+v (data %+v), want grant_resolved for claude/sess_1 with %+v and no secret", ev, data, wantData)
			}
		})
	}
}

func TestDeciderActor(t *testing.T) {
	for via, want := range map[string]string{plexus.ViaSystem: plexus.ActorSystem, plexus.ViaCLI: plexus.ActorHuman, plexus.ViaFile: plexus.ActorHuman} {
		if got := deciderActor(via); got != want {
			t.Errorf("deciderActor(%q) = %q, want %q", via, got, want)
		}
	}
}

// TestCommitDecision, on a real journal: a refused request is stored with
// its new state, its row and its grant_resolved event in one transaction,
// and none of them when the transaction fails.
func TestCommitDecision(t *testing.T) {
	ctx := context.Background()
	now := time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC)
	pending := func() *plexus.Pending {
		return &plexus.Pending{ID: "pend_1", Kind: plexus.PendingGrant, AgentID: "claude", SessionID: "sess_1", TraceID: "tr_1",
			State: plexus.StatePending, CreatedAt: now, ExpiresAt: now.Add(time.Hour), Items: []plexus.PendingItem{{CapabilityID: "fs.write"}}}
	}
	setup := func(t *testing.T) *journal.DB {
		db := plexustest.MustOpenJournal(t)
		mustUpdate(t, db, func(tx plexus.StateTx) error {
			if err := tx.PutAgent(&plexus.Agent{ID: "claude", CreatedAt: now}); err != nil {
				return err
			}
			return tx.PutPending(pending())
		})
		return db
	}
	state := func(t *testing.T, db *journal.DB) string {
		var p *plexus.Pending
		if err := db.View(ctx, func(tx plexus.StateTx) error {
			var err error
			p, err = tx.Pending("pend_1")
			return err
		}); err != nil {
			t.Fatal(err)
		}
		return p.State
	}

	t.Run("OK", func(t *testing.T) {
		db := setup(t)
		p := pending()
		row, ev := refusal(p, plexus.Decision{PendingID: "pend_1", DecidedBy: "ann", Via: plexus.ViaCLI}, plexus.ActorHuman)
		mustUpdate(t, db, func(tx plexus.StateTx) error { return commitDecision(tx, p, row, ev) })
		if got := state(t, db); got != plexus.StateDenied {
			t.Errorf("state = %q, want %q", got, plexus.StateDenied)
		}
		if got, want := actions(t, db), []string{"grant.denied"}; !slices.Equal(got, want) {
			t.Errorf("rows = %v, want %v", got, want)
		}
		evs, err := db.EventsSince(ctx, 0, "claude", "sess_1", 0)
		if err != nil || len(evs) != 1 || evs[0].Type != plexus.EventGrantResolved {
			t.Errorf("events = %+v, %v; want one grant_resolved", evs, err)
		}
	})

	t.Run("ErrRolledBack", func(t *testing.T) {
		db := setup(t)
		p := pending()
		row, ev := refusal(p, plexus.Decision{PendingID: "pend_1", DecidedBy: "ann", Via: plexus.ViaCLI}, plexus.ActorHuman)
		boom := errors.New("a later step failed")
		err := db.Update(ctx, true, func(tx plexus.StateTx) error {
			if err := commitDecision(tx, p, row, ev); err != nil {
				return err
			}
			return boom
		})
		if !errors.Is(err, boom) {
			t.Fatalf("update = %v, want %v", err, boom)
		}
		if got := state(t, db); got != plexus.StatePending {
			t.Errorf("state = %q, want still %q", got, plexus.StatePending)
		}
		if got := actions(t, db); len(got) != 0 {
			t.Errorf("rows = %v, want none", got)
		}
	})
}

// TestCheckRevocation: a revocation must name its channel; who revoked
// defaults to the owner and the reason to a plain one.
func TestCheckRevocation(t *testing.T) {
	tests := []struct {
		name, by, via, reason string
		wantBy, wantReason    string
		code                  plexus.ErrorCode
	}{
		{name: "OKDefaults", via: plexus.ViaCLI, wantBy: plexus.ActorHuman, wantReason: "revoked by the owner"},
		{name: "OKGiven", by: "alice", via: plexus.ViaFile, reason: "done", wantBy: "alice", wantReason: "done"},
		{name: "ErrNoChannel", reason: "done", code: plexus.CodeInvalidRequest},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			by, reason, err := checkRevocation(tc.by, tc.via, tc.reason)
			var code plexus.ErrorCode
			if err != nil {
				code = plexus.AsError(err).Code
			}
			if code != tc.code || by != tc.wantBy || reason != tc.wantReason {
				t.Errorf("checkRevocation = %q, %q, %v; want %q, %q, code %q", by, reason, err, tc.wantBy, tc.wantReason, tc.code)
			}
		})
	}
}

// TestRevokeDecided, on a real journal: revoking an approved decision ends
// the grant it gave (with its token) under one decision.revoked row, leaves
// a grant a newer decision replaced, and refuses an unknown decision or
// one that granted nothing.
func TestRevokeDecided(t *testing.T) {
	now := time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC)
	db := plexustest.MustOpenJournal(t)
	g := &Gateway{now: func() time.Time { return now }}
	put := func(p plexus.Pending) {
		mustUpdate(t, db, func(tx plexus.StateTx) error { return tx.PutPending(&p) })
	}
	mustUpdate(t, db, func(tx plexus.StateTx) error {
		if err := tx.PutAgent(&plexus.Agent{ID: "claude", CreatedAt: now}); err != nil {
			return err
		}
		for _, gr := range []plexus.Grant{
			{ID: "gr_a", PendingID: "pend_ok", StandingGrant: plexus.StandingGrant{AgentID: "claude", CapabilityID: "a"}},
			{ID: "gr_b", PendingID: "pend_newer", StandingGrant: plexus.StandingGrant{AgentID: "claude", CapabilityID: "b"}},
		} {
			gr.Verbs, gr.GrantedAt, gr.ExpiresAt, gr.Standing = []plexus.Verb{plexus.VerbRead}, now, now.Add(time.Hour), true
			if err := tx.PutGrant(&gr); err != nil {
				return err
			}
		}
		return tx.PutToken(&plexus.TokenRecord{JTI: "tok_a", AgentID: "claude", SessionID: "sess_1", IssuedAt: now,
			ExpiresAt: now.Add(time.Hour), Scopes: []plexus.TokenScope{{ID: "a", Verbs: []plexus.Verb{plexus.VerbRead}}}})
	})
	items := []plexus.PendingItem{{CapabilityID: "a"}, {CapabilityID: "b"}}
	put(plexus.Pending{ID: "pend_ok", Kind: plexus.PendingGrant, AgentID: "claude", State: plexus.StateApproved, Items: items,
		CreatedAt: now, ExpiresAt: now.Add(time.Hour), TraceID: "tr_ok"})
	put(plexus.Pending{ID: "pend_denied", Kind: plexus.PendingGrant, AgentID: "claude", State: plexus.StateDenied, Items: items,
		CreatedAt: now, ExpiresAt: now.Add(time.Hour)})
	revoke := func(id string) (decisionRevoked, error) {
		var out decisionRevoked
		err := db.Update(t.Context(), true, func(tx plexus.StateTx) error {
			var err error
			out, err = g.revokeDecided(tx, id, plexus.ActorHuman, plexus.ViaCLI, "done")
			return err
		})
		return out, err
	}
	for id, code := range map[string]plexus.ErrorCode{"pend_nope": plexus.CodeNotFound, "pend_denied": plexus.CodeConflict} {
		if _, err := revoke(id); plexus.AsError(err) == nil || plexus.AsError(err).Code != code {
			t.Errorf("revoke %s: err = %v; want %s", id, err, code)
		}
	}
	got, err := revoke("pend_ok")
	if err != nil || got.grants != 1 || len(got.events) != 1 || got.uninstall != "" || got.refresh != "" {
		t.Fatalf("revoke = %+v, %v; want the one grant of pend_ok revoked with its token's event", got, err)
	}
	if want := []string{"grant.revoked", "decision.revoked"}; !slices.Equal(actions(t, db), want) {
		t.Errorf("rows = %v; want %v", actions(t, db), want)
	}
}
