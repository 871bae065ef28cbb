package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/plexus-gw/plexus"
	"github.com/plexus-gw/plexus/daemon"
	"github.com/plexus-gw/plexus/gateway"
	"github.com/plexus-gw/plexus/internal/oauthtest"
	"github.com/plexus-gw/plexus/journal"
)

// A remote MCP server's sign-in request, end to end on the real daemon:
// filed through the gateway as the OAuth client files it, written into
// inbox/ by the reconciler, decided by the owner moving the file (seen by
// the real watcher), started through the daemon's starter, the page to
// open written into the file in active/, and journaled, while no agent can
// see, poll, approve or hear of it.

// recordingStarter stands for the OAuth client's Login: it records each
// server it starts and answers the authorization URL.
type recordingStarter struct {
	mu    sync.Mutex
	calls []string
	reqs  []plexus.SignInRequest // what the owner approved, as passed
}

const signInPage = "https://auth.example.test/authorize?client_id=plexus&code_challenge=E9Mel&code_challenge_method=S256&state=e2e-state-canary"

func (s *recordingStarter) StartSignIn(_ context.Context, req plexus.SignInRequest) (string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.calls = append(s.calls, req.Server)
	s.reqs = append(s.reqs, req)
	return signInPage, nil
}

func (s *recordingStarter) started() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.calls)
}

// signInEnv is a filesEnv whose daemon starts sign-ins through starter
// and logs into log (nil: the default).
func signInEnv(t *testing.T, starter *recordingStarter, log *slog.Logger) *filesEnv {
	t.Helper()
	e := &filesEnv{clock: newFakeClock()}
	e.testDaemon = startTestDaemon(t, daemon.Options{Clock: e.clock.Now, Owner: func() string { return filesOwner }, SignIn: starter,
		Logger: log})
	addPortal(t, e.testDaemon, "notes")
	e.pat, e.sid = enrolledAgent(t, e.testDaemon, "claude")
	e.events = e.openEvents(t, e.sid, "")
	return e
}

func (e *filesEnv) adminCreds() gateway.Credentials {
	return gateway.Credentials{ConnectionKey: e.key}
}

func githubRequest() plexus.SignInRequest {
	return plexus.SignInRequest{Server: "github", Resource: "https://api.githubcopilot.com/mcp/", Issuer: "https://github.com/login/oauth",
		Scopes: []string{"repo", "read:org"}, Reason: "the server answered 401"}
}

