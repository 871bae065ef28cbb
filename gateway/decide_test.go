package gateway

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/plexus-gw/plexus"
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
