package e2e

import (
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/plexus-gw/plexus"
	"github.com/plexus-gw/plexus/internal/oauthtest"
)

// startLogin starts a sign-in to server through the admin API and answers
// where the authorization server sends the browser back (the daemon's
// callback with code and state).
func startLogin(t *testing.T, o *oauthEnv, server string) *url.URL {
	t.Helper()
	var lr plexus.MCPLoginResponse
	if st := o.td.call(t, http.MethodPost, "/admin/api/mcp/"+server+"/login", o.td.admin(), nil, &lr); st != http.StatusOK || lr.URL == "" {
		t.Fatalf("start login %s: %d %+v", server, st, lr)
	}
	loc, err := url.Parse(oauthtest.AuthorizeRedirect(t, lr.URL))
	if err != nil {
		t.Fatal(err)
	}
	return loc
}

// callbackWith is the daemon's callback URL carrying q.
func callbackWith(o *oauthEnv, q url.Values) string {
	return o.td.BaseURL() + "/oauth/callback?" + q.Encode()
}

// waitLogin asks for the outcome of the sign-in to server.
func waitLogin(t *testing.T, o *oauthEnv, server string) plexus.MCPLoginStatus {
	t.Helper()
	var st plexus.MCPLoginStatus
	if code := o.td.call(t, http.MethodPost, "/admin/api/mcp/"+server+"/login/wait", o.td.admin(), nil, &st); code != http.StatusOK {
		t.Fatalf("wait login %s: %d", server, code)
	}
	return st
}

// TestAttackOAuthCallback: the callback answers a browser's navigation
// only on the gateway's own authority, takes one use of a fresh state
// bound to one login, and nothing else; an agent can neither start, wait
// for, nor end a sign-in.
func TestAttackOAuthCallback(t *testing.T) {
	o := newOAuthEnv(t)
	td := o.td
	o.waitNeedsSignIn()
	pat, _ := enrolledAgent(t, td, "mallory")

	t.Run("AgentCannotStartWaitOrEnd", func(t *testing.T) {
		for _, path := range []string{"/admin/api/mcp/fx/login", "/admin/api/mcp/fx/login/wait", "/admin/api/mcp/fx/logout"} {
			for name, hdr := range map[string]map[string]string{"PAT": bearer(pat), "none": nil} {
				var body plexus.ErrorResponse
				if st := td.call(t, http.MethodPost, path, hdr, nil, &body); st != http.StatusUnauthorized || body.Error == nil || body.Error.Code != plexus.CodeUnauthorized {
					t.Errorf("POST %s with %s: %d %+v, want 401 unauthorized", path, name, st, body.Error)
				}
			}
		}
	})

	t.Run("ConsoleSessionCannotStart", func(t *testing.T) {
		ce := &consoleEnv{td: td}
		c, csrf := ce.signedIn(t)
		for _, path := range []string{"/admin/api/mcp/fx/login", "/admin/api/mcp/fx/logout"} {
			resp, body := do(t, c, http.MethodPost, td.BaseURL()+path, map[string]string{"X-CSRF-Token": csrf, "Origin": ce.origin()}, "")
			if resp.StatusCode != http.StatusUnauthorized {
				t.Errorf("POST %s from a signed-in console tab: %d %s, want 401", path, resp.StatusCode, body)
			}
		}
	})

	loc := startLogin(t, o, "fx")
	q := loc.Query()

	t.Run("ForeignHost", func(t *testing.T) {
		req, err := http.NewRequest(http.MethodGet, callbackWith(o, q), nil)
		if err != nil {
			t.Fatal(err)
		}
		req.Host = "evil.example:" + strings.Split(td.Addr(), ":")[1]
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusForbidden {
			t.Errorf("callback under a foreign Host: %d, want 403", resp.StatusCode)
		}
	})
	t.Run("ForeignOrigin", func(t *testing.T) {
		st, _ := td.raw(t, http.MethodGet, "/oauth/callback?"+q.Encode(), map[string]string{"Origin": "https://evil.example"}, nil)
		if st != http.StatusForbidden {
			t.Errorf("callback with a foreign Origin: %d, want 403", st)
		}
	})
	t.Run("UnknownState", func(t *testing.T) {
		bad := url.Values{"code": {q.Get("code")}, "state": {"made-up-state-0123456789"}, "iss": {q.Get("iss")}}
		st, body := td.raw(t, http.MethodGet, "/oauth/callback?"+bad.Encode(), bearer(pat), nil)
		if st < 400 || strings.Contains(string(body), q.Get("code")) {
			t.Errorf("callback with an unknown state (and an agent's PAT): %d %s, want a refusal that does not echo the code", st, body)
		}
		if it := o.item(); it.Source == nil || !it.Source.Health.NeedsSignIn {
			t.Errorf("fx after a made-up state: %+v", it.Source)
		}
	})
	t.Run("OneUse", func(t *testing.T) {
		page := browserGet(t, callbackWith(o, q))
		if st := waitLogin(t, o, "fx"); st.State != plexus.MCPLoginSignedIn {
			t.Fatalf("login after the callback: %+v (page %s)", st, page)
		}
		waitFor(t, 20*time.Second, "fx connected", holds(func() bool {
			it := o.item()
			return it.Source != nil && it.Source.Health.Status == plexus.HealthOK
		}))
		tokens := o.fx.TokenRequests()
		st, _ := td.raw(t, http.MethodGet, "/oauth/callback?"+q.Encode(), nil, nil)
		if st < 400 {
			t.Errorf("the same callback again: %d, want a refusal", st)
		}
		if got := o.fx.TokenRequests(); len(got) != len(tokens) {
			t.Errorf("a replayed callback reached the token endpoint (%d → %d requests)", len(tokens), len(got))
		}
	})
}

// TestAttackOAuthCrossServer: a login started for one server cannot
// complete another's: the state of one with the code of the other fails,
// and neither is signed in by it.
func TestAttackOAuthCrossServer(t *testing.T) {
	o := newOAuthEnv(t)
	o.e.ok("mcp", "add", "fy", "--url", o.fx.URL, "--oauth-client-id", "plexus-e2e",
		"--oauth-client-secret", "${secret:fx-oauth}", "--wait", "1s")
	o.waitNeedsSignIn()
	waitFor(t, 20*time.Second, "fy needs sign-in", holds(func() bool {
		st, raw := o.td.raw(t, http.MethodGet, "/admin/api/status", o.td.admin(), nil)
		return st == http.StatusOK && strings.Contains(string(raw), "plexus mcp login fy")
	}))
	locX := startLogin(t, o, "fx")
	locY := startLogin(t, o, "fy")
	mixed := url.Values{"code": {locX.Query().Get("code")}, "state": {locY.Query().Get("state")}, "iss": {locX.Query().Get("iss")}}
	browserGet(t, callbackWith(o, mixed))
	if st := waitLogin(t, o, "fy"); st.State != plexus.MCPLoginFailed {
		t.Errorf("fy's login completed with fx's code: %+v", st)
	}
	for _, name := range []string{"fx", "fy"} {
		st, raw := o.td.raw(t, http.MethodGet, "/admin/api/status", o.td.admin(), nil)
		if st != http.StatusOK || !strings.Contains(string(raw), "plexus mcp login "+name) {
			t.Errorf("%s no longer needs sign-in after the mixed callback: %s", name, raw)
		}
	}
}
