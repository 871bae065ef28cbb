package console

import (
	"encoding/json"
	"errors"
	"net"
	nethttp "net/http"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/plexus-gw/plexus"
	"github.com/plexus-gw/plexus/gateway"
)

// The cookies: the session's id, and the sign-in form's CSRF value (the
// form is posted before any session exists). Both are HttpOnly,
// SameSite=Strict, scoped to the console and named with the listener's
// port (cookieName), so two daemons on one host keep theirs apart. A
// cookie is not enough to use the console: every API call also carries
// the tab's page secret (pageHeader), which no other port can read.
const (
	sessionCookie = "plexus_console"
	signinCookie  = "plexus_console_signin"
	csrfHeader    = "X-Plexus-CSRF"
	pageHeader    = "X-Plexus-Console"
	// secretFragment starts the fragment of the redirect after sign-in:
	// the page's script moves the secret into sessionStorage and clears it.
	secretFragment = "#session="
	// maxBody caps the body of every change.
	maxBody = 64 << 10
)

// LinkResponse is the body of POST /console/link.
type LinkResponse struct {
	URL       string    `json:"url"`
	ExpiresAt time.Time `json:"expiresAt"`
}

// owner is a signed-in request: its session, and the owner's credentials
// for the gateway, which the console holds for the request and never
// sends to the browser.
type owner struct {
	id    string // the session's id, as the cookie carries it
	sess  *session
	creds gateway.Credentials
}

// handleLink mints a one-time sign-in link for the caller that presents
// the connection-key (`plexus console`). Nothing else opens it: an agent's
// token is not a connection-key, and a cookie is not looked at.
func (c *Console) handleLink(w nethttp.ResponseWriter, r *nethttp.Request) {
	cr := gateway.Credentials{ConnectionKey: r.Header.Get(plexus.ConnectionKeyHeader), Remote: r.RemoteAddr}
	if b, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer "); ok {
		cr.Bearer = strings.TrimSpace(b)
	}
	if err := c.opts.Owner.AdminCheck(r.Context(), cr); err != nil {
		writeError(w, nethttp.StatusUnauthorized, "a sign-in link needs the connection-key")
		return
	}
	key := cr.ConnectionKey
	if key == "" {
		key = cr.Bearer
	}
	code, exp := c.auth.mintLink(sum(key))
	u := url.URL{Scheme: "http", Host: r.Host, Path: Prefix + "signin", RawQuery: url.Values{"code": {code}}.Encode()}
	writeJSON(w, nethttp.StatusOK, LinkResponse{URL: u.String(), ExpiresAt: exp})
}

// handleSignInPage redeems a one-time link (?code=…) into a session and
// redirects to the console without the code; without a code it shows the
// form to paste the connection-key into.
func (c *Console) handleSignInPage(w nethttp.ResponseWriter, r *nethttp.Request) {
	if !r.URL.Query().Has("code") {
		problem := ""
		if r.URL.Query().Has("tab") {
			problem = "This tab is not signed in (a console session belongs to the tab it was opened in). " +
				"Run plexus console again, or paste the connection-key below."
		}
		c.signInForm(w, r, nethttp.StatusOK, problem)
		return
	}
	code := r.URL.Query().Get("code")
	keySum, ok := c.auth.redeem(code)
	if ok { // only a real link has a page to drop: a made-up code costs no file work
		c.dropLinkFile(code)
		key, err := c.opts.Key()
		ok = err == nil && sum(key) == keySum
	}
	if !ok {
		c.signInForm(w, r, nethttp.StatusForbidden, "This sign-in link was used already or has expired. "+
			"Run plexus console again, or paste the connection-key below.")
		return
	}
	c.startSession(w, r, keySum, "link")
}

// handleSignIn takes the connection-key pasted into the form.
func (c *Console) handleSignIn(w nethttp.ResponseWriter, r *nethttp.Request) {
	if err := r.ParseForm(); err != nil {
		c.signInForm(w, r, nethttp.StatusBadRequest, "The form could not be read.")
		return
	}
	if !anyCookie(r, cookieName(r, signinCookie), func(v string) bool { return sameSecret(v, r.PostForm.Get("csrf")) }) {
		c.signInForm(w, r, nethttp.StatusForbidden, "This form has expired; try again.")
		return
	}
	key := strings.TrimSpace(r.PostForm.Get("key"))
	if err := c.opts.Owner.AdminCheck(r.Context(), gateway.Credentials{ConnectionKey: key, Remote: r.RemoteAddr}); err != nil {
		c.signInForm(w, r, nethttp.StatusUnauthorized, "That is not the connection-key (plexus key show prints it).")
		return
	}
	nethttp.SetCookie(w, cookie(cookieName(r, signinCookie), "", -1))
	c.startSession(w, r, sum(key), "key")
}

