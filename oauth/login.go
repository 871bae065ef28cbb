package oauth

import (
	"context"
	"errors"
	"fmt"
	"html"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/oauthex"
	"golang.org/x/oauth2"

	"github.com/plexus-gw/plexus"
)

// Flow is a sign-in under way: URL is the authorization URL the owner
// opens (empty for client credentials, which need no person); Done
// receives nil once signed in, or what failed.
type Flow struct {
	URL  string
	Done <-chan error
}

// login is one authorization-code sign-in. Its goroutine (run) owns rec
// and err until finished is closed; then they are read-only.
type login struct {
	m        *Manager
	src      *source
	d        *discovery
	redirect string
	approved *plexus.SignInRequest // the request the owner approved, if the inbox started it
	cancel   context.CancelFunc
	urlCh    chan string   // the authorization URL, once
	done     chan error    // Flow.Done: the outcome, once
	finished chan struct{} // closed when the outcome is known
	rec      *record       // what the sign-in stored
	err      error
}

// pending is a state a login waits on: its callback may come once, before
// expires.
type pending struct {
	login   *login
	expires time.Time
	ch      chan callbackResult // buffered 1: the one answer
}

type callbackResult struct {
	code, iss string
	err       error
}

// LoginOption changes one [Manager.Login].
type LoginOption func(*loginOptions)

type loginOptions struct {
	approved *plexus.SignInRequest
}

// Approved binds a Login to the sign-in request the owner approved in the
// inbox: it starts only at the issuer and for the resource the request
// showed, asking for no scope beyond those it showed (offline_access
// aside, for the refresh token). Anything else fails the start, saying
// why, and files a new request showing what was found.
func Approved(req plexus.SignInRequest) LoginOption {
	return func(o *loginOptions) { o.approved = &req }
}

// Login starts the owner's sign-in to a server and returns once the
// authorization URL is known (or, for client credentials, once signed in).
// It probes the server for its challenge and runs the SDK's
// authorization-code handler, whose browser step waits for [Manager.Callback]
// (or a listener on the entry's callbackPort). A new Login for the same
// server ends the one before. The flow ends after ten minutes. Its errors
// hold no text of the authorization server's but short codes.
func (m *Manager) Login(ctx context.Context, server string, opts ...LoginOption) (*Flow, error) {
	var o loginOptions
	for _, f := range opts {
		f(&o)
	}
	s, err := m.lookup(server)
	if err != nil {
		return nil, err
	}
	if s.err != nil {
		return nil, s.err
	}
	if s.cfg.Grant == GrantClientCredentials {
		return m.loginClientCredentials(ctx, s, o.approved)
	}
	l, err := m.startLogin(ctx, s, o.approved)
	if err != nil {
		err = clean(err)
		m.journal(ctx, "oauth.signin.failed", server, map[string]any{"error": err.Error()})
		return nil, err
	}
	select {
	case u := <-l.urlCh:
		return &Flow{URL: u, Done: l.done}, nil
	case <-l.finished:
		return nil, l.err
	case <-ctx.Done():
		l.cancel()
		<-l.finished
		return nil, fmt.Errorf("sign in to %s: %w", server, ctx.Err())
	}
}

// loginClientCredentials signs in with no person. The scopes it asks for
// from now on are the entry's and, when the owner approved a request (a
// widening), those it showed; from the command line, also those a step-up
// asked for, which a request showed already.
func (m *Manager) loginClientCredentials(ctx context.Context, s *source, approved *plexus.SignInRequest) (*Flow, error) {
	s.fetchMu.Lock()
	s.mu.Lock()
	s.dead, s.forced, s.rec = false, "", nil
	s.granted = union(s.granted, minus(s.widen, s.cfg.Scopes))
	if approved != nil {
		s.granted = minus(union(approved.Scopes, approved.Widening), s.cfg.Scopes)
		s.issuer = approved.Issuer
	}
	s.mu.Unlock()
	_, err := s.fetchClientCredentials(ctx)
	s.fetchMu.Unlock()
	if err != nil {
		return nil, clean(err)
	}
	if m.opts.SignedIn != nil {
		m.opts.SignedIn(s.name)
	}
	done := make(chan error, 1)
	done <- nil
	return &Flow{Done: done}, nil
}