// TestSignInInbox: the request's file appears in inbox/ naming the server,
// the issuer, the resource and the scopes; the owner moves it to active/;
// the starter is called once for the server and the page to open is in the
// file; the journal holds signin.requested then signin.approved (via file,
// by the owner), and no row holds the page's one-use state. A second
// request while the first waits files nothing new.
func TestSignInInbox(t *testing.T) {
	ctx := context.Background()
	st := &recordingStarter{}
	var logged syncBuffer
	e := signInEnv(t, st, slog.New(slog.NewTextHandler(&logged, &slog.HandlerOptions{Level: slog.LevelWarn})))
	id, err := e.Gateway().RequestSignIn(ctx, githubRequest())
	if err != nil {
		t.Fatal(err)
	}
	if again, err := e.Gateway().RequestSignIn(ctx, githubRequest()); err != nil || again != id {
		t.Fatalf("a second request while %s waits = %s, %v; want %s", id, again, err, id)
	}
	f, b := e.waitFile(t, plexus.FolderInbox, id, stateIs(plexus.StatePending))
	if f.Type != plexus.PendingSignIn || f.Agent != "" {
		t.Errorf("file type %q agent %q; want a sign-in no agent owns", f.Type, f.Agent)
	}
	for _, w := range []string{"server: github", "issuer: https://github.com/login/oauth", "resource: https://api.githubcopilot.com/mcp/",
		"`read:org`, `repo`", "No agent asked for this"} {
		if !strings.Contains(string(b), w) {
			t.Errorf("inbox file lacks %q:\n%s", w, b)
		}
	}
	if len(st.started()) != 0 {
		t.Fatal("the starter ran before the owner decided")
	}

	// The owner keeps a note in the frontmatter, then moves the file.
	ownerWrite(t, e.path(plexus.FolderInbox, id), edit(t, b, "reason: \"\"\n", "reason: \"\"\nmy_note: the work account\n"))
	move(t, e.path(plexus.FolderInbox, id), e.path(plexus.FolderActive, id))
	_, b = e.waitFile(t, plexus.FolderActive, id, stateIs(plexus.StateApproved))
	if !strings.Contains(string(b), "<"+signInPage+">") || !strings.Contains(string(b), "## Finish signing in") {
		t.Errorf("active file lacks the page to open:\n%s", b)
	}
	if !strings.Contains(string(b), "my_note: the work account") {
		t.Errorf("the owner's note was dropped:\n%s", b)
	}
	if got := st.started(); !slices.Equal(got, []string{"github"}) {
		t.Errorf("starter calls = %v; want [github]", got)
	}
	e.onlyIn(t, id, plexus.FolderActive)

	rows := e.activity(t, journal.Filter{Type: "signin."})
	var acts []string
	for _, r := range rows {
		acts = append(acts, r.ActionType)
	}
	if !slices.Equal(acts, []string{"signin.requested", "signin.approved"}) {
		t.Fatalf("sign-in rows = %v; want requested, approved", acts)
	}
	checkPayload(t, rows[0], map[string]any{"server": "github", "issuer": "https://github.com/login/oauth",
		"resource": "https://api.githubcopilot.com/mcp/", "scopes": []any{"read:org", "repo"}})
	checkPayload(t, rows[1], map[string]any{"server": "github", "via": plexus.ViaFile, "decidedBy": filesOwner})

	// Done with it, the owner puts the file away: nothing is revoked (signing
	// out is plexus mcp logout), and it stays where they put it.
	move(t, e.path(plexus.FolderActive, id), e.path(plexus.FolderArchive, id))
	e.settle(t)
	e.settle(t)
	if b := e.onlyIn(t, id, plexus.FolderArchive); !strings.Contains(string(b), signInPage) {
		t.Errorf("the archived file was rewritten:\n%s", b)
	}
	if strings.Contains(logged.String(), "inbox:") {
		t.Errorf("the reconciler reported a problem:\n%s", logged.String())
	}
	if p, err := e.Gateway().AdminShowPending(ctx, e.adminCreds(), id); err != nil || p.State != plexus.StateApproved {
		t.Errorf("after the file was put away: %+v, %v; want still approved", p.State, err)
	}
	for _, r := range e.activity(t, journal.Filter{}) {
		if r.ActionType == "decision.revoked" || r.ActionType == "inbox.refused" || r.ActionType == "inbox.moved" {
			t.Errorf("putting the file away journaled %s %v", r.ActionType, r.Payload)
		}
		raw, err := json.Marshal(r)
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(string(raw), "e2e-state-canary") {
			t.Errorf("journal row %s holds the authorization URL: %s", r.ActionType, raw)
		}
	}
}

// TestSignInInboxDeny: the owner moves the request to rejected/ with a
// reason: nothing starts, and signin.denied keeps the reason.
func TestSignInInboxDeny(t *testing.T) {
	ctx := context.Background()
	st := &recordingStarter{}
	e := signInEnv(t, st, nil)
	id, err := e.Gateway().RequestSignIn(ctx, githubRequest())
	if err != nil {
		t.Fatal(err)
	}
	_, b := e.waitFile(t, plexus.FolderInbox, id, nil)
	ownerWrite(t, e.path(plexus.FolderInbox, id), edit(t, b, `reason: ""`, "reason: not on this machine"))
	move(t, e.path(plexus.FolderInbox, id), e.path(plexus.FolderRejected, id))
	e.waitFile(t, plexus.FolderRejected, id, stateIs(plexus.StateDenied))
	if got := st.started(); len(got) != 0 {
		t.Errorf("starter calls = %v; want none", got)
	}
	rows := e.activity(t, journal.Filter{Type: "signin.denied"})
	if len(rows) != 1 {
		t.Fatalf("signin.denied rows = %d; want 1", len(rows))
	}
	checkPayload(t, rows[0], map[string]any{"server": "github", "reason": "not on this machine", "via": plexus.ViaFile})
}

