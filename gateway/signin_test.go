package gateway

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/plexus-gw/plexus"
	"github.com/plexus-gw/plexus/internal/plexustest"
	"github.com/plexus-gw/plexus/journal"
)

// recordingStarter is a [SignInStarter] that records each server it is
// asked to start and answers url or err.
type recordingStarter struct {
	mu    sync.Mutex
	calls []string
	reqs  []plexus.SignInRequest // what the owner approved, as passed
	url   string
	err   error
}

func (s *recordingStarter) StartSignIn(_ context.Context, req plexus.SignInRequest) (string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.calls = append(s.calls, req.Server)
	s.reqs = append(s.reqs, req)
	return s.url, s.err
}

func (s *recordingStarter) started() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.calls)
}

// signInCanary stands for the one-use state an authorization URL carries:
// it belongs in the owner's file, never in a journal row.
const signInCanary = "st4te-canary-7f3a"

const signInURL = "https://auth.example.com/authorize?client_id=plexus&state=" + signInCanary + "&code_challenge=abc&code_challenge_method=S256"

func githubSignIn() plexus.SignInRequest {
	return plexus.SignInRequest{Server: "github", Resource: "https://api.githubcopilot.com/mcp/", Issuer: "https://github.com/login/oauth",
		Scopes: []string{"repo", "read:org"}, Reason: "the server answered 401"}
}

// signInGateway is a gateway on a real journal with starter wired (nil: none).
func signInGateway(t *testing.T, starter SignInStarter) (*Gateway, *journal.DB, *plexustest.Clock) {
	t.Helper()
	clk := plexustest.NewClock(time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC))
	home := plexustest.TempHome(t)
	db := plexustest.MustOpenHomeJournal(t, home, clk.Now)
	g := mustGateway(t, home, db, clk.Now, func(d *Deps) {
		if starter != nil {
			d.SignIn = starter
		}
	})
	return g, db, clk
}

