package console

import (
	"encoding/json"
	"errors"
	nethttp "net/http"
	"net/url"
	"strings"
	"time"

	"github.com/plexus-gw/plexus"
	"github.com/plexus-gw/plexus/gateway"
)

// The cookies: the session's id, and the sign-in form's CSRF value (the
// form is posted before any session exists). Both are HttpOnly,
// SameSite=Strict and scoped to the console.
const (
	sessionCookie = "plexus_console"
	signinCookie  = "plexus_console_signin"
	csrfHeader    = "X-Plexus-CSRF"
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
		c.signInForm(w, nethttp.StatusOK, "")
		return
	}
	keySum, ok := c.auth.redeem(r.URL.Query().Get("code"))
	if ok {
		key, err := c.opts.Key()
		ok = err == nil && sum(key) == keySum
	}
	if !ok {
		c.signInForm(w, nethttp.StatusForbidden, "This sign-in link was used already or has expired. "+
			"Run plexus console again, or paste the connection-key below.")
		return
	}
	c.startSession(w, r, keySum)
}

// handleSignIn takes the connection-key pasted into the form.
func (c *Console) handleSignIn(w nethttp.ResponseWriter, r *nethttp.Request) {
	if err := r.ParseForm(); err != nil {
		c.signInForm(w, nethttp.StatusBadRequest, "The form could not be read.")
		return
	}
	ck, err := r.Cookie(signinCookie)
	if err != nil || !sameSecret(ck.Value, r.PostForm.Get("csrf")) {
		c.signInForm(w, nethttp.StatusForbidden, "This form has expired; try again.")
		return
	}
	key := strings.TrimSpace(r.PostForm.Get("key"))
	if err := c.opts.Owner.AdminCheck(r.Context(), gateway.Credentials{ConnectionKey: key, Remote: r.RemoteAddr}); err != nil {
		c.signInForm(w, nethttp.StatusUnauthorized, "That is not the connection-key (plexus key show prints it).")
		return
	}
	nethttp.SetCookie(w, cookie(signinCookie, "", -1))
	c.startSession(w, r, sum(key))
}

func (c *Console) startSession(w nethttp.ResponseWriter, r *nethttp.Request, keySum [32]byte) {
	id, _ := c.auth.open(keySum)
	nethttp.SetCookie(w, cookie(sessionCookie, id, int(c.opts.SessionTTL/time.Second)))
	nethttp.Redirect(w, r, Prefix, nethttp.StatusSeeOther)
}

func (c *Console) signInForm(w nethttp.ResponseWriter, status int, problem string) {
	csrf := secret()
	nethttp.SetCookie(w, cookie(signinCookie, csrf, int(time.Hour/time.Second)))
	c.page(w, status, "signin.html", map[string]string{"CSRF": csrf, "Problem": problem})
}

func (c *Console) handleSignOut(w nethttp.ResponseWriter, r *nethttp.Request, o *owner) {
	c.auth.close(o.id)
	nethttp.SetCookie(w, cookie(sessionCookie, "", -1))
	nethttp.Redirect(w, r, Prefix+"signin", nethttp.StatusSeeOther)
}

func (c *Console) handleApp(w nethttp.ResponseWriter, r *nethttp.Request, o *owner) {
	c.page(w, nethttp.StatusOK, "app.html", map[string]string{"CSRF": o.sess.csrf})
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

// signIn finds the request's live session from its cookie alone (an
// Authorization header, an agent's token included, is never read), and
// for a request that changes something checks its CSRF token.
func (c *Console) signIn(r *nethttp.Request) (*owner, int, error) {
	ck, err := r.Cookie(sessionCookie)
	if err != nil || ck.Value == "" {
		return nil, nethttp.StatusUnauthorized, errSignedOut
	}
	key, err := c.opts.Key()
	if err != nil {
		return nil, nethttp.StatusInternalServerError, errors.New("the connection-key cannot be read")
	}
	s, ok := c.auth.lookup(ck.Value, sum(key))
	if !ok {
		return nil, nethttp.StatusUnauthorized, errSignedOut
	}
	if r.Method != nethttp.MethodGet && r.Method != nethttp.MethodHead {
		tok := r.Header.Get(csrfHeader)
		if tok == "" && strings.HasPrefix(r.Header.Get("Content-Type"), "application/x-www-form-urlencoded") {
			tok = r.PostFormValue("csrf")
		}
		if !sameSecret(s.csrf, tok) {
			return nil, nethttp.StatusForbidden, errors.New("this change lacks the console's CSRF token; reload the page")
		}
	}
	return &owner{id: ck.Value, sess: s, creds: gateway.Credentials{ConnectionKey: key, Remote: r.RemoteAddr, Via: plexus.ViaConsole}}, 0, nil
}

// signedIn serves h to a signed-in owner, and answers anyone else in JSON.
func (c *Console) signedIn(h func(nethttp.ResponseWriter, *nethttp.Request, *owner)) nethttp.Handler {
	return nethttp.HandlerFunc(func(w nethttp.ResponseWriter, r *nethttp.Request) {
		o, status, err := c.signIn(r)
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
		o, _, err := c.signIn(r)
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
