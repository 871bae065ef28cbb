package e2e

// Attacks on the owner's web console: each is refused and changes nothing.

import (
	"bufio"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/plexus-gw/plexus"
	"github.com/plexus-gw/plexus/console"
	"github.com/plexus-gw/plexus/journal"
)

func TestConsoleSignIn(t *testing.T) {
	e := newConsoleEnv(t)
	base := e.td.BaseURL()

	t.Run("OK", func(t *testing.T) {
		c := browser(t)
		link := e.link(t)
		resp, _ := do(t, c, "GET", link, nil, "")
		secret := pageSecret(t, resp)
		var ck *http.Cookie
		for _, k := range resp.Cookies() {
			if k.Name == e.cookieName() {
				ck = k
			}
		}
		if ck == nil || !ck.HttpOnly || ck.SameSite != http.SameSiteStrictMode || ck.Path != "/console/" || ck.Value == "" {
			t.Fatalf("session cookie = %+v, want HttpOnly, SameSite=Strict, Path=/console/", ck)
		}
		code := strings.TrimPrefix(link, base+"/console/signin?code=")
		if strings.Contains(ck.Value, code) || strings.Contains(secret, code) || secret == ck.Value {
			t.Error("the session cookie or the page secret carries the link's code, or they are one")
		}
		resp, body := do(t, c, "GET", base+"/console/", nil, "")
		csp := resp.Header.Get("Content-Security-Policy")
		if resp.StatusCode != http.StatusOK || !strings.Contains(body, "app.js") {
			t.Fatalf("console page: status %d", resp.StatusCode)
		}
		for _, want := range []string{"script-src 'self'", "style-src 'self'", "frame-ancestors 'none'", "default-src 'none'"} {
			if !strings.Contains(csp, want) {
				t.Errorf("Content-Security-Policy %q lacks %q", csp, want)
			}
		}
		if strings.Contains(csp, "unsafe-inline") || strings.Contains(body, "<script>") || strings.Contains(body, "style=") {
			t.Errorf("inline script or style allowed or used: CSP %q", csp)
		}
	})
	t.Run("ErrReusedLink", func(t *testing.T) {
		link := e.link(t)
		if resp, _ := do(t, browser(t), "GET", link, nil, ""); resp.StatusCode != http.StatusSeeOther {
			t.Fatalf("first use: status %d", resp.StatusCode)
		}
		c := browser(t)
		resp, body := do(t, c, "GET", link, nil, "")
		if resp.StatusCode != http.StatusForbidden || !strings.Contains(body, "used already or has expired") {
			t.Errorf("second use: status %d: %s", resp.StatusCode, body)
		}
		if resp, _ := do(t, c, "GET", base+"/console/api/pending", nil, ""); resp.StatusCode != http.StatusUnauthorized {
			t.Errorf("after a refused link: status %d, want 401", resp.StatusCode)
		}
	})
	t.Run("ErrExpiredLink", func(t *testing.T) {
		link := e.link(t)
		e.clock.Advance(console.DefaultLinkTTL + time.Second)
		if resp, _ := do(t, browser(t), "GET", link, nil, ""); resp.StatusCode != http.StatusForbidden {
			t.Errorf("expired link: status %d, want 403", resp.StatusCode)
		}
	})
	t.Run("ErrMadeUpLink", func(t *testing.T) {
		if resp, _ := do(t, browser(t), "GET", base+"/console/signin?code=AAAA", nil, ""); resp.StatusCode != http.StatusForbidden {
			t.Errorf("made-up code: status %d, want 403", resp.StatusCode)
		}
	})
	t.Run("PastedKey", func(t *testing.T) {
		if c := pasteKey(t, e, e.td.key); c == nil {
			t.Fatal("the connection-key pasted into the sign-in form did not sign in")
		}
	})
	t.Run("ErrAgentToken", func(t *testing.T) {
		if c := pasteKey(t, e, e.pat); c != nil {
			t.Error("an agent's PAT pasted as the key signed in")
		}
		st, body := e.td.raw(t, "POST", "/console/link", bearer(e.pat), nil)
		if st != http.StatusUnauthorized || errorCode(t, string(body)) != plexus.CodeUnauthorized {
			t.Errorf("link with an agent's PAT: status %d: %s", st, body)
		}
		for _, hdr := range []map[string]string{bearer(e.pat), session(e.sid)} {
			resp, _ := do(t, browser(t), "GET", base+"/console/api/pending", hdr, "")
			if resp.StatusCode != http.StatusUnauthorized {
				t.Errorf("pending with agent credentials %v: status %d, want 401", hdr, resp.StatusCode)
			}
		}
	})
	t.Run("ErrSessionExpired", func(t *testing.T) {
		c, _ := e.signedIn(t)
		e.clock.Advance(console.DefaultSessionTTL)
		if resp, _ := do(t, c, "GET", base+"/console/api/pending", nil, ""); resp.StatusCode != http.StatusUnauthorized {
			t.Errorf("after the session's lifetime: status %d, want 401", resp.StatusCode)
		}
		if resp, _ := do(t, c, "GET", base+"/console/", nil, ""); resp.StatusCode != http.StatusSeeOther {
			t.Errorf("page after the session's lifetime: status %d, want 303 to sign in", resp.StatusCode)
		}
	})
	t.Run("SignOut", func(t *testing.T) {
		c, csrf := e.signedIn(t)
		resp, _ := do(t, c, "POST", base+"/console/api/signout", map[string]string{"Origin": e.origin(),
			"X-Plexus-CSRF": csrf, "Content-Type": "application/json"}, "{}")
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("sign out: status %d", resp.StatusCode)
		}
		if resp, _ := do(t, c, "GET", base+"/console/api/pending", nil, ""); resp.StatusCode != http.StatusUnauthorized {
			t.Errorf("after sign-out: status %d, want 401", resp.StatusCode)
		}
	})
	t.Run("KeyRotationSignsOut", func(t *testing.T) {
		c, _ := e.signedIn(t)
		var rot plexus.KeyRotateResponse
		if st := e.td.call(t, "POST", "/admin/api/key/rotate", e.td.admin(), nil, &rot); st != http.StatusOK {
			t.Fatalf("rotate: status %d", st)
		}
		e.td.key = rot.ConnectionKey
		if resp, _ := do(t, c, "GET", base+"/console/api/pending", nil, ""); resp.StatusCode != http.StatusUnauthorized {
			t.Errorf("after the key was rotated: status %d, want 401", resp.StatusCode)
		}
	})
}

