package oauth

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/oauthex"
)

// discovery is what the sign-in request shows and what the client
// credentials grant and revocation need: the resource and its
// authorization server's metadata. The authorization-code flow itself
// rediscovers inside the SDK's handler; the two agree because both follow
// the same MCP spec order.
type discovery struct {
	resource        string
	scopesSupported []string // the protected resource's
	asm             *oauthex.AuthServerMeta
	// moved is set when the 2025-03-26 fallback accepted an issuer on the
	// server's origin other than the origin itself (see
	// [Manager.legacyAuthServerMeta]): the SDK's handler, which would
	// refuse it, is shown this discovery instead of its own.
	moved *movedIssuer
}

// discover finds the protected resource metadata (RFC 9728: from the
// challenge, else the well-known paths) and the authorization server's
// metadata (RFC 8414 or OpenID discovery, else the 2025-03-26 fallbacks).
// An issuer that does not match its metadata is refused (oauthex checks
// it), but for an issuer on the server's own origin in the 2025-03-26
// fallback ([Manager.legacyAuthServerMeta]); so is any endpoint that is
// not https outside loopback.
//
// What the upstream names (the challenge's resource_metadata, the
// metadata's authorization servers and endpoints) may not reach further
// in than the server itself: no loopback address for a server that is not
// on loopback, no private one for a public server. The daemon fetches
// them on a first 401, with no owner action. A URL's literal host is
// checked here; the address a name resolves to is checked when c dials it
// ([dialGuard]), c being the entry's client.
//
// asMetaURL, the entry's authServerMetadataUrl, pins the authorization
// server: its metadata must name the issuer its URL derives from (RFC 8414
// §3), and a server naming other authorization servers is refused.
func (m *Manager) discover(ctx context.Context, c *http.Client, serverURL string, ch []oauthex.Challenge, asMetaURL string) (*discovery, error) {
	base := serverURL
	if asMetaURL != "" {
		base = inner(serverURL, asMetaURL) // the owner chose it
	}
	prm := m.resourceMetadata(ctx, c, serverURL, ch)
	d := &discovery{resource: serverURL}
	issuer := ""
	if prm != nil {
		d.resource, d.scopesSupported = prm.Resource, prm.ScopesSupported
		issuer = prm.AuthorizationServers[0]
	} else {
		// 2025-03-26: the MCP server's origin is the authorization server.
		u, err := url.Parse(serverURL)
		if err != nil {
			return nil, fmt.Errorf("parse the server URL: %w", err)
		}
		issuer = u.Scheme + "://" + u.Host
	}
	var asm *oauthex.AuthServerMeta
	var err error
	if prm == nil && asMetaURL == "" {
		asm, d.moved, err = m.legacyAuthServerMeta(ctx, c, issuer)
	} else {
		asm, err = m.authServerMeta(ctx, c, issuer, asMetaURL, base)
	}
	if err != nil {
		return nil, err
	}
	if asMetaURL != "" && prm != nil && !slices.ContainsFunc(prm.AuthorizationServers, func(a string) bool { return sameIssuer(a, asm.Issuer) }) {
		return nil, fmt.Errorf("the server names the authorization server %s, but the entry pins %s (authServerMetadataUrl): refused",
			issuer, asm.Issuer)
	}
	d.asm = asm
	for _, e := range []string{asm.AuthorizationEndpoint, asm.TokenEndpoint, asm.RevocationEndpoint, asm.RegistrationEndpoint} {
		if e == "" {
			continue
		}
		if err := checkHTTPS(e); err != nil {
			return nil, fmt.Errorf("authorization server %s: %w", asm.Issuer, err)
		}
		if err := reachable(e, base); err != nil {
			return nil, fmt.Errorf("authorization server %s: %w", asm.Issuer, err)
		}
	}
	return d, nil
}

func sameIssuer(a, b string) bool { return strings.TrimSuffix(a, "/") == strings.TrimSuffix(b, "/") }

