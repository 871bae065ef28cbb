package oauth_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/plexus-gw/plexus"
	"github.com/plexus-gw/plexus/internal/oauthtest"
	"github.com/plexus-gw/plexus/oauth"
)

// TestLogin runs the owner's sign-in with the test as the browser, for each
// way of registering the client, then calls a tool with the token.
func TestLogin(t *testing.T) {
	for _, tc := range []struct {
		name         string
		opts         oauthtest.Options
		cfg          func(t *testing.T) oauth.Config
		client       func(h *harness) string // the client_id the token endpoint must see
		method       string                  // the client authentication it must see
		registration int                     // DCR requests after one login
		scopes       []string                // the scopes asked; default the challenge's plus offline_access
	}{
		{
			name: "DynamicRegistration",
			cfg:  func(*testing.T) oauth.Config { return oauth.Config{} },
			client: func(h *harness) string {
				return h.as.Clients()[0]
			},
			method: "client_secret_basic", registration: 1, // what the registration answered
		},
		{
			name: "PreRegistered",
			cfg: func(*testing.T) oauth.Config {
				return oauth.Config{ClientID: "plexus-pre", ClientSecret: "pre-secret"}
			},
			client: func(*harness) string { return "plexus-pre" },
			method: "client_secret_post",
		},
		{
			name: "ClientIDMetadataDocument",
			opts: oauthtest.Options{CIMD: true},
			cfg: func(*testing.T) oauth.Config {
				return oauth.Config{ClientMetadataURL: "https://plexus.example/client.json", ClientID: "plexus-pre"}
			},
			client: func(*harness) string { return "https://plexus.example/client.json" },
			method: "none",
		},
		{
			name: "ClientIDMetadataDocumentNotOffered",
			cfg: func(*testing.T) oauth.Config {
				return oauth.Config{ClientMetadataURL: "https://plexus.example/client.json", ClientID: "plexus-pre", ClientSecret: "pre-secret"}
			},
			client: func(*harness) string { return "plexus-pre" },
			method: "client_secret_post",
		},
		{
			name: "OpenIDDiscovery",
			opts: oauthtest.Options{OpenIDOnly: true},
			cfg:  func(*testing.T) oauth.Config { return oauth.Config{} },
			client: func(h *harness) string {
				return h.as.Clients()[0]
			},
			method: "client_secret_basic", registration: 1,
		},
		{
			name: "WellKnownResourceMetadata",
			opts: oauthtest.Options{NoChallengeMetadata: true, NoChallengeScope: true},
			cfg:  func(*testing.T) oauth.Config { return oauth.Config{} },
			client: func(h *harness) string {
				return h.as.Clients()[0]
			},
			method: "client_secret_basic", registration: 1,
			scopes: []string{"mcp:read", "mcp:write", "offline_access"}, // scopes_supported
		},
		{
			name: "EntryScopes",
			cfg:  func(*testing.T) oauth.Config { return oauth.Config{Scopes: []string{"mcp:read", "mcp:write"}} },
			client: func(h *harness) string {
				return h.as.Clients()[0]
			},
			method: "client_secret_basic", registration: 1,
			scopes: []string{"mcp:read", "mcp:write", "offline_access"},
		},
		{
			name: "CallbackPort",
			cfg:  func(t *testing.T) oauth.Config { return oauth.Config{CallbackPort: freePort(t)} },
			client: func(h *harness) string {
				return h.as.Clients()[0]
			},
			method: "client_secret_basic", registration: 1,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, tc.opts)
			h.as.RegisterClient(oauthtest.Client{ID: "plexus-pre", Secret: "pre-secret"})
			oh := h.handler(tc.cfg(t))
			h.login()

			scopes, err := h.connect(oh)
			if err != nil {
				t.Fatalf("connect after sign-in: %v", err)
			}
			wantScopes := tc.scopes
			if wantScopes == nil {
				wantScopes = []string{"mcp:read", "offline_access"}
			}
			if got := strings.Fields(scopes); !cmp.Equal(got, wantScopes, sortStrings) {
				t.Errorf("token scopes = %v, want %v", got, wantScopes)
			}
			reqs := h.as.TokenRequests()
			want := oauthtest.TokenRequest{Grant: "authorization_code", ClientID: tc.client(h), AuthMethod: tc.method,
				Resource: h.as.URL, Scopes: wantScopes}
			if len(reqs) != 1 || !cmp.Equal(reqs[0], want, sortStrings) {
				t.Errorf("token requests = %+v, want [%+v]", reqs, want)
			}
			if got := h.as.Count(oauthtest.EndpointRegister); got != tc.registration {
				t.Errorf("registrations = %d, want %d", got, tc.registration)
			}
			if n, detail := h.m.State(server); n || detail != "signed in" {
				t.Errorf("State = %v %q, want false \"signed in\"", n, detail)
			}
			if got := h.signedInCalls(); len(got) != 1 || !h.hasRow("oauth.signin.started") || !h.hasRow("oauth.signin.completed") {
				t.Errorf("SignedIn calls %v, journal %v: want one call and started, completed rows", got, h.journalRows())
			}

			// A second sign-in reuses the client Plexus registered.
			h.login()
			if got := h.as.Count(oauthtest.EndpointRegister); got != tc.registration {
				t.Errorf("registrations after a second sign-in = %d, want %d", got, tc.registration)
			}
		})
	}
}

