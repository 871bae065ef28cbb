// Package oauthtest runs a real OAuth 2.1 authorization server and an MCP
// server protected by it, on httptest servers, for tests of Plexus's OAuth
// client (issue #19). It is imported by tests only.
//
// The authorization server speaks the parts of the MCP authorization spec a
// client needs: authorization server metadata (RFC 8414 and OpenID
// discovery), dynamic client registration (RFC 7591), pre-registered and
// Client ID Metadata Document clients, an authorize endpoint that approves
// at once (a test "browser" GETs the URL and follows the redirect), a token
// endpoint (PKCE S256, resource indicators RFC 8707, refresh tokens,
// client_secret_basic / client_secret_post / private_key_jwt RFC 7523, the
// client_credentials grant) and revocation (RFC 7009). The MCP server is a
// real go-sdk mcp.Server behind auth.RequireBearerToken, with protected
// resource metadata (RFC 9728) and step-up (insufficient_scope).
//
// Knobs let a test bend the server (scopes, lifetimes, refusing refresh,
// issuer mismatch) and observe it (requests per endpoint, revoked tokens,
// the client authentication each token request used). It never checks the
// client's side of anything beyond what a real server would refuse.
package oauthtest

import (
	"crypto"
	"crypto/rand"
	"net/http/httptest"
	"slices"
	"sync"
	"testing"
	"time"
)

// Endpoint names for [Server.Count].
const (
	EndpointPRM       = "prm"       // protected resource metadata
	EndpointASMeta    = "as-meta"   // authorization server metadata (either discovery document)
	EndpointRegister  = "register"  // dynamic client registration
	EndpointAuthorize = "authorize" // the authorization endpoint
	EndpointToken     = "token"     // the token endpoint, every grant
	EndpointRevoke    = "revoke"    // RFC 7009 revocation
	EndpointMCP       = "mcp"       // the protected MCP endpoint
)

// Options shape a [Server]. The zero value is a well-behaved server.
type Options struct {
	// Scopes are the scopes the MCP server requires and names in its
	// challenge; default ["mcp:read"].
	Scopes []string
	// ScopesSupported is the authorization server's scopes_supported and the
	// protected resource's; default Scopes plus "mcp:write" and
	// "offline_access".
	ScopesSupported []string
	// NoChallengeScope leaves scope out of the 401 challenge, so a client
	// falls back to scopes_supported.
	NoChallengeScope bool
	// NoChallengeMetadata leaves resource_metadata out of the challenge, so a
	// client must find the protected resource metadata at the well-known path.
	NoChallengeMetadata bool
	// OpenIDOnly serves only the OpenID discovery document (no RFC 8414).
	OpenIDOnly bool
	// TokenLifetime is how long an access token lives; default one hour.
	TokenLifetime time.Duration
	// NoIssParameter drops authorization_response_iss_parameter_supported
	// from the metadata and iss from the authorization response.
	NoIssParameter bool
	// WrongIss makes the authorization response carry an iss that is not
	// the issuer (RFC 9207 mix-up).
	WrongIss bool
	// MetadataIssuer, when set, is the issuer the metadata claims (an issuer
	// mismatch when it differs from the server's URL).
	MetadataIssuer string
	// CIMD advertises client_id_metadata_document_supported and accepts any
	// https URL as a client_id.
	CIMD bool
	// NoDCR removes the registration endpoint.
	NoDCR bool
	// NoRevocation removes the revocation endpoint.
	NoRevocation bool
	// AuthMethods is token_endpoint_auth_methods_supported; default
	// client_secret_basic, client_secret_post, private_key_jwt, none.
	AuthMethods []string
	// NoRefreshTokens issues access tokens without a refresh token.
	NoRefreshTokens bool
}

// Client is a client the authorization server knows.
type Client struct {
	ID           string
	Secret       string           // empty for a public client
	PublicKey    crypto.PublicKey // for private_key_jwt
	RedirectURIs []string         // empty accepts any loopback redirect
}

// TokenRequest is what the token endpoint saw for one request it answered
// with tokens (never the secrets themselves).
type TokenRequest struct {
	Grant      string   // authorization_code, refresh_token, client_credentials
	ClientID   string   //
	AuthMethod string   // client_secret_basic, client_secret_post, private_key_jwt, none
	Resource   string   // the resource parameter
	Scopes     []string // the scopes granted
}

// Server is the authorization server and the MCP server it protects.
type Server struct {
	// AS serves the authorization server; MCP serves the protected resource.
	AS, MCP *httptest.Server
	// URL is the MCP endpoint (the resource), Issuer the authorization
	// server's issuer.
	URL, Issuer string

	opts Options

	mu            sync.Mutex // guards everything below
	required      []string
	lifetime      time.Duration
	refuseRefresh bool
	rejectTokens  bool
	clients       map[string]*Client
	codes         map[string]*grantInfo
	access        map[string]*grantInfo
	refresh       map[string]*grantInfo
	revoked       []string
	counts        map[string]int
	tokenReqs     []TokenRequest
	jtis          map[string]bool
}