// resourceMetadata returns the first protected resource metadata found,
// or nil when the server publishes none.
func (m *Manager) resourceMetadata(ctx context.Context, hc *http.Client, serverURL string, ch []oauthex.Challenge) *oauthex.ProtectedResourceMetadata {
	for _, c := range prmCandidates(serverURL, ch) {
		if err := reachable(c.url, serverURL); err != nil {
			m.opts.Logger.Warn("oauth: the challenge's resource_metadata refused", "url", shown(c.url), "err", err)
			continue
		}
		prm, err := oauthex.GetProtectedResourceMetadata(ctx, c.url, c.resource, hc)
		if err != nil || prm == nil || len(prm.AuthorizationServers) == 0 {
			m.opts.Logger.Debug("oauth: no protected resource metadata here", "url", c.url, "err", err)
			continue
		}
		return prm
	}
	return nil
}

type prmCandidate struct{ url, resource string }

// prmCandidates lists where protected resource metadata may be, in the
// MCP spec's order: the challenge's resource_metadata, the well-known path
// inserted before the endpoint's path, the well-known path at the root.
func prmCandidates(serverURL string, ch []oauthex.Challenge) []prmCandidate {
	var out []prmCandidate
	for _, c := range ch {
		if u := c.Params["resource_metadata"]; u != "" {
			out = append(out, prmCandidate{u, serverURL})
			break
		}
	}
	u, err := url.Parse(serverURL)
	if err != nil {
		return out
	}
	origin := u.Scheme + "://" + u.Host
	if p := strings.Trim(u.Path, "/"); p != "" {
		out = append(out, prmCandidate{origin + "/.well-known/oauth-protected-resource/" + p, serverURL})
	}
	return append(out, prmCandidate{origin + "/.well-known/oauth-protected-resource", origin})
}

// authServerMeta fetches the metadata from the URL the entry names, else
// by discovery from the issuer (which may not reach further in than base),
// else builds the 2025-03-26 fallback.
func (m *Manager) authServerMeta(ctx context.Context, c *http.Client, issuer, asMetaURL, base string) (*oauthex.AuthServerMeta, error) {
	var asm *oauthex.AuthServerMeta
	var err error
	if asMetaURL != "" {
		if issuer, err = issuerOf(asMetaURL); err != nil {
			return nil, err
		}
		asm, err = oauthex.GetAuthServerMeta(ctx, asMetaURL, issuer, c)
		if err == nil && asm == nil {
			err = fmt.Errorf("no metadata at %s", shown(asMetaURL))
		}
	} else {
		if err := reachable(issuer, base); err != nil {
			return nil, fmt.Errorf("the authorization server the server names: %w", err)
		}
		asm, err = auth.GetAuthServerMetadata(ctx, issuer, c)
	}
	if err != nil {
		return nil, fmt.Errorf("authorization server metadata of %s: %w", shown(issuer), err)
	}
	if asm == nil {
		base := strings.TrimSuffix(issuer, "/")
		asm = &oauthex.AuthServerMeta{
			Issuer:                issuer,
			AuthorizationEndpoint: base + "/authorize",
			TokenEndpoint:         base + "/token",
			RegistrationEndpoint:  base + "/register",
		}
	}
	return asm, nil
}

// issuerOf is the issuer a metadata URL is derived from (RFC 8414 §3, and
// OpenID discovery's appended form): the metadata must name it.
func issuerOf(metaURL string) (string, error) {
	u, err := url.Parse(metaURL)
	if err == nil && u.Host != "" {
		origin := u.Scheme + "://" + u.Host
		for _, wk := range []string{"/.well-known/oauth-authorization-server", "/.well-known/openid-configuration"} {
			if rest, ok := strings.CutPrefix(u.Path, wk); ok {
				return origin + rest, nil
			}
			if pre, ok := strings.CutSuffix(u.Path, wk); ok {
				return origin + pre, nil
			}
		}
	}
	return "", fmt.Errorf("authServerMetadataUrl %s is not a metadata URL (https://issuer/.well-known/oauth-authorization-server or …/.well-known/openid-configuration)", shown(metaURL))
}

func challengeParam(ch []oauthex.Challenge, name string) string {
	for _, c := range ch {
		if c.Scheme == "bearer" && c.Params[name] != "" {
			return c.Params[name]
		}
	}
	return ""
}

// union returns a's scopes followed by those of b not in a.
func union(a, b []string) []string {
	out := append([]string(nil), a...)
	for _, s := range b {
		if !slices.Contains(out, s) {
			out = append(out, s)
		}
	}
	return out
}

// minus returns the scopes of a not in b.
func minus(a, b []string) []string {
	var out []string
	for _, s := range a {
		if !slices.Contains(b, s) {
			out = append(out, s)
		}
	}
	return out
}