func mustPending(t *testing.T, db *journal.DB, id string) *plexus.Pending {
	t.Helper()
	var p *plexus.Pending
	if err := db.View(context.Background(), func(tx plexus.StateTx) error {
		var err error
		p, err = tx.Pending(id)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestCleanSignIn: a request whose server, resource, issuer or scopes are
// not what they claim is refused with invalid_request; the rest is
// cleaned (scopes sorted and unique).
func TestCleanSignIn(t *testing.T) {
	ok := githubSignIn()
	edit := func(f func(*plexus.SignInRequest)) plexus.SignInRequest {
		r := githubSignIn()
		f(&r)
		return r
	}
	tests := []struct {
		name string
		req  plexus.SignInRequest
		bad  bool
	}{
		{name: "OK", req: ok},
		{name: "OKLoopbackHTTP", req: edit(func(r *plexus.SignInRequest) { r.Resource = "http://127.0.0.1:8080/mcp" })},
		{name: "OKNoIssuerYet", req: edit(func(r *plexus.SignInRequest) { r.Issuer = "" })},
		{name: "ErrNoServer", req: edit(func(r *plexus.SignInRequest) { r.Server = "" }), bad: true},
		{name: "ErrServerName", req: edit(func(r *plexus.SignInRequest) { r.Server = "git hub\n" }), bad: true},
		{name: "ErrPlainHTTP", req: edit(func(r *plexus.SignInRequest) { r.Resource = "http://api.example.com/mcp" }), bad: true},
		{name: "ErrRelative", req: edit(func(r *plexus.SignInRequest) { r.Resource = "/mcp" }), bad: true},
		{name: "ErrUserInfo", req: edit(func(r *plexus.SignInRequest) { r.Issuer = "https://me:pw@auth.example.com" }), bad: true},
		{name: "ErrMarkdownInURL", req: edit(func(r *plexus.SignInRequest) { r.Issuer = "https://auth.example.com/<img>" }), bad: true},
		{name: "ErrScopeSpace", req: edit(func(r *plexus.SignInRequest) { r.Scopes = []string{"repo admin"} }), bad: true},
		{name: "ErrWideningQuote", req: edit(func(r *plexus.SignInRequest) { r.Widening = []string{`a"b`} }), bad: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := cleanSignIn(tc.req)
			if tc.bad {
				if e := plexus.AsError(err); err == nil || e.Code != plexus.CodeInvalidRequest {
					t.Fatalf("cleanSignIn = %+v, %v; want invalid_request", got, err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !slices.IsSorted(got.Scopes) {
				t.Errorf("scopes %v not sorted", got.Scopes)
			}
		})
	}
}

// TestRequestSignInDedup, on a real journal: while a request for a server
// waits, asking again answers the same decision and writes nothing; a
// widening supersedes a plain request (withdrawn, journaled) and a
// widening that adds a scope supersedes the widening before it; a plain
// request never supersedes a widening. Another server gets its own.
func TestRequestSignInDedup(t *testing.T) {
	ctx := context.Background()
	g, db, _ := signInGateway(t, nil)
	file := func(r plexus.SignInRequest) string {
		t.Helper()
		id, err := g.RequestSignIn(ctx, r)
		if err != nil {
			t.Fatal(err)
		}
		return id
	}
	plain := githubSignIn()
	first := file(plain)
	again := plain
	again.Reason = "the refresh token was refused"
	if id := file(again); id != first {
		t.Fatalf("a second request for the same server = %s; want the waiting %s", id, first)
	}
	if got, want := actions(t, db), []string{"signin.requested"}; !slices.Equal(got, want) {
		t.Fatalf("rows = %v; want %v (asking again writes nothing)", got, want)
	}
	wide := plain
	wide.Widening = []string{"admin:org"}
	second := file(wide)
	if second == first {
		t.Fatal("a widening answered the plain request; want a new decision")
	}
	if p := mustPending(t, db, first); p.State != plexus.StateWithdrawn || !strings.Contains(p.Reason, second) {
		t.Errorf("the superseded request = %s (%q); want withdrawn naming %s", p.State, p.Reason, second)
	}
	if id := file(plain); id != second {
		t.Errorf("a plain request after a widening = %s; want the widening %s", id, second)
	}
	if id := file(wide); id != second {
		t.Errorf("the same widening again = %s; want %s", id, second)
	}
	wider := wide
	wider.Widening = []string{"admin:org", "delete_repo"}
	third := file(wider)
	if third == second {
		t.Error("a widening adding a scope answered the waiting widening; want a new decision")
	}
	other := plain
	other.Server = "linear"
	if id := file(other); id == third || id == first {
		t.Error("another server's request answered github's decision")
	}
	want := []string{"signin.requested", "signin.withdrawn", "signin.requested", "signin.withdrawn", "signin.requested", "signin.requested"}
	if got := actions(t, db); !slices.Equal(got, want) {
		t.Errorf("rows = %v; want %v", got, want)
	}
	if p := mustPending(t, db, third); p.Kind != plexus.PendingSignIn || p.AgentID != "" || p.SessionID != "" ||
		!slices.Equal(p.SignIn.Widening, []string{"admin:org", "delete_repo"}) {
		t.Errorf("widening decision = %+v; want a sign-in no agent owns, with its widening", p)
	}
}

// TestSignInApprove: approving calls the starter once, for the server, and
// the decision keeps the URL it answered (Decide's answer too, for the
// channel that approved); the rows are requested then approved, with
// what was asked and never the URL; no event is published (no agent may
// observe it); the starter is given the request as approved; approving
// again is a conflict and starts nothing.
func TestSignInApprove(t *testing.T) {
	ctx := context.Background()
	st := &recordingStarter{url: signInURL}
	g, db, _ := signInGateway(t, st)
	id, err := g.RequestSignIn(ctx, githubSignIn())
	if err != nil {
		t.Fatal(err)
	}
	out, err := g.Decide(ctx, plexus.Decision{PendingID: id, Approve: true, Via: plexus.ViaFile, DecidedBy: "owner"})
	if err != nil {
		t.Fatal(err)
	}
	if got := st.started(); !slices.Equal(got, []string{"github"}) {
		t.Fatalf("starter calls = %v; want [github]", got)
	}
	want := githubSignIn()
	slices.Sort(want.Scopes)
	if got := st.reqs[0]; got.Server != want.Server || got.Resource != want.Resource || got.Issuer != want.Issuer || !slices.Equal(got.Scopes, want.Scopes) {
		t.Errorf("the starter was given %+v; want the request the owner approved, %+v", got, want)
	}
	if out.State != plexus.StateApproved || out.SignIn == nil || out.SignIn.AuthURL != signInURL {
		t.Errorf("Decide answered %+v; want approved with the URL", out)
	}
	if p := mustPending(t, db, id); p.SignIn.AuthURL != signInURL || p.SignIn.StartError != "" {
		t.Errorf("kept sign-in = %+v; want the URL and no error", p.SignIn)
	}
	if _, err := g.Decide(ctx, plexus.Decision{PendingID: id, Approve: true, Via: plexus.ViaCLI}); plexus.AsError(err).Code != plexus.CodeConflict {
		t.Errorf("approving again = %v; want conflict", err)
	}
	if got := st.started(); len(got) != 1 {
		t.Errorf("starter calls = %v; want one", got)
	}
	rows := signInRows(t, db)
	if got, want := rowActions(rows), []string{"signin.requested", "signin.approved"}; !slices.Equal(got, want) {
		t.Fatalf("rows = %v; want %v", got, want)
	}
	p := rows[1].Payload
	if p["server"] != "github" || p["issuer"] != "https://github.com/login/oauth" || p["resource"] != "https://api.githubcopilot.com/mcp/" ||
		p["via"] != plexus.ViaFile || p["decidedBy"] != "owner" {
		t.Errorf("signin.approved payload = %v", p)
	}
	assertNoSignInSecret(t, db)
	assertNoEvents(t, db)
}

// TestSignInDeny: a denial keeps the owner's reason on the decision and
// its signin.denied row, and starts nothing.
func TestSignInDeny(t *testing.T) {
	ctx := context.Background()
	st := &recordingStarter{url: signInURL}
	g, db, _ := signInGateway(t, st)
	id, err := g.RequestSignIn(ctx, githubSignIn())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := g.Decide(ctx, plexus.Decision{PendingID: id, Via: plexus.ViaCLI, Reason: "not this account"}); err != nil {
		t.Fatal(err)
	}
	if got := st.started(); len(got) != 0 {
		t.Errorf("starter calls = %v; want none", got)
	}
	if p := mustPending(t, db, id); p.State != plexus.StateDenied || p.Reason != "not this account" {
		t.Errorf("decision = %s %q; want denied with the reason", p.State, p.Reason)
	}
	rows := signInRows(t, db)
	if got, want := rowActions(rows), []string{"signin.requested", "signin.denied"}; !slices.Equal(got, want) {
		t.Fatalf("rows = %v; want %v", got, want)
	}
	if r := rows[1].Payload["reason"]; r != "not this account" {
		t.Errorf("signin.denied reason = %v", r)
	}
	assertNoEvents(t, db)
}

// TestSignInStartFails: a start that fails, answers a URL that is not
// https, or has no starter wired keeps the approval, writes why on the
// decision and journals signin.failed; no URL is kept.
func TestSignInStartFails(t *testing.T) {
	tests := []struct {
		name    string
		starter SignInStarter
		want    string
	}{
		{name: "Error", starter: &recordingStarter{err: errors.New("the authorization server offers no PKCE S256")}, want: "PKCE S256"},
		{name: "PlainHTTP", starter: &recordingStarter{url: "http://auth.example.com/authorize?state=x"}, want: "neither https"},
		{name: "NotWired", want: "plexus mcp login github"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			g, db, _ := signInGateway(t, tc.starter)
			id, err := g.RequestSignIn(ctx, githubSignIn())
			if err != nil {
				t.Fatal(err)
			}
			out, err := g.Decide(ctx, plexus.Decision{PendingID: id, Approve: true, Via: plexus.ViaFile})
			if err != nil {
				t.Fatal(err)
			}
			p := mustPending(t, db, id)
			if p.State != plexus.StateApproved || p.SignIn.AuthURL != "" || !strings.Contains(p.SignIn.StartError, tc.want) ||
				out.SignIn.StartError != p.SignIn.StartError {
				t.Errorf("decision = %s %+v; want approved, no URL, the error naming %q", p.State, p.SignIn, tc.want)
			}
			rows := signInRows(t, db)
			if got, want := rowActions(rows), []string{"signin.requested", "signin.approved", "signin.failed"}; !slices.Equal(got, want) {
				t.Fatalf("rows = %v; want %v", got, want)
			}
			if e, _ := rows[2].Payload["error"].(string); !strings.Contains(e, tc.want) {
				t.Errorf("signin.failed error = %q; want it naming %q", e, tc.want)
			}
		})
	}
}

// TestSignInWhole: a sign-in is approved as a whole: a narrowing is
// refused with invalid_request and leaves it waiting, unstarted.
func TestSignInWhole(t *testing.T) {
	ctx := context.Background()
	st := &recordingStarter{url: signInURL}
	g, db, _ := signInGateway(t, st)
	id, err := g.RequestSignIn(ctx, githubSignIn())
	if err != nil {
		t.Fatal(err)
	}
	_, err = g.Decide(ctx, plexus.Decision{PendingID: id, Approve: true, Via: plexus.ViaCLI, Verbs: []plexus.Verb{plexus.VerbRead}})
	if e := plexus.AsError(err); err == nil || e.Code != plexus.CodeInvalidRequest {
		t.Fatalf("a narrowed approval = %v; want invalid_request", err)
	}
	if p := mustPending(t, db, id); p.State != plexus.StatePending || len(st.started()) != 0 {
		t.Errorf("after the refusal: %s, %d starts; want pending, none", p.State, len(st.started()))
	}
}

// TestSignInExpires: an unanswered request expires with a signin.expired
// row, and the server's next request is put up anew.
func TestSignInExpires(t *testing.T) {
	ctx := context.Background()
	g, db, clk := signInGateway(t, nil)
	id, err := g.RequestSignIn(ctx, githubSignIn())
	if err != nil {
		t.Fatal(err)
	}
	clk.Advance(SignInTTL)
	if err := g.Sweep(ctx); err != nil {
		t.Fatal(err)
	}
	if p := mustPending(t, db, id); p.State != plexus.StateExpired {
		t.Errorf("state = %s; want expired", p.State)
	}
	next, err := g.RequestSignIn(ctx, githubSignIn())
	if err != nil {
		t.Fatal(err)
	}
	if next == id {
		t.Error("a request after expiry answered the expired decision")
	}
	if got, want := actions(t, db), []string{"signin.requested", "signin.expired", "signin.requested"}; !slices.Equal(got, want) {
		t.Errorf("rows = %v; want %v", got, want)
	}
}

func signInRows(t *testing.T, db *journal.DB) []plexus.Activity {
	t.Helper()
	rows, err := db.Activity(context.Background(), journal.Filter{Type: "signin."})
	if err != nil {
		t.Fatal(err)
	}
	return rows
}

func rowActions(rows []plexus.Activity) []string {
	out := make([]string, len(rows))
	for i, r := range rows {
		out[i] = r.ActionType
	}
	return out
}

// assertNoSignInSecret fails when any journal row holds the authorization
// URL or its one-use state.
func assertNoSignInSecret(t *testing.T, db *journal.DB) {
	t.Helper()
	rows, err := db.Activity(context.Background(), journal.Filter{})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range rows {
		b, err := json.Marshal(r)
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(string(b), signInCanary) || strings.Contains(string(b), "/authorize") {
			t.Errorf("row %s holds the authorization URL: %s", r.ActionType, b)
		}
	}
}

// assertNoEvents fails when anything was broadcast on /events (a
// decision no agent owns would reach every agent).
func assertNoEvents(t *testing.T, db *journal.DB) {
	t.Helper()
	evs, err := db.EventsSince(context.Background(), 0, "", "", 0) // broadcasts: what every agent sees
	if err != nil {
		t.Fatal(err)
	}
	if len(evs) != 0 {
		t.Errorf("events published: %+v; want none", evs)
	}
}

// TestWithdrawSignIn: signing in another way withdraws the request
// waiting for that server (journaled with why), and only that one; with
// none waiting it does nothing.
func TestWithdrawSignIn(t *testing.T) {
	ctx := context.Background()
	g, db, _ := signInGateway(t, nil)
	gh, err := g.RequestSignIn(ctx, githubSignIn())
	if err != nil {
		t.Fatal(err)
	}
	other := githubSignIn()
	other.Server = "linear"
	lin, err := g.RequestSignIn(ctx, other)
	if err != nil {
		t.Fatal(err)
	}
	if err := g.WithdrawSignIn(ctx, "github", "signed in with plexus mcp login"); err != nil {
		t.Fatal(err)
	}
	if err := g.WithdrawSignIn(ctx, "github", "again"); err != nil {
		t.Fatal(err)
	}
	if p := mustPending(t, db, gh); p.State != plexus.StateWithdrawn || p.Reason != "signed in with plexus mcp login" {
		t.Errorf("github's request = %s %q; want withdrawn with why", p.State, p.Reason)
	}
	if p := mustPending(t, db, lin); p.State != plexus.StatePending {
		t.Errorf("linear's request = %s; want still pending", p.State)
	}
	want := []string{"signin.requested", "signin.requested", "signin.withdrawn"}
	if got := actions(t, db); !slices.Equal(got, want) {
		t.Errorf("rows = %v; want %v", got, want)
	}
}