// TestRefreshPersisted: an expiring token is refreshed before it is sent,
// the refreshed tokens are stored, and a restarted Manager uses them
// without a sign-in.
func TestRefreshPersisted(t *testing.T) {
	h := newHarness(t, oauthtest.Options{})
	oh := h.handler(oauth.Config{})
	h.login()
	before := h.stored()

	h.clock.Advance(2 * time.Hour)
	h.as.SetTokenLifetime(24 * time.Hour) // the refreshed token outlives the moved clock
	if _, err := h.connect(oh); err != nil {
		t.Fatalf("connect after the token expired: %v", err)
	}
	reqs := h.as.TokenRequests()
	if last := reqs[len(reqs)-1]; len(reqs) != 2 || last.Grant != "refresh_token" || last.Resource != h.as.URL {
		t.Fatalf("token requests = %+v, want the code exchange then one refresh naming the resource", reqs)
	}
	after := h.stored()
	if tokenOf(after, "access_token") == tokenOf(before, "access_token") ||
		tokenOf(after, "refresh_token") == tokenOf(before, "refresh_token") {
		t.Errorf("the stored tokens did not change after a refresh")
	}

	h.newManager() // a restart
	if _, err := h.connect(h.handler(oauth.Config{})); err != nil {
		t.Fatalf("connect after a restart: %v", err)
	}
	if got := len(h.as.TokenRequests()); got != 2 {
		t.Errorf("token requests after a restart = %d, want 2 (the stored token is used)", got)
	}
}

// TestRefusedRefresh: a refused refresh puts the source in needs-sign-in,
// reported once, and nothing asks the token endpoint again.
func TestRefusedRefresh(t *testing.T) {
	h := newHarness(t, oauthtest.Options{})
	oh := h.handler(oauth.Config{})
	h.login()
	h.as.RefuseRefresh(true)
	h.clock.Advance(2 * time.Hour)

	for i := range 3 {
		_, err := h.connect(oh)
		if !errors.Is(err, oauth.ErrNeedsSignIn) {
			t.Fatalf("connect %d: err = %v, want ErrNeedsSignIn", i, err)
		}
	}
	if got := h.as.Count(oauthtest.EndpointToken); got != 2 {
		t.Errorf("token endpoint requests = %d, want 2 (the exchange and one refused refresh)", got)
	}
	needs := h.needsRequests()
	if len(needs) != 1 || needs[0].Reason != "the refresh token was refused" || needs[0].Issuer != h.as.Issuer {
		t.Errorf("NeedsSignIn calls = %+v, want one for the refused refresh at %s", needs, h.as.Issuer)
	}
	if n, detail := h.m.State(server); !n || detail != "the refresh token was refused" {
		t.Errorf("State = %v %q, want needs sign-in", n, detail)
	}
	if !h.hasRow("oauth.refresh.failed") {
		t.Errorf("journal = %v, want an oauth.refresh.failed row", h.journalRows())
	}

	// Signing in again ends the episode.
	h.as.SetTokenLifetime(24 * time.Hour)
	h.login()
	if _, err := h.connect(oh); err != nil {
		t.Fatalf("connect after signing in again: %v", err)
	}
}

// TestNeedsSignIn: a server answering 401 with no token stored is
// reported once per episode with what the owner is asked, and the handler
// runs no flow of its own.
func TestNeedsSignIn(t *testing.T) {
	h := newHarness(t, oauthtest.Options{})
	oh := h.handler(oauth.Config{})
	for i := range 2 {
		if _, err := h.connect(oh); !errors.Is(err, oauth.ErrNeedsSignIn) {
			t.Fatalf("connect %d: err = %v, want ErrNeedsSignIn", i, err)
		}
	}
	needs := h.needsRequests()
	want := []string{"mcp:read"}
	if len(needs) != 1 || needs[0].Server != server || needs[0].Resource != h.as.URL ||
		needs[0].Issuer != h.as.Issuer || !cmp.Equal(needs[0].Scopes, want) {
		t.Errorf("NeedsSignIn calls = %+v, want one for %s at %s with %v", needs, h.as.URL, h.as.Issuer, want)
	}
	for _, e := range []string{oauthtest.EndpointAuthorize, oauthtest.EndpointToken, oauthtest.EndpointRegister} {
		if got := h.as.Count(e); got != 0 {
			t.Errorf("%s requests = %d, want 0 (no flow inline)", e, got)
		}
	}
	if n, _ := h.m.State(server); !n {
		t.Errorf("State: needsSignIn = false, want true")
	}
}

