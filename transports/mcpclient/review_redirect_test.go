package mcpclient_test

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/plexus-gw/plexus/transports/mcpclient"
)

// Review (issue #19, owner safety): a source's OAuth token must never
// follow a redirect to another origin. Server A (the configured URL)
// answers every request with 307 to server B: same host, another port,
// so another origin. B must never see A's token.
func TestReviewTokenNotSentOnCrossOriginRedirect(t *testing.T) {
	var mu sync.Mutex
	var leaked []string
	b := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		if a := r.Header.Get("Authorization"); a != "" {
			leaked = append(leaked, a)
		}
		mu.Unlock()
		http.Error(w, "nope", http.StatusNotFound)
	}))
	defer b.Close()
	a := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, b.URL+"/mcp", http.StatusTemporaryRedirect)
	}))
	defer a.Close()
	th := &tokenHandler{token: "canary-access-token"}
	startClient(t, "gh", mcpclient.ServerConfig{URL: a.URL + "/mcp"},
		mcpclient.Options{MinBackoff: time.Millisecond, MaxBackoff: 5 * time.Millisecond,
			SignIn: &mcpclient.SignIn{Handler: th, Needed: func(err error) bool { return errors.Is(err, errNeedsSignIn) }}})
	time.Sleep(500 * time.Millisecond) // let it try to connect a few times
	mu.Lock()
	defer mu.Unlock()
	if len(leaked) > 0 {
		t.Fatalf("server B (another origin) received the token %d times: %q", len(leaked), leaked[0])
	}
}

// Review (pre-existing, same class): a url server's static headers (an
// API key from ${secret:…}) are added by the RoundTripper to every hop,
// so a redirect to another host (here localhost instead of 127.0.0.1)
// receives them.
func TestReviewStaticHeadersNotSentOnCrossHostRedirect(t *testing.T) {
	var mu sync.Mutex
	var leaked []string
	b := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		if a := r.Header.Get("X-Api-Key"); a != "" {
			leaked = append(leaked, a)
		}
		mu.Unlock()
		http.Error(w, "nope", http.StatusNotFound)
	}))
	defer b.Close()
	other := strings.Replace(b.URL, "127.0.0.1", "localhost", 1)
	a := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, other+"/mcp", http.StatusTemporaryRedirect)
	}))
	defer a.Close()
	startClient(t, "k", mcpclient.ServerConfig{URL: a.URL + "/mcp", Headers: map[string]string{"X-Api-Key": "canary-api-key"}},
		mcpclient.Options{MinBackoff: time.Millisecond, MaxBackoff: 5 * time.Millisecond})
	time.Sleep(500 * time.Millisecond)
	mu.Lock()
	defer mu.Unlock()
	if len(leaked) > 0 {
		t.Fatalf("another host received the server's static header %d times: %q", len(leaked), leaked[0])
	}
}