// pasteKey signs a new browser in through the sign-in form with key, and
// returns it, or nil when the form refused.
func pasteKey(t *testing.T, e *consoleEnv, key string) *http.Client {
	t.Helper()
	c := browser(t)
	resp, body := do(t, c, "GET", e.td.BaseURL()+"/console/signin", nil, "")
	m := regexpCSRFInput.FindStringSubmatch(body)
	if resp.StatusCode != http.StatusOK || m == nil {
		t.Fatalf("sign-in page: status %d: %s", resp.StatusCode, body)
	}
	form := url.Values{"csrf": {m[1]}, "key": {key}}.Encode()
	resp, _ = do(t, c, "POST", e.td.BaseURL()+"/console/signin", map[string]string{"Origin": e.origin(),
		"Content-Type": "application/x-www-form-urlencoded"}, form)
	if resp.StatusCode != http.StatusSeeOther {
		return nil
	}
	withPage(c, pageSecret(t, resp))
	if resp, _ := do(t, c, "GET", e.td.BaseURL()+"/console/api/pending", nil, ""); resp.StatusCode != http.StatusOK {
		t.Fatalf("signed in by the form, but pending answers %d", resp.StatusCode)
	}
	return c
}

// TestConsoleAttacks: a decision the console would make, sent without
// what makes it the owner's, is refused and leaves the decision pending.
func TestConsoleAttacks(t *testing.T) {
	e := newConsoleEnv(t)
	pid := e.ask(t, "portal.notes.write")
	c, csrf := e.signedIn(t)
	deny := e.td.BaseURL() + "/console/api/pending/" + pid + "/deny"
	body := `{"reason":"no"}`
	json := "application/json"
	otherPort := "http://127.0.0.1:" + strconv.Itoa(e.td.port()+1)

	for _, tt := range []struct {
		name   string
		client *http.Client
		hdr    map[string]string
		want   int
	}{
		{"ErrCrossOriginForm", c, map[string]string{"Origin": "http://evil.example", "X-Plexus-CSRF": csrf, "Content-Type": json}, http.StatusForbidden},
		{"ErrOtherLocalPort", c, map[string]string{"Origin": otherPort, "X-Plexus-CSRF": csrf, "Content-Type": json}, http.StatusForbidden},
		// The second layer alone: the Origin is right, but the browser says
		// the request came from another site (CrossOriginProtection).
		{"ErrCrossSiteFetch", c, map[string]string{"Origin": e.origin(), "Sec-Fetch-Site": "cross-site", "X-Plexus-CSRF": csrf, "Content-Type": json}, http.StatusForbidden},
		{"ErrNoOrigin", c, map[string]string{"X-Plexus-CSRF": csrf, "Content-Type": json}, http.StatusForbidden},
		{"ErrNoCookie", browser(t), map[string]string{"Origin": e.origin(), "X-Plexus-CSRF": csrf, "Content-Type": json}, http.StatusUnauthorized},
		{"ErrAgentToken", browser(t), map[string]string{"Origin": e.origin(), "X-Plexus-CSRF": csrf, "Content-Type": json,
			"Authorization": "Bearer " + e.pat}, http.StatusUnauthorized},
		{"ErrCSRFMissing", c, map[string]string{"Origin": e.origin(), "Content-Type": json}, http.StatusForbidden},
		{"ErrCSRFWrong", c, map[string]string{"Origin": e.origin(), "X-Plexus-CSRF": csrf + "x", "Content-Type": json}, http.StatusForbidden},
		{"ErrForeignHost", c, map[string]string{"Host": "evil.example:" + strconv.Itoa(e.td.port()), "Origin": "http://evil.example:" + strconv.Itoa(e.td.port()),
			"X-Plexus-CSRF": csrf, "Content-Type": json}, http.StatusForbidden},
	} {
		t.Run(tt.name, func(t *testing.T) {
			resp, b := do(t, tt.client, "POST", deny, tt.hdr, body)
			if resp.StatusCode != tt.want {
				t.Errorf("status %d, want %d: %s", resp.StatusCode, tt.want, b)
			}
			e.stillPending(t, pid)
		})
	}
	t.Run("ErrEveryEndpoint", func(t *testing.T) {
		// What each route answers without a session, and each change
		// without its CSRF token: nothing is read or done.
		base := e.td.BaseURL() + "/console/api/"
		for _, path := range []string{"pending", "grants", "agents", "sources", "journal", "journal?trace=x", "events"} {
			resp, _ := do(t, browser(t), "GET", base+path, bearer(e.pat), "")
			if resp.StatusCode != http.StatusUnauthorized {
				t.Errorf("GET %s without a session: status %d, want 401", path, resp.StatusCode)
			}
		}
		for path, body := range map[string]string{
			"grants/revoke":               `{"agentId":"claude","capabilityId":"portal.notes.write"}`,
			"agents/revoke":               `{"agentId":"claude"}`,
			"pending/" + pid + "/approve": `{}`,
		} {
			resp, _ := do(t, browser(t), "POST", base+path, map[string]string{"Origin": e.origin(), "Content-Type": json}, body)
			if resp.StatusCode != http.StatusUnauthorized {
				t.Errorf("POST %s without a session: status %d, want 401", path, resp.StatusCode)
			}
			resp, _ = do(t, c, "POST", base+path, map[string]string{"Origin": e.origin(), "Content-Type": json}, body)
			if resp.StatusCode != http.StatusForbidden {
				t.Errorf("POST %s without the CSRF token: status %d, want 403", path, resp.StatusCode)
			}
		}
		e.stillPending(t, pid)
		if _, sid := e.pat, e.sid; e.td.call(t, "GET", "/manifest", session(sid), nil, nil) != http.StatusOK {
			t.Error("the agent was revoked by a refused request")
		}
	})
	t.Run("ErrHugeBody", func(t *testing.T) {
		huge := `{"reason":"` + strings.Repeat("x", 100<<10) + `"}`
		resp, _ := do(t, c, "POST", deny, map[string]string{"Origin": e.origin(), "X-Plexus-CSRF": csrf, "Content-Type": json}, huge)
		if resp.StatusCode != http.StatusBadRequest {
			t.Errorf("a 100 KiB decision: status %d, want 400", resp.StatusCode)
		}
		e.stillPending(t, pid)
	})
	t.Run("ErrCrossOriginSignIn", func(t *testing.T) {
		resp, _ := do(t, browser(t), "POST", e.td.BaseURL()+"/console/signin", map[string]string{"Origin": "http://evil.example",
			"Content-Type": "application/x-www-form-urlencoded"}, url.Values{"key": {e.td.key}}.Encode())
		if resp.StatusCode != http.StatusForbidden || len(resp.Cookies()) > 0 && strings.HasPrefix(resp.Cookies()[0].Name, "plexus_console_") {
			t.Errorf("cross-origin sign-in: status %d, cookies %v", resp.StatusCode, resp.Cookies())
		}
	})
	t.Run("ErrForeignHostPage", func(t *testing.T) {
		resp, _ := do(t, c, "GET", e.td.BaseURL()+"/console/", map[string]string{"Host": "127.0.0.1.nip.io:" + strconv.Itoa(e.td.port())}, "")
		if resp.StatusCode != http.StatusForbidden {
			t.Errorf("foreign Host: status %d, want 403", resp.StatusCode)
		}
	})
	t.Run("OwnerDenies", func(t *testing.T) {
		// The same request, with all it takes, goes through: the refusals
		// above are for what they lacked.
		resp, b := do(t, c, "POST", deny, map[string]string{"Origin": e.origin(), "X-Plexus-CSRF": csrf, "Content-Type": json}, body)
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("status %d: %s", resp.StatusCode, b)
		}
		f := decisionFile(t, e.td.Home().Dir, plexus.FolderRejected, pid)
		if f.State != plexus.StateDenied || f.Via != plexus.ViaConsole || f.Reason != "no" {
			t.Errorf("rejected/ file: state %q via %q reason %q", f.State, f.Via, f.Reason)
		}
	})
}