// startLogin prepares everything that can fail before the owner is sent
// anywhere (the challenge, discovery, the SDK handler, the loopback
// listener), then starts the flow.
func (m *Manager) startLogin(ctx context.Context, s *source, approved *plexus.SignInRequest) (*login, error) {
	req, resp, err := m.probe(ctx, s.http, s.url)
	if err != nil {
		return nil, fmt.Errorf("sign in to %s: %w", s.name, err)
	}
	if !challenged(resp) {
		// The probe went through: the challenge that made the source need
		// sign-in came with a later method (tools/list); use it.
		if kept := s.lastChallenge(req); kept != nil {
			resp.Body.Close()
			resp = kept
		}
	}
	started := false
	defer func() {
		if !started {
			resp.Body.Close()
		}
	}()
	l, h, err := m.prepareLogin(ctx, s, resp, approved)
	if err != nil {
		return nil, fmt.Errorf("sign in to %s: %w", s.name, err)
	}
	srv, err := m.listen(s.cfg.CallbackPort)
	if err != nil {
		return nil, fmt.Errorf("sign in to %s: %w", s.name, err)
	}
	lctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), stateLifetime)
	l.cancel = cancel
	if !m.track(s, l) {
		cancel()
		if srv != nil {
			m.shutdown(srv)
		}
		return nil, fmt.Errorf("sign in to %s: the OAuth manager is closed", s.name)
	}
	m.journal(ctx, "oauth.signin.started", s.name, map[string]any{"issuer": l.d.asm.Issuer, "resource": shown(l.d.resource)})
	started = true
	go l.run(lctx, h, req, resp, srv)
	return l, nil
}

// prepareLogin reads the challenge, discovers the authorization server (an
// issuer mismatch stops here) and builds the SDK's handler for the login.
func (m *Manager) prepareLogin(ctx context.Context, s *source, resp *http.Response, approved *plexus.SignInRequest) (*login, *auth.AuthorizationCodeHandler, error) {
	ch, err := oauthex.ParseWWWAuthenticate(resp.Header.Values("WWW-Authenticate"))
	if err != nil {
		ch = nil // an unreadable challenge: discovery falls back to the well-known paths
	}
	d, err := m.discover(ctx, s.http, s.url, ch, s.cfg.AuthServerMetadataURL)
	if err != nil {
		return nil, nil, err
	}
	client := s.http
	if d.moved != nil {
		if client, err = d.moved.client(s.http, s.url, ch); err != nil {
			return nil, nil, err
		}
	}
	rec, err := s.record()
	if err != nil {
		m.opts.Logger.Warn("oauth: the stored sign-in is unreadable; signing in afresh", "server", s.name, "err", err)
		rec = nil
	}
	l := &login{m: m, src: s, d: d, redirect: m.opts.CallbackURL(s.cfg.CallbackPort), approved: approved,
		urlCh: make(chan string, 1), done: make(chan error, 1), finished: make(chan struct{})}
	if err := l.check(ctx, rec, ch); err != nil {
		return nil, nil, err
	}
	h, err := auth.NewAuthorizationCodeHandler(l.sdkConfig(rec, client))
	if err != nil {
		return nil, nil, err
	}
	return l, h, nil
}

// track makes l the server's running login, counted for Close, unless the
// Manager is closed. Under m.mu, so Close either sees the login or refuses
// it.
func (m *Manager) track(s *source, l *login) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return false
	}
	m.logins.Add(1)
	s.setLogin(l)
	return true
}

