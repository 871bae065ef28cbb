package oauth_test

import (
	"encoding/json"
	"errors"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/plexus-gw/plexus/internal/oauthtest"
	"github.com/plexus-gw/plexus/oauth"
)

// TestUnauthorizedRefreshesOnce: a token the server refuses is refreshed
// once and the request retried. After that, neither a refused refresh nor
// the refreshed token refused in turn makes another token request: the
// source needs sign-in, reported once.
func TestUnauthorizedRefreshesOnce(t *testing.T) {
	for _, tc := range []struct {
		name   string
		before func(h *harness) // after the sign-in, before the first call
		after  func(h *harness) // after the first call
		calls  int              // token requests after the first call
		ok     bool             // the first call succeeds
	}{
		{"RefreshedThenRefused", func(h *harness) { h.as.ExpireAccessTokens() }, func(h *harness) { h.as.ExpireAccessTokens() }, 2, true},
		{"RefreshRefused", func(h *harness) { h.as.ExpireAccessTokens(); h.as.RefuseRefresh(true) }, func(*harness) {}, 2, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, oauthtest.Options{})
			oh := h.handler(oauth.Config{})
			h.login()
			tc.before(h)
			if _, err := h.connect(oh); (err == nil) != tc.ok {
				t.Fatalf("first call: err = %v, want ok %v", err, tc.ok)
			}
			tc.after(h)
			for i := range 3 {
				if _, err := h.connect(oh); !errors.Is(err, oauth.ErrNeedsSignIn) {
					t.Fatalf("call %d: err = %v, want ErrNeedsSignIn", i, err)
				}
			}
			if got := h.as.Count(oauthtest.EndpointToken); got != tc.calls {
				t.Errorf("token requests = %d, want %d (the exchange and one refresh)", got, tc.calls)
			}
			if got := len(h.needsRequests()); got != 1 {
				t.Errorf("NeedsSignIn calls = %d, want 1", got)
			}
		})
	}
}

// TestRejectedTokens: a server that refuses every token, new ones too,
// costs one refresh (or one client-credentials token), not one per call.
func TestRejectedTokens(t *testing.T) {
	t.Run("AuthorizationCode", func(t *testing.T) {
		h := newHarness(t, oauthtest.Options{})
		oh := h.handler(oauth.Config{})
		h.login()
		h.as.RejectTokens(true)
		for i := range 3 {
			if _, err := h.connect(oh); !errors.Is(err, oauth.ErrNeedsSignIn) {
				t.Fatalf("connect %d: err = %v, want ErrNeedsSignIn", i, err)
			}
		}
		if got := h.as.Count(oauthtest.EndpointToken); got != 2 {
			t.Errorf("token requests = %d, want 2 (the exchange and one refresh)", got)
		}
	})
	t.Run("ClientCredentials", func(t *testing.T) {
		h := newHarness(t, oauthtest.Options{})
		h.as.RegisterClient(oauthtest.Client{ID: "svc", Secret: "svc-secret"})
		h.as.RejectTokens(true)
		oh := h.handler(oauth.Config{ClientID: "svc", ClientSecret: "svc-secret", Grant: oauth.GrantClientCredentials})
		for i := range 3 {
			if _, err := h.connect(oh); !errors.Is(err, oauth.ErrNeedsSignIn) {
				t.Fatalf("connect %d: err = %v, want ErrNeedsSignIn", i, err)
			}
		}
		if got := h.as.Count(oauthtest.EndpointToken); got != 2 {
			t.Errorf("token requests = %d, want 2 (the first token and one more)", got)
		}
		if got := len(h.needsRequests()); got != 1 {
			t.Errorf("NeedsSignIn calls = %d, want 1", got)
		}
	})
}