// TestStepUpWidening: a server asking for scopes beyond those approved is
// a new sign-in request showing the widening; nothing asks for them until
// the owner signs in again.
func TestStepUpWidening(t *testing.T) {
	h := newHarness(t, oauthtest.Options{})
	oh := h.handler(oauth.Config{})
	h.login()
	h.as.SetRequiredScopes("mcp:read", "mcp:write")

	if _, err := h.connect(oh); !errors.Is(err, oauth.ErrNeedsSignIn) {
		t.Fatalf("connect: err = %v, want ErrNeedsSignIn", err)
	}
	needs := h.needsRequests()
	if len(needs) != 1 || !cmp.Equal(needs[0].Widening, []string{"mcp:write"}) ||
		!slices.Contains(needs[0].Scopes, "mcp:write") {
		t.Fatalf("NeedsSignIn calls = %+v, want one widening by mcp:write", needs)
	}
	if got := h.as.Count(oauthtest.EndpointAuthorize); got != 1 {
		t.Errorf("authorize requests = %d, want 1 (the widening is not asked for silently)", got)
	}
	if got := len(h.as.TokenRequests()); got != 1 {
		t.Errorf("token requests = %d, want 1", got)
	}

	h.login()
	scopes, err := h.connect(oh)
	if err != nil {
		t.Fatalf("connect after the owner's sign-in: %v", err)
	}
	if !strings.Contains(scopes, "mcp:write") {
		t.Errorf("token scopes = %q, want mcp:write after the owner signed in", scopes)
	}
}

// TestClientCredentials: no person; the grant authenticates as the
// authorization server allows, sends the resource, and a refused grant
// is reported once with no retry.
func TestClientCredentials(t *testing.T) {
	rsaKey, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	ecKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name    string
		methods []string
		client  oauthtest.Client
		cfg     oauth.Config
		want    string
	}{
		{"SecretBasic", nil, oauthtest.Client{ID: "svc", Secret: "svc-secret"},
			oauth.Config{ClientID: "svc", ClientSecret: "svc-secret"}, "client_secret_basic"},
		{"SecretPost", []string{"client_secret_post"}, oauthtest.Client{ID: "svc", Secret: "svc-secret"},
			oauth.Config{ClientID: "svc", ClientSecret: "svc-secret"}, "client_secret_post"},
		{"PrivateKeyJWTRSA", nil, oauthtest.Client{ID: "svc", PublicKey: &rsaKey.PublicKey},
			oauth.Config{ClientID: "svc", PrivateKey: pemKey(t, rsaKey)}, "private_key_jwt"},
		{"PrivateKeyJWTEC", nil, oauthtest.Client{ID: "svc", PublicKey: &ecKey.PublicKey},
			oauth.Config{ClientID: "svc", PrivateKey: pemKey(t, ecKey)}, "private_key_jwt"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, oauthtest.Options{AuthMethods: tc.methods})
			h.as.RegisterClient(tc.client)
			tc.cfg.Grant = oauth.GrantClientCredentials
			oh := h.handler(tc.cfg)
			if _, err := h.connect(oh); err != nil {
				t.Fatalf("connect: %v", err)
			}
			want := oauthtest.TokenRequest{Grant: "client_credentials", ClientID: "svc", AuthMethod: tc.want,
				Resource: h.as.URL, Scopes: []string{"mcp:read"}}
			if reqs := h.as.TokenRequests(); len(reqs) != 1 || !cmp.Equal(reqs[0], want) {
				t.Errorf("token requests = %+v, want [%+v]", reqs, want)
			}
			if n, detail := h.m.State(server); n || detail != "signed in" {
				t.Errorf("State = %v %q, want signed in", n, detail)
			}
		})
	}

	t.Run("Refused", func(t *testing.T) {
		h := newHarness(t, oauthtest.Options{})
		h.as.RegisterClient(oauthtest.Client{ID: "svc", Secret: "svc-secret"})
		oh := h.handler(oauth.Config{ClientID: "svc", ClientSecret: "wrong", Grant: oauth.GrantClientCredentials})
		for i := range 3 {
			if _, err := h.connect(oh); !errors.Is(err, oauth.ErrNeedsSignIn) {
				t.Fatalf("connect %d: err = %v, want ErrNeedsSignIn", i, err)
			}
		}
		if got := h.as.Count(oauthtest.EndpointToken); got != 1 {
			t.Errorf("token endpoint requests = %d, want 1 (no retry)", got)
		}
		if got := len(h.needsRequests()); got != 1 {
			t.Errorf("NeedsSignIn calls = %d, want 1", got)
		}
	})
}

var sortStrings = cmpopts.SortSlices(func(a, b string) bool { return a < b })

func pemKey(t *testing.T, key any) string {
	t.Helper()
	der, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	return string(pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}))
}

