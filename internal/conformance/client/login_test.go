package main

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
)

// TestBrowseFirstURL: the driver, as the owner's browser, opens the first
// URL `mcp login` prints that is not the daemon's own, and follows the
// authorization server's redirect to the callback once.
func TestBrowseFirstURL(t *testing.T) {
	var mu sync.Mutex
	var callbacks []string
	callback := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		callbacks = append(callbacks, r.URL.RawQuery)
		mu.Unlock()
	}))
	defer callback.Close()
	as := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, callback.URL+"/oauth/callback?code=c&state="+r.URL.Query().Get("state"), http.StatusFound)
	}))
	defer as.Close()
	d := &daemon{baseURL: callback.URL}
	out := strings.Join([]string{
		"the console is at " + callback.URL + "/console/",
		"Sign in to conf at this URL (it works until 23:04:19):",
		as.URL + "/authorize?state=s1",
		"or this one: " + as.URL + "/authorize?state=s2",
		"Waiting for the sign-in…",
	}, "\n")
	if err := d.browseFirstURL(context.Background(), strings.NewReader(out)); err != nil {
		t.Fatal(err)
	}
	if want := []string{"code=c&state=s1"}; len(callbacks) != 1 || callbacks[0] != want[0] {
		t.Errorf("the callback was opened with %q, want %q", callbacks, want)
	}
}

func TestBrowseFirstURLNone(t *testing.T) {
	d := &daemon{baseURL: "http://127.0.0.1:1"}
	err := d.browseFirstURL(context.Background(), strings.NewReader("plexus: not_found: no such server\n"))
	if err == nil || !strings.Contains(err.Error(), "no authorization URL") {
		t.Errorf("err = %v, want one saying mcp login printed no authorization URL", err)
	}
}

// TestPlanFor: the scenarios that sign in, with which grant, and the
// scenario calls the Go SDK's conformance client makes.
func TestPlanFor(t *testing.T) {
	for _, tc := range []struct {
		scenario string
		grant    string
		signIn   bool
	}{
		{"auth/metadata-default", "", true},
		{"auth/pre-registration", "", true},
		{"auth/client-credentials-basic", "client_credentials", false},
		{"auth/client-credentials-jwt", "client_credentials", false},
		{"tools_call", "", false},
		{"a-scenario-not-known-yet", "", false},
	} {
		p := planFor(tc.scenario)
		if p.grant != tc.grant || p.signIn != tc.signIn || p.play == nil {
			t.Errorf("planFor(%q) = grant %q, signIn %v, play set %v; want %q, %v, true", tc.scenario, p.grant, p.signIn, p.play != nil, tc.grant, tc.signIn)
		}
	}
}