// startSession opens a session and sends the browser to the console with
// the tab's page secret in the fragment, which the browser never sends to
// a server.
func (c *Console) startSession(w nethttp.ResponseWriter, r *nethttp.Request, keySum [32]byte, how string) {
	id, s := c.auth.open(keySum)
	nethttp.SetCookie(w, cookie(cookieName(r, sessionCookie), id, int(c.opts.SessionTTL/time.Second)))
	c.journal(r.Context(), "console.signin", map[string]any{"with": how, "remote": r.RemoteAddr})
	nethttp.Redirect(w, r, Prefix+secretFragment+s.page, nethttp.StatusSeeOther)
}

func (c *Console) signInForm(w nethttp.ResponseWriter, r *nethttp.Request, status int, problem string) {
	csrf := secret()
	nethttp.SetCookie(w, cookie(cookieName(r, signinCookie), csrf, int(time.Hour/time.Second)))
	c.page(w, status, "signin.html", map[string]string{"CSRF": csrf, "Problem": problem})
}

func (c *Console) handleSignOut(w nethttp.ResponseWriter, r *nethttp.Request, o *owner) {
	c.auth.close(o.id)
	nethttp.SetCookie(w, cookie(cookieName(r, sessionCookie), "", -1))
	c.journal(r.Context(), "console.signout", map[string]any{"remote": r.RemoteAddr})
	writeJSON(w, nethttp.StatusOK, DecideResponse{Message: "Signed out."})
}

// SessionResponse is the body of GET /console/api/session: what the page
// needs besides its page secret, handed out only with it.
type SessionResponse struct {
	CSRF    string    `json:"csrf"`
	Expires time.Time `json:"expires"`
}

func (c *Console) handleSession(w nethttp.ResponseWriter, r *nethttp.Request, o *owner) {
	writeJSON(w, nethttp.StatusOK, SessionResponse{CSRF: o.sess.csrf, Expires: o.sess.expires})
}

// handleApp serves the page to a session's cookie: it holds no data, and
// its script signs the tab in again when the tab has no page secret.
func (c *Console) handleApp(w nethttp.ResponseWriter, r *nethttp.Request, o *owner) {
	c.page(w, nethttp.StatusOK, "app.html", nil)
}

func (c *Console) page(w nethttp.ResponseWriter, status int, name string, data any) {
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(status)
	if err := c.pages.ExecuteTemplate(w, name, data); err != nil {
		c.log.Warn("console: render page", "page", name, "err", err)
	}
}

func cookie(name, value string, maxAge int) *nethttp.Cookie {
	return &nethttp.Cookie{Name: name, Value: value, Path: Prefix, MaxAge: maxAge,
		HttpOnly: true, SameSite: nethttp.SameSiteStrictMode}
}

// errSignedOut is what a request without a live session learns.
var errSignedOut = errors.New("not signed in to the console (or the session ended): open it again with plexus console")

// errNoPageSecret is what a request with a session's cookie but without
// its tab's page secret learns: a cookie alone never opens the console.
var errNoPageSecret = errors.New("this tab is not signed in to the console: open it again with plexus console")

// cookieName is base named with the port of the listener r came in on:
// browsers keep cookies by host, not port, so two daemons on one host
// would otherwise overwrite each other's.
func cookieName(r *nethttp.Request, base string) string {
	if a, ok := r.Context().Value(nethttp.LocalAddrContextKey).(net.Addr); ok {
		if ap, err := netip.ParseAddrPort(a.String()); err == nil {
			return base + "_" + strconv.Itoa(int(ap.Port()))
		}
	}
	if _, port, err := net.SplitHostPort(r.Host); err == nil {
		return base + "_" + port
	}
	return base
}

// anyCookie reports whether any cookie of r named name has a value ok
// takes. Every one is tried: a page on another port of the host can set a
// same-named cookie with a longer Path, which the browser sends first.
func anyCookie(r *nethttp.Request, name string, ok func(v string) bool) bool {
	for _, ck := range r.CookiesNamed(name) {
		if ck.Value != "" && ok(ck.Value) {
			return true
		}
	}
	return false
}

// session finds the live session of r's cookies.
func (c *Console) session(r *nethttp.Request, keySum [32]byte) (string, *session) {
	var id string
	var s *session
	anyCookie(r, cookieName(r, sessionCookie), func(v string) bool {
		found, ok := c.auth.lookup(v, keySum)
		if ok {
			id, s = v, found
		}
		return ok
	})
	return id, s
}