// TestLogout revokes the refresh and access tokens when the server offers
// revocation, and deletes the stored sign-in either way.
func TestLogout(t *testing.T) {
	for _, tc := range []struct {
		name    string
		opts    oauthtest.Options
		removed bool // the entry is gone (mcp remove after a restart): only the store knows the sign-in
	}{
		{"Revocation", oauthtest.Options{}, false},
		{"NoRevocation", oauthtest.Options{NoRevocation: true}, false},
		{"EntryRemoved", oauthtest.Options{}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, tc.opts)
			oh := h.handler(oauth.Config{})
			h.login()
			blob := h.stored()
			if tc.removed {
				h.newManager()
			}
			if err := h.m.Logout(t.Context(), server); err != nil {
				t.Fatalf("Logout: %v", err)
			}
			var want []string
			if !tc.opts.NoRevocation {
				want = []string{tokenOf(blob, "refresh_token"), tokenOf(blob, "access_token")}
			}
			if got := h.as.Revoked(); !cmp.Equal(got, want) {
				t.Errorf("revoked = %d tokens, want %d (refresh then access)", len(got), len(want))
			}
			if h.stored() != nil {
				t.Errorf("the sign-in is still stored after Logout")
			}
			if !h.hasRow("oauth.signout") {
				t.Errorf("journal = %v, want an oauth.signout row", h.journalRows())
			}
			if tc.removed {
				return
			}
			if _, err := h.connect(oh); !errors.Is(err, oauth.ErrNeedsSignIn) {
				t.Errorf("connect after Logout: err = %v, want ErrNeedsSignIn", err)
			}
		})
	}
}

// TestCallbackRefuses: the callback takes one use of a fresh state bound
// to a running login, and answers anything else with a bare 400.
func TestCallbackRefuses(t *testing.T) {
	for _, tc := range []struct {
		name string
		// prepare gets the redirect the browser would follow and returns
		// the request the attacker makes instead.
		prepare  func(h *harness, redirect string) (method, target string)
		loginErr bool // the login ends with an error
	}{
		{"UnknownState", func(h *harness, redirect string) (string, string) {
			return http.MethodGet, withQuery(redirect, "state", "made-up")
		}, false},
		{"NoState", func(h *harness, redirect string) (string, string) {
			return http.MethodGet, withQuery(redirect, "state", "")
		}, false},
		{"Replay", func(h *harness, redirect string) (string, string) {
			if code, _ := get(h.t, http.MethodGet, redirect); code != http.StatusOK {
				h.t.Fatalf("the genuine callback answered %d", code)
			}
			return http.MethodGet, redirect
		}, false},
		{"Expired", func(h *harness, redirect string) (string, string) {
			h.clock.Advance(11 * time.Minute)
			return http.MethodGet, redirect
		}, true},
		{"Post", func(h *harness, redirect string) (string, string) {
			return http.MethodPost, redirect
		}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, oauthtest.Options{})
			h.handler(oauth.Config{})
			flow, err := h.m.Login(t.Context(), server)
			if err != nil {
				t.Fatalf("Login: %v", err)
			}
			redirect := oauthtest.AuthorizeRedirect(t, flow.URL)
			code := mustQuery(t, redirect, "code")
			method, target := tc.prepare(h, redirect)
			status, body := get(t, method, target)
			if status != http.StatusBadRequest || body != "bad request\n" {
				t.Errorf("callback answered %d %q, want a bare 400", status, body)
			}
			if strings.Contains(body, code) {
				t.Errorf("the callback echoed the code")
			}
			if tc.loginErr {
				if err := <-flow.Done; err == nil || !strings.Contains(err.Error(), "expired") {
					t.Errorf("flow ended with %v, want the sign-in expired", err)
				}
				if got := h.as.Count(oauthtest.EndpointToken); got != 0 {
					t.Errorf("token requests = %d, want 0", got)
				}
			}
		})
	}
}

func withQuery(raw, k, v string) string {
	u, err := url.Parse(raw)
	if err != nil {
		panic(err)
	}
	q := u.Query()
	q.Set(k, v)
	u.RawQuery = q.Encode()
	return u.String()
}

func mustQuery(t *testing.T, raw, k string) string {
	t.Helper()
	u, err := url.Parse(raw)
	if err != nil {
		t.Fatal(err)
	}
	return u.Query().Get(k)
}

func get(t *testing.T, method, target string) (int, string) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), method, target, nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, string(b)
}

