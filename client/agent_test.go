package client

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/plexus-gw/plexus"
)

// mustAgent returns an agent client of g with a store in a fresh temp dir.
func mustAgent(tb testing.TB, g *fakeGateway, dir string) *Agent {
	tb.Helper()
	if dir == "" {
		dir = filepath.Join(tb.TempDir(), "agent")
	}
	a, err := NewAgent(g.srv.URL, NewCredStore(dir), WithClock(g.clock.Now))
	if err != nil {
		tb.Fatal(err)
	}
	return a
}

// mustEnrolled returns an agent client that has redeemed the fake code.
func mustEnrolled(tb testing.TB, g *fakeGateway) *Agent {
	tb.Helper()
	a := mustAgent(tb, g, "")
	if _, err := a.Enroll(context.Background(), fakeCode, false); err != nil {
		tb.Fatal(err)
	}
	return a
}

func TestEnroll(t *testing.T) {
	ctx := context.Background()
	t.Run("OK", func(t *testing.T) {
		g := newFakeGateway(t, newClock())
		dir := filepath.Join(t.TempDir(), "home", "agent")
		a := mustAgent(t, g, dir)
		id, err := a.Enroll(ctx, fakeCode, false)
		if err != nil {
			t.Fatal(err)
		}
		if id != fakeAgentID {
			t.Fatalf("agent id = %q, want %q", id, fakeAgentID)
		}
		fi, err := os.Stat(dir)
		if err != nil {
			t.Fatal(err)
		}
		if got := fi.Mode().Perm(); got != 0o700 {
			t.Errorf("dir mode = %04o, want 0700", got)
		}
		fi, err = os.Stat(filepath.Join(dir, CredentialsFile))
		if err != nil {
			t.Fatal(err)
		}
		if got := fi.Mode().Perm(); got != 0o600 {
			t.Errorf("credentials mode = %04o, want 0600", got)
		}
		got, err := NewCredStore(dir).Credentials()
		if err != nil {
			t.Fatal(err)
		}
		want := Credentials{BaseURL: g.srv.URL, AgentID: fakeAgentID, PAT: fakePAT}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("stored credentials (-want +got):\n%s", diff)
		}
		entries, _ := os.ReadDir(dir)
		for _, e := range entries {
			if strings.Contains(e.Name(), ".tmp-") {
				t.Errorf("temp file %s left behind", e.Name())
			}
		}
	})
	t.Run("ErrAlreadyEnrolled", func(t *testing.T) {
		g := newFakeGateway(t, newClock())
		a := mustEnrolled(t, g)
		_, err := a.Enroll(ctx, "plx_enroll_other", false)
		if !errors.Is(err, ErrAlreadyEnrolled) {
			t.Fatalf("err = %v, want ErrAlreadyEnrolled", err)
		}
		if n := g.count("POST /agents/enroll"); n != 1 {
			t.Errorf("enroll requests = %d, want 1 (the code must not be spent)", n)
		}
	})
	t.Run("Force", func(t *testing.T) {
		g := newFakeGateway(t, newClock())
		dir := filepath.Join(t.TempDir(), "agent")
		store := NewCredStore(dir)
		old := Credentials{BaseURL: "http://127.0.0.1:1", AgentID: "old", PAT: "plx_agent_old"}
		if err := store.SaveCredentials(old, false); err != nil {
			t.Fatal(err)
		}
		if err := store.SaveCredentials(Credentials{BaseURL: old.BaseURL, AgentID: "x", PAT: "y"}, false); !errors.Is(err, ErrAlreadyEnrolled) {
			t.Fatalf("overwrite without force: err = %v, want ErrAlreadyEnrolled", err)
		}
		a := mustAgent(t, g, dir)
		if _, err := a.Enroll(ctx, fakeCode, true); err != nil {
			t.Fatal(err)
		}
		got, err := store.Credentials()
		if err != nil {
			t.Fatal(err)
		}
		if got.AgentID != fakeAgentID || got.PAT != fakePAT {
			t.Errorf("credentials = %v, want the new agent", got)
		}
	})
	t.Run("ErrCodeConsumed", func(t *testing.T) {
		g := newFakeGateway(t, newClock())
		mustEnrolled(t, g)
		_, err := mustAgent(t, g, "").Enroll(ctx, fakeCode, false)
		var ce *Error
		if !errors.As(err, &ce) || ce.Body.Code != plexus.CodeCodeConsumed || ce.Status != 409 {
			t.Fatalf("err = %#v, want *Error code_consumed 409", err)
		}
	})
}