// TestAttackSignInAgentBlind: an agent cannot create, see, poll, approve
// or hear of a sign-in request. No agent route files one (only the daemon
// calls RequestSignIn); polling its id answers not_found; the owner's
// routes refuse the agent's PAT and session; and after the owner approves
// it, the agent's /events carry nothing of it before the agent's own next
// event.
func TestAttackSignInAgentBlind(t *testing.T) {
	ctx := context.Background()
	st := &recordingStarter{}
	e := signInEnv(t, st, nil)
	// A first event of the agent's own: the replay below starts after it.
	firstEvents := eventsUntil(t, e.events, e.deniedAsk(t, "first"))
	first := firstEvents[len(firstEvents)-1].ID
	id, err := e.Gateway().RequestSignIn(ctx, githubRequest())
	if err != nil {
		t.Fatal(err)
	}
	e.waitFile(t, plexus.FolderInbox, id, nil)

	var perr plexus.ErrorResponse
	if code := e.call(t, "GET", "/grants/status?pendingId="+id, session(e.sid), nil, &perr); code != http.StatusNotFound {
		t.Errorf("the agent polling the sign-in: status %d %+v; want 404", code, perr)
	}
	for _, h := range []map[string]string{bearer(e.pat), session(e.sid)} {
		if code := e.call(t, "GET", "/admin/api/pending", h, nil, nil); code != http.StatusUnauthorized {
			t.Errorf("the agent listing pending decisions: status %d; want 401", code)
		}
		if code := e.call(t, "GET", "/admin/api/pending/"+id, h, nil, nil); code != http.StatusUnauthorized {
			t.Errorf("the agent reading the sign-in: status %d; want 401", code)
		}
		if code := e.call(t, "POST", "/admin/api/pending/"+id+"/approve", h, map[string]any{}, nil); code != http.StatusUnauthorized {
			t.Errorf("the agent approving the sign-in: status %d; want 401", code)
		}
	}
	if len(st.started()) != 0 {
		t.Fatal("the agent's attempts started a sign-in")
	}

	// The owner approves; then the agent asks for something that pends and
	// the owner denies it: that grant_resolved is the agent's next event,
	// and nothing about the sign-in may come before it, live or replayed
	// (as a reconnecting agent gets them) from the agent's first event on.
	if _, err := e.Gateway().Decide(ctx, plexus.Decision{PendingID: id, Approve: true, Via: plexus.ViaAdminAPI}); err != nil {
		t.Fatal(err)
	}
	last := e.deniedAsk(t, "last")
	live := eventsUntil(t, e.events, last)
	replayed := eventsUntil(t, e.openEvents(t, e.sid, first), last)
	for _, ev := range append(live, replayed...) {
		if strings.Contains(ev.Data, id) || strings.Contains(ev.Data, "github") || strings.Contains(ev.Data, "e2e-state-canary") {
			t.Errorf("the agent heard of the sign-in: %s %s", ev.Type, ev.Data)
		}
	}
	var poll plexus.ErrorResponse
	if code := e.call(t, "GET", "/grants/status?pendingId="+id, session(e.sid), nil, &poll); code != http.StatusNotFound {
		t.Errorf("the agent polling the approved sign-in: status %d; want 404", code)
	}
}

// deniedAsk has the agent ask for a grant that pends and the owner deny
// it, and answers the pending id; its grant_resolved is the agent's next
// event.
func (e *filesEnv) deniedAsk(t *testing.T, reason string) string {
	t.Helper()
	a := e.ask(t, "", "portal.notes.write")
	if _, err := e.Gateway().Decide(context.Background(), plexus.Decision{PendingID: a.ID, Via: plexus.ViaAdminAPI, Reason: reason}); err != nil {
		t.Fatal(err)
	}
	return a.ID
}