// TestIssuerRefused: metadata naming another issuer stops the sign-in
// before the owner is sent anywhere; an authorization response carrying
// another issuer (RFC 9207 mix-up) is refused before any token request.
func TestIssuerRefused(t *testing.T) {
	t.Run("MetadataMismatch", func(t *testing.T) {
		h := newHarness(t, oauthtest.Options{MetadataIssuer: "http://127.0.0.1:1"})
		h.handler(oauth.Config{})
		if _, err := h.m.Login(t.Context(), server); err == nil || !strings.Contains(err.Error(), "issuer") {
			t.Fatalf("Login err = %v, want an issuer mismatch", err)
		}
		if got := h.as.Count(oauthtest.EndpointAuthorize) + h.as.Count(oauthtest.EndpointRegister); got != 0 {
			t.Errorf("authorize and register requests = %d, want 0", got)
		}
		if !h.hasRow("oauth.signin.failed") {
			t.Errorf("journal = %v, want oauth.signin.failed", h.journalRows())
		}
	})
	t.Run("WrongIss", func(t *testing.T) {
		h := newHarness(t, oauthtest.Options{WrongIss: true})
		h.handler(oauth.Config{})
		flow, err := h.m.Login(t.Context(), server)
		if err != nil {
			t.Fatalf("Login: %v", err)
		}
		status, body := oauthtest.Browse(t, flow.URL)
		if status != http.StatusBadRequest || !strings.Contains(body, "failed") {
			t.Errorf("callback answered %d %q, want the failed page", status, body)
		}
		if err := <-flow.Done; err == nil || !strings.Contains(err.Error(), "issuer") {
			t.Errorf("flow ended with %v, want an issuer mismatch", err)
		}
		if got := h.as.Count(oauthtest.EndpointToken); got != 0 {
			t.Errorf("token requests = %d, want 0", got)
		}
	})
}

// TestPlainHTTPRefused: a token never goes over plain http but to
// loopback. A url server refused so (one on the owner's network, which
// never asks for sign-in) still works: no token, no error; only a sign-in
// is refused, saying why, and its URL's query is not repeated.
func TestPlainHTTPRefused(t *testing.T) {
	for _, tc := range []struct {
		url string
		ok  bool
	}{
		{"https://mcp.example.com/mcp", true},
		{"http://127.0.0.1:8080/mcp", true},
		{"http://localhost:8080/mcp", true},
		{"http://[::1]:8080/mcp", true},
		{"http://mcp.example.com/mcp?key=CANARY-QUERY-KEY", false},
		{"http://10.0.0.5/mcp", false},
		{"http://192.168.1.20/mcp", false},
		{"ftp://mcp.example.com/mcp", false},
	} {
		t.Run(tc.url, func(t *testing.T) {
			h := newHarness(t, oauthtest.Options{})
			oh := h.m.Handler(server, tc.url, oauth.Config{Grant: oauth.GrantAuthorizationCode})
			if ts, err := oh.TokenSource(t.Context()); err != nil || ts != nil {
				t.Errorf("TokenSource = %v, %v; want no token and no error (nothing signed in yet)", ts, err)
			}
			if tc.ok {
				return
			}
			req, err := http.NewRequest(http.MethodPost, tc.url, nil)
			if err != nil {
				t.Fatal(err)
			}
			aerr := oh.Authorize(t.Context(), req, fakeResp(401, `Bearer scope="x"`))
			_, lerr := h.m.Login(t.Context(), server)
			for what, err := range map[string]error{"Authorize": aerr, "Login": lerr} {
				if err == nil || errors.Is(err, oauth.ErrNeedsSignIn) {
					t.Errorf("%s err = %v, want the configuration refused", what, err)
					continue
				}
				if strings.HasPrefix(tc.url, "http:") && !strings.Contains(err.Error(), "plain http") {
					t.Errorf("%s err = %v, want it to say plain http", what, err)
				}
				if strings.Contains(err.Error(), "CANARY-QUERY-KEY") {
					t.Errorf("%s err = %v repeats the URL's query", what, err)
				}
			}
			if _, detail := h.m.State(server); !strings.Contains(detail, "refused") {
				t.Errorf("State detail = %q, want it to say the configuration is refused", detail)
			}
		})
	}
}

// TestHandlerSameEntry: asking again for the same entry (a reconnect) keeps
// the episode: the owner is asked once. A changed entry starts afresh.
func TestHandlerSameEntry(t *testing.T) {
	h := newHarness(t, oauthtest.Options{})
	for i := range 2 {
		if _, err := h.connect(h.handler(oauth.Config{})); !errors.Is(err, oauth.ErrNeedsSignIn) {
			t.Fatalf("connect %d: err = %v, want ErrNeedsSignIn", i, err)
		}
	}
	if got := len(h.needsRequests()); got != 1 {
		t.Errorf("NeedsSignIn calls = %d, want 1 across reconnects", got)
	}
	if _, err := h.connect(h.handler(oauth.Config{Scopes: []string{"mcp:write"}})); !errors.Is(err, oauth.ErrNeedsSignIn) {
		t.Fatalf("connect with a changed entry: err = %v, want ErrNeedsSignIn", err)
	}
	if got := h.needsRequests(); len(got) != 2 || !cmp.Equal(got[1].Scopes, []string{"mcp:write"}) {
		t.Errorf("NeedsSignIn calls = %+v, want a second one asking for the entry's scopes", got)
	}
}