// sdkConfig is the SDK handler for this login: registration by Client ID
// Metadata Document, else the entry's client id, else the client Plexus
// registered before at this issuer for this redirect, else dynamic
// registration; PKCE, resource and the iss check are the SDK's.
func (l *login) sdkConfig(rec *record, client *http.Client) *auth.AuthorizationCodeHandlerConfig {
	s := l.src
	cfg := &auth.AuthorizationCodeHandlerConfig{
		RedirectURL:              l.redirect,
		AuthorizationCodeFetcher: l.fetch,
		ScopeFilter:              func(discovered []string) []string { return l.scopes(discovered, rec) },
		RequestRefreshToken:      true,
		Client:                   client,
		NewTokenSource:           l.keep,
		DynamicClientRegistrationConfig: &auth.DynamicClientRegistrationConfig{
			Metadata: &oauthex.ClientRegistrationMetadata{
				RedirectURIs: []string{l.redirect}, ClientName: "Plexus",
				GrantTypes: []string{"authorization_code", "refresh_token"}, ResponseTypes: []string{"code"},
			},
		},
	}
	if s.cfg.ClientMetadataURL != "" {
		cfg.ClientIDMetadataDocumentConfig = &auth.ClientIDMetadataDocumentConfig{URL: s.cfg.ClientMetadataURL}
	}
	switch {
	case s.cfg.ClientID != "":
		// Pinned to the issuer checked above: the SDK rediscovers, and
		// refuses an authorization server that is not this one, so the
		// client's secret goes nowhere else.
		cfg.PreregisteredClient = &oauthex.ClientCredentials{ClientID: s.cfg.ClientID, Issuer: l.d.asm.Issuer}
		if s.cfg.ClientSecret != "" {
			cfg.PreregisteredClient.ClientSecretAuth = &oauthex.ClientSecretAuth{ClientSecret: s.cfg.ClientSecret}
		}
	case rec != nil && rec.Registered && rec.RedirectURL == l.redirect && rec.Issuer == l.d.asm.Issuer:
		cfg.PreregisteredClient = &oauthex.ClientCredentials{ClientID: rec.ClientID, Issuer: rec.Issuer}
		if rec.ClientSecret != "" {
			cfg.PreregisteredClient.ClientSecretAuth = &oauthex.ClientSecretAuth{ClientSecret: rec.ClientSecret}
		}
	}
	return cfg
}

// scopes is what the sign-in asks for: the entry's scopes, else those the
// SDK discovered (challenge, else scopes_supported); plus those approved
// before at the same issuer and those a step-up asked for (the owner
// approves them by signing in).
//
// A sign-in the owner approved in the inbox asks for exactly the scopes
// the request showed.
func (l *login) scopes(discovered []string, rec *record) []string {
	if l.approved != nil {
		return union(l.approved.Scopes, nil)
	}
	out := discovered
	if len(l.src.cfg.Scopes) > 0 {
		out = l.src.cfg.Scopes
	}
	if rec != nil && rec.Issuer == l.d.asm.Issuer {
		out = union(out, rec.Scopes)
	}
	l.src.mu.Lock()
	defer l.src.mu.Unlock()
	return union(out, l.src.widen)
}

// keep stores what the token exchange produced, before the SDK's handler
// reports success: tokens, the client (a registered one's secret too), and
// where to refresh and revoke.
func (l *login) keep(_ context.Context, cfg *oauth2.Config, tok *oauth2.Token) (oauth2.TokenSource, error) {
	s := l.src
	rec := &record{
		ServerURL: s.url, Token: tok, Scopes: cfg.Scopes, Resource: l.d.resource, Issuer: l.d.asm.Issuer,
		TokenURL: cfg.Endpoint.TokenURL, RevocationURL: l.d.asm.RevocationEndpoint,
		ClientID: cfg.ClientID, ClientSecret: cfg.ClientSecret, AuthStyle: cfg.Endpoint.AuthStyle,
		Registered:  cfg.ClientID != s.cfg.ClientID && cfg.ClientID != s.cfg.ClientMetadataURL,
		RedirectURL: l.redirect,
	}
	if err := saveRecord(l.m.opts.Store, s.name, rec); err != nil {
		return nil, err
	}
	l.rec = rec
	return oauth2.StaticTokenSource(tok), nil
}