// eventsUntil reads ch up to and including the grant_resolved of
// pendingID and answers every event read (a generous deadline bounds the
// wait: liveness, not timing).
func eventsUntil(t *testing.T, ch <-chan sseEvent, pendingID string) []sseEvent {
	t.Helper()
	deadline := time.After(10 * time.Second)
	var out []sseEvent
	for {
		select {
		case ev, ok := <-ch:
			if !ok {
				t.Fatalf("the event stream ended before the grant_resolved of %s", pendingID)
			}
			out = append(out, ev)
			if ev.Type == plexus.EventGrantResolved && strings.Contains(ev.Data, pendingID) {
				return out
			}
		case <-deadline:
			t.Fatalf("no grant_resolved of %s within 10s; read %+v", pendingID, out)
		}
	}
}

// TestConsoleBrowserSignInRequest: the console's Pending page shows a
// sign-in request as a card with no agent and nothing to narrow, saying
// no agent asked and what approving signs in to; Approve starts the
// sign-in once and the page says where to finish it.
func TestConsoleBrowserSignInRequest(t *testing.T) {
	st := &recordingStarter{}
	clock := newFakeClock()
	e := &consoleEnv{td: startTestDaemon(t, daemon.Options{Clock: clock.Now, SignIn: st}), clock: clock}
	p := newPage(t)
	e.signIn(t, p)

	id, err := e.td.Gateway().RequestSignIn(context.Background(), githubRequest())
	if err != nil {
		t.Fatal(err)
	}
	syncInbox(t, e.td)
	p.do(chromedp.WaitVisible(chromedp.CSS(card(id))))
	text := run(p, chromedp.Text(chromedp.CSS(card(id))))
	for _, want := range []string{"github asks you to sign in to it", "Who asks", "No agent asked for this",
		"https://api.githubcopilot.com/mcp/", "https://github.com/login/oauth", "read:org", "put up "} {
		if !strings.Contains(text, want) {
			t.Errorf("the card lacks %q:\n%s", want, text)
		}
	}
	if n := run(p, chromedp.Evaluate[int](`document.querySelectorAll("`+card(id)+` select.window, `+card(id)+` input[data-cap]").length`)); n != 0 {
		t.Errorf("the card offers %d narrowing controls; want none (a sign-in is decided as a whole)", n)
	}
	p.shot("pending-signin")

	p.do(chromedp.Click(chromedp.CSS(card(id)+" button.approve")), chromedp.WaitNotPresent(chromedp.CSS(card(id))))
	// The card leaves as soon as the file moves; the answer comes after.
	waitFor(t, 10*time.Second, "the page to open, in the status line", func() string {
		if status := run(p, chromedp.Text(chromedp.CSS("#status"))); !strings.Contains(status, signInPage) {
			return "the status line says " + status
		}
		return ""
	})
	if got := st.started(); !slices.Equal(got, []string{"github"}) {
		t.Errorf("starter calls = %v; want [github]", got)
	}
}

var authorizationURLRe = regexp.MustCompile(`(?m)^  authorization_url: (\S+)$`)

