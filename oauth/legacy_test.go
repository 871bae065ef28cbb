package oauth

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/plexus-gw/plexus/internal/plexustest"
	"github.com/plexus-gw/plexus/platform"
)

// metaServer is a real MCP server's origin with no OAuth of its own: it
// serves the metadata documents it is given, by path ({origin} in an
// issuer is its own origin), and 404 for anything else.
func metaServer(t *testing.T, docs map[string]string) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(nil)
	t.Cleanup(srv.Close)
	srv.Config.Handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		v, ok := docs[r.URL.Path]
		if !ok {
			http.NotFound(w, r)
			return
		}
		v = strings.ReplaceAll(v, "{origin}", srv.URL)
		var doc any
		if strings.HasPrefix(r.URL.Path, "/.well-known/oauth-protected-resource") {
			doc = map[string]any{"resource": srv.URL + "/mcp", "authorization_servers": []string{v}}
		} else {
			doc = map[string]any{"issuer": v, "authorization_endpoint": v + "/authorize", "token_endpoint": v + "/token",
				"registration_endpoint": v + "/register", "response_types_supported": []string{"code"},
				"code_challenge_methods_supported": []string{"S256"}}
		}
		w.Header().Set("Content-Type", "application/json")
		if err := json.NewEncoder(w).Encode(doc); err != nil {
			t.Errorf("write %s: %v", r.URL.Path, err)
		}
	})
	return srv
}

// TestLegacyIssuerOnOrigin: in the 2025-03-26 fallback (no protected
// resource metadata, nothing pinned) metadata at the server's origin may
// name an issuer on that origin, which is then the issuer; every other
// mismatch is refused (RFC 8414 §3.3): another origin, scheme or port, an
// issuer with a query, OpenID discovery, an authorization server named by
// protected resource metadata, the entry's authServerMetadataUrl.
func TestLegacyIssuerOnOrigin(t *testing.T) {
	const asMeta = "/.well-known/oauth-authorization-server"
	for _, tc := range []struct {
		name  string
		docs  map[string]string
		pin   string // authServerMetadataUrl's path on the server
		want  string // the issuer accepted; "" for refused
		moved bool
	}{
		{name: "PathOnOrigin", docs: map[string]string{asMeta: "{origin}/oauth"}, want: "{origin}/oauth", moved: true},
		{name: "TheOrigin", docs: map[string]string{asMeta: "{origin}"}, want: "{origin}"},
		{name: "NoMetadata", docs: map[string]string{}, want: "{origin}"},
		{name: "OtherOrigin", docs: map[string]string{asMeta: "https://as.example/oauth"}},
		{name: "OtherHost", docs: map[string]string{asMeta: "http://localhost:{port}/oauth"}},
		{name: "OtherPort", docs: map[string]string{asMeta: "http://127.0.0.1:1/oauth"}},
		{name: "OtherScheme", docs: map[string]string{asMeta: "https" + "://{host}/oauth"}},
		{name: "Query", docs: map[string]string{asMeta: "{origin}/oauth?tenant=a"}},
		{name: "UserInfo", docs: map[string]string{asMeta: "http://u@{host}/oauth"}},
		{name: "OpenID", docs: map[string]string{"/.well-known/openid-configuration": "{origin}/oauth"}},
		{name: "NamedByPRM", docs: map[string]string{
			"/.well-known/oauth-protected-resource/mcp":  "{origin}/as",
			"/.well-known/oauth-authorization-server/as": "{origin}/oauth",
		}},
		{name: "Pinned", docs: map[string]string{asMeta: "{origin}/oauth"}, pin: asMeta},
	} {
		t.Run(tc.name, func(t *testing.T) {
			docs := map[string]string{}
			srv := metaServer(t, docs)
			u, err := url.Parse(srv.URL)
			if err != nil {
				t.Fatal(err)
			}
			for k, v := range tc.docs {
				docs[k] = strings.NewReplacer("{host}", u.Host, "{port}", u.Port()).Replace(v)
			}
			m := New(Options{Store: platform.New(platform.Options{Home: plexustest.TempHome(t).Dir}),
				CallbackURL: func(int) string { return "http://127.0.0.1:1/oauth/callback" }})
			defer m.Close()
			pin := ""
			if tc.pin != "" {
				pin = srv.URL + tc.pin
			}
			serverURL := srv.URL + "/mcp"
			d, err := m.discover(t.Context(), m.client(serverURL, pin), serverURL, nil, pin)
			if tc.want == "" {
				if err == nil {
					t.Fatalf("discover accepted issuer %s, want refused", d.asm.Issuer)
				}
				if !strings.Contains(err.Error(), "issuer") {
					t.Errorf("err = %v, want an issuer mismatch", err)
				}
				t.Logf("refused: %v", err)
				return
			}
			if err != nil {
				t.Fatalf("discover: %v", err)
			}
			if want := strings.ReplaceAll(tc.want, "{origin}", srv.URL); d.asm.Issuer != want {
				t.Errorf("issuer = %s, want %s", d.asm.Issuer, want)
			}
			if (d.moved != nil) != tc.moved {
				t.Errorf("moved = %v, want %v", d.moved != nil, tc.moved)
			}
			if tc.moved && d.asm.TokenEndpoint != d.asm.Issuer+"/token" {
				t.Errorf("token endpoint = %s, want the accepted issuer's", d.asm.TokenEndpoint)
			}
		})
	}
}

