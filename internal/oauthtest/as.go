package oauthtest

import (
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"github.com/modelcontextprotocol/go-sdk/oauthex"
)

const jwtBearer = "urn:ietf:params:oauth:client-assertion-type:jwt-bearer"

func (s *Server) asHandler() http.Handler {
	mux := http.NewServeMux()
	if !s.opts.OpenIDOnly {
		mux.HandleFunc("GET /.well-known/oauth-authorization-server", s.serveMeta)
	}
	mux.HandleFunc("GET /.well-known/openid-configuration", s.serveMeta)
	if !s.opts.NoDCR {
		mux.HandleFunc("POST /register", s.serveRegister)
	}
	mux.HandleFunc("GET /authorize", s.serveAuthorize)
	mux.HandleFunc("POST /token", s.serveToken)
	if !s.opts.NoRevocation {
		mux.HandleFunc("POST /revoke", s.serveRevoke)
	}
	return mux
}

func (s *Server) serveMeta(w http.ResponseWriter, r *http.Request) {
	s.count(EndpointASMeta)
	issuer := s.Issuer
	if s.opts.MetadataIssuer != "" {
		issuer = s.opts.MetadataIssuer
	}
	meta := oauthex.AuthServerMeta{
		Issuer:                            issuer,
		AuthorizationEndpoint:             s.Issuer + "/authorize",
		TokenEndpoint:                     s.Issuer + "/token",
		ScopesSupported:                   s.opts.ScopesSupported,
		ResponseTypesSupported:            []string{"code"},
		GrantTypesSupported:               []string{"authorization_code", "refresh_token", "client_credentials"},
		TokenEndpointAuthMethodsSupported: s.opts.AuthMethods,
		TokenEndpointAuthSigningAlgValuesSupported: []string{"RS256", "ES256"},
		CodeChallengeMethodsSupported:              []string{"S256"},
		ClientIDMetadataDocumentSupported:          s.opts.CIMD,
		AuthorizationResponseIssParameterSupported: !s.opts.NoIssParameter,
	}
	if !s.opts.NoDCR {
		meta.RegistrationEndpoint = s.Issuer + "/register"
	}
	if !s.opts.NoRevocation {
		meta.RevocationEndpoint = s.Issuer + "/revoke"
	}
	writeJSON(w, http.StatusOK, meta)
}

func (s *Server) serveRegister(w http.ResponseWriter, r *http.Request) {
	s.count(EndpointRegister)
	var meta oauthex.ClientRegistrationMetadata
	if err := json.NewDecoder(io.LimitReader(r.Body, 1<<16)).Decode(&meta); err != nil {
		oauthError(w, http.StatusBadRequest, "invalid_client_metadata")
		return
	}
	if len(meta.RedirectURIs) == 0 {
		oauthError(w, http.StatusBadRequest, "invalid_redirect_uri")
		return
	}
	c := &Client{ID: newValue("dcr-"), RedirectURIs: meta.RedirectURIs}
	method := meta.TokenEndpointAuthMethod
	if method == "" {
		method = "client_secret_basic"
	}
	if method != "none" {
		c.Secret = newValue("dcrsecret-")
	}
	s.mu.Lock()
	s.clients[c.ID] = c
	s.mu.Unlock()
	writeJSON(w, http.StatusCreated, map[string]any{
		"client_id":                  c.ID,
		"client_secret":              c.Secret,
		"redirect_uris":              c.RedirectURIs,
		"token_endpoint_auth_method": method,
	})
}

// serveAuthorize approves at once: the fixture has no person to ask.
func (s *Server) serveAuthorize(w http.ResponseWriter, r *http.Request) {
	s.count(EndpointAuthorize)
	q := r.URL.Query()
	clientID, redirect := q.Get("client_id"), q.Get("redirect_uri")
	if !s.redirectAllowed(clientID, redirect) {
		// Never redirect to an unchecked URI (RFC 6749 §4.1.2.1).
		http.Error(w, "unknown client or redirect_uri", http.StatusBadRequest)
		return
	}
	back, err := url.Parse(redirect)
	if err != nil {
		http.Error(w, "bad redirect_uri", http.StatusBadRequest)
		return
	}
	fail := func(code string) {
		u := *back
		v := u.Query()
		v.Set("error", code)
		v.Set("state", q.Get("state"))
		u.RawQuery = v.Encode()
		http.Redirect(w, r, u.String(), http.StatusFound)
	}
	switch {
	case q.Get("response_type") != "code":
		fail("unsupported_response_type")
		return
	case q.Get("code_challenge_method") != "S256" || q.Get("code_challenge") == "":
		fail("invalid_request")
		return
	case q.Get("resource") != s.URL:
		fail("invalid_target")
		return
	}
	code := newValue("code-")
	s.mu.Lock()
	s.codes[code] = &grantInfo{
		clientID: clientID, resource: q.Get("resource"), redirectURI: redirect,
		challenge: q.Get("code_challenge"), scopes: strings.Fields(q.Get("scope")),
		expires: time.Now().Add(10 * time.Minute),
	}
	s.mu.Unlock()
	u := *back
	v := u.Query()
	v.Set("code", code)
	v.Set("state", q.Get("state"))
	switch {
	case s.opts.WrongIss:
		v.Set("iss", "https://attacker.example")
	case !s.opts.NoIssParameter:
		v.Set("iss", s.Issuer)
	}
	u.RawQuery = v.Encode()
	http.Redirect(w, r, u.String(), http.StatusFound)
}

