package gateway

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/plexus-gw/plexus"
)

// TestBackingState: the grant behind a call denies it once revoked or past
// its trust window; a used once grant is reported (not denied) so that a
// retry of its call can still be answered, and a workflow member's scope
// never counts its workflow's grant as used.
func TestBackingState(t *testing.T) {
	now := time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC)
	past := now.Add(-time.Minute)
	direct := &plexus.TokenScope{ID: "fs.read"}
	member := &plexus.TokenScope{ID: "fs.read", SynthesizedFor: "wf.sync"}
	grant := func(standing bool, exp time.Time, used, revoked *time.Time) *plexus.Grant {
		return &plexus.Grant{UsedAt: used, RevokedAt: revoked,
			StandingGrant: plexus.StandingGrant{Standing: standing, ExpiresAt: exp}}
	}
	tests := []struct {
		name     string
		backing  *plexus.Grant
		scope    *plexus.TokenScope
		code     plexus.ErrorCode // "" for no denial
		usedOnce bool
	}{
		{name: "StandingLive", backing: grant(true, now.Add(time.Hour), nil, nil), scope: direct},
		{name: "OnceUnused", backing: grant(false, time.Time{}, nil, nil), scope: direct},
		{name: "ErrRevoked", backing: grant(true, now.Add(time.Hour), nil, &past), scope: direct, code: plexus.CodeTokenRevoked},
		{name: "ErrRevokedBeforeUsed", backing: grant(false, time.Time{}, &past, &past), scope: direct, code: plexus.CodeTokenRevoked},
		{name: "ErrWindowEnded", backing: grant(true, now, nil, nil), scope: direct, code: plexus.CodeGrantRequired},
		{name: "OnceUsed", backing: grant(false, time.Time{}, &past, nil), scope: direct, usedOnce: true},
		{name: "OnceUsedMember", backing: grant(false, time.Time{}, &past, nil), scope: member},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			denial, usedOnce := backingState(tc.backing, tc.scope, "fs.read", now)
			var code plexus.ErrorCode
			if denial != nil {
				code = denial.Code
			}
			if code != tc.code || usedOnce != tc.usedOnce {
				t.Errorf("backingState = %q, usedOnce %v; want %q, %v", code, usedOnce, tc.code, tc.usedOnce)
			}
		})
	}
}

func TestMutates(t *testing.T) {
	tests := []struct {
		verbs []plexus.Verb
		want  bool
	}{
		{nil, false},
		{[]plexus.Verb{plexus.VerbRead}, false},
		{[]plexus.Verb{plexus.VerbRead, plexus.VerbWrite}, true},
		{[]plexus.Verb{plexus.VerbExecute}, true},
	}
	for _, tc := range tests {
		if got := mutates(tc.verbs); got != tc.want {
			t.Errorf("mutates(%v) = %v, want %v", tc.verbs, got, tc.want)
		}
	}
}

// TestOutcome: the answer and the outcome row of a dispatched call are
// computed together, the row carrying the call's payload completed with
// its duration, its started row and (on failure) the error code; a failure
// answers no output (an MCP tool's own result travels in mcpResult).
func TestOutcome(t *testing.T) {
	req := plexus.InvokeRequest{ID: "fs.write"}
	ic := plexus.InvokeContext{AgentID: "claude", TraceID: "tr_1", JTI: "tok_1"}
	started := &plexus.Activity{ID: 41}
	tests := []struct {
		name        string
		res         plexus.TransportResult
		started     *plexus.Activity
		wantResp    plexus.InvokeResponse
		wantAction  string
		wantPayload map[string]any
	}{
		{
			name: "OK", res: plexus.TransportResult{OK: true, Data: "done"}, started: started,
			wantResp:    plexus.InvokeResponse{ID: "fs.write", OK: true, Output: "done"},
			wantAction:  plexus.ActionInvokeOK,
			wantPayload: map[string]any{"jti": "tok_1", "durationMs": int64(1500), "startedId": "evt_41"},
		},
		{
			name: "OKRead", res: plexus.TransportResult{OK: true, Data: "done"},
			wantResp:    plexus.InvokeResponse{ID: "fs.write", OK: true, Output: "done"},
			wantAction:  plexus.ActionInvokeOK,
			wantPayload: map[string]any{"jti": "tok_1", "durationMs": int64(1500)},
		},
		{
			name: "Failed", res: plexus.TransportResult{Data: "partial", Error: plexus.Errorf(plexus.CodeTransportError, "boom")}, started: started,
			wantResp: plexus.InvokeResponse{ID: "fs.write", Error: &plexus.ErrorBody{Code: plexus.CodeTransportError, Message: "boom",
				CapabilityID: "fs.write"}},
			wantAction:  plexus.ActionInvokeFailed,
			wantPayload: map[string]any{"jti": "tok_1", "durationMs": int64(1500), "startedId": "evt_41", "errorCode": "transport_error"},
		},
		{
			name: "FailedMCP", res: plexus.TransportResult{Data: "tool said no", MCPResult: json.RawMessage(`{"isError":true}`),
				Error: plexus.Errorf(plexus.CodeTransportError, "tool error")},
			wantResp: plexus.InvokeResponse{ID: "fs.write", MCPResult: json.RawMessage(`{"isError":true}`),
				Error: &plexus.ErrorBody{Code: plexus.CodeTransportError, Message: "tool error", CapabilityID: "fs.write"}},
			wantAction:  plexus.ActionInvokeFailed,
			wantPayload: map[string]any{"jti": "tok_1", "durationMs": int64(1500), "errorCode": "transport_error"},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			resp, row := outcome(req, ic, tc.res, map[string]any{"jti": "tok_1"}, 1500*time.Millisecond, tc.started)
			if diff := cmp.Diff(tc.wantResp, resp); diff != "" {
				t.Errorf("response (-want +got):\n%s", diff)
			}
			want := &plexus.Activity{TraceID: "tr_1", Actor: "claude", AgentID: "claude", ActionType: tc.wantAction,
				Target: "fs.write", Payload: tc.wantPayload}
			if diff := cmp.Diff(want, row); diff != "" {
				t.Errorf("outcome row (-want +got):\n%s", diff)
			}
		})
	}
}
