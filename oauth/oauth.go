// Package oauth signs Plexus in to remote MCP servers that ask for OAuth
// (issue #19): one [Manager] per daemon holds, per server entry, an
// [auth.OAuthHandler] for the source's Streamable HTTP transport, the
// owner's interactive sign-in ([Manager.Login] and the loopback
// [Manager.Callback]), sign-out with revocation, and the client-credentials
// grant that needs no person.
//
// It builds on the MCP Go SDK: discovery, client registration, PKCE,
// resource indicators, step-up scopes and the iss check are the SDK's
// [auth.AuthorizationCodeHandler], run only inside a Login the owner
// started. What the SDK lacks (a stored token that survives restarts,
// refresh that stops instead of looping, client credentials,
// private_key_jwt, revocation) is added here on golang.org/x/oauth2.
//
// It must never run a browser flow on its own: a handler that meets a 401
// without a usable token reports that the server needs sign-in, once per
// episode, and returns [ErrNeedsSignIn]. It must never let a token, a
// refresh token, a code or a client secret reach the journal, a log, an
// error string or any file but the secrets store.
package oauth

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"slices"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/auth"

	"github.com/plexus-gw/plexus"
)

// ErrNeedsSignIn is wrapped by the error a handler returns when the server
// wants a sign-in the handler cannot do by itself: no token, a refused
// refresh, or a step-up beyond the scopes the owner approved. The owner
// signs in with [Manager.Login]; nothing retries meanwhile.
var ErrNeedsSignIn = errors.New("needs sign-in")

// Grants a [Config] may name.
const (
	GrantAuthorizationCode = "authorization_code"
	GrantClientCredentials = "client_credentials"
)

// Config is one server entry's oauth object, its secret values already
// resolved from ${secret:…}.
type Config struct {
	ClientID, ClientSecret, PrivateKey string
	// CallbackPort, when set, makes a login listen on 127.0.0.1:port for the
	// redirect instead of the daemon's /oauth/callback.
	CallbackPort int
	// AuthServerMetadataURL overrides discovery of the authorization
	// server's metadata (used by the client-credentials grant).
	AuthServerMetadataURL string
	// ClientMetadataURL is a Client ID Metadata Document the owner hosts.
	ClientMetadataURL string
	// Scopes, when set, are asked for instead of the discovered ones.
	Scopes []string
	// Grant is GrantAuthorizationCode (the default) or GrantClientCredentials.
	Grant string
}

// Store keeps the tokens; platform.Services fits. Its methods may be
// called from any goroutine.
type Store interface {
	Secret(name string) (string, error)
	SetSecret(name string, v []byte) error
	RemoveSecret(name string) error
}

// Options are a [Manager]'s dependencies. Store and CallbackURL are
// required; the rest have working zero values.
type Options struct {
	Store Store
	// HTTPClient, when set, makes every OAuth request instead of the
	// client Plexus builds per server entry, whose dials refuse what the
	// upstream names further in than the server ([DialRefusedError]).
	HTTPClient *http.Client
	// Resolver resolves host names for those dials; nil is the system's.
	Resolver *net.Resolver
	Now      func() time.Time
	// CallbackURL returns the redirect URI for a login: the daemon's
	// http://127.0.0.1:<port>/oauth/callback for port 0, or the one the
	// entry's callbackPort names.
	CallbackURL func(port int) string
	// NeedsSignIn is called once per episode when a server wants a sign-in.
	NeedsSignIn func(plexus.SignInRequest)
	// SignedIn is called when a sign-in completed: the source may reconnect.
	SignedIn func(server string)
	// Journal records each step; payload never holds a secret.
	Journal func(ctx context.Context, action, server string, payload map[string]any)
	Logger  *slog.Logger
}

// Manager is the OAuth client of every server entry. Its methods are safe
// for concurrent use.
type Manager struct {
	opts Options

	mu      sync.Mutex // guards servers, states and closed; never held across I/O
	servers map[string]*source
	states  map[string]*pending
	closed  bool

	logins sync.WaitGroup // the running logins' goroutines
}

// Close ends every running sign-in (its callbackPort listener too) and
// waits for them. Logins started after Close fail.
func (m *Manager) Close() {
	m.mu.Lock()
	m.closed = true
	srcs := make([]*source, 0, len(m.servers))
	for _, s := range m.servers {
		srcs = append(srcs, s)
	}
	m.mu.Unlock()
	for _, s := range srcs {
		s.cancelLogin()
	}
	m.logins.Wait()
}

