package oauth

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/oauthex"
	"golang.org/x/oauth2"
	"golang.org/x/oauth2/clientcredentials"

	"github.com/plexus-gw/plexus"
)

const (
	stateLifetime = 10 * time.Minute // a login's state, and the login itself
	expirySkew    = time.Minute      // a token is refreshed this long before it expires
)

// source is one server entry's OAuth state.
type source struct {
	m         *Manager
	name, url string
	cfg       Config
	err       error // the configuration, refused: every use returns it
	http      *http.Client

	// fetchMu serialises token requests (refresh, client credentials) so
	// that many callers make one request. It is held across that I/O, and
	// taken before mu.
	fetchMu sync.Mutex

	mu     sync.Mutex // guards the fields below; never held across I/O
	loaded bool
	// rec is the sign-in: the stored one, or for client credentials the
	// current token, kept in memory only. Never mutated: replaced. nil when
	// there is none.
	rec      *record
	needs    bool // waiting for the owner to sign in
	reason   string
	notified bool     // NeedsSignIn was called in this episode
	dead     bool     // the token endpoint refused: nothing is asked of it until a sign-in
	forced   string   // the access token a 401 made us fetch: refused in turn, only the owner can help
	widen    []string // the scopes a step-up asked for, for the next sign-in
	// shown are the scopes the requests filed in this episode showed the
	// owner: a step-up asking beyond them files a new request.
	shown []string
	// granted are the scopes beyond cfg.Scopes the owner approved for a
	// client-credentials source (by a Login): its unattended token
	// requests ask for cfg.Scopes and these, never for a step-up's.
	granted []string
	// issuer is the authorization server a client-credentials source last
	// signed in at: its secret goes to no other without the owner.
	issuer string
	login  *login // the sign-in running, if any
	// challenge is the status and WWW-Authenticate values of the last 401
	// or 403 the server sent a real request: a server may let the login's
	// probe (initialize) through and challenge only later methods.
	challenge *http.Response
}

// lastChallenge returns a copy of the last challenge a request met, or nil.
func (s *source) lastChallenge(req *http.Request) *http.Response {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.challenge == nil {
		return nil
	}
	return &http.Response{StatusCode: s.challenge.StatusCode, Status: s.challenge.Status,
		Header: s.challenge.Header.Clone(), Body: http.NoBody, Request: req}
}

// record returns the stored sign-in, reading it on first use. A record
// made for another server URL is ignored: its token is not this server's.
func (s *source) record() (*record, error) {
	s.mu.Lock()
	if s.loaded {
		defer s.mu.Unlock()
		return s.rec, nil
	}
	s.mu.Unlock()
	rec, err := loadRecord(s.m.opts.Store, s.name)
	if err != nil {
		return nil, err
	}
	if rec != nil && rec.ServerURL != s.url {
		s.m.opts.Logger.Warn("oauth: the stored sign-in is for another URL; sign in again", "server", s.name)
		rec = nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.loaded {
		s.loaded, s.rec = true, rec
	}
	return s.rec, nil
}

func (s *source) setRecord(rec *record) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.loaded, s.rec = true, rec
}

func (s *source) state() (bool, string) {
	if s.err != nil {
		return false, "OAuth configuration refused: " + s.err.Error()
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case s.login != nil:
		return true, "signing in"
	case s.needs:
		return true, s.reason
	case s.rec != nil:
		return false, "signed in"
	default:
		return false, "not signed in"
	}
}

// fresh reports whether a token can be sent as is: not within expirySkew
// of its expiry.
func (s *source) fresh(t *oauth2.Token) bool {
	return t != nil && t.AccessToken != "" && (t.Expiry.IsZero() || s.m.opts.Now().Add(expirySkew).Before(t.Expiry))
}

// handler is the [auth.OAuthHandler] a source's transport calls. It never
// runs a browser flow: see the package comment.
type handler struct{ src *source }

var _ auth.OAuthHandler = (*handler)(nil)

