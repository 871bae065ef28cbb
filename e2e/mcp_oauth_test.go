package e2e

import (
	"bytes"
	"context"
	"io"
	"io/fs"
	"log/slog"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/plexus-gw/plexus"
	"github.com/plexus-gw/plexus/daemon"
	"github.com/plexus-gw/plexus/internal/oauthtest"
	"github.com/plexus-gw/plexus/mcphost"
)

// oauthEnv is a daemon with a remote MCP server that signs in, the
// fixture's authorization server behind it, and the owner's command line.
type oauthEnv struct {
	t    *testing.T
	fx   *oauthtest.Server
	td   *testDaemon
	e    *cliEnv
	logs *lockedBuffer
}

// clientSecretCanary is the pre-registered client's secret: it may live in
// the secrets store and nowhere else.
const clientSecretCanary = "CANARY-CLIENT-SECRET-3f9a1c7e5b2d4a68"

// newOAuthEnv starts the fixture and the daemon and adds the server fx
// with a pre-registered confidential client, through plexus mcp add.
func newOAuthEnv(t *testing.T) *oauthEnv {
	t.Helper()
	o := startOAuthEnv(t)
	o.fx.RegisterClient(oauthtest.Client{ID: "plexus-e2e", Secret: clientSecretCanary})
	if r := o.e.runStdin(context.Background(), strings.NewReader(clientSecretCanary), "secrets", "set", "fx-oauth"); r.code != exitOK {
		t.Fatalf("%s", r)
	}
	o.e.ok("mcp", "add", "fx", "--url", o.fx.URL, "--oauth-client-id", "plexus-e2e",
		"--oauth-client-secret", "${secret:fx-oauth}", "--wait", "1s")
	return o
}

// startOAuthEnv starts the fixture and a daemon logging to a buffer.
func startOAuthEnv(t *testing.T) *oauthEnv {
	t.Helper()
	fx := oauthtest.New(t, oauthtest.Options{})
	logs := &lockedBuffer{}
	td := startTestDaemon(t, daemon.Options{Logger: slog.New(slog.NewJSONHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))})
	e := &cliEnv{t: t, home: td.Home().Dir, addr: td.Addr(), agentHome: t.TempDir()}
	return &oauthEnv{t: t, fx: fx, td: td, e: e, logs: logs}
}

// item is fx's line of plexus mcp list --json.
func (o *oauthEnv) item() mcphost.ListItem {
	o.t.Helper()
	var items []mcphost.ListItem
	o.e.jsonOut(&items, "mcp", "list", "--json")
	for _, it := range items {
		if it.Name == "fx" {
			return it
		}
	}
	o.t.Fatalf("mcp list has no fx: %+v", items)
	return mcphost.ListItem{}
}

// waitNeedsSignIn waits until mcp list shows fx as needing sign-in.
func (o *oauthEnv) waitNeedsSignIn() {
	o.t.Helper()
	waitFor(o.t, 20*time.Second, "fx listed as needing sign-in", holds(func() bool {
		it := o.item()
		return it.Source != nil && it.Source.Health.NeedsSignIn
	}))
}

var authURLRe = regexp.MustCompile(`(?m)^(http://127\.0\.0\.1:\d+/authorize\?\S+)$`)

// login runs plexus mcp login fx --no-browser, and plays the browser: it
// GETs the printed URL and follows the redirect to the daemon's callback.
// It answers the command's run, the authorization code the browser
// carried, and the callback's answer.
func (o *oauthEnv) login() (cliRun, string, string) {
	o.t.Helper()
	argv := []string{"plexus", "--home", o.e.home, "--addr", o.e.addr, "--agent-home", o.e.agentHome, "mcp", "login", "fx", "--no-browser"}
	out, errOut := &syncBuffer{}, &syncBuffer{}
	done := make(chan int, 1)
	go func() {
		done <- runPlexus(context.Background(), o.t, deciderEnv(), strings.NewReader(""), argv, out, errOut)
	}()
	var authURL string
	waitFor(o.t, 20*time.Second, "the authorization URL printed", holds(func() bool {
		m := authURLRe.FindStringSubmatch(out.String())
		if m != nil {
			authURL = m[1]
		}
		return m != nil
	}))
	redirect := oauthtest.AuthorizeRedirect(o.t, authURL)
	loc, err := url.Parse(redirect)
	if err != nil {
		o.t.Fatal(err)
	}
	page := browserGet(o.t, redirect)
	code := <-done
	return cliRun{args: argv[7:], code: code, stdout: out.String(), stderr: errOut.String()}, loc.Query().Get("code"), page
}