// New returns a Manager. It panics when Store or CallbackURL is missing:
// a wiring bug.
func New(o Options) *Manager {
	if o.Store == nil || o.CallbackURL == nil {
		panic("oauth.New: Options.Store and Options.CallbackURL are required")
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	return &Manager{opts: o, servers: map[string]*source{}, states: map[string]*pending{}}
}

// Handler returns the OAuth handler for one server entry, to give its
// StreamableClientTransport. Asked again for the same server with the same
// URL and configuration (a reconnect), it returns a handler on the same
// state, so an episode stays one episode. A changed entry replaces the
// state and ends any running sign-in; the stored tokens stay, but are used
// only for the URL they were issued for.
func (m *Manager) Handler(server, serverURL string, cfg Config) auth.OAuthHandler {
	m.mu.Lock()
	defer m.mu.Unlock()
	if old := m.servers[server]; old != nil {
		if old.url == serverURL && sameConfig(old.cfg, cfg) {
			return &handler{src: old}
		}
		old.cancelLogin()
	}
	src := &source{m: m, name: server, url: serverURL, cfg: cfg, err: checkConfig(serverURL, cfg),
		http: m.client(serverURL, cfg.AuthServerMetadataURL),
		// A client-credentials token lives in memory only: one is asked for
		// at start and whenever it expires.
		loaded: cfg.Grant == GrantClientCredentials}
	m.servers[server] = src
	return &handler{src: src}
}

// client makes the OAuth requests of the server entry at serverURL.
func (m *Manager) client(serverURL, asMetaURL string) *http.Client {
	if m.opts.HTTPClient != nil {
		return m.opts.HTTPClient
	}
	return guardedClient(serverURL, asMetaURL, m.opts.Resolver)
}

func sameConfig(a, b Config) bool {
	return a.ClientID == b.ClientID && a.ClientSecret == b.ClientSecret && a.PrivateKey == b.PrivateKey &&
		a.CallbackPort == b.CallbackPort && a.AuthServerMetadataURL == b.AuthServerMetadataURL &&
		a.ClientMetadataURL == b.ClientMetadataURL && a.Grant == b.Grant && slices.Equal(a.Scopes, b.Scopes)
}

// State says whether a server waits for the owner to sign in, and a short
// human detail ("signed in", "the refresh token was refused"). The detail
// never holds a secret.
func (m *Manager) State(server string) (needsSignIn bool, detail string) {
	src := m.source(server)
	if src == nil {
		return false, "no such OAuth server"
	}
	return src.state()
}

func (m *Manager) source(server string) *source {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.servers[server]
}

func (m *Manager) lookup(server string) (*source, error) {
	if src := m.source(server); src != nil {
		return src, nil
	}
	return nil, plexus.WrapError(plexus.CodeNotFound, plexus.ErrNotFound,
		fmt.Sprintf("no remote MCP server %q uses OAuth", server))
}

func (m *Manager) journal(ctx context.Context, action, server string, payload map[string]any) {
	if m.opts.Journal != nil {
		m.opts.Journal(ctx, action, server, payload)
	}
}

// checkConfig refuses what would send a token where it must not go.
func checkConfig(serverURL string, cfg Config) error {
	if err := checkHTTPS(serverURL); err != nil {
		return plexus.WrapError(plexus.CodeInvalidRequest, err, "the server URL")
	}
	if cfg.AuthServerMetadataURL != "" {
		if err := checkHTTPS(cfg.AuthServerMetadataURL); err != nil {
			return plexus.WrapError(plexus.CodeInvalidRequest, err, "authServerMetadataUrl")
		}
	}
	switch cfg.Grant {
	case "", GrantAuthorizationCode:
	case GrantClientCredentials:
		if cfg.ClientID == "" || (cfg.ClientSecret == "") == (cfg.PrivateKey == "") {
			return plexus.Errorf(plexus.CodeInvalidRequest,
				"grant client_credentials needs clientId and exactly one of clientSecret or privateKey")
		}
	default:
		return plexus.Errorf(plexus.CodeInvalidRequest, "oauth grant %q: use %s or %s", cfg.Grant,
			GrantAuthorizationCode, GrantClientCredentials)
	}
	return nil
}

// checkHTTPS allows https anywhere and http only to a loopback host: a
// token or a code never crosses a network in the clear.
func checkHTTPS(raw string) error {
	u, err := url.Parse(raw)
	if err != nil {
		return errors.New("the URL does not parse") // the parser's message quotes it whole
	}
	switch u.Scheme {
	case "https":
		return nil
	case "http":
		if isLoopback(u.Hostname()) {
			return nil
		}
		return fmt.Errorf("%s uses plain http to a host that is not loopback, so Plexus does not sign in to it; use https", shown(raw))
	default:
		return fmt.Errorf("%s: scheme %q is not https", shown(raw), u.Scheme)
	}
}

func isLoopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip, err := netip.ParseAddr(host)
	return err == nil && ip.IsLoopback()
}