// TokenSource returns nil when there is no token to send: the request then
// goes out bare, the server answers 401, and Authorize reports the sign-in.
//
// A refused configuration (a plain-http server URL outside loopback, a
// grant it cannot do) sends no token and fails nothing here: every url
// server gets a handler, most never ask for sign-in, and those must keep
// working. Only a sign-in (Authorize, Login) is refused, saying why.
func (h *handler) TokenSource(ctx context.Context) (oauth2.TokenSource, error) {
	s := h.src
	if s.err != nil {
		return nil, nil
	}
	s.mu.Lock()
	dead := s.dead
	s.mu.Unlock()
	if dead {
		return nil, nil
	}
	if s.cfg.Grant != GrantClientCredentials {
		rec, err := s.record()
		if err != nil {
			return nil, err
		}
		if rec == nil || rec.Token == nil {
			return nil, nil
		}
	}
	return &tokenSource{ctx: ctx, src: s}, nil
}

// tokenSource gives the transport the current token, refreshing it (or
// asking for a client-credentials one) under the connection's context.
type tokenSource struct {
	ctx context.Context
	src *source
}

func (t *tokenSource) Token() (*oauth2.Token, error) { return t.src.token(t.ctx) }

func (s *source) token(ctx context.Context) (*oauth2.Token, error) {
	s.fetchMu.Lock()
	defer s.fetchMu.Unlock()
	if s.cfg.Grant == GrantClientCredentials {
		return s.clientCredentialsToken(ctx)
	}
	rec, err := s.record()
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	dead := s.dead
	s.mu.Unlock()
	switch {
	case rec == nil || rec.Token == nil || dead:
		return nil, s.needSignIn(ctx, "not signed in", nil, nil)
	case s.fresh(rec.Token):
		return rec.Token, nil
	case rec.Token.RefreshToken == "":
		return nil, s.needSignIn(ctx, "the token expired and the server gave no refresh token", nil, nil)
	}
	return s.refresh(ctx, rec)
}

// refresh trades the refresh token for new tokens and stores them. A
// refusal ends the episode's token use: the source needs sign-in and the
// token endpoint is not asked again until the owner signs in.
func (s *source) refresh(ctx context.Context, rec *record) (*oauth2.Token, error) {
	tok, err := s.m.requestToken(ctx, tokenRequest{
		client: s.http, url: rec.TokenURL, clientID: rec.ClientID, secret: rec.ClientSecret, style: rec.AuthStyle,
		params: url.Values{"grant_type": {"refresh_token"}, "refresh_token": {rec.Token.RefreshToken}, "resource": {rec.Resource}},
	})
	var te *TokenError
	if errors.As(err, &te) {
		s.mu.Lock()
		s.dead = true
		s.mu.Unlock()
		s.m.journal(ctx, "oauth.refresh.failed", s.name, map[string]any{"error": te.Error()})
		return nil, s.needSignIn(ctx, "the refresh token was refused", nil, nil)
	}
	if err != nil {
		return nil, fmt.Errorf("refresh the token of %s: %w", s.name, err)
	}
	if tok.RefreshToken == "" {
		tok.RefreshToken = rec.Token.RefreshToken // RFC 6749 §6: the old one stays valid
	}
	next := *rec
	next.Token = tok
	if err := saveRecord(s.m.opts.Store, s.name, &next); err != nil {
		// The new token works now; after a restart the old refresh token
		// may be spent, and the source will ask for sign-in.
		s.m.opts.Logger.Error("oauth: keep the refreshed token", "server", s.name, "err", err)
	}
	s.setRecord(&next)
	return tok, nil
}

