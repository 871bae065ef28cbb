package e2e

// The owner's web console (issue 15) against the real in-process daemon:
// the helpers its HTTP attack tests and its browser tests share.

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"strings"
	"testing"

	"github.com/plexus-gw/plexus"
	"github.com/plexus-gw/plexus/client"
	"github.com/plexus-gw/plexus/console"
	"github.com/plexus-gw/plexus/daemon"
	"github.com/plexus-gw/plexus/internal/plexustest"
)

// consoleEnv is a daemon with a fake clock, the notes and docs portals and an
// enrolled agent "claude" whose session can ask for grants.
type consoleEnv struct {
	td    *testDaemon
	clock *plexustest.Clock
	pat   string
	sid   string
}

func newConsoleEnv(t *testing.T) *consoleEnv {
	t.Helper()
	clock := newFakeClock()
	td := startTestDaemon(t, daemon.Options{Clock: clock.Now})
	addPortal(t, td, "notes")
	addPortal(t, td, "docs")
	pat, sid := enrolledAgent(t, td, "claude")
	return &consoleEnv{td: td, clock: clock, pat: pat, sid: sid}
}

// ask makes the agent ask for caps (to write, for a day) and returns
// the pending id once its file is in inbox/.
func (e *consoleEnv) ask(t *testing.T, caps ...string) string {
	t.Helper()
	grants := map[string]any{}
	for _, c := range caps {
		grants[c] = map[string]any{"decision": "allow", "verbs": []string{"write"}, "purpose": "keep the minutes"}
	}
	var pend plexus.GrantPendingResponse
	if st := e.td.call(t, "PUT", "/grants", session(e.sid), map[string]any{"grants": grants}, &pend); st != http.StatusAccepted || pend.PendingID == "" {
		t.Fatalf("ask: status %d, %+v", st, pend)
	}
	syncInbox(t, e.td)
	if !hasFile(e.td.Home().Dir, plexus.FolderInbox, pend.PendingID) {
		t.Fatalf("no inbox file for %s", pend.PendingID)
	}
	return pend.PendingID
}

// link asks for a one-time sign-in link as `plexus console` does.
func (e *consoleEnv) link(t *testing.T) string {
	t.Helper()
	adm, err := client.NewAdmin(e.td.BaseURL(), e.td.key)
	if err != nil {
		t.Fatal(err)
	}
	l, err := adm.ConsoleLink(t.Context())
	if err != nil {
		t.Fatalf("console link: %v", err)
	}
	if !strings.HasPrefix(l.URL, e.td.BaseURL()+"/console/signin?code=") {
		t.Fatalf("link %q is not the console's sign-in on %s", l.URL, e.td.BaseURL())
	}
	return l.URL
}

// browser is an HTTP client that keeps cookies and never follows a
// redirect, so each answer is seen as the browser gets it.
func browser(t *testing.T) *http.Client {
	t.Helper()
	jar, err := cookiejar.New(nil)
	if err != nil {
		t.Fatal(err)
	}
	return &http.Client{Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
}

// do sends one request through c and returns the answer, its body read.
func do(t *testing.T, c *http.Client, method, u string, hdr map[string]string, body string) (*http.Response, string) {
	t.Helper()
	req, err := http.NewRequest(method, u, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range hdr {
		if k == "Host" {
			req.Host = v
			continue
		}
		req.Header.Set(k, v)
	}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, u, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp, string(b)
}

// pageSecret is the tab's page secret in the fragment of the redirect
// after a sign-in (resp), which the page's script keeps.
func pageSecret(t *testing.T, resp *http.Response) string {
	t.Helper()
	loc := resp.Header.Get("Location")
	s, ok := strings.CutPrefix(loc, "/console/#session=")
	if resp.StatusCode != http.StatusSeeOther || !ok || s == "" {
		t.Fatalf("sign in: status %d, Location %q, want 303 to /console/#session=…", resp.StatusCode, loc)
	}
	return s
}

// withPage sends, on each request of c, the page secret the page's script
// sends: c is then a signed-in tab.
func withPage(c *http.Client, secret string) *http.Client {
	next := c.Transport
	if next == nil {
		next = http.DefaultTransport
	}
	c.Transport = pageTransport{next: next, secret: secret}
	return c
}

type pageTransport struct {
	next   http.RoundTripper
	secret string
}

func (p pageTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	if r.Header.Get("X-Plexus-Console") == "" {
		r.Header.Set("X-Plexus-Console", p.secret)
	}
	return p.next.RoundTrip(r)
}

// signedIn signs a new browser tab in with a one-time link and returns it
// (sending its page secret) with the CSRF token it is handed.
func (e *consoleEnv) signedIn(t *testing.T) (*http.Client, string) {
	t.Helper()
	c := browser(t)
	resp, _ := do(t, c, "GET", e.link(t), nil, "")
	withPage(c, pageSecret(t, resp))
	var s console.SessionResponse
	resp, body := do(t, c, "GET", e.td.BaseURL()+"/console/api/session", nil, "")
	if err := json.Unmarshal([]byte(body), &s); resp.StatusCode != http.StatusOK || err != nil || s.CSRF == "" {
		t.Fatalf("console session: status %d, no CSRF token: %s", resp.StatusCode, body)
	}
	return c, s.CSRF
}

// sessionCookie is the console's session cookie in c's jar.
func (e *consoleEnv) sessionCookie(t *testing.T, c *http.Client) *http.Cookie {
	t.Helper()
	u, err := url.Parse(e.td.BaseURL() + "/console/")
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range c.Jar.Cookies(u) {
		if k.Name == e.cookieName() {
			return k
		}
	}
	t.Fatalf("no cookie %s", e.cookieName())
	return nil
}

// cookieName is the session cookie's name: it carries the daemon's port.
func (e *consoleEnv) cookieName() string {
	u, err := url.Parse(e.td.BaseURL())
	if err != nil {
		panic(err)
	}
	return "plexus_console_" + u.Port()
}

// origin is the console's own origin, as the browser sends it.
func (e *consoleEnv) origin() string { return e.td.BaseURL() }

// stillPending fails unless decision pid is pending in the gateway with its
// file in inbox/: a refused request changed nothing.
func (e *consoleEnv) stillPending(t *testing.T, pid string) {
	t.Helper()
	var p plexus.Pending
	if st := e.td.call(t, "GET", "/admin/api/pending/"+url.PathEscape(pid), e.td.admin(), nil, &p); st != http.StatusOK || p.State != plexus.StatePending {
		t.Errorf("decision %s: status %d, state %q, want pending", pid, st, p.State)
	}
	syncInbox(t, e.td)
	if !hasFile(e.td.Home().Dir, plexus.FolderInbox, pid) {
		t.Errorf("the file of %s left inbox/", pid)
	}
}

// errorCode is the code of a uniform error envelope.
func errorCode(t *testing.T, body string) plexus.ErrorCode {
	t.Helper()
	var env plexus.ErrorResponse
	if err := json.Unmarshal([]byte(body), &env); err != nil || env.Error == nil {
		t.Fatalf("not an error envelope: %q", body)
	}
	return env.Error.Code
}