var regexpCSRFInput = regexp.MustCompile(`<input type="hidden" name="csrf" value="([^"]+)">`)

// TestConsoleEventsEndOnSignOut: a page's event stream carries nothing
// more once its session is signed out: it ends at the next change.
func TestConsoleEventsEndOnSignOut(t *testing.T) {
	e := newConsoleEnv(t)
	c, csrf := e.signedIn(t)
	req, err := http.NewRequestWithContext(t.Context(), "GET", e.td.BaseURL()+"/console/api/events", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := c.Do(req)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("events: %v %v", resp, err)
	}
	defer resp.Body.Close()
	lines := make(chan string)
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(resp.Body)
		for sc.Scan() {
			lines <- sc.Text()
		}
	}()
	next := func() (string, bool) {
		select {
		case l, ok := <-lines:
			return l, ok
		case <-time.After(20 * time.Second):
			t.Fatal("the stream neither sent nor ended")
			return "", false
		}
	}
	for l, ok := next(); l != "event: changed"; l, ok = next() {
		if !ok {
			t.Fatal("the stream ended before its first event")
		}
	}
	if resp, _ := do(t, c, "POST", e.td.BaseURL()+"/console/api/signout", map[string]string{"Origin": e.origin(),
		"X-Plexus-CSRF": csrf, "Content-Type": "application/json"}, "{}"); resp.StatusCode != http.StatusOK {
		t.Fatalf("sign out: status %d", resp.StatusCode)
	}
	e.ask(t, "portal.notes.write") // a change: the stream wakes, and ends
	for {
		l, ok := next()
		if !ok {
			return
		}
		if l == "event: changed" {
			t.Fatal("a signed-out page's stream was told of a change")
		}
	}
}

