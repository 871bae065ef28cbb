package oauth

import (
	"context"
	"fmt"
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
}

// discover finds the protected resource metadata (RFC 9728: from the
// challenge, else the well-known paths) and the authorization server's
// metadata (RFC 8414 or OpenID discovery, else the 2025-03-26 fallbacks).
// An issuer that does not match its metadata is refused (oauthex checks
// it), as is any endpoint that is not https outside loopback.
func (m *Manager) discover(ctx context.Context, serverURL string, ch []oauthex.Challenge, asMetaURL string) (*discovery, error) {
	prm := m.resourceMetadata(ctx, serverURL, ch)
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
	asm, err := m.authServerMeta(ctx, issuer, asMetaURL)
	if err != nil {
		return nil, err
	}
	d.asm = asm
	for _, e := range []string{asm.AuthorizationEndpoint, asm.TokenEndpoint, asm.RevocationEndpoint} {
		if e == "" {
			continue
		}
		if err := checkHTTPS(e); err != nil {
			return nil, fmt.Errorf("authorization server %s: %w", asm.Issuer, err)
		}
	}
	return d, nil
}

// resourceMetadata returns the first protected resource metadata found,
// or nil when the server publishes none.
func (m *Manager) resourceMetadata(ctx context.Context, serverURL string, ch []oauthex.Challenge) *oauthex.ProtectedResourceMetadata {
	for _, c := range prmCandidates(serverURL, ch) {
		prm, err := oauthex.GetProtectedResourceMetadata(ctx, c.url, c.resource, m.opts.HTTPClient)
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
// by discovery from the issuer, else builds the 2025-03-26 fallback.
func (m *Manager) authServerMeta(ctx context.Context, issuer, asMetaURL string) (*oauthex.AuthServerMeta, error) {
	var asm *oauthex.AuthServerMeta
	var err error
	if asMetaURL != "" {
		asm, err = oauthex.GetAuthServerMeta(ctx, asMetaURL, issuer, m.opts.HTTPClient)
	} else {
		asm, err = auth.GetAuthServerMetadata(ctx, issuer, m.opts.HTTPClient)
	}
	if err != nil {
		return nil, fmt.Errorf("authorization server metadata of %s: %w", issuer, err)
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
