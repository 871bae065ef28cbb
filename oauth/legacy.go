package oauth

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/oauthex"
)

// metaLimit is the most of a metadata document read, as the SDK does.
const metaLimit = 1 << 20

// legacyAuthServerMeta is the 2025-03-26 fallback's authorization server:
// the MCP server publishes no protected resource metadata and the entry
// pins none, so the server's origin is the authorization server and its
// metadata is at <origin>/.well-known/oauth-authorization-server.
//
// RFC 8414 §3.3 has the metadata name the issuer it was asked for. Here,
// and only here, an issuer on the document's own origin (scheme, host and
// port) is accepted (<origin>/oauth, say), and is the issuer from then on:
// the iss check (RFC 9207), the stored sign-in, a client id's binding. No
// third party named this authorization server: it is derived from the URL
// the owner wrote, and whoever serves that origin's well-known path speaks
// for the origin whichever path its issuer names. Another origin, scheme
// or port is refused, as is any mismatch in OpenID discovery, in metadata
// that protected resource metadata named, and at authServerMetadataUrl.
// docs/mcp.md says why this opens no mix-up.
func (m *Manager) legacyAuthServerMeta(ctx context.Context, c *http.Client, origin string) (*oauthex.AuthServerMeta, *movedIssuer, error) {
	metaURL := origin + "/.well-known/oauth-authorization-server"
	doc, err := fetchMeta(ctx, c, metaURL)
	if err != nil {
		return nil, nil, fmt.Errorf("authorization server metadata of %s: %w", shown(origin), err)
	}
	if doc == nil { // none there: OpenID discovery, else the fixed endpoints
		asm, err := m.authServerMeta(ctx, c, origin, "", origin)
		return asm, nil, err
	}
	issuer := origin
	if claimed := doc.issuer(); !sameIssuer(claimed, origin) && onOrigin(claimed, metaURL) {
		issuer = claimed
	}
	// The SDK checks what was fetched (the issuer, PKCE, the endpoints'
	// schemes), against the issuer accepted.
	asm, err := oauthex.GetAuthServerMeta(ctx, metaURL, issuer, answering(nil, map[string]*document{metaURL: doc}))
	if err == nil && asm == nil {
		err = errors.New("no metadata")
	}
	if err != nil {
		return nil, nil, fmt.Errorf("authorization server metadata of %s: %w", shown(origin), err)
	}
	if issuer == origin {
		return asm, nil, nil
	}
	return asm, &movedIssuer{issuer: asm.Issuer, meta: doc}, nil
}

// onOrigin reports whether issuer is a valid issuer identifier (RFC 8414
// §2: no query, no fragment) on the origin of metaURL.
func onOrigin(issuer, metaURL string) bool {
	iu, err := url.Parse(issuer)
	if err != nil || iu.User != nil || iu.RawQuery != "" || iu.ForceQuery || iu.Fragment != "" || iu.Host == "" {
		return false
	}
	mu, err := url.Parse(metaURL)
	if err != nil {
		return false
	}
	return originOf(iu) == originOf(mu)
}

func originOf(u *url.URL) string {
	port := u.Port()
	if port == "" {
		port = map[string]string{"http": "80", "https": "443"}[strings.ToLower(u.Scheme)]
	}
	return strings.ToLower(u.Scheme) + "://" + strings.ToLower(u.Hostname()) + ":" + port
}

// document is a metadata document as fetched.
type document struct {
	body        []byte
	contentType string
}

func (d *document) issuer() string {
	var v struct {
		Issuer string `json:"issuer"`
	}
	if json.Unmarshal(d.body, &v) != nil {
		return ""
	}
	return v.Issuer
}

// fetchMeta gets a metadata document: nil when the server has none there
// (a 4xx, as the SDK takes it).
func fetchMeta(ctx context.Context, c *http.Client, u string) (*document, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return nil, fmt.Errorf("metadata request: %w", err)
	}
	resp, err := c.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	switch {
	case resp.StatusCode == http.StatusOK:
	case resp.StatusCode >= 400 && resp.StatusCode < 500:
		return nil, nil
	default:
		return nil, fmt.Errorf("status %d", resp.StatusCode)
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, metaLimit))
	if err != nil {
		return nil, fmt.Errorf("read the metadata: %w", err)
	}
	return &document{body: body, contentType: resp.Header.Get("Content-Type")}, nil
}

// movedIssuer is the legacy fallback's accepted issuer and its metadata as
// fetched and checked.
type movedIssuer struct {
	issuer string
	meta   *document
}

// client is c for the SDK's handler of a login: the SDK's own discovery
// would find no protected resource metadata, take the origin for the
// issuer and refuse the metadata, so its discovery requests are answered
// here: protected resource metadata naming the accepted issuer, at each
// place the SDK looks (Plexus found none at any), and the metadata
// checked above, at each URL the SDK derives from that issuer. Nothing
// else it asks (registration, the token) is answered but by the network.
func (mv *movedIssuer) client(c *http.Client, serverURL string, ch []oauthex.Challenge) (*http.Client, error) {
	docs := map[string]*document{}
	for _, p := range prmCandidates(serverURL, ch) {
		b, err := json.Marshal(oauthex.ProtectedResourceMetadata{Resource: p.resource, AuthorizationServers: []string{mv.issuer}})
		if err != nil {
			return nil, fmt.Errorf("protected resource metadata: %w", err)
		}
		docs[p.url] = &document{body: b, contentType: "application/json"}
	}
	iu, err := url.Parse(mv.issuer)
	if err != nil {
		return nil, fmt.Errorf("the issuer: %w", err)
	}
	origin, path := iu.Scheme+"://"+iu.Host, strings.Trim(iu.Path, "/")
	for _, u := range []string{
		origin + "/.well-known/oauth-authorization-server/" + path,
		origin + "/.well-known/openid-configuration/" + path,
		origin + "/" + path + "/.well-known/openid-configuration",
	} {
		docs[u] = mv.meta
	}
	base := c.Transport
	if base == nil {
		base = http.DefaultTransport
	}
	out := answering(base, docs)
	out.CheckRedirect, out.Timeout, out.Jar = c.CheckRedirect, c.Timeout, c.Jar
	return out, nil
}

// answering is a client that answers a GET of one of docs' URLs with that
// document, and sends anything else through next (refused when nil).
func answering(next http.RoundTripper, docs map[string]*document) *http.Client {
	return &http.Client{Transport: &answerer{next: next, docs: docs}}
}

type answerer struct {
	next http.RoundTripper
	docs map[string]*document
}

func (a *answerer) RoundTrip(req *http.Request) (*http.Response, error) {
	if d := a.docs[req.URL.String()]; d != nil && req.Method == http.MethodGet {
		if req.Body != nil {
			if err := req.Body.Close(); err != nil {
				return nil, fmt.Errorf("close the request: %w", err)
			}
		}
		return &http.Response{
			Status: "200 OK", StatusCode: http.StatusOK, Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
			Header:        http.Header{"Content-Type": {d.contentType}, "Content-Length": {strconv.Itoa(len(d.body))}},
			Body:          io.NopCloser(bytes.NewReader(d.body)),
			ContentLength: int64(len(d.body)), Request: req,
		}, nil
	}
	if a.next == nil {
		return nil, fmt.Errorf("%s: not asked for", shown(req.URL.String()))
	}
	return a.next.RoundTrip(req)
}