// Authorize is called by the transport after a 401 or 403. It refreshes
// once when the token sent was refused and a refresh token exists;
// otherwise it reports the sign-in needed and returns [ErrNeedsSignIn].
func (h *handler) Authorize(ctx context.Context, req *http.Request, resp *http.Response) error {
	defer resp.Body.Close()
	s := h.src
	if s.err != nil {
		return s.err
	}
	ch, err := oauthex.ParseWWWAuthenticate(resp.Header.Values("WWW-Authenticate"))
	if err != nil {
		s.m.opts.Logger.Debug("oauth: unreadable challenge", "server", s.name, "err", err)
		ch = nil
	}
	if values := resp.Header.Values("WWW-Authenticate"); len(values) > 0 {
		kept := &http.Response{StatusCode: resp.StatusCode, Status: resp.Status, Header: http.Header{"Www-Authenticate": slices.Clone(values)}}
		s.mu.Lock()
		s.challenge = kept
		s.mu.Unlock()
	}
	if resp.StatusCode == http.StatusForbidden {
		if challengeParam(ch, "error") != "insufficient_scope" {
			return fmt.Errorf("%s answered 403 Forbidden", s.name)
		}
		return s.stepUp(ctx, ch)
	}
	sent := bearer(req)
	if s.cfg.Grant == GrantClientCredentials {
		return s.clientCredentialsRefused(ctx, sent, ch)
	}
	return s.unauthorized(ctx, sent, ch)
}

func (s *source) unauthorized(ctx context.Context, sent string, ch []oauthex.Challenge) error {
	rec, err := s.record()
	if err != nil {
		return err
	}
	if sent == "" || rec == nil || rec.Token == nil {
		return s.needSignIn(ctx, "the server answered 401 Unauthorized", ch, nil)
	}
	s.fetchMu.Lock()
	defer s.fetchMu.Unlock()
	s.mu.Lock()
	cur, dead, forced := s.rec, s.dead, s.forced
	try := !dead && cur != nil && cur.Token.AccessToken == sent && cur.Token.RefreshToken != "" && forced != sent
	s.mu.Unlock()
	switch {
	case cur != nil && cur.Token.AccessToken != sent && !dead:
		return nil // another request refreshed meanwhile: retry with the new token
	case !try:
		return s.needSignIn(ctx, "the server refused the token", ch, nil)
	}
	tok, err := s.refresh(ctx, cur)
	if err != nil {
		return err
	}
	s.mu.Lock()
	s.forced = tok.AccessToken
	s.mu.Unlock()
	return nil
}

// stepUp answers 403 insufficient_scope. Scopes beyond those the owner
// approved and those already shown in this episode are a new sign-in
// request showing the widening (the gateway lets it supersede the one
// waiting); they are never asked for silently.
func (s *source) stepUp(ctx context.Context, ch []oauthex.Challenge) error {
	want := strings.Fields(challengeParam(ch, "scope"))
	approved := union(s.cfg.Scopes, nil)
	if s.cfg.Grant != GrantClientCredentials {
		rec, err := s.record()
		if err != nil {
			return err
		}
		if rec != nil {
			approved = rec.Scopes
		}
	} else {
		s.mu.Lock()
		approved = union(approved, s.granted)
		s.mu.Unlock()
	}
	s.mu.Lock()
	widening := minus(want, union(approved, s.shown))
	s.widen = union(s.widen, union(approved, want))
	s.mu.Unlock()
	if len(widening) > 0 {
		return s.needSignIn(ctx, "the server asks for more scopes than were approved", ch, widening)
	}
	return s.needSignIn(ctx, "the server refused the token's scopes", ch, nil)
}

// needSignIn puts the source in "needs sign-in", tells the daemon once per
// episode (and again for each widening), and returns the error wrapping
// [ErrNeedsSignIn].
func (s *source) needSignIn(ctx context.Context, reason string, ch []oauthex.Challenge, widening []string) error {
	s.mu.Lock()
	first := !s.notified || len(widening) > 0
	if first {
		s.needs, s.reason, s.notified = true, reason, true // the episode keeps its first reason
	}
	s.mu.Unlock()
	err := fmt.Errorf("%s: %s; run: plexus mcp login %s: %w", s.name, reason, s.name, ErrNeedsSignIn)
	if first {
		s.notify(ctx, s.signInRequest(ctx, reason, ch, widening))
	}
	return err
}