// browserGet is a browser's navigation: a GET with no Origin and no
// credential; it answers the body.
func browserGet(t *testing.T, u string) string {
	t.Helper()
	resp, err := http.Get(u)
	if err != nil {
		t.Fatalf("GET %s: %v", u, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestMCPOAuthSignIn is the owner's story: a server that asks for OAuth is
// listed as needing sign-in; plexus mcp login signs in through the daemon's
// own callback and the source connects; a call succeeds through /invoke; a
// token revoked behind Plexus's back puts the source back to needing
// sign-in (the call answers source_unavailable with the fix, and nothing
// is retried); plexus mcp logout revokes at the server and deletes the
// stored tokens; no secret is anywhere it does not belong.
func TestMCPOAuthSignIn(t *testing.T) {
	o := newOAuthEnv(t)
	td, e, fx := o.td, o.e, o.fx
	secrets := map[string]string{"client secret": clientSecretCanary}

	o.waitNeedsSignIn()
	quietFixture(t, fx)
	if r := e.ok("mcp", "list"); !strings.Contains(r.stdout, "needs sign-in: run plexus mcp login fx") {
		t.Errorf("mcp list does not say fx needs sign-in:\n%s", r)
	}
	if r := e.ok("status"); !strings.Contains(r.stdout, "needs sign-in: run plexus mcp login fx") {
		t.Errorf("status does not say fx needs sign-in:\n%s", r)
	}

	run, code, page := o.login()
	if run.code != exitOK || !strings.Contains(run.stdout, "Signed in to fx; its source mcp:fx is connected") {
		t.Fatalf("%s\ncallback page: %s", run, page)
	}
	checkNoSecret(t, "mcp login's output", []byte(run.stdout+run.stderr+page), map[string]string{"code": code}, http.StatusOK)
	secrets["authorization code"] = code
	for i, v := range fx.Issued() {
		secrets["token "+string(rune('a'+i))] = v
	}
	if len(fx.Issued()) < 2 {
		t.Fatalf("the fixture issued %v, want an access and a refresh token", fx.Issued())
	}
	checkSealedFile(t, td.Home().Dir, secrets) // the stored sign-in shows none of them
	if it := o.item(); it.Source == nil || it.Source.Health.Status != plexus.HealthOK || it.Source.Health.NeedsSignIn {
		t.Fatalf("fx after login: %+v", it.Source)
	}

	_, sid := enrolledAgent(t, td, "claude")
	tok := grantAllowed(t, td, sid, map[string]any{"mcp.fx.echo": map[string]any{"decision": "allow", "verbs": []string{"write"}}})
	st, resp, raw := td.invoke(t, tok, plexus.InvokeRequest{ID: "mcp.fx.echo", Input: map[string]any{"text": "through the sign-in"}})
	if st != http.StatusOK || !resp.OK || !bytes.Contains(resp.MCPResult, []byte("through the sign-in")) {
		t.Fatalf("invoke after login: %d %s", st, raw)
	}

	t.Run("RevokedNeedsSignIn", func(t *testing.T) {
		fx.ExpireAccessTokens()
		fx.RefuseRefresh(true)
		st, resp, raw := td.invoke(t, tok, plexus.InvokeRequest{ID: "mcp.fx.echo", Input: map[string]any{"text": "again"}})
		if st != http.StatusOK && resp.Error == nil || resp.OK || resp.Error == nil || resp.Error.Code != plexus.CodeSourceUnavailable ||
			!strings.Contains(resp.Error.Message, "plexus mcp login fx") {
			t.Fatalf("invoke with the tokens refused: %d %s", st, raw)
		}
		o.waitNeedsSignIn()
		quietFixture(t, fx)
		if ent, ok := manifestEntry(t, td, sid, "mcp.fx.echo"); !ok || ent.Health == nil || !ent.Health.NeedsSignIn ||
			!strings.Contains(ent.Health.Detail, "plexus mcp login fx") {
			t.Errorf("the agent's manifest entry does not show fx needs sign-in: %+v", ent.Health)
		}
		fx.RefuseRefresh(false)
		run, code, page := o.login()
		if run.code != exitOK {
			t.Fatalf("%s\ncallback page: %s", run, page)
		}
		secrets["second authorization code"] = code
		for i, v := range fx.Issued() {
			secrets["second token "+string(rune('a'+i))] = v
		}
		if _, resp, raw := td.invoke(t, tok, plexus.InvokeRequest{ID: "mcp.fx.echo", Input: map[string]any{"text": "back"}}); !resp.OK {
			t.Fatalf("invoke after signing in again: %s", raw)
		}
	})

	t.Run("Logout", func(t *testing.T) {
		issued := fx.Issued()
		r := e.ok("mcp", "logout", "fx")
		if !strings.Contains(r.stdout, "Signed out of fx") {
			t.Errorf("%s", r)
		}
		revoked := fx.Revoked()
		if len(revoked) == 0 || !slices.ContainsFunc(issued, func(v string) bool { return slices.Contains(revoked, v) }) {
			t.Errorf("the fixture revoked %d tokens of %d issued; want fx's revoked", len(revoked), len(issued))
		}
		if _, err := os.Stat(filepath.Join(td.Home().Dir, "secrets", "oauth.fx")); !os.IsNotExist(err) {
			t.Errorf("the stored tokens are still there after logout: %v", err)
		}
		o.waitNeedsSignIn()
	})

	t.Run("NoSecretLeaks", func(t *testing.T) {
		checkOAuthCanary(t, o, secrets)
	})
}

// quietFixture checks that nothing reaches the server or its
// authorization server for a while (many of the client's reconnect
// backoffs, which start at 200 ms) while fx waits for sign-in.
func quietFixture(t *testing.T, fx *oauthtest.Server) {
	t.Helper()
	counts := fxCounts(fx)
	time.Sleep(time.Second)
	if got := fxCounts(fx); !slices.Equal(got, counts) {
		t.Errorf("requests at the fixture went %v → %v while fx waited for sign-in", counts, got)
	}
}

// fxCounts is how many requests each of the fixture's endpoints got.
func fxCounts(fx *oauthtest.Server) []int {
	var out []int
	for _, ep := range []string{oauthtest.EndpointMCP, oauthtest.EndpointPRM, oauthtest.EndpointASMeta, oauthtest.EndpointRegister,
		oauthtest.EndpointToken, oauthtest.EndpointRevoke} {
		out = append(out, fx.Count(ep))
	}
	return out
}

// checkOAuthCanary looks for every secret of the sign-in in the answers an
// owner or agent can read, in /metrics, in every file of the home but the
// secrets store (journal.db, the audit mirror, mcp.json, the inbox) and in
// the daemon's log.
func checkOAuthCanary(t *testing.T, o *oauthEnv, secrets map[string]string) {
	td := o.td
	for _, path := range []string{"/admin/api/status", "/admin/api/pending", "/admin/api/sources", "/metrics"} {
		st, raw := td.raw(t, http.MethodGet, path, td.admin(), nil)
		checkNoSecret(t, "GET "+path, raw, secrets, st)
	}
	r := o.e.ok("mcp", "list", "--json")
	checkNoSecret(t, "mcp list", []byte(r.stdout+r.stderr), secrets, http.StatusOK)
	r = o.e.ok("journal", "--json")
	checkNoSecret(t, "journal --json", []byte(r.stdout), secrets, http.StatusOK)
	td.stop() // journal.db and its -wal settle
	home := td.Home().Dir
	store := filepath.Join(home, "secrets")
	err := filepath.WalkDir(home, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && path == store {
			return filepath.SkipDir // where the tokens belong
		}
		if !d.Type().IsRegular() {
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(home, path)
		checkNoSecret(t, rel, b, secrets, http.StatusOK)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	checkNoSecret(t, "the daemon's log", o.logs.Bytes(), secrets, http.StatusOK)
}

// TestMCPOAuthClientCredentials: a server whose entry says grant
// client_credentials signs in with no person, at start, with the client
// secret from the secrets store; its calls succeed through /invoke.
func TestMCPOAuthClientCredentials(t *testing.T) {
	fx := oauthtest.New(t, oauthtest.Options{})
	fx.RegisterClient(oauthtest.Client{ID: "svc", Secret: clientSecretCanary})
	td := startTestDaemon(t, daemon.Options{})
	e := &cliEnv{t: t, home: td.Home().Dir, addr: td.Addr(), agentHome: t.TempDir()}
	if r := e.runStdin(context.Background(), strings.NewReader(clientSecretCanary), "secrets", "set", "svc-secret"); r.code != exitOK {
		t.Fatalf("%s", r)
	}
	r := e.ok("mcp", "add", "svc", "--url", fx.URL, "--oauth-grant", "client_credentials", "--oauth-client-id", "svc",
		"--oauth-client-secret", "${secret:svc-secret}")
	if !strings.Contains(r.stdout, "Plexus serves") {
		t.Fatalf("the server did not come up without a person:\n%s", r)
	}
	_, sid := enrolledAgent(t, td, "claude")
	tok := grantAllowed(t, td, sid, map[string]any{"mcp.svc.echo": map[string]any{"decision": "allow", "verbs": []string{"write"}}})
	if _, resp, raw := td.invoke(t, tok, plexus.InvokeRequest{ID: "mcp.svc.echo", Input: map[string]any{"text": "no person"}}); !resp.OK {
		t.Fatalf("invoke: %s", raw)
	}
	reqs := fx.TokenRequests()
	if len(reqs) == 0 || reqs[0].Grant != "client_credentials" || reqs[0].ClientID != "svc" {
		t.Errorf("token requests = %+v, want client_credentials for svc", reqs)
	}
	if fx.Count(oauthtest.EndpointAuthorize) != 0 {
		t.Errorf("a person was sent to the authorization endpoint")
	}
}

// TestMCPOAuthDynamicRegistration: a url server added with nothing but
// its URL signs in when it asks, Plexus registering itself (RFC 7591);
// the registered client's secret is a secret like the tokens.
func TestMCPOAuthDynamicRegistration(t *testing.T) {
	o := startOAuthEnv(t)
	o.e.ok("mcp", "add", "fx", "--url", o.fx.URL, "--wait", "1s")
	o.waitNeedsSignIn()
	run, code, page := o.login()
	if run.code != exitOK {
		t.Fatalf("%s\ncallback page: %s", run, page)
	}
	if got := o.fx.Count(oauthtest.EndpointRegister); got != 1 {
		t.Errorf("registrations = %d, want 1", got)
	}
	secrets := map[string]string{"authorization code": code}
	for _, id := range o.fx.Clients() {
		if sec := o.fx.ClientSecret(id); sec != "" {
			secrets["registered client secret"] = sec
		}
	}
	for i, v := range o.fx.Issued() {
		secrets["token "+string(rune('a'+i))] = v
	}
	if len(secrets) < 3 {
		t.Fatalf("secrets to look for: %v; want the code, tokens and the client's secret", secrets)
	}
	r := o.e.ok("mcp", "remove", "fx")
	if !strings.Contains(r.stdout, "Its sign-in tokens are revoked and deleted") || len(o.fx.Revoked()) == 0 {
		t.Errorf("mcp remove of a signed-in server: revoked %d tokens\n%s", len(o.fx.Revoked()), r)
	}
	if _, err := os.Stat(filepath.Join(o.td.Home().Dir, "secrets", "oauth.fx")); !os.IsNotExist(err) {
		t.Errorf("the stored tokens are still there after mcp remove: %v", err)
	}
	checkOAuthCanary(t, o, secrets)
}