// TestClose ends a sign-in waiting for its browser, frees its callback
// port, and refuses new sign-ins.
func TestClose(t *testing.T) {
	h := newHarness(t, oauthtest.Options{})
	port := freePort(t)
	h.handler(oauth.Config{CallbackPort: port})
	flow, err := h.m.Login(t.Context(), server)
	if err != nil {
		t.Fatalf("Login: %v", err)
	}
	h.m.Close()
	if err := <-flow.Done; err == nil {
		t.Errorf("the flow ended without error after Close")
	}
	if c, err := net.Dial("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port))); err == nil {
		c.Close()
		t.Errorf("the callback port still listens after Close")
	}
	if _, err := h.m.Login(t.Context(), server); err == nil {
		t.Errorf("Login after Close succeeded")
	}
}

func fakeResp(status int, challenge string) *http.Response {
	h := http.Header{}
	h.Set("WWW-Authenticate", challenge)
	return &http.Response{StatusCode: status, Header: h, Body: io.NopCloser(strings.NewReader(""))}
}

// TestStepUpMidEpisodeFilesWidening: a step-up that arrives while the
// episode's request is already filed is a new request showing the
// widening; the sign-in never asks for a scope no request showed. Here the server asks for mcp:admin on a 403 after the 401 that
// filed the first request; the owner approves what the inbox showed, and
// the sign-in asks for mcp:admin all the same.
func TestStepUpMidEpisodeFilesWidening(t *testing.T) {
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
	if len(needs) != 2 || !slices.Equal(needs[1].Widening, []string{"mcp:admin"}) {
		t.Errorf("requests filed = %+v, want a second one widening by mcp:admin", needs)
	}
}

// TestPinnedAuthServer: an entry that pins its authorization server
// (authServerMetadataUrl) and holds a client secret for it is never sent
// to another one. The server's protected resource metadata names another;
// the sign-in is refused before the owner is sent anywhere.
func TestPinnedAuthServer(t *testing.T) {
	legit := oauthtest.New(t, oauthtest.Options{})
	h := newHarness(t, oauthtest.Options{}) // h.as: the server whose PRM names its own AS, not the pinned one
	h.m.Handler(server, h.as.URL, oauth.Config{ClientID: "owner-app", ClientSecret: "CANARY-CLIENT-SECRET",
		AuthServerMetadataURL: legit.Issuer + "/.well-known/oauth-authorization-server"})
	flow, err := h.m.Login(t.Context(), server)
	if err == nil {
		t.Fatalf("the entry pins %s, yet the sign-in goes to %s", legit.Issuer, flow.URL)
	}
	if !strings.Contains(err.Error(), "pins") {
		t.Errorf("Login err = %v, want it to say the entry pins another authorization server", err)
	}
	if n := h.as.Count(oauthtest.EndpointRegister) + h.as.Count(oauthtest.EndpointAuthorize) + len(h.as.TokenRequests()); n != 0 {
		t.Errorf("the unpinned authorization server got %d requests, want 0", n)
	}
	t.Run("Matching", func(t *testing.T) {
		h := newHarness(t, oauthtest.Options{})
		h.as.RegisterClient(oauthtest.Client{ID: "owner-app", Secret: "s", RedirectURIs: []string{h.cb.URL + "/oauth/callback"}})
		h.m.Handler(server, h.as.URL, oauth.Config{ClientID: "owner-app", ClientSecret: "s",
			AuthServerMetadataURL: h.as.Issuer + "/.well-known/oauth-authorization-server"})
		flow, err := h.m.Login(t.Context(), server)
		if err != nil {
			t.Fatalf("Login with the pin the server agrees with: %v", err)
		}
		if !strings.HasPrefix(flow.URL, h.as.Issuer) {
			t.Errorf("the sign-in goes to %s, want %s", flow.URL, h.as.Issuer)
		}
	})
}

// TestRegistrationErrorHoldsNoBody: an authorization server's text does
// not reach the owner's terminal, the journal or an answer verbatim. Its registration endpoint
// answers 500 with a terminal escape sequence and a successful-looking
// body holding a client secret; the SDK quotes the body in its error, and
// Login returns it (the daemon answers it, the CLI prints it raw).
func TestRegistrationErrorHoldsNoBody(t *testing.T) {
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
	if !strings.Contains(err.Error(), "500") {
		t.Errorf("Login err = %q, want the status", err)
	}
	if strings.Contains(err.Error(), "\x1b") || strings.Contains(err.Error(), "DCR-SECRET-CANARY") {
		t.Errorf("Login's error carries the authorization server's raw body (escape sequences / a secret)")
	}
	if strings.Contains(rows, "DCR-SECRET-CANARY") || strings.Contains(rows, `\u001b`) {
		t.Errorf("the journal carries the authorization server's raw body: %s", rows)
	}
}

// TestClientCredentialsStepUpAsksOwner: a client-credentials source (no
// person) does not ask for a step-up's wider scopes on its own: after a
// 403 insufficient_scope naming mcp:write, a request showing the widening
// is filed, and the next token, fetched at expiry, asks for mcp:read only.
func TestClientCredentialsStepUpAsksOwner(t *testing.T) {
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
	if len(reqs) != 2 || slices.Contains(last.Scopes, "mcp:write") {
		t.Fatalf("token requests = %+v, want a second one without the widening mcp:write (no owner asked)", reqs)
	}
	if needs := h.needsRequests(); len(needs) != 1 || !slices.Equal(needs[0].Widening, []string{"mcp:write"}) {
		t.Errorf("requests filed = %+v, want one widening by mcp:write", needs)
	}
}