// TestSecretsCanary runs whole stories and checks that no token, refresh
// token, code or client secret reached the journal callback, the log, an
// error, the sign-in request, the callback page or any file: the
// sign-in's own file in secrets/ holds it sealed.
func TestSecretsCanary(t *testing.T) {
	h := newHarness(t, oauthtest.Options{})
	oh := h.handler(oauth.Config{})
	var secrets, seen []string
	keep := func(blob map[string]any) {
		secrets = append(secrets, tokenOf(blob, "access_token"), tokenOf(blob, "refresh_token"))
		if s, ok := blob["client_secret"].(string); ok {
			secrets = append(secrets, s)
		}
	}
	errText := func(err error) {
		if err != nil {
			seen = append(seen, err.Error())
		}
	}

	// Sign in, the test as the browser, keeping the code.
	flow, err := h.m.Login(t.Context(), server)
	if err != nil {
		t.Fatal(err)
	}
	redirect := oauthtest.AuthorizeRedirect(t, flow.URL)
	secrets = append(secrets, mustQuery(t, redirect, "code"))
	_, page := get(t, http.MethodGet, redirect)
	seen = append(seen, page)
	errText(<-flow.Done)
	keep(h.stored())
	if len(secrets) != 4 {
		t.Fatalf("collected %d secrets, want code, access, refresh and client secret", len(secrets))
	}
	checkFiles(t, h, secrets) // the sign-in stored: its file shows none of them
	_, err = h.connect(oh)
	errText(err)

	// A refresh, a replayed callback, a refused refresh, a step-up, sign-out.
	h.clock.Advance(2 * time.Hour)
	h.as.SetTokenLifetime(24 * time.Hour)
	_, err = h.connect(oh)
	errText(err)
	keep(h.stored())
	checkFiles(t, h, secrets) // and the refreshed tokens, stored again
	_, page = get(t, http.MethodGet, redirect)
	seen = append(seen, page)
	h.as.ExpireAccessTokens()
	h.as.RefuseRefresh(true)
	_, err = h.connect(oh)
	errText(err)
	h.as.SetRequiredScopes("mcp:read", "mcp:write")
	_, err = h.connect(oh)
	errText(err)
	errText(h.m.Logout(t.Context(), server))

	// Client credentials refused, with a secret.
	cc := newHarness(t, oauthtest.Options{})
	cc.as.RegisterClient(oauthtest.Client{ID: "svc", Secret: "svc-secret-canary"})
	secrets = append(secrets, "wrong-secret-canary")
	_, err = cc.connect(cc.handler(oauth.Config{ClientID: "svc", ClientSecret: "wrong-secret-canary", Grant: oauth.GrantClientCredentials}))
	errText(err)

	for _, hh := range []*harness{h, cc} {
		seen = append(seen, hh.journalRows()...)
		seen = append(seen, hh.logs.String())
		b, err := json.Marshal(hh.needsRequests())
		if err != nil {
			t.Fatal(err)
		}
		seen = append(seen, string(b))
		_, detail := hh.m.State(server)
		seen = append(seen, detail)
	}
	if len(h.journalRows()) < 5 {
		t.Fatalf("the stories left %d journal rows: too little to check", len(h.journalRows()))
	}
	for _, s := range secrets {
		if s == "" {
			t.Fatalf("an empty secret was collected")
		}
		for _, v := range seen {
			if strings.Contains(v, s) {
				t.Errorf("a secret (%.6s…) appears in %q", s, v)
			}
		}
	}
	checkFiles(t, h, secrets)
}

// checkFiles walks the home: no file holds a secret, the sealed sign-in
// in secrets/ included.
func checkFiles(t *testing.T, h *harness, secrets []string) {
	t.Helper()
	n := 0
	err := filepath.WalkDir(h.home, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		n++
		for _, s := range secrets {
			if strings.Contains(string(b), s) {
				t.Errorf("a secret (%.6s…) is in %s", s, path)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if n == 0 {
		t.Fatalf("no file under %s: the walk checked nothing", h.home)
	}
}
