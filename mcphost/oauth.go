package mcphost

// A url server's "oauth" object: how Plexus signs in to a remote MCP
// server that asks for it, in the shape Claude Code's .mcp.json uses
// (clientId, callbackPort, authServerMetadataUrl, scopes), plus what a
// confidential client or a person-less sign-in needs.

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/url"
	"slices"
	"strings"

	"github.com/plexus-gw/plexus/platform"
	"github.com/plexus-gw/plexus/transports/mcpclient"
)

// The grants an "oauth" object may name.
const (
	GrantAuthorizationCode = "authorization_code"
	GrantClientCredentials = "client_credentials"
)

// oauthKeys are the keys of an "oauth" object Plexus reads; others are
// reported (as "oauth.<key>") and kept in the file.
var oauthKeys = []string{"clientId", "clientSecret", "privateKey", "callbackPort", "authServerMetadataUrl",
	"clientMetadataUrl", "scopes", "grant"}

// OAuth is a server entry's "oauth" object as written. ClientSecret and
// PrivateKey are secret references ("${secret:NAME}"), never values: a
// value in mcp.json would sit in a file the owner copies between hosts.
type OAuth struct {
	ClientID              string `json:"clientId,omitempty"`
	ClientSecret          string `json:"clientSecret,omitempty"`
	PrivateKey            string `json:"privateKey,omitempty"`
	CallbackPort          int    `json:"callbackPort,omitempty"`
	AuthServerMetadataURL string `json:"authServerMetadataUrl,omitempty"`
	ClientMetadataURL     string `json:"clientMetadataUrl,omitempty"`
	// Scopes is what the entry pins, in order; written as Claude Code
	// does, one space-separated string (a JSON array is read too).
	Scopes []string `json:"scopes,omitempty"`
	// Grant is GrantAuthorizationCode (also when empty) or
	// GrantClientCredentials.
	Grant string `json:"grant,omitempty"`
}

// MarshalJSON writes scopes as Claude Code's one space-separated string.
func (o OAuth) MarshalJSON() ([]byte, error) {
	type plain OAuth
	var w struct {
		plain
		Scopes string `json:"scopes,omitempty"`
	}
	w.plain, w.Scopes = plain(o), strings.Join(o.Scopes, " ")
	return json.Marshal(w)
}

// GrantOrDefault is the grant the entry asks for.
func (o OAuth) GrantOrDefault() string {
	if o.Grant == "" {
		return GrantAuthorizationCode
	}
	return o.Grant
}

// decodeOAuth reads an entry's "oauth" value; ignored are its keys Plexus
// does not read, as "oauth.<key>". problem names a value of the wrong type.
func decodeOAuth(raw json.RawMessage) (o *OAuth, ignored []string, problem string) {
	var keys map[string]json.RawMessage
	if err := json.Unmarshal(raw, &keys); err != nil || keys == nil {
		return nil, nil, `"oauth" must be an object ({"clientId": …, "scopes": "…"})`
	}
	for k := range keys {
		if !slices.Contains(oauthKeys, k) {
			ignored = append(ignored, "oauth."+k)
		}
	}
	var typed struct {
		OAuth
		Scopes json.RawMessage `json:"scopes"`
	}
	if err := json.Unmarshal(raw, &typed); err != nil {
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) {
			return nil, nil, fmt.Sprintf("oauth.%s must be %s", strings.TrimPrefix(te.Field, "OAuth."), te.Type.String())
		}
		return nil, nil, "oauth: " + err.Error()
	}
	o = &typed.OAuth
	scopes, problem := decodeScopes(typed.Scopes)
	o.Scopes = scopes
	return o, ignored, problem
}

// decodeScopes reads "scopes": a space-separated string (Claude Code's
// shape) or an array of strings.
func decodeScopes(raw json.RawMessage) ([]string, string) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return nil, ""
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return strings.Fields(s), ""
	}
	var list []string
	if json.Unmarshal(raw, &list) != nil {
		return nil, `oauth.scopes must be a string of space-separated scopes ("repo read:org")`
	}
	var out []string
	for _, sc := range list {
		out = append(out, strings.Fields(sc)...)
	}
	return out, ""
}

// checkOAuth returns what is wrong with s's "oauth" object, "" when
// nothing is (or there is none).
func checkOAuth(s Server) string {
	o := s.OAuth
	if o == nil {
		return ""
	}
	if s.URL == "" {
		return `"oauth" signs in to a remote server: only a "url" server takes it`
	}
	for k := range s.Headers {
		if strings.EqualFold(k, "Authorization") {
			return `headers.Authorization and "oauth" both authorize the server: keep one`
		}
	}
	for _, sec := range []struct{ key, v string }{{"clientSecret", o.ClientSecret}, {"privateKey", o.PrivateKey}} {
		if p := secretOnly(sec.key, sec.v); p != "" {
			return p
		}
	}
	switch {
	case o.CallbackPort < 0 || o.CallbackPort > 65535:
		return "oauth.callbackPort must be a port, 1 to 65535"
	case strings.ContainsAny(o.ClientID, "\x00\r\n"):
		return "oauth.clientId holds a NUL, CR or LF"
	}
	if p := checkMetadataURL("authServerMetadataUrl", o.AuthServerMetadataURL); p != "" {
		return p
	}
	if p := checkClientMetadataURL(o.ClientMetadataURL); p != "" {
		return p
	}
	for _, sc := range o.Scopes {
		if strings.ContainsAny(sc, "\x00\r\n\"\\") {
			return fmt.Sprintf("oauth.scopes: %q is not a scope", sc)
		}
	}
	switch o.Grant {
	case "", GrantAuthorizationCode:
	case GrantClientCredentials:
		if o.ClientID == "" || o.ClientSecret == "" && o.PrivateKey == "" {
			return `oauth.grant "client_credentials" signs in with no person: it needs clientId and one of clientSecret or privateKey`
		}
	default:
		return fmt.Sprintf(`oauth.grant %q is not one of authorization_code, client_credentials`, o.Grant)
	}
	return ""
}