// signIn finds the request's live session from its cookie (an
// Authorization header, an agent's token included, is never read). Unless
// cookieOnly (the page itself, which holds no data), the request must
// also carry the tab's page secret, and one that changes something its
// CSRF token.
func (c *Console) signIn(r *nethttp.Request, cookieOnly bool) (*owner, int, error) {
	key, err := c.opts.Key()
	if err != nil {
		return nil, nethttp.StatusInternalServerError, errors.New("the connection-key cannot be read")
	}
	id, s := c.session(r, sum(key))
	if s == nil {
		return nil, nethttp.StatusUnauthorized, errSignedOut
	}
	o := &owner{id: id, sess: s, creds: gateway.Credentials{ConnectionKey: key, Remote: r.RemoteAddr, Via: plexus.ViaConsole}}
	if cookieOnly {
		return o, 0, nil
	}
	if !sameSecret(s.page, r.Header.Get(pageHeader)) {
		return nil, nethttp.StatusUnauthorized, errNoPageSecret
	}
	if r.Method != nethttp.MethodGet && r.Method != nethttp.MethodHead && !sameSecret(s.csrf, r.Header.Get(csrfHeader)) {
		return nil, nethttp.StatusForbidden, errors.New("this change lacks the console's CSRF token; reload the page")
	}
	return o, 0, nil
}

// signedIn serves h to a signed-in owner, and answers anyone else in JSON.
func (c *Console) signedIn(h func(nethttp.ResponseWriter, *nethttp.Request, *owner)) nethttp.Handler {
	return nethttp.HandlerFunc(func(w nethttp.ResponseWriter, r *nethttp.Request) {
		o, status, err := c.signIn(r, false)
		if err != nil {
			writeError(w, status, err.Error())
			return
		}
		h(w, r, o)
	})
}

// signedInPage is signedIn for a page: anyone else goes to the sign-in page.
func (c *Console) signedInPage(h func(nethttp.ResponseWriter, *nethttp.Request, *owner)) nethttp.Handler {
	return nethttp.HandlerFunc(func(w nethttp.ResponseWriter, r *nethttp.Request) {
		o, _, err := c.signIn(r, true)
		if err != nil {
			nethttp.Redirect(w, r, Prefix+"signin", nethttp.StatusSeeOther)
			return
		}
		h(w, r, o)
	})
}

// mutating guards a request that changes something against other origins:
// the browser's Origin must be the console's own (the Host, which the Host
// guard has held to the gateway's loopback authority), and, as a second
// layer, net/http's CrossOriginProtection checks Sec-Fetch-Site.
func (c *Console) mutating(next nethttp.Handler) nethttp.Handler {
	cop := nethttp.NewCrossOriginProtection()
	cop.SetDenyHandler(nethttp.HandlerFunc(func(w nethttp.ResponseWriter, r *nethttp.Request) {
		writeError(w, nethttp.StatusForbidden, "a change must come from the console's own page")
	}))
	return cop.Handler(nethttp.HandlerFunc(func(w nethttp.ResponseWriter, r *nethttp.Request) {
		if r.Header.Get("Origin") != "http://"+r.Host {
			writeError(w, nethttp.StatusForbidden, "a change must come from the console's own page")
			return
		}
		// Every body the console takes is small: a form or a decision.
		r.Body = nethttp.MaxBytesReader(w, r.Body, maxBody)
		next.ServeHTTP(w, r)
	}))
}

// writeError answers in the uniform error envelope (docs/errors.md), the
// code following the status.
func writeError(w nethttp.ResponseWriter, status int, msg string) {
	code := plexus.CodeInternalError
	switch status {
	case nethttp.StatusBadRequest:
		code = plexus.CodeInvalidRequest
	case nethttp.StatusUnauthorized:
		code = plexus.CodeUnauthorized
	case nethttp.StatusForbidden:
		code = plexus.CodeHostForbidden
	case nethttp.StatusNotFound:
		code = plexus.CodeNotFound
	case nethttp.StatusConflict:
		code = plexus.CodeConflict
	case nethttp.StatusBadGateway, nethttp.StatusServiceUnavailable:
		code = plexus.CodeSourceUnavailable
	}
	writeJSON(w, status, plexus.ErrorResponse{Error: &plexus.ErrorBody{Code: code, Message: msg}})
}

func writeJSON(w nethttp.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	if err := json.NewEncoder(w).Encode(v); err != nil {
		return // the client went away; nothing is left to tell it
	}
}