type grantInfo struct {
	clientID, resource, redirectURI, challenge string
	scopes                                     []string
	expires                                    time.Time
}

// New starts the two servers; they close when the test ends.
func New(t testing.TB, opts Options) *Server {
	t.Helper()
	if len(opts.Scopes) == 0 {
		opts.Scopes = []string{"mcp:read"}
	}
	if len(opts.ScopesSupported) == 0 {
		opts.ScopesSupported = append(slices.Clone(opts.Scopes), "mcp:write", "offline_access")
	}
	if len(opts.AuthMethods) == 0 {
		opts.AuthMethods = []string{"client_secret_basic", "client_secret_post", "private_key_jwt", "none"}
	}
	if opts.TokenLifetime == 0 {
		opts.TokenLifetime = time.Hour
	}
	s := &Server{
		opts:     opts,
		required: slices.Clone(opts.Scopes),
		lifetime: opts.TokenLifetime,
		clients:  map[string]*Client{},
		codes:    map[string]*grantInfo{},
		access:   map[string]*grantInfo{},
		refresh:  map[string]*grantInfo{},
		counts:   map[string]int{},
		jtis:     map[string]bool{},
	}
	// Both URLs are known before either handler is built: the handlers
	// name each other.
	s.AS, s.MCP = httptest.NewUnstartedServer(nil), httptest.NewUnstartedServer(nil)
	s.Issuer = "http://" + s.AS.Listener.Addr().String()
	s.URL = "http://" + s.MCP.Listener.Addr().String() + "/mcp"
	s.AS.Config.Handler, s.MCP.Config.Handler = s.asHandler(), s.mcpHandler()
	s.AS.Start()
	t.Cleanup(s.AS.Close)
	s.MCP.Start()
	t.Cleanup(s.MCP.Close)
	return s
}

// RegisterClient makes a client known, as an owner pre-registering one would.
func (s *Server) RegisterClient(c Client) {
	s.mu.Lock()
	defer s.mu.Unlock()
	cc := c
	s.clients[c.ID] = &cc
}

// SetRequiredScopes changes the scopes the MCP server requires: a token
// lacking one is answered 403 insufficient_scope naming them (step-up).
func (s *Server) SetRequiredScopes(scopes ...string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.required = slices.Clone(scopes)
}

// SetTokenLifetime changes the lifetime of access tokens issued from now on.
func (s *Server) SetTokenLifetime(d time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.lifetime = d
}

// RefuseRefresh makes the token endpoint answer invalid_grant to every
// refresh_token request (a revoked or expired refresh token).
func (s *Server) RefuseRefresh(refuse bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.refuseRefresh = refuse
}

// RejectTokens makes the MCP server refuse every token, new ones too, as a
// server would whose tokens' audience does not match it.
func (s *Server) RejectTokens(reject bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.rejectTokens = reject
}

// ExpireAccessTokens makes every access token issued so far invalid at the
// MCP server, as if its lifetime had passed.
func (s *Server) ExpireAccessTokens() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, g := range s.access {
		g.expires = time.Unix(0, 0)
	}
}

// Count returns how many requests an endpoint (Endpoint*) received.
func (s *Server) Count(endpoint string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.counts[endpoint]
}

// Revoked returns the token values revoked so far, in order.
func (s *Server) Revoked() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.revoked)
}

// TokenRequests returns the token requests answered with tokens, in order.
func (s *Server) TokenRequests() []TokenRequest {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.tokenReqs)
}

// Issued returns the access and refresh tokens currently valid (for canary
// tests: none of these may appear anywhere they don't belong).
func (s *Server) Issued() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []string
	for v := range s.access {
		out = append(out, v)
	}
	for v := range s.refresh {
		out = append(out, v)
	}
	return out
}

// Clients returns the IDs of the clients known (pre-registered or
// registered dynamically).
func (s *Server) Clients() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []string
	for id := range s.clients {
		out = append(out, id)
	}
	slices.Sort(out)
	return out
}

// ClientSecret returns a known client's secret (a DCR client's secret, for
// canary tests).
func (s *Server) ClientSecret(id string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if c := s.clients[id]; c != nil {
		return c.Secret
	}
	return ""
}

func (s *Server) count(endpoint string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.counts[endpoint]++
}

func newValue(prefix string) string { return prefix + rand.Text() }

// Browse plays the browser for an authorization URL: it GETs the URL and
// the redirect the authorization server answers, without following any
// further (the redirect lands on the client's callback). It returns the
// callback's response status and body.
func Browse(t testing.TB, authURL string) (int, string) {
	t.Helper()
	return browse(t, authURL)
}