// fetch is the SDK's browser step: it binds the SDK's fresh state to this
// login, hands the URL to Login's caller, and waits for the callback.
func (l *login) fetch(ctx context.Context, args *auth.AuthorizationArgs) (*auth.AuthorizationResult, error) {
	u, err := url.Parse(args.URL)
	if err != nil {
		return nil, fmt.Errorf("parse the authorization URL: %w", err)
	}
	state := u.Query().Get("state")
	if state == "" {
		return nil, errors.New("the authorization URL has no state")
	}
	if err := l.matches(u); err != nil {
		return nil, err
	}
	p := &pending{login: l, expires: l.m.opts.Now().Add(stateLifetime), ch: make(chan callbackResult, 1)}
	l.m.addState(state, p)
	defer l.m.dropState(state, p)
	select {
	case l.urlCh <- args.URL:
	default: // a URL was handed out already; the SDK asks once
	}
	select {
	case r := <-p.ch:
		if r.err != nil {
			return nil, r.err
		}
		return &auth.AuthorizationResult{Code: r.code, State: state, Iss: r.iss}, nil
	case <-ctx.Done():
		return nil, fmt.Errorf("no sign-in came back from the browser: %w", ctx.Err())
	}
}

// run is the login's goroutine: the SDK's flow, then the outcome.
func (l *login) run(ctx context.Context, h *auth.AuthorizationCodeHandler, req *http.Request, resp *http.Response, srv *http.Server) {
	defer l.m.logins.Done()
	defer l.cancel()
	err := h.Authorize(ctx, req, resp)
	if err == nil && l.rec == nil {
		err = errors.New("the server did not ask for a sign-in")
	}
	if err != nil {
		err = clean(fmt.Errorf("sign in to %s: %w", l.src.name, clean(err)))
	}
	l.src.finishLogin(l, err)
	l.report(context.WithoutCancel(ctx), err)
	l.err = err
	close(l.finished)
	l.done <- err
	if srv != nil {
		l.m.shutdown(srv)
	}
}

// report journals the outcome and tells the daemon, before Done does: a
// caller that saw Done finds both.
func (l *login) report(ctx context.Context, err error) {
	if err != nil {
		l.m.journal(ctx, "oauth.signin.failed", l.src.name, map[string]any{"error": err.Error()})
		return
	}
	l.m.journal(ctx, "oauth.signin.completed", l.src.name, map[string]any{
		"issuer": l.rec.Issuer, "resource": shown(l.rec.Resource), "scopes": l.rec.Scopes})
	if l.m.opts.SignedIn != nil {
		l.m.opts.SignedIn(l.src.name)
	}
}

// setLogin makes l the server's running login, ending any other. The
// caller holds m.mu (lock order: m.mu, then s.mu).
func (s *source) setLogin(l *login) {
	s.mu.Lock()
	old := s.login
	s.login = l
	s.mu.Unlock()
	if old != nil {
		old.cancel()
	}
}

func (s *source) cancelLogin() {
	s.mu.Lock()
	l := s.login
	s.mu.Unlock()
	if l != nil {
		l.cancel()
	}
}

// waitLogin waits for the running login, if any, to finish.
func (s *source) waitLogin() {
	s.mu.Lock()
	l := s.login
	s.mu.Unlock()
	if l != nil {
		<-l.finished
	}
}

// finishLogin records a login's outcome: a success ends the episode.
func (s *source) finishLogin(l *login, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.login == l {
		s.login = nil
	}
	if err != nil {
		return
	}
	s.loaded, s.rec = true, l.rec
	s.needs, s.reason, s.notified, s.dead, s.forced, s.widen, s.shown = false, "", false, false, "", nil, nil
	s.challenge = nil
}

// challenged reports whether resp is a 401 or 403 carrying a challenge.
func challenged(resp *http.Response) bool {
	return (resp.StatusCode == http.StatusUnauthorized || resp.StatusCode == http.StatusForbidden) &&
		len(resp.Header.Values("WWW-Authenticate")) > 0
}