// refile files a new sign-in request showing what discovery found now,
// whatever was filed in this episode: a sign-in refused because it would
// not match what the owner was shown (or what was signed in before).
func (s *source) refile(ctx context.Context, reason string, d *discovery, scopes []string) {
	s.mu.Lock()
	s.needs, s.reason, s.notified = true, reason, true
	s.mu.Unlock()
	s.notify(ctx, plexus.SignInRequest{Server: s.name, Resource: shown(d.resource), Issuer: d.asm.Issuer,
		Scopes: scopes, Reason: reason})
}

// notify journals req and hands it to the daemon, remembering the scopes
// it showed.
func (s *source) notify(ctx context.Context, req plexus.SignInRequest) {
	s.mu.Lock()
	s.shown = union(s.shown, union(req.Scopes, req.Widening))
	s.mu.Unlock()
	s.m.journal(ctx, "oauth.signin.needed", s.name, map[string]any{
		"reason": req.Reason, "resource": req.Resource, "issuer": req.Issuer, "scopes": req.Scopes, "widening": req.Widening,
	})
	if s.m.opts.NeedsSignIn != nil {
		s.m.opts.NeedsSignIn(req)
	}
}

// signInRequest says what the owner is asked: the stored sign-in's
// resource and issuer when there is one, else what discovery finds. A
// widening shows every scope the next sign-in asks for. The resource is
// shown without its query (where a key may ride).
func (s *source) signInRequest(ctx context.Context, reason string, ch []oauthex.Challenge, widening []string) plexus.SignInRequest {
	req := plexus.SignInRequest{Server: s.name, Resource: s.url, Reason: reason, Widening: widening}
	s.mu.Lock()
	rec, widen, before := s.rec, s.widen, s.shown
	s.mu.Unlock()
	scopes := strings.Fields(challengeParam(ch, "scope"))
	if rec != nil {
		req.Resource, req.Issuer = rec.Resource, rec.Issuer
		scopes = union(rec.Scopes, scopes)
	} else if d, err := s.m.discover(ctx, s.http, s.url, ch, s.cfg.AuthServerMetadataURL); err == nil {
		req.Resource, req.Issuer = d.resource, d.asm.Issuer
		if len(scopes) == 0 {
			scopes = d.scopesSupported
		}
	} else {
		s.m.opts.Logger.Warn("oauth: discovery for the sign-in request", "server", s.name, "err", err)
	}
	if len(s.cfg.Scopes) > 0 {
		scopes = s.cfg.Scopes
	}
	if len(widening) > 0 {
		scopes = union(before, widen)
	}
	req.Scopes, req.Resource = scopes, shown(req.Resource)
	return req
}

// bearer returns the access token a request carried.
func bearer(req *http.Request) string {
	if req == nil {
		return ""
	}
	scheme, tok, ok := strings.Cut(req.Header.Get("Authorization"), " ")
	if !ok || !strings.EqualFold(scheme, "bearer") {
		return ""
	}
	return strings.TrimSpace(tok)
}

// tokenRequest is one request to a token endpoint.
type tokenRequest struct {
	client                *http.Client
	url, clientID, secret string
	style                 oauth2.AuthStyle
	scopes                []string
	params                url.Values
}

// requestToken posts to a token endpoint with x/oauth2's client
// credentials machinery, which lets params choose the grant (refresh_token
// too) and sends the resource indicator the MCP spec asks for on every
// token request, which oauth2.Config's refresh does not.
func (m *Manager) requestToken(ctx context.Context, r tokenRequest) (*oauth2.Token, error) {
	if err := checkHTTPS(r.url); err != nil {
		return nil, fmt.Errorf("token endpoint: %w", err)
	}
	conf := clientcredentials.Config{
		ClientID: r.clientID, ClientSecret: r.secret, TokenURL: r.url,
		Scopes: r.scopes, EndpointParams: r.params, AuthStyle: r.style,
	}
	tok, err := conf.Token(context.WithValue(ctx, oauth2.HTTPClient, r.client))
	if err != nil {
		return nil, clean(err)
	}
	return tok, nil
}