// TestConsoleOtherUser: the owner's session cookie and even its page
// secret, in the hands of a process of another OS user, open nothing on
// Linux: the console answers only the owner's own OS user.
func TestConsoleOtherUser(t *testing.T) {
	if runtime.GOOS != "linux" || os.Getuid() != 0 {
		t.Skip("runs curl as another user (nobody): needs Linux and root, as CI has")
	}
	curl, err := exec.LookPath("curl")
	if err != nil {
		t.Skip("no curl on PATH to act as another user's client")
	}
	e := newConsoleEnv(t)
	c, _ := e.signedIn(t)
	ck := e.sessionCookie(t, c)
	cookie := ck.Name + "=" + ck.Value
	secret := c.Transport.(pageTransport).secret
	status := func(uid uint32) string {
		cmd := exec.Command(curl, "-s", "-o", "/dev/null", "-w", "%{http_code}", "-H", "Cookie: "+cookie,
			"-H", "X-Plexus-Console: "+secret, e.td.BaseURL()+"/console/api/pending")
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uid, Gid: uid}}
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("curl as uid %d: %v", uid, err)
		}
		return string(out)
	}
	if got := status(65534); got != "403" {
		t.Errorf("another user with the owner's cookie: status %s, want 403", got)
	}
	if got := status(0); got != "200" {
		t.Errorf("the owner's own user with the cookie: status %s, want 200", got)
	}
}