// secretOnly returns the problem with a credential's value v of key: it
// must be exactly one secret reference.
func secretOnly(key, v string) string {
	if v == "" {
		return ""
	}
	m := secretRef.FindStringSubmatch(v)
	if m == nil || m[0] != v {
		return fmt.Sprintf("oauth.%s must name a secret, not hold a value: store it with plexus secrets set <name>, then write \"%s\": \"${secret:<name>}\"", key, key)
	}
	if !platform.ValidSecretName(m[1]) {
		return fmt.Sprintf("oauth.%s names the secret %q, which is not a secret name", key, m[1])
	}
	return ""
}

// checkMetadataURL checks a URL Plexus fetches metadata from: https, or
// plain http to a loopback host (a local authorization server).
func checkMetadataURL(key, v string) string {
	if v == "" {
		return ""
	}
	u, err := url.Parse(v)
	switch {
	case err != nil || u.Host == "" || u.User != nil:
		return fmt.Sprintf("oauth.%s must be an absolute https URL without credentials", key)
	case u.Scheme == "https":
	case u.Scheme == "http" && loopbackHost(u.Hostname()):
	default:
		return fmt.Sprintf("oauth.%s must be an https URL (plain http only to a loopback host)", key)
	}
	return ""
}

// checkClientMetadataURL checks a Client ID Metadata Document's URL: the
// client id itself, so https with a path (the spec's rule: an
// authorization server refuses anything else).
func checkClientMetadataURL(v string) string {
	if v == "" {
		return ""
	}
	u, err := url.Parse(v)
	switch {
	case err != nil || u.Scheme != "https" || u.Host == "" || u.User != nil || u.Fragment != "":
		return "oauth.clientMetadataUrl must be an https URL (the Client ID Metadata Document you host), without credentials or fragment"
	case u.Path == "" || u.Path == "/":
		return "oauth.clientMetadataUrl must name a document, not the site's root (https://example.com/plexus-client.json)"
	}
	return ""
}

// loopbackHost reports whether host is "localhost" or a loopback IP.
func loopbackHost(host string) bool {
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// oauthSecrets are the "oauth" object's secret references by key.
func (s Server) oauthSecrets() map[string]string {
	if s.OAuth == nil {
		return nil
	}
	return map[string]string{"oauth.clientSecret": s.OAuth.ClientSecret, "oauth.privateKey": s.OAuth.PrivateKey}
}

// SignInConfig is a server's "oauth" object with its secrets resolved,
// for the OAuth client alone: ClientSecret and PrivateKey are values and
// never go to a log, an error or the journal.
type SignInConfig struct {
	ClientID, ClientSecret, PrivateKey string
	CallbackPort                       int
	AuthServerMetadataURL              string
	ClientMetadataURL                  string
	Scopes                             []string
	Grant                              string
}

// signIn is server s's OAuth plumbing for its client: every url server
// without its own Authorization header signs in when it asks (with its
// "oauth" object, or by discovery and registration alone). Its secrets
// are read now, like env and headers.
func (m *Manager) signIn(s Server) (*mcpclient.SignIn, error) {
	if m.cfg.SignIns == nil || s.URL == "" {
		return nil, nil
	}
	for k := range s.Headers {
		if strings.EqualFold(k, "Authorization") {
			return nil, nil // the owner's header is the credential
		}
	}
	var cfg SignInConfig
	if o := s.OAuth; o != nil {
		sec, err := ResolveSecrets(s.oauthSecrets(), m.cfg.Secret)
		if err != nil {
			return nil, err
		}
		cfg = SignInConfig{ClientID: o.ClientID, ClientSecret: sec["oauth.clientSecret"], PrivateKey: sec["oauth.privateKey"],
			CallbackPort: o.CallbackPort, AuthServerMetadataURL: o.AuthServerMetadataURL, ClientMetadataURL: o.ClientMetadataURL,
			Scopes: slices.Clone(o.Scopes), Grant: o.GrantOrDefault()}
	}
	if cfg.Grant == "" {
		cfg.Grant = GrantAuthorizationCode
	}
	return &mcpclient.SignIn{Handler: m.cfg.SignIns.Handler(s.Name, s.URL, cfg), Needed: m.cfg.SignIns.Needed}, nil
}

// SignedIn tells server name's client that the owner signed in: a client
// waiting for it connects at once. An unknown name is ignored.
func (m *Manager) SignedIn(name string) {
	m.mu.Lock()
	run := m.servers[name]
	m.mu.Unlock()
	if run != nil {
		run.client.SignedIn()
	}
}

// SignsIn reports whether server name runs and signs in with OAuth (a
// url server without its own Authorization header): only then is there
// a sign-in to start.
func (m *Manager) SignsIn(name string) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	run := m.servers[name]
	return run != nil && run.signsIn
}

// SignedOut tells server name's client that its tokens are gone: it drops
// its session and waits for a new sign-in. An unknown name is ignored.
func (m *Manager) SignedOut(name string) {
	m.mu.Lock()
	run := m.servers[name]
	m.mu.Unlock()
	if run != nil {
		run.client.SignedOut()
	}
}
