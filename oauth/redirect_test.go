package oauth

import (
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"golang.org/x/oauth2"
)

// TestRedirectKeepsToken: the source's transport sends its token to its
// own server, and a redirect to another origin (here the same host on
// another port, which net/http treats as the same host) does not carry it.
// The unprotected client shows the leak the protection closes.
func TestRedirectKeepsToken(t *testing.T) {
	for _, tc := range []struct {
		name     string
		client   *http.Client
		wantLeak bool
	}{
		{"Protected", ProtectRedirects(http.DefaultClient), false},
		{"NetHTTPDefault", http.DefaultClient, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var mu sync.Mutex
			var atServer, atOther []string
			other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				mu.Lock()
				atOther = append(atOther, r.Header.Get("Authorization"))
				mu.Unlock()
				http.NotFound(w, r)
			}))
			defer other.Close()
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				mu.Lock()
				atServer = append(atServer, r.Header.Get("Authorization"))
				mu.Unlock()
				http.Redirect(w, r, other.URL+"/elsewhere", http.StatusTemporaryRedirect)
			}))
			defer srv.Close()

			store, key := testStore(t)
			if err := saveRecord(store, "remote", &record{ServerURL: srv.URL + "/mcp", Resource: srv.URL + "/mcp",
				Token:    &oauth2.Token{AccessToken: "at-canary", TokenType: "Bearer", Expiry: time.Now().Add(time.Hour)},
				TokenURL: srv.URL + "/token"}); err != nil {
				t.Fatal(err)
			}
			m := New(Options{Store: store, TokenKey: key, CallbackURL: func(int) string { return "http://127.0.0.1:1/oauth/callback" }})
			oh := m.Handler("remote", srv.URL+"/mcp", Config{})
			_, err := mcp.NewClient(&mcp.Implementation{Name: "t"}, nil).Connect(t.Context(),
				&mcp.StreamableClientTransport{Endpoint: srv.URL + "/mcp", OAuthHandler: oh, HTTPClient: tc.client, MaxRetries: -1}, nil)
			if err == nil {
				t.Fatalf("connect succeeded against a redirect to a 404")
			}
			mu.Lock()
			defer mu.Unlock()
			if len(atServer) == 0 || atServer[0] != "Bearer at-canary" {
				t.Errorf("the server saw Authorization %q, want its token", atServer)
			}
			leaked := len(atOther) > 0 && atOther[0] != ""
			if leaked != tc.wantLeak {
				t.Errorf("the other origin saw Authorization %q; leak = %v, want %v", atOther, leaked, tc.wantLeak)
			}
		})
	}
}

// TestRecordForAnotherURL: a stored sign-in made for another server URL
// (the entry's url changed) is never sent.
func TestRecordForAnotherURL(t *testing.T) {
	store, key := testStore(t)
	if err := saveRecord(store, "remote", &record{ServerURL: "https://old.example/mcp",
		Token: &oauth2.Token{AccessToken: "at-canary", Expiry: time.Now().Add(time.Hour)}}); err != nil {
		t.Fatal(err)
	}
	m := New(Options{Store: store, TokenKey: key, CallbackURL: func(int) string { return "http://127.0.0.1:1/oauth/callback" }})
	ts, err := m.Handler("remote", "https://new.example/mcp", Config{}).TokenSource(t.Context())
	if err != nil || ts != nil {
		t.Errorf("TokenSource = %v, %v; want no token source for another URL's sign-in", ts, err)
	}
}