// legacyServer is a 2025-03-26 MCP server that is its own authorization
// server under /oauth: no protected resource metadata, its metadata at
// the origin's root naming issuer <origin>/oauth and sending iss in the
// authorization response (RFC 9207). The token endpoint counts its calls.
func legacyServer(t *testing.T, tokens *atomic.Int32) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(nil)
	t.Cleanup(srv.Close)
	mux := http.NewServeMux()
	reply := func(w http.ResponseWriter, status int, v any) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		if err := json.NewEncoder(w).Encode(v); err != nil {
			t.Errorf("reply: %v", err)
		}
	}
	mux.HandleFunc("POST /mcp", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("WWW-Authenticate", `Bearer error="invalid_token"`)
		http.Error(w, "unauthorized", http.StatusUnauthorized)
	})
	mux.HandleFunc("GET /.well-known/oauth-authorization-server", func(w http.ResponseWriter, r *http.Request) {
		iss := srv.URL + "/oauth"
		reply(w, http.StatusOK, map[string]any{"issuer": iss, "authorization_endpoint": iss + "/authorize",
			"token_endpoint": iss + "/token", "registration_endpoint": iss + "/register",
			"response_types_supported": []string{"code"}, "code_challenge_methods_supported": []string{"S256"},
			"authorization_response_iss_parameter_supported": true})
	})
	mux.HandleFunc("POST /oauth/register", func(w http.ResponseWriter, r *http.Request) {
		reply(w, http.StatusCreated, map[string]any{"client_id": "legacy-client", "redirect_uris": []string{"http://127.0.0.1:1/oauth/callback"}})
	})
	mux.HandleFunc("POST /oauth/token", func(w http.ResponseWriter, r *http.Request) {
		tokens.Add(1)
		reply(w, http.StatusOK, map[string]any{"access_token": "legacy-token", "token_type": "Bearer", "expires_in": 3600})
	})
	srv.Config.Handler = mux
	return srv
}

// TestLegacyLogin: a sign-in in the 2025-03-26 fallback runs the SDK's
// flow at the issuer accepted on the server's origin: the authorization
// URL is its, the iss check (RFC 9207) holds the response to it (the
// origin itself, the issuer the SDK would have taken, is refused before
// any token request), and the stored sign-in names it.
func TestLegacyLogin(t *testing.T) {
	for _, tc := range []struct {
		name, iss string // iss: the path after the origin
		ok        bool
	}{
		{"AcceptedIssuer", "/oauth", true},
		{"OriginAsIssuer", "", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var tokens atomic.Int32
			srv := legacyServer(t, &tokens)
			m := New(Options{Store: platform.New(platform.Options{Home: plexustest.TempHome(t).Dir}),
				CallbackURL: func(int) string { return "http://127.0.0.1:1/oauth/callback" }})
			defer m.Close()
			m.Handler("legacy", srv.URL+"/mcp", Config{})
			flow, err := m.Login(t.Context(), "legacy")
			if err != nil {
				t.Fatalf("Login: %v", err)
			}
			au, err := url.Parse(flow.URL)
			if err != nil {
				t.Fatal(err)
			}
			if got, want := au.Scheme+"://"+au.Host+au.Path, srv.URL+"/oauth/authorize"; got != want {
				t.Errorf("authorization endpoint = %s, want %s", got, want)
			}
			q := url.Values{"state": {au.Query().Get("state")}, "code": {"legacy-code"}, "iss": {srv.URL + tc.iss}}
			m.Callback().ServeHTTP(httptest.NewRecorder(), httptest.NewRequest(http.MethodGet, "/oauth/callback?"+q.Encode(), nil))
			err = <-flow.Done
			rec, lerr := loadRecord(m.opts.Store, "legacy")
			if lerr != nil {
				t.Fatal(lerr)
			}
			if !tc.ok {
				if err == nil || rec != nil || tokens.Load() != 0 {
					t.Errorf("iss %s: err = %v, stored %v, %d token requests; want refused, nothing stored or asked", q.Get("iss"), err, rec != nil, tokens.Load())
				}
				return
			}
			if err != nil {
				t.Fatalf("sign-in: %v", err)
			}
			if rec == nil {
				t.Fatal("nothing stored")
			}
			if rec.Issuer != srv.URL+"/oauth" || rec.TokenURL != srv.URL+"/oauth/token" {
				t.Errorf("stored issuer %s, token endpoint %s; want %s/oauth and its token endpoint", rec.Issuer, rec.TokenURL, srv.URL)
			}
		})
	}
}