// TestSignInInboxDaemon is the owner's story through the inbox on the
// daemon as wired: a server added with plexus mcp add answers 401, and its
// sign-in request appears in inbox/ by itself, once; the owner moves it to
// active/; the daemon's OAuth client starts the sign-in and its
// authorization URL is in the file; the owner opens it (the test as the
// browser, redirected to the daemon's own /oauth/callback) and the source
// connects. The journal tells it: signin.requested, signin.approved, and
// the OAuth client's rows; no row holds the URL, a token or the code.
func TestSignInInboxDaemon(t *testing.T) {
	o := newOAuthEnv(t)
	fe, id := fxSignInRequest(t, o)
	_, b := fe.waitFile(t, plexus.FolderInbox, id, stateIs(plexus.StatePending))
	for _, w := range []string{"server: fx", "resource: " + o.fx.URL, "issuer: http://127.0.0.1:", "No agent asked for this"} {
		if !strings.Contains(string(b), w) {
			t.Errorf("inbox file lacks %q:\n%s", w, b)
		}
	}

	move(t, fe.path(plexus.FolderInbox, id), fe.path(plexus.FolderActive, id))
	_, b = fe.waitFile(t, plexus.FolderActive, id, stateIs(plexus.StateApproved))
	m := authorizationURLRe.FindSubmatch(b)
	if m == nil {
		t.Fatalf("the active file shows no authorization URL:\n%s", b)
	}
	authURL := string(m[1])
	if !strings.Contains(string(b), "<"+authURL+">") {
		t.Errorf("the body does not link the URL:\n%s", b)
	}
	redirect := oauthtest.AuthorizeRedirect(t, authURL)
	if !strings.HasPrefix(redirect, o.td.BaseURL()+"/oauth/callback?") {
		t.Fatalf("the authorization server redirects to %s; want the daemon's callback", redirect)
	}
	page := browserGet(t, redirect)
	waitFor(t, 20*time.Second, "fx connected", holds(func() bool {
		it := o.item()
		return it.Source != nil && it.Source.Health.Status == plexus.HealthOK && !it.Source.Health.NeedsSignIn
	}))
	code, err := url.Parse(redirect)
	if err != nil {
		t.Fatal(err)
	}

	var acts []string
	secrets := map[string]string{"authorization code": code.Query().Get("code"), "authorization URL": authURL,
		"client secret": clientSecretCanary}
	for i, v := range o.fx.Issued() {
		secrets["token "+string(rune('a'+i))] = v
	}
	for _, r := range o.td.activity(t, journal.Filter{}) {
		if strings.HasPrefix(r.ActionType, "signin.") {
			acts = append(acts, r.ActionType)
		}
		raw, err := json.Marshal(r)
		if err != nil {
			t.Fatal(err)
		}
		checkNoSecret(t, "journal row "+r.ActionType, raw, secrets, http.StatusOK)
	}
	if !slices.Equal(acts, []string{"signin.requested", "signin.approved"}) {
		t.Errorf("sign-in rows = %v; want requested, approved", acts)
	}
	checkNoSecret(t, "the callback page", []byte(page), map[string]string{"code": secrets["authorization code"]}, http.StatusOK)
}

// fxSignInRequest waits until fx needs sign-in and its request is put up,
// and answers the files view of the daemon and the request's id.
func fxSignInRequest(t *testing.T, o *oauthEnv) (*filesEnv, string) {
	t.Helper()
	o.waitNeedsSignIn()
	var id string
	waitFor(t, 20*time.Second, "fx's sign-in request", holds(func() bool {
		for _, r := range o.td.activity(t, journal.Filter{Type: "signin.requested"}) {
			if r.Payload["server"] == "fx" {
				id = r.Target
			}
		}
		return id != ""
	}))
	return &filesEnv{testDaemon: o.td}, id
}

// TestSignInInboxWithdrawnByLogin: the owner signs in with plexus mcp
// login while the request waits in inbox/: the request asks for nothing
// any more, so it is withdrawn (journaled with why) and its file is filed
// in archive/.
func TestSignInInboxWithdrawnByLogin(t *testing.T) {
	o := newOAuthEnv(t)
	fe, id := fxSignInRequest(t, o)
	fe.waitFile(t, plexus.FolderInbox, id, stateIs(plexus.StatePending))
	if run, _, page := o.login(); run.code != exitOK {
		t.Fatalf("%s\ncallback page: %s", run, page)
	}
	fe.waitFile(t, plexus.FolderArchive, id, stateIs(plexus.StateWithdrawn))
	rows := o.td.activity(t, journal.Filter{Type: "signin.withdrawn"})
	if len(rows) != 1 || rows[0].Target != id || !strings.Contains(fmt.Sprint(rows[0].Payload["reason"]), "plexus mcp login") {
		t.Errorf("signin.withdrawn rows = %+v; want one for %s saying the owner signed in with plexus mcp login", rows, id)
	}
}
