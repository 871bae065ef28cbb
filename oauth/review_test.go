package oauth_test

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/plexus-gw/plexus/internal/oauthtest"
	"github.com/plexus-gw/plexus/oauth"
)

func fakeResp(status int, challenge string) *http.Response {
	h := http.Header{}
	h.Set("WWW-Authenticate", challenge)
	return &http.Response{StatusCode: status, Header: h, Body: io.NopCloser(strings.NewReader(""))}
}

// Review: a step-up that arrives while an episode's request is already
// filed (no widening shown) must not be granted silently by the next
// sign-in. Here the server asks for mcp:admin on a 403 after the 401 that
// filed the first request; the owner approves what the inbox showed, and
// the sign-in asks for mcp:admin all the same.
func TestReviewWideningInSameEpisodeIsSilent(t *testing.T) {
	h := newHarness(t, oauthtest.Options{})
	oh := h.handler(oauth.Config{})
	req, err := http.NewRequest(http.MethodPost, h.as.URL, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := oh.Authorize(t.Context(), req, fakeResp(401, `Bearer resource_metadata="`+h.as.URL+`/.well-known/oauth-protected-resource"`)); !errors.Is(err, oauth.ErrNeedsSignIn) {
		t.Fatalf("401: %v", err)
	}
	if err := oh.Authorize(t.Context(), req, fakeResp(403, `Bearer error="insufficient_scope", scope="mcp:read mcp:admin"`)); !errors.Is(err, oauth.ErrNeedsSignIn) {
		t.Fatalf("403: %v", err)
	}
	needs := h.needsRequests()
	for _, n := range needs {
		t.Logf("request shown to the owner: scopes=%v widening=%v", n.Scopes, n.Widening)
	}
	shown := false
	for _, n := range needs {
		if slices.Contains(n.Scopes, "mcp:admin") || slices.Contains(n.Widening, "mcp:admin") {
			shown = true
		}
	}
	h.login() // the owner approves the request the inbox shows
	got, _ := h.stored()["scopes"].([]any)
	t.Logf("scopes the sign-in asked for: %v", got)
	asked := false
	for _, s := range got {
		if s == "mcp:admin" {
			asked = true
		}
	}
	if asked && !shown {
		t.Fatalf("the sign-in asked for mcp:admin, which no request shown to the owner named")
	}
}

// Review: an entry that pins its authorization server
// (authServerMetadataUrl) and holds a client secret for it must never be
// sent to another authorization server. The server's protected resource
// metadata names another one; the owner's sign-in goes there, and the
// token exchange would carry the owner's client secret to it.
func TestReviewPinnedAuthServerIgnoredByLogin(t *testing.T) {
	legit := oauthtest.New(t, oauthtest.Options{})
	h := newHarness(t, oauthtest.Options{}) // h.as: the server whose PRM names its own AS, not the pinned one
	h.m.Handler(server, h.as.URL, oauth.Config{ClientID: "owner-app", ClientSecret: "CANARY-CLIENT-SECRET",
		AuthServerMetadataURL: legit.Issuer + "/.well-known/oauth-authorization-server"})
	flow, err := h.m.Login(t.Context(), server)
	if err != nil {
		t.Logf("Login refused: %v", err)
		return // refusing is the fix
	}
	if !strings.HasPrefix(flow.URL, legit.Issuer) {
		t.Fatalf("the entry pins %s, yet the sign-in goes to %s", legit.Issuer, flow.URL)
	}
}

// Review: an authorization server's text must not reach the owner's
// terminal, the journal or an answer verbatim. Its registration endpoint
// answers 500 with a terminal escape sequence and a successful-looking
// body holding a client secret; the SDK quotes the body in its error, and
// Login returns it (the daemon answers it, the CLI prints it raw).
func TestReviewRegistrationBodyReachesErrors(t *testing.T) {
	var base string
	mux := http.NewServeMux()
	mux.HandleFunc("/mcp", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("WWW-Authenticate", `Bearer scope="x"`)
		http.Error(w, "unauthorized", http.StatusUnauthorized)
	})
	mux.HandleFunc("/.well-known/oauth-authorization-server", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"issuer":%q,"authorization_endpoint":%q,"token_endpoint":%q,"registration_endpoint":%q,"code_challenge_methods_supported":["S256"],"response_types_supported":["code"]}`,
			base, base+"/authorize", base+"/token", base+"/register")
	})
	mux.HandleFunc("/register", func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusInternalServerError)
		fmt.Fprint(w, "\x1b]0;owned\x07\x1b[2J{\"client_id\":\"c\",\"client_secret\":\"DCR-SECRET-CANARY\"}")
	})
	ts := httptest.NewServer(mux)
	defer ts.Close()
	base = ts.URL
	h := newHarness(t, oauthtest.Options{})
	h.m.Handler(server, ts.URL+"/mcp", oauth.Config{})
	_, err := h.m.Login(t.Context(), server)
	if err == nil {
		t.Fatal("Login succeeded")
	}
	t.Logf("Login error: %q", err.Error())
	rows := strings.Join(h.journalRows(), "\n")
	if strings.Contains(err.Error(), "\x1b") || strings.Contains(err.Error(), "DCR-SECRET-CANARY") {
		t.Errorf("Login's error carries the authorization server's raw body (escape sequences / a secret)")
	}
	if strings.Contains(rows, "DCR-SECRET-CANARY") || strings.Contains(rows, `\u001b`) {
		t.Errorf("the journal carries the authorization server's raw body: %s", rows)
	}
}

// Review: a client-credentials source (no person) must not ask for a
// step-up's wider scopes on its own: the widening is the owner's to
// approve. After a 403 insufficient_scope naming mcp:write, the next token
// fetched at expiry asks for mcp:write with nobody asked.
func TestReviewClientCredentialsWideningSilent(t *testing.T) {
	h := newHarness(t, oauthtest.Options{})
	h.as.RegisterClient(oauthtest.Client{ID: "svc", Secret: "svc-secret"})
	oh := h.handler(oauth.Config{ClientID: "svc", ClientSecret: "svc-secret", Grant: oauth.GrantClientCredentials, Scopes: []string{"mcp:read"}})
	ts, err := oh.TokenSource(t.Context())
	if err != nil || ts == nil {
		t.Fatalf("TokenSource: %v %v", ts, err)
	}
	if _, err := ts.Token(); err != nil {
		t.Fatalf("first token: %v", err)
	}
	req, err := http.NewRequest(http.MethodPost, h.as.URL, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := oh.Authorize(t.Context(), req, fakeResp(403, `Bearer error="insufficient_scope", scope="mcp:read mcp:write"`)); !errors.Is(err, oauth.ErrNeedsSignIn) {
		t.Fatalf("403: %v", err)
	}
	h.clock.Advance(2 * time.Hour) // the token expires
	if _, err := ts.Token(); err != nil {
		t.Logf("token after expiry: %v", err)
	}
	reqs := h.as.TokenRequests()
	last := reqs[len(reqs)-1]
	t.Logf("token requests: %+v", reqs)
	if len(reqs) > 1 && slices.Contains(last.Scopes, "mcp:write") {
		t.Fatalf("a client-credentials token was fetched with the widening mcp:write, no owner asked")
	}
}

// Review: mcphost gives every url server without an Authorization header
// an OAuth handler, also one that never signs in. A plain-http server on
// the owner's network (http://192.168.1.20/mcp, no sign-in) then fails
// every request: the handler refuses its URL outright.
func TestReviewPlainHTTPServerWithoutOAuthBroken(t *testing.T) {
	h := newHarness(t, oauthtest.Options{})
	oh := h.m.Handler("lan", "http://192.168.1.20/mcp", oauth.Config{Grant: oauth.GrantAuthorizationCode})
	if _, err := oh.TokenSource(t.Context()); err != nil {
		t.Fatalf("TokenSource of a server that never asked for sign-in: %v (the SDK fails every request with it)", err)
	}
}