// TestConsoleDecideWords: what the console says after a decision names its
// channel, a refused window is worded for the page, an approval naming what
// the file does not hold is refused as a changed file, and sign-ins and
// sign-outs are journaled without their secrets.
func TestConsoleDecideWords(t *testing.T) {
	e := newConsoleEnv(t)
	c, csrf := e.signedIn(t)
	h := map[string]string{"Origin": e.origin(), "X-Plexus-CSRF": csrf, "Content-Type": "application/json"}
	approve := func(pid string) string { return e.td.BaseURL() + "/console/api/pending/" + pid + "/approve" }

	pid := e.ask(t, "portal.notes.write")
	for _, tc := range []struct{ body, want string }{
		{`{"window":"30d"}`, "the window you picked: window 30d is longer"},
		{`{"keep":["portal.notes.write","portal.docs.write"],"verbs":{"portal.notes.write":["write"]}}`, "the file changed since the page showed it"},
		{`{"keep":["portal.notes.write"],"verbs":{"portal.notes.write":["write","execute"]}}`, "the file changed since the page showed it"},
	} {
		resp, b := do(t, c, "POST", approve(pid), h, tc.body)
		if resp.StatusCode < 400 || !strings.Contains(b, tc.want) {
			t.Errorf("%s: status %d %s, want %q", tc.body, resp.StatusCode, b, tc.want)
		}
		e.stillPending(t, pid)
	}
	resp, b := do(t, c, "POST", approve(pid), h, `{"keep":["portal.notes.write"],"verbs":{"portal.notes.write":["write"]}}`)
	if resp.StatusCode != http.StatusOK || !strings.Contains(b, "via console") || strings.Contains(b, "via cli") {
		t.Errorf("approve: status %d %s, want it said via console", resp.StatusCode, b)
	}

	secret := c.Transport.(pageTransport).secret
	ck := e.sessionCookie(t, c)
	if resp, _ := do(t, c, "POST", e.td.BaseURL()+"/console/api/signout", h, "{}"); resp.StatusCode != http.StatusOK {
		t.Fatalf("sign out: status %d", resp.StatusCode)
	}
	in := e.td.activity(t, journal.Filter{Type: "console.signin"})
	out := e.td.activity(t, journal.Filter{Type: "console.signout"})
	if len(in) != 1 || len(out) != 1 || in[0].Actor != plexus.ActorHuman || out[0].Actor != plexus.ActorHuman {
		t.Fatalf("console rows: %d sign-ins %+v, %d sign-outs %+v, want one each by a human", len(in), in, len(out), out)
	}
	for _, r := range append(in, out...) {
		row := fmt.Sprint(r.Payload, r.Target)
		if strings.Contains(row, secret) || strings.Contains(row, csrf) || strings.Contains(row, ck.Value) {
			t.Errorf("%s row carries a secret: %s", r.ActionType, row)
		}
	}
}