// probe asks the server, without a token, for its challenge.
func (m *Manager) probe(ctx context.Context, c *http.Client, serverURL string) (*http.Request, *http.Response, error) {
	const initialize = `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"plexus","version":"0"}}}`
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, serverURL, strings.NewReader(initialize))
	if err != nil {
		return nil, nil, fmt.Errorf("probe: %w", err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	resp, err := c.Do(req)
	if err != nil {
		return nil, nil, fmt.Errorf("probe: %w", err)
	}
	return req, resp, nil
}

func (m *Manager) addState(state string, p *pending) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.states[state] = p
}

func (m *Manager) dropState(state string, p *pending) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.states[state] == p {
		delete(m.states, state)
	}
}

// takeState removes a state and returns its login, or nil when the state
// is unknown, used or expired. An expired state ends its login.
func (m *Manager) takeState(state string) *pending {
	m.mu.Lock()
	p := m.states[state]
	delete(m.states, state)
	m.mu.Unlock()
	if p == nil {
		return nil
	}
	if m.opts.Now().After(p.expires) {
		p.ch <- callbackResult{err: errors.New("the sign-in expired; start it again")}
		return nil
	}
	return p
}

// Callback serves the redirect back from the authorization server. It
// accepts one use of a state a running login registered, within ten
// minutes, and answers anything else with a bare 400: nothing in its
// answers tells a caller which states exist, and nothing echoes the code.
func (m *Manager) Callback() http.Handler { return http.HandlerFunc(m.serveCallback) }

func (m *Manager) serveCallback(w http.ResponseWriter, r *http.Request) {
	h := w.Header()
	h.Set("Cache-Control", "no-store")
	h.Set("Referrer-Policy", "no-referrer")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Content-Security-Policy", "default-src 'none'")
	var p *pending
	if r.Method == http.MethodGet {
		p = m.takeState(r.URL.Query().Get("state"))
	}
	if p == nil {
		http.Error(w, "bad request", http.StatusBadRequest)
		return
	}
	q := r.URL.Query()
	res := callbackResult{code: q.Get("code"), iss: q.Get("iss")}
	if e := q.Get("error"); e != "" || res.code == "" {
		res.err = fmt.Errorf("the authorization server answered %q instead of a code", safeCode(e))
	}
	p.ch <- res
	select {
	case <-p.login.finished:
	case <-r.Context().Done():
		return
	}
	name := html.EscapeString(p.login.src.name)
	h.Set("Content-Type", "text/html; charset=utf-8")
	if p.login.err != nil {
		w.WriteHeader(http.StatusBadRequest)
		fmt.Fprintf(w, "<!doctype html><title>Plexus</title><p>Sign-in to %s failed. The plexus command that started it says why.\n", name)
		return
	}
	fmt.Fprintf(w, "<!doctype html><title>Plexus</title><p>Signed in to %s. You may close this tab.\n", name)
}

// listen binds the entry's callbackPort on loopback for this login, or
// returns nil when the daemon's own callback serves it. The listener
// serves the callback's path alone, and only to a request naming it by
// its loopback host (a DNS-rebound page names another).
func (m *Manager) listen(port int) (*http.Server, error) {
	if port == 0 {
		return nil, nil
	}
	cb, err := url.Parse(m.opts.CallbackURL(port))
	if err != nil {
		return nil, fmt.Errorf("the callback URL: %w", err)
	}
	ln, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
	if err != nil {
		return nil, fmt.Errorf("listen on the callback port: %w", err)
	}
	hosts := []string{cb.Host, net.JoinHostPort("127.0.0.1", strconv.Itoa(port)), net.JoinHostPort("localhost", strconv.Itoa(port))}
	cbh := m.Callback()
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != cb.Path || !slices.Contains(hosts, strings.ToLower(r.Host)) {
			http.Error(w, "bad request", http.StatusBadRequest)
			return
		}
		cbh.ServeHTTP(w, r)
	})
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	go func() {
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			m.opts.Logger.Error("oauth: callback listener", "err", err)
		}
	}()
	return srv, nil
}

func (m *Manager) shutdown(srv *http.Server) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := srv.Shutdown(ctx); err != nil {
		m.opts.Logger.Warn("oauth: stop the callback listener", "err", err)
	}
}
