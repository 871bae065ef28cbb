package gateway

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"github.com/google/go-cmp/cmp"

	"github.com/plexus-gw/plexus"
	"github.com/plexus-gw/plexus/auth"
	"github.com/plexus-gw/plexus/internal/plexustest"
	"github.com/plexus-gw/plexus/journal"
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

// TestInvokeRateLimited, on a real journal with auth's rate limiter and the
// gateway on one clock: an agent past its burst is refused rate_limited as
// soon as its token is verified, with one invoke.denied row for the whole
// flood, then a summary with the count when the window ends; another agent
// keeps its own bucket, and the agent is let through again once its bucket
// refills.
func TestInvokeRateLimited(t *testing.T) {
	ctx := context.Background()
	clk := plexustest.NewClock(time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC))
	home := plexustest.TempHome(t)
	db := plexustest.MustOpenHomeJournal(t, home, clk.Now)
	limiter, err := auth.NewRateLimiter(1, 2, clk.Now)
	if err != nil {
		t.Fatal(err)
	}
	g := mustGateway(t, home, db, clk.Now, func(d *Deps) { d.Limiter = limiter })
	token := func(agent string) string {
		now := clk.Now()
		tok, err := g.d.Signer.Mint(auth.Claims{SessionID: "sess_" + agent, RegisteredClaims: jwt.RegisteredClaims{
			Subject: agent, ID: "tok_" + agent, IssuedAt: jwt.NewNumericDate(now), ExpiresAt: jwt.NewNumericDate(now.Add(time.Hour))}})
		if err != nil {
			t.Fatal(err)
		}
		return tok
	}
	claude, codex := Credentials{Bearer: token("claude")}, Credentials{Bearer: token("codex")}
	code := func(c Credentials) plexus.ErrorCode {
		resp := g.Invoke(ctx, c, plexus.InvokeRequest{ID: "fs.read"})
		if resp.OK || resp.Error == nil {
			t.Fatalf("invoke = %+v, want a denial (nothing is granted in this test)", resp)
		}
		return resp.Error.Code
	}
	limited := func() []plexus.Activity {
		var out []plexus.Activity
		rows, err := db.Activity(ctx, journal.Filter{Type: "invoke.denied"})
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range rows {
			if r.Payload["errorCode"] == string(plexus.CodeRateLimited) {
				out = append(out, r)
			}
		}
		return out
	}

	for i := range 2 {
		if got := code(claude); got == plexus.CodeRateLimited {
			t.Fatalf("call %d within the burst: rate_limited", i+1)
		}
	}
	for i := range 3 {
		if got := code(claude); got != plexus.CodeRateLimited {
			t.Fatalf("call %d past the burst: %s, want rate_limited", i+3, got)
		}
	}
	if got := code(codex); got == plexus.CodeRateLimited {
		t.Errorf("another agent: rate_limited by claude's calls")
	}
	if rows := limited(); len(rows) != 1 || rows[0].AgentID != "claude" {
		t.Fatalf("rate_limited rows = %+v, want one, for claude (the rest coalesce)", rows)
	}

	clk.Advance(DefaultDenialWindow) // refills the bucket and ends the window
	if got := code(claude); got == plexus.CodeRateLimited {
		t.Errorf("after the bucket refilled: rate_limited")
	}
	g.flushDenials(ctx, false)
	rows := limited()
	if len(rows) != 2 || rows[1].Payload["coalesced"] != true || rows[1].Payload["count"] != json.Number("2") {
		t.Errorf("rate_limited rows = %+v, want the first and a summary counting 2 more", rows)
	}
}

// TestInputHash: a call's input hash is the keyed hash of the input as
// json.Marshal writes it (what the journal's earlier rows hold), whichever
// encoder produced the bytes, so identical calls still match across versions.
func TestInputHash(t *testing.T) {
	h, err := auth.NewHasher([]byte("0123456789abcdef0123456789abcdef"))
	if err != nil {
		t.Fatal(err)
	}
	g := &Gateway{d: Deps{Hasher: h}}
	tests := map[string]map[string]any{
		"echo":          {"msg": "hello, plexus", "n": 42.0},
		"html":          {"q": "<a href='x'>&amp;</a>", "<": ">"},
		"non-ASCII":     {"name": "Zoë 日本 😀", "sep": "a\u2028b", "bad": "\xff"},
		"nested":        {"a": []any{map[string]any{"z": nil, "y": 1e-7}}, "b": true, "c": 1e21},
		"not from JSON": {"n": 42, "typed": map[string]string{"k": "v"}}, // a caller in-process
	}
	for name, in := range tests {
		b, err := json.Marshal(in)
		if err != nil {
			t.Fatal(err)
		}
		sum := h.Hash(string(b))
		want := hex.EncodeToString(sum[:16])
		for range 2 { // the second time from a recycled buffer
			if got := g.inputHash(in); got != want {
				t.Errorf("%s: inputHash = %s, want %s", name, got, want)
			}
		}
	}
	if got := g.inputHash(map[string]any{"f": math.Inf(1)}); !strings.HasPrefix(got, "unencodable: ") {
		t.Errorf("an unencodable input hashes to %q, want it marked unencodable", got)
	}
}