func (s *Server) redirectAllowed(clientID, redirect string) bool {
	u, err := url.Parse(redirect)
	if err != nil || redirect == "" {
		return false
	}
	s.mu.Lock()
	c := s.clients[clientID]
	s.mu.Unlock()
	if c == nil {
		if !s.opts.CIMD || !strings.HasPrefix(clientID, "https://") {
			return false
		}
		c = &Client{ID: clientID}
	}
	if len(c.RedirectURIs) == 0 {
		h := u.Hostname()
		return u.Scheme == "http" && (h == "127.0.0.1" || h == "localhost" || h == "::1")
	}
	return slices.Contains(c.RedirectURIs, redirect)
}

func (s *Server) serveToken(w http.ResponseWriter, r *http.Request) {
	s.count(EndpointToken)
	if err := r.ParseForm(); err != nil {
		oauthError(w, http.StatusBadRequest, "invalid_request")
		return
	}
	clientID, method, ok := s.authenticate(r)
	if !ok {
		oauthError(w, http.StatusUnauthorized, "invalid_client")
		return
	}
	var g *grantInfo
	var errCode string
	grant := r.PostForm.Get("grant_type")
	switch grant {
	case "authorization_code":
		g, errCode = s.redeemCode(r, clientID)
	case "refresh_token":
		g, errCode = s.redeemRefresh(r, clientID)
	case "client_credentials":
		g, errCode = s.clientCredentials(r, clientID, method)
	default:
		errCode = "unsupported_grant_type"
	}
	if errCode != "" {
		oauthError(w, http.StatusBadRequest, errCode)
		return
	}
	s.issue(w, g, grant, method)
}