// TestConsoleLinkRace: a one-time link redeemed by many clients at once
// signs in exactly one.
func TestConsoleLinkRace(t *testing.T) {
	e := newConsoleEnv(t)
	for round := range 3 {
		link := e.link(t)
		var wins atomic.Int32
		var wg sync.WaitGroup
		for range 32 {
			wg.Go(func() {
				resp, err := browser(t).Get(link)
				if err != nil {
					t.Error(err)
					return
				}
				if resp.StatusCode == http.StatusSeeOther {
					wins.Add(1)
				}
				if err := resp.Body.Close(); err != nil {
					t.Error(err)
				}
			})
		}
		wg.Wait()
		if n := wins.Load(); n != 1 {
			t.Errorf("round %d: one link signed in %d clients, want 1", round, n)
		}
	}
}

// TestConsoleNarrowWidens: every approval from the console that would
// widen what was asked (a longer window, another capability, another verb,
// nothing at all, a field spelled otherwise or given twice) is refused and
// changes nothing.
func TestConsoleNarrowWidens(t *testing.T) {
	e := newConsoleEnv(t)
	pid := e.ask(t, "portal.notes.write")
	c, csrf := e.signedIn(t)
	u := e.td.BaseURL() + "/console/api/pending/" + pid + "/approve"
	h := map[string]string{"Origin": e.origin(), "X-Plexus-CSRF": csrf, "Content-Type": "application/json"}
	for _, body := range []string{
		`{"window":"7d"}`,
		`{"window":"forever"}`,
		`{"window":"30d"}`,
		`{"keep":["portal.notes.write","portal.docs.write"]}`,
		`{"keep":["portal.docs.write"]}`,
		`{"verbs":{"portal.notes.write":["write","execute"]}}`,
		`{"verbs":{"portal.notes.write":["execute"]}}`,
		`{"verbs":{"portal.docs.write":["write"]}}`,
		`{"keep":[]}`,
		`{"verbs":{"portal.notes.write":[]}}`,
		`{"keep":["portal.notes.write"],"verbs":{"portal.docs.write":["read"]}}`,
		`{"Keep":["portal.docs.write"]}`,
		`{"keep":["portal.notes.write"],"keep":["portal.docs.write"]}`,
	} {
		resp, b := do(t, c, "POST", u, h, body)
		if resp.StatusCode < 400 || resp.StatusCode >= 500 {
			t.Errorf("%s: status %d %s, want it refused", body, resp.StatusCode, strings.TrimSpace(b))
		}
		e.stillPending(t, pid)
	}
}