// TestLoginApproved: a sign-in started from the inbox is bound to the
// request the owner approved. It asks for the scopes the request showed
// and no more; an issuer or resource other than the one shown (or an
// issuer not shown at all) fails the start before the owner is sent
// anywhere and files a new request showing what was found.
func TestLoginApproved(t *testing.T) {
	for _, tc := range []struct {
		name   string
		change func(h *harness, r *plexus.SignInRequest)
		fails  string // in the error; "" for a start that succeeds
	}{
		{name: "AsShown", change: func(*harness, *plexus.SignInRequest) {}},
		{name: "FewerScopes", change: func(_ *harness, r *plexus.SignInRequest) { r.Scopes = nil }},
		{name: "OtherIssuer", change: func(_ *harness, r *plexus.SignInRequest) { r.Issuer = "https://as.example" }, fails: "approved request"},
		{name: "IssuerNotShown", change: func(_ *harness, r *plexus.SignInRequest) { r.Issuer = "" }, fails: "approved request"},
		{name: "OtherResource", change: func(h *harness, r *plexus.SignInRequest) { r.Resource = h.as.URL + "/other" }, fails: "approved request"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, oauthtest.Options{})
			oh := h.handler(oauth.Config{})
			if _, err := h.connect(oh); !errors.Is(err, oauth.ErrNeedsSignIn) {
				t.Fatalf("connect: %v", err)
			}
			req := h.needsRequests()[0]
			tc.change(h, &req)
			flow, err := h.m.Login(t.Context(), server, oauth.Approved(req))
			if tc.fails != "" {
				if err == nil || !strings.Contains(err.Error(), tc.fails) {
					t.Fatalf("Login err = %v, want it to say %q", err, tc.fails)
				}
				if n := h.as.Count(oauthtest.EndpointAuthorize) + h.as.Count(oauthtest.EndpointRegister); n != 0 {
					t.Errorf("authorize and register requests = %d, want 0", n)
				}
				needs := h.needsRequests()
				if len(needs) != 2 || needs[1].Issuer != h.as.Issuer || needs[1].Resource != h.as.URL {
					t.Errorf("requests filed = %+v, want a new one showing %s for %s", needs, h.as.Issuer, h.as.URL)
				}
				return
			}
			if err != nil {
				t.Fatalf("Login: %v", err)
			}
			for _, sc := range strings.Fields(mustQuery(t, flow.URL, "scope")) {
				if sc != "offline_access" && !slices.Contains(req.Scopes, sc) {
					t.Errorf("the sign-in asks for %q, which the approved request %v did not show", sc, req.Scopes)
				}
			}
			if status, _ := oauthtest.Browse(t, flow.URL); status != http.StatusOK {
				t.Errorf("callback answered %d", status)
			}
			if err := <-flow.Done; err != nil {
				t.Errorf("flow: %v", err)
			}
		})
	}
}