func TestCall(t *testing.T) {
	ctx := context.Background()
	t.Run("TokenReused", func(t *testing.T) {
		g := newFakeGateway(t, newClock())
		a := mustEnrolled(t, g)
		for i := range 2 {
			resp, err := a.Call(ctx, "notes.read", map[string]any{"q": i}, CallOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if !resp.OK || resp.AuditID != "evt_1" {
				t.Fatalf("resp = %+v", resp)
			}
		}
		// A second process with the same store reuses session and token.
		b := mustAgent(t, g, a.store.Dir())
		if _, err := b.Call(ctx, "notes.read", nil, CallOptions{}); err != nil {
			t.Fatal(err)
		}
		for route, want := range map[string]int{"POST /link/handshake": 1, "PUT /grants": 1, "GET /manifest": 1, "POST /invoke": 3} {
			if got := g.count(route); got != want {
				t.Errorf("%s: %d requests, want %d", route, got, want)
			}
		}
		if g.invokeToks[0] != g.invokeToks[1] || g.invokeToks[1] != g.invokeToks[2] {
			t.Errorf("invokes presented different tokens")
		}
		want := map[string]plexus.GrantDecision{"notes.read": {Decision: plexus.DecisionAllow, Verbs: []plexus.Verb{plexus.VerbRead}}}
		if diff := cmp.Diff(want, g.grantBodies[0].Grants); diff != "" {
			t.Errorf("grant request (-want +got):\n%s", diff)
		}
	})
	t.Run("ExpiredRefreshed", func(t *testing.T) {
		g := newFakeGateway(t, newClock())
		a := mustEnrolled(t, g)
		if _, err := a.Call(ctx, "notes.read", nil, CallOptions{}); err != nil {
			t.Fatal(err)
		}
		g.clock.Advance(20 * time.Minute)
		if _, err := a.Call(ctx, "notes.read", nil, CallOptions{}); err != nil {
			t.Fatal(err)
		}
		if got := g.count("POST /grants/refresh"); got != 1 {
			t.Errorf("refreshes = %d, want 1", got)
		}
		if got := g.count("PUT /grants"); got != 1 {
			t.Errorf("grant requests = %d, want 1", got)
		}
		toks, err := a.store.Tokens()
		if err != nil {
			t.Fatal(err)
		}
		if len(toks) != 1 || toks[0].Token != g.invokeToks[1] || g.invokeToks[0] == g.invokeToks[1] {
			t.Errorf("cache holds %v; invokes presented %d tokens", toks, len(g.invokeToks))
		}
	})
	t.Run("InvokeTokenExpiredRetried", func(t *testing.T) {
		g := newFakeGateway(t, newClock())
		a := mustEnrolled(t, g)
		if _, err := a.Call(ctx, "notes.read", nil, CallOptions{}); err != nil {
			t.Fatal(err)
		}
		g.expireAll() // the gateway's view, ahead of the client's clock
		resp, err := a.Call(ctx, "notes.read", nil, CallOptions{})
		if err != nil || !resp.OK {
			t.Fatalf("resp = %+v, err = %v", resp, err)
		}
		if got := g.count("POST /grants/refresh"); got != 1 {
			t.Errorf("refreshes = %d, want 1", got)
		}
	})
	t.Run("TokenRevokedAsksForPurpose", func(t *testing.T) {
		g := newFakeGateway(t, newClock())
		a := mustEnrolled(t, g)
		if _, err := a.Call(ctx, "notes.read", nil, CallOptions{}); err != nil {
			t.Fatal(err)
		}
		g.revokeAll()
		// Neither the call that learns of the revoke nor the next one asks
		// the owner again without saying why.
		for i := range 2 {
			_, err := a.Call(ctx, "notes.read", nil, CallOptions{})
			var re *RevokedError
			if !errors.As(err, &re) || re.CapabilityID != "notes.read" {
				t.Fatalf("call %d after the revoke: err = %v, want a RevokedError for notes.read", i+1, err)
			}
		}
		if got := g.count("PUT /grants"); got != 1 {
			t.Fatalf("grant requests = %d, want 1 (none without a purpose)", got)
		}
		if _, err := a.Call(ctx, "notes.read", nil, CallOptions{Purpose: "read the notes again"}); err != nil {
			t.Fatal(err)
		}
		if got := g.count("PUT /grants"); got != 2 {
			t.Errorf("grant requests = %d, want 2", got)
		}
		if got := g.grantBodies[1].Grants["notes.read"].Purpose; got != "read the notes again" {
			t.Errorf("the request after the revoke has purpose %q", got)
		}
		if _, err := a.Call(ctx, "notes.read", nil, CallOptions{}); err != nil {
			t.Errorf("a call after asking again: %v", err)
		}
	})
	t.Run("SessionExpiredRehandshake", func(t *testing.T) {
		g := newFakeGateway(t, newClock())
		a := mustEnrolled(t, g)
		if _, err := a.Call(ctx, "notes.read", nil, CallOptions{}); err != nil {
			t.Fatal(err)
		}
		g.restart()
		if _, err := a.Call(ctx, "notes.read", nil, CallOptions{}); err != nil { // invoke answers session_expired
			t.Fatal(err)
		}
		g.restart()
		if _, err := a.Call(ctx, "notes.write", nil, CallOptions{}); err != nil { // PUT /grants answers it
			t.Fatal(err)
		}
		if got := g.count("POST /link/handshake"); got != 3 {
			t.Errorf("handshakes = %d, want 3", got)
		}
	})
	t.Run("PendingWaitApproved", func(t *testing.T) {
		g := newFakeGateway(t, newClock())
		g.pend["notes.write"], g.polls = true, 1
		a := mustEnrolled(t, g)
		var notice *plexus.GrantPendingResponse
		resp, err := a.Call(ctx, "notes.write", map[string]any{"path": "a.md"}, CallOptions{
			Purpose: "save the summary", Wait: true, WaitTimeout: 10 * time.Second,
			OnPending: func(p plexus.GrantPendingResponse) { notice = &p },
		})
		if err != nil {
			t.Fatal(err)
		}
		if !resp.OK {
			t.Fatalf("resp = %+v", resp)
		}
		if notice == nil || notice.PendingID != "pend_1" || notice.PendingNarration[0].Summary == "" {
			t.Errorf("OnPending got %+v", notice)
		}
		if got := g.count("GET /grants/status"); got != 2 {
			t.Errorf("status polls = %d, want 2", got)
		}
		d := g.grantBodies[0].Grants["notes.write"]
		if d.Purpose != "save the summary" || !cmp.Equal(d.Verbs, []plexus.Verb{plexus.VerbWrite}) {
			t.Errorf("grant decision = %+v", d)
		}
	})
	t.Run("ErrPending", func(t *testing.T) {
		g := newFakeGateway(t, newClock())
		g.pend["notes.write"] = true
		a := mustEnrolled(t, g)
		called := false
		_, err := a.Call(ctx, "notes.write", nil, CallOptions{OnPending: func(plexus.GrantPendingResponse) { called = true }})
		var ce *Error
		if !errors.As(err, &ce) || ce.Body.Code != plexus.CodeGrantPendingUser || ce.Body.PendingID != "pend_1" || ce.State != plexus.StatePending {
			t.Fatalf("err = %#v, want pending *Error", err)
		}
		if !called || !IsPending(err) {
			t.Errorf("OnPending called %v, IsPending %v", called, IsPending(err))
		}
		if got := g.count("POST /invoke"); got != 0 {
			t.Errorf("invokes = %d, want 0", got)
		}
	})
	t.Run("ErrDenied", func(t *testing.T) {
		g := newFakeGateway(t, newClock())
		g.pend["notes.write"], g.decision, g.reason = true, plexus.StateDenied, "not today"
		a := mustEnrolled(t, g)
		_, err := a.Call(ctx, "notes.write", nil, CallOptions{Wait: true})
		var ce *Error
		if !errors.As(err, &ce) {
			t.Fatalf("err = %v, want *Error", err)
		}
		if ce.Body.Code != plexus.CodeGrantRequired || ce.State != plexus.StateDenied || !strings.Contains(ce.Body.Message, "not today") {
			t.Errorf("err = %+v, want grant_required, denied, with the reason", ce)
		}
	})
	t.Run("ErrWaitTimeout", func(t *testing.T) {
		g := newFakeGateway(t, newClock())
		g.pend["notes.write"], g.polls = true, 1000
		a := mustEnrolled(t, g)
		_, err := a.Call(ctx, "notes.write", nil, CallOptions{Wait: true, WaitTimeout: 600 * time.Millisecond})
		if !IsPending(err) {
			t.Fatalf("err = %v, want still pending", err)
		}
	})
	t.Run("ErrUnknownCapability", func(t *testing.T) {
		g := newFakeGateway(t, newClock())
		a := mustEnrolled(t, g)
		_, err := a.Call(ctx, "nope", nil, CallOptions{})
		if CodeOf(err) != plexus.CodeUnknownCapability {
			t.Fatalf("err = %v, want unknown_capability", err)
		}
	})
	t.Run("ErrNotEnrolled", func(t *testing.T) {
		g := newFakeGateway(t, newClock())
		_, err := mustAgent(t, g, "").Call(ctx, "notes.read", nil, CallOptions{})
		if !errors.Is(err, ErrNotEnrolled) {
			t.Fatalf("err = %v, want ErrNotEnrolled", err)
		}
	})
}

func TestList(t *testing.T) {
	g := newFakeGateway(t, newClock())
	standing := true
	read := []plexus.Verb{plexus.VerbRead}
	g.entries = append(g.entries,
		plexus.Entry{ID: "ext.thing", Kind: plexus.KindCapability, Grants: read, Standing: &standing},
		plexus.Entry{ID: "notes.search", Kind: plexus.KindCapability, Grants: read, Provenance: plexus.ProvenanceFirstParty},
		plexus.Entry{ID: "mcp.up.get", Kind: plexus.KindCapability, Grants: read, Provenance: plexus.ProvenanceManaged},
		plexus.Entry{ID: "mcp.down.get", Kind: plexus.KindCapability, Grants: read, Provenance: plexus.ProvenanceManaged,
			Health: &plexus.Health{Status: plexus.HealthUnavailable}},
		plexus.Entry{ID: "ext.other", Kind: plexus.KindCapability, Grants: read, Provenance: plexus.ProvenanceExtension},
		plexus.Entry{ID: "mcp.up.run", Kind: plexus.KindCapability, Grants: []plexus.Verb{plexus.VerbExecute}, Provenance: plexus.ProvenanceManaged},
	)
	a := mustEnrolled(t, g)
	if _, err := a.Call(context.Background(), "notes.read", nil, CallOptions{}); err != nil {
		t.Fatal(err)
	}
	got, err := a.List(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	type row struct {
		ID       string
		Callable bool
		Via      string
		Prov     plexus.Provenance
	}
	var rows []row
	for _, e := range got {
		rows = append(rows, row{e.ID, e.CallableNow, e.Via, e.Provenance})
	}
	want := []row{
		{"notes.read", true, ViaToken, plexus.ProvenanceFirstParty},
		{"notes.write", false, "", plexus.ProvenanceFirstParty},
		{"ext.thing", true, ViaStanding, plexus.ProvenanceExtension},
		{"notes.search", true, ViaAutoApprove, plexus.ProvenanceFirstParty},
		{"mcp.up.get", true, ViaAutoApprove, plexus.ProvenanceManaged},
		{"mcp.down.get", false, "", plexus.ProvenanceManaged},
		{"ext.other", false, "", plexus.ProvenanceExtension},
		{"mcp.up.run", false, "", plexus.ProvenanceManaged},
	}
	if diff := cmp.Diff(want, rows); diff != "" {
		t.Errorf("list (-want +got):\n%s", diff)
	}
}

// WithClock sets the clock an [Agent] judges token and session expiry by.
func WithClock(now func() time.Time) Option { return func(c *config) { c.now = now } }