// authenticate checks the client's authentication and says which method it
// used. A public client (no secret, no key) authenticates with "none".
func (s *Server) authenticate(r *http.Request) (clientID, method string, ok bool) {
	if id, secret, basic := r.BasicAuth(); basic {
		// RFC 6749 §2.3.1: both are form-encoded before basic auth.
		uid, err1 := url.QueryUnescape(id)
		usecret, err2 := url.QueryUnescape(secret)
		if err1 != nil || err2 != nil {
			return id, "client_secret_basic", false
		}
		return uid, "client_secret_basic", s.secretMatches(uid, usecret)
	}
	if r.PostForm.Get("client_assertion_type") == jwtBearer {
		id, ok := s.verifyAssertion(r.PostForm.Get("client_assertion"))
		return id, "private_key_jwt", ok
	}
	id := r.PostForm.Get("client_id")
	if secret := r.PostForm.Get("client_secret"); secret != "" {
		return id, "client_secret_post", s.secretMatches(id, secret)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	c := s.clients[id]
	if c == nil && s.opts.CIMD && strings.HasPrefix(id, "https://") {
		return id, "none", true
	}
	return id, "none", c != nil && c.Secret == "" && c.PublicKey == nil
}

func (s *Server) secretMatches(id, secret string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	c := s.clients[id]
	return c != nil && c.Secret != "" && subtle.ConstantTimeCompare([]byte(c.Secret), []byte(secret)) == 1
}

// verifyAssertion checks an RFC 7523 client assertion: signed by the
// client's registered key, iss = sub = client_id, aud naming this server,
// not expired, its jti never seen before.
func (s *Server) verifyAssertion(assertion string) (string, bool) {
	var claims jwt.RegisteredClaims
	tok, err := jwt.ParseWithClaims(assertion, &claims, func(t *jwt.Token) (any, error) {
		sub, err := t.Claims.GetSubject()
		if err != nil {
			return nil, err
		}
		s.mu.Lock()
		defer s.mu.Unlock()
		c := s.clients[sub]
		if c == nil || c.PublicKey == nil {
			return nil, fmt.Errorf("no key for client")
		}
		return c.PublicKey, nil
	}, jwt.WithValidMethods([]string{"RS256", "ES256"}), jwt.WithExpirationRequired())
	if err != nil || !tok.Valid || claims.Issuer != claims.Subject || claims.ID == "" {
		return "", false
	}
	if !slices.Contains(claims.Audience, s.Issuer) && !slices.Contains(claims.Audience, s.Issuer+"/token") {
		return "", false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.jtis[claims.ID] {
		return "", false
	}
	s.jtis[claims.ID] = true
	return claims.Subject, true
}

func (s *Server) redeemCode(r *http.Request, clientID string) (*grantInfo, string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	code := r.PostForm.Get("code")
	g := s.codes[code]
	delete(s.codes, code) // one use, whatever happens next
	if g == nil || g.clientID != clientID || time.Now().After(g.expires) {
		return nil, "invalid_grant"
	}
	if r.PostForm.Get("redirect_uri") != g.redirectURI {
		return nil, "invalid_grant"
	}
	sum := sha256.Sum256([]byte(r.PostForm.Get("code_verifier")))
	if base64.RawURLEncoding.EncodeToString(sum[:]) != g.challenge {
		return nil, "invalid_grant"
	}
	if r.PostForm.Get("resource") != g.resource {
		return nil, "invalid_target"
	}
	return g, ""
}

func (s *Server) redeemRefresh(r *http.Request, clientID string) (*grantInfo, string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	rt := r.PostForm.Get("refresh_token")
	g := s.refresh[rt]
	if s.refuseRefresh || g == nil || g.clientID != clientID {
		return nil, "invalid_grant"
	}
	if res := r.PostForm.Get("resource"); res != "" && res != g.resource {
		return nil, "invalid_target"
	}
	delete(s.refresh, rt) // rotated: the old refresh token is spent
	return g, ""
}

func (s *Server) clientCredentials(r *http.Request, clientID, method string) (*grantInfo, string) {
	if method == "none" {
		return nil, "unauthorized_client"
	}
	if r.PostForm.Get("resource") != s.URL {
		return nil, "invalid_target"
	}
	scopes := strings.Fields(r.PostForm.Get("scope"))
	if len(scopes) == 0 {
		s.mu.Lock()
		scopes = slices.Clone(s.required)
		s.mu.Unlock()
	}
	return &grantInfo{clientID: clientID, resource: s.URL, scopes: scopes}, ""
}

func (s *Server) issue(w http.ResponseWriter, g *grantInfo, grant, method string) {
	s.mu.Lock()
	access := newValue("at-")
	ng := *g
	ng.expires = time.Now().Add(s.lifetime)
	s.access[access] = &ng
	resp := map[string]any{
		"access_token": access,
		"token_type":   "Bearer",
		"expires_in":   int(s.lifetime.Seconds()),
		"scope":        strings.Join(g.scopes, " "),
	}
	if grant != "client_credentials" && !s.opts.NoRefreshTokens {
		rt := newValue("rt-")
		s.refresh[rt] = &ng
		resp["refresh_token"] = rt
	}
	s.tokenReqs = append(s.tokenReqs, TokenRequest{
		Grant: grant, ClientID: g.clientID, AuthMethod: method, Resource: g.resource, Scopes: g.scopes,
	})
	s.mu.Unlock()
	w.Header().Set("Cache-Control", "no-store")
	writeJSON(w, http.StatusOK, resp)
}

func (s *Server) serveRevoke(w http.ResponseWriter, r *http.Request) {
	s.count(EndpointRevoke)
	if err := r.ParseForm(); err != nil {
		oauthError(w, http.StatusBadRequest, "invalid_request")
		return
	}
	if _, _, ok := s.authenticate(r); !ok {
		oauthError(w, http.StatusUnauthorized, "invalid_client")
		return
	}
	tok := r.PostForm.Get("token")
	s.mu.Lock()
	s.revoked = append(s.revoked, tok)
	delete(s.access, tok)
	delete(s.refresh, tok)
	s.mu.Unlock()
	w.WriteHeader(http.StatusOK) // RFC 7009 §2.2: 200 whether or not the token was known
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		http.Error(w, "encode", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	if _, err := w.Write(b); err != nil {
		return // the client went away; it sees a short body
	}
}

func oauthError(w http.ResponseWriter, status int, code string) {
	writeJSON(w, status, map[string]string{"error": code})
}

func browse(t testing.TB, authURL string) (int, string) {
	t.Helper()
	loc := AuthorizeRedirect(t, authURL)
	resp, err := http.Get(loc)
	if err != nil {
		t.Fatalf("browser: GET callback: %v", err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("browser: read callback: %v", err)
	}
	return resp.StatusCode, string(body)
}

// AuthorizeRedirect GETs an authorization URL and returns where the
// authorization server redirects the browser (the client's callback with
// code, state and iss), without following it.
func AuthorizeRedirect(t testing.TB, authURL string) string {
	t.Helper()
	c := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := c.Get(authURL)
	if err != nil {
		t.Fatalf("browser: GET authorization URL: %v", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusFound {
		t.Fatalf("browser: authorization endpoint answered %d", resp.StatusCode)
	}
	return resp.Header.Get("Location")
}
