package oauth

import (
	"context"
	"crypto/elliptic"
	"crypto/rand"
	"errors"
	"fmt"
	"net/url"
	"slices"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"github.com/modelcontextprotocol/go-sdk/oauthex"
	"golang.org/x/oauth2"
)

const jwtBearer = "urn:ietf:params:oauth:client-assertion-type:jwt-bearer"

// clientCredentialsToken returns the current client-credentials token, or
// asks for a new one when there is none or it is about to expire. The
// caller holds fetchMu.
func (s *source) clientCredentialsToken(ctx context.Context) (*oauth2.Token, error) {
	s.mu.Lock()
	rec, dead := s.rec, s.dead
	s.mu.Unlock()
	if dead {
		return nil, s.needSignIn(ctx, "the authorization server refused the client credentials", nil, nil)
	}
	if rec != nil && s.fresh(rec.Token) {
		return rec.Token, nil
	}
	return s.fetchClientCredentials(ctx)
}

// fetchClientCredentials signs in with no person (the client_credentials
// grant): the token endpoint found by discovery, the resource indicator
// sent, the client authenticated by its secret or a private_key_jwt
// assertion (RFC 7523). A refusal needs the owner: nothing retries it.
//
// It asks for the entry's scopes and those the owner granted by a Login,
// never for a step-up's on its own; and it sends the client's secret only
// to the authorization server it signed in at before (the one the owner
// approved, or the entry pins): a changed one is a new sign-in request.
func (s *source) fetchClientCredentials(ctx context.Context) (*oauth2.Token, error) {
	d, err := s.m.discover(ctx, s.http, s.url, nil, s.cfg.AuthServerMetadataURL)
	if err != nil {
		return nil, fmt.Errorf("sign in to %s: %w", s.name, err)
	}
	s.mu.Lock()
	scopes, known := union(s.cfg.Scopes, s.granted), s.issuer
	s.mu.Unlock()
	if known != "" && known != d.asm.Issuer {
		s.mu.Lock()
		s.dead = true
		s.mu.Unlock()
		reason := fmt.Sprintf("the authorization server changed from %s to %s", known, d.asm.Issuer)
		s.refile(ctx, reason, d, scopes)
		return nil, fmt.Errorf("%s: %s; approve the new sign-in request, or run: plexus mcp login %s: %w", s.name, reason, s.name, ErrNeedsSignIn)
	}
	r := tokenRequest{client: s.http, url: d.asm.TokenEndpoint, clientID: s.cfg.ClientID, scopes: scopes,
		params: url.Values{"resource": {d.resource}}}
	if err := s.m.clientAuth(&r, s.cfg, d.asm); err != nil {
		return nil, fmt.Errorf("sign in to %s: %w", s.name, err)
	}
	tok, err := s.m.requestToken(ctx, r)
	var te *TokenError
	if errors.As(err, &te) {
		s.mu.Lock()
		s.dead = true
		s.mu.Unlock()
		s.m.journal(ctx, "oauth.signin.failed", s.name, map[string]any{"grant": GrantClientCredentials, "error": te.Error()})
		return nil, s.needSignIn(ctx, "the authorization server refused the client credentials", nil, nil)
	}
	if err != nil {
		return nil, fmt.Errorf("sign in to %s: %w", s.name, err)
	}
	s.mu.Lock()
	first := s.rec == nil
	s.rec = &record{ServerURL: s.url, Token: tok, Scopes: scopes, Resource: d.resource, Issuer: d.asm.Issuer,
		TokenURL: d.asm.TokenEndpoint, RevocationURL: d.asm.RevocationEndpoint, ClientID: s.cfg.ClientID}
	s.issuer = d.asm.Issuer
	s.needs, s.notified, s.shown = false, false, nil
	s.mu.Unlock()
	if first {
		s.m.journal(ctx, "oauth.signin.completed", s.name, map[string]any{
			"grant": GrantClientCredentials, "issuer": d.asm.Issuer, "resource": shown(d.resource), "scopes": scopes})
	}
	return tok, nil
}

// clientCredentialsRefused answers a 401 to a client-credentials token: a
// new token, once; that one refused too, the owner is asked.
func (s *source) clientCredentialsRefused(ctx context.Context, sent string, ch []oauthex.Challenge) error {
	s.fetchMu.Lock()
	defer s.fetchMu.Unlock()
	s.mu.Lock()
	rec, dead, forced := s.rec, s.dead, s.forced
	try := !dead && forced != sent
	s.mu.Unlock()
	switch {
	case rec != nil && sent != "" && rec.Token.AccessToken != sent && !dead:
		return nil // a new token came meanwhile
	case !try:
		return s.needSignIn(ctx, "the server refused the client-credentials token", ch, nil)
	}
	tok, err := s.fetchClientCredentials(ctx)
	if err != nil {
		return err
	}
	s.mu.Lock()
	s.forced = tok.AccessToken
	s.mu.Unlock()
	return nil
}

// clientAuth sets how the client authenticates at the token endpoint:
// private_key_jwt when the entry has a key, else the secret by basic or
// post, whichever the server lists (basic when it lists neither).
func (m *Manager) clientAuth(r *tokenRequest, cfg Config, asm *oauthex.AuthServerMeta) error {
	if cfg.PrivateKey == "" {
		r.secret = cfg.ClientSecret
		r.style = oauth2.AuthStyleInHeader
		methods := asm.TokenEndpointAuthMethodsSupported
		if !slices.Contains(methods, "client_secret_basic") && slices.Contains(methods, "client_secret_post") {
			r.style = oauth2.AuthStyleInParams
		}
		return nil
	}
	a, err := m.assertion(cfg.ClientID, cfg.PrivateKey, asm.Issuer)
	if err != nil {
		return err
	}
	r.style = oauth2.AuthStyleInParams // client_id in the form, no secret
	r.params.Set("client_assertion_type", jwtBearer)
	r.params.Set("client_assertion", a)
	return nil
}

// assertion signs a one-use RFC 7523 client assertion: iss and sub the
// client, aud the authorization server's issuer, five minutes to live.
func (m *Manager) assertion(clientID, pemKey, audience string) (string, error) {
	key, method, err := parseKey(pemKey)
	if err != nil {
		return "", err
	}
	now := m.opts.Now()
	return jwt.NewWithClaims(method, jwt.RegisteredClaims{
		Issuer: clientID, Subject: clientID, Audience: jwt.ClaimStrings{audience},
		IssuedAt: jwt.NewNumericDate(now), ExpiresAt: jwt.NewNumericDate(now.Add(5 * time.Minute)),
		ID: rand.Text(),
	}).SignedString(key)
}

// parseKey reads a PEM private key: RSA (RS256) or EC P-256 (ES256) or
// P-384 (ES384). Its error never quotes the key.
func parseKey(p string) (any, jwt.SigningMethod, error) {
	if k, err := jwt.ParseRSAPrivateKeyFromPEM([]byte(p)); err == nil {
		return k, jwt.SigningMethodRS256, nil
	}
	if k, err := jwt.ParseECPrivateKeyFromPEM([]byte(p)); err == nil {
		switch k.Curve {
		case elliptic.P256():
			return k, jwt.SigningMethodES256, nil
		case elliptic.P384():
			return k, jwt.SigningMethodES384, nil
		}
	}
	return nil, nil, errors.New("privateKey is not a PEM RSA or EC (P-256, P-384) private key")
}