// TestCallbackPortServesOnlyCallback: the listener on an entry's
// callbackPort answers its callback path alone, and only under its
// loopback host name: another path or a rebound host name reaches no
// state.
func TestCallbackPortServesOnlyCallback(t *testing.T) {
	h := newHarness(t, oauthtest.Options{})
	port := freePort(t)
	h.handler(oauth.Config{CallbackPort: port})
	flow, err := h.m.Login(t.Context(), server)
	if err != nil {
		t.Fatalf("Login: %v", err)
	}
	state := mustQuery(t, flow.URL, "state")
	base := fmt.Sprintf("http://127.0.0.1:%d", port)
	for _, tc := range []struct{ name, path, host string }{
		{"OtherPath", "/oauth/callback?state=" + state + "&code=x", ""},
		{"ReboundHost", "/callback?state=" + state + "&code=x", "evil.example:" + strconv.Itoa(port)},
	} {
		req, err := http.NewRequest(http.MethodGet, base+tc.path, nil)
		if err != nil {
			t.Fatal(err)
		}
		if tc.host != "" {
			req.Host = tc.host
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusBadRequest {
			t.Errorf("%s: status %d, want 400", tc.name, resp.StatusCode)
		}
	}
	// The state is still unused: the owner's browser finishes the sign-in.
	if status, _ := oauthtest.Browse(t, flow.URL); status != http.StatusOK {
		t.Errorf("the real callback answered %d, want 200", status)
	}
	if err := <-flow.Done; err != nil {
		t.Errorf("flow: %v", err)
	}
}

// heldStore holds the first write of a sign-in until released, and
// reports a removal: the moment between a login's code exchange and its
// tokens stored.
type heldStore struct {
	oauth.Store
	held, release, removed chan struct{}
	once                   sync.Once
}

func (s *heldStore) SetSecret(name string, v []byte) error {
	s.once.Do(func() {
		close(s.held)
		<-s.release
	})
	return s.Store.SetSecret(name, v)
}

func (s *heldStore) RemoveSecret(name string) error {
	select {
	case <-s.removed:
	default:
		close(s.removed)
	}
	return s.Store.RemoveSecret(name)
}

// TestLogoutDuringLogin: a logout that comes while a login is storing the
// tokens it just exchanged waits for it, then revokes and deletes them:
// no token stays stored and the source is not signed in.
func TestLogoutDuringLogin(t *testing.T) {
	h := newHarness(t, oauthtest.Options{})
	hs := &heldStore{held: make(chan struct{}), release: make(chan struct{}), removed: make(chan struct{})}
	h.wrap = func(st oauth.Store) oauth.Store { hs.Store = st; return hs }
	h.newManager()
	h.handler(oauth.Config{})
	flow, err := h.m.Login(t.Context(), server)
	if err != nil {
		t.Fatalf("Login: %v", err)
	}
	go oauthtest.Browse(t, flow.URL)
	<-hs.held // the code is exchanged; the tokens are being stored
	out := make(chan error, 1)
	go func() { out <- h.m.Logout(context.Background(), server) }()
	select {
	case <-hs.removed: // the logout did not wait: the tokens land after it
	case <-time.After(200 * time.Millisecond): // waiting, as it should
	}
	close(hs.release)
	if err := <-out; err != nil {
		t.Fatalf("Logout: %v", err)
	}
	<-flow.Done
	if blob := h.stored(); blob != nil {
		t.Errorf("tokens stay stored after the logout")
	}
	if _, detail := h.m.State(server); detail == "signed in" {
		t.Errorf("State = %q after the logout", detail)
	}
}

// TestSecretClientIssuerChanged: a client holding a secret, with no pinned
// authorization server, signed in before at one issuer; the server now
// names another. The sign-in from the command line is refused before the
// secret goes anywhere, a new request shows the new issuer, and approving
// that request signs in there.
func TestSecretClientIssuerChanged(t *testing.T) {
	h := newHarness(t, oauthtest.Options{})
	h.as.RegisterClient(oauthtest.Client{ID: "plexus-pre", Secret: "pre-secret"})
	old := fmt.Sprintf(`{"server_url":%q,"issuer":"https://old-as.example","resource":%q,"token_url":"https://old-as.example/token","client_id":"plexus-pre","scopes":["mcp:read"],"token":{"access_token":"old-token"}}`,
		h.as.URL, h.as.URL)
	if err := h.store.SetSecret("oauth."+server, []byte(old)); err != nil {
		t.Fatal(err)
	}
	h.handler(oauth.Config{ClientID: "plexus-pre", ClientSecret: "pre-secret"})
	_, err := h.m.Login(t.Context(), server)
	if err == nil || !strings.Contains(err.Error(), "changed from https://old-as.example") {
		t.Fatalf("Login err = %v, want the issuer change refused", err)
	}
	if n := h.as.Count(oauthtest.EndpointAuthorize) + len(h.as.TokenRequests()); n != 0 {
		t.Errorf("the new authorization server got %d authorize/token requests, want 0", n)
	}
	needs := h.needsRequests()
	if len(needs) != 1 || needs[0].Issuer != h.as.Issuer {
		t.Fatalf("requests filed = %+v, want one showing %s", needs, h.as.Issuer)
	}
	flow, err := h.m.Login(t.Context(), server, oauth.Approved(needs[0]))
	if err != nil {
		t.Fatalf("Login of the approved request: %v", err)
	}
	if status, _ := oauthtest.Browse(t, flow.URL); status != http.StatusOK {
		t.Errorf("callback answered %d", status)
	}
	if err := <-flow.Done; err != nil {
		t.Errorf("flow: %v", err)
	}
}

// TestURLQueryNotShown: a server URL's query (where a key sometimes
// rides) is not in the sign-in request the owner is shown nor in the
// journal.
func TestURLQueryNotShown(t *testing.T) {
	h := newHarness(t, oauthtest.Options{})
	u := h.as.URL + "?key=CANARY-QUERY-KEY"
	oh := h.m.Handler(server, u, oauth.Config{})
	req, err := http.NewRequest(http.MethodPost, u, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := oh.Authorize(t.Context(), req, fakeResp(401, `Bearer scope="mcp:read"`)); !errors.Is(err, oauth.ErrNeedsSignIn) {
		t.Fatalf("Authorize: %v", err)
	}
	needs := h.needsRequests()
	if len(needs) != 1 || strings.Contains(needs[0].Resource, "CANARY") || needs[0].Resource == "" {
		t.Errorf("requests filed = %+v, want one whose resource has no query", needs)
	}
	if rows := strings.Join(h.journalRows(), "\n"); strings.Contains(rows, "CANARY") {
		t.Errorf("the journal holds the URL's query: %s", rows)
	}
}
