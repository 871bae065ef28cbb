package oauth

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"slices"
	"strings"
	"syscall"
	"time"
)

// DialRefusedError is the error of a request to a host the upstream named
// (a challenge's resource_metadata, an authorization server, an endpoint
// in its metadata) whose name resolved to an address further in than the
// MCP server: loopback for a server that is not on loopback, a private
// network for a public one. It names the host and the address, nothing
// of the request.
type DialRefusedError struct {
	Host string     // the host name the URL named
	Addr netip.Addr // the address it resolved to
	reach
}

func (e *DialRefusedError) Error() string {
	return fmt.Sprintf("%s resolves to %s, on %s, and the MCP server is not there: refused", e.Host, e.Addr, e.where())
}

// dialGuard applies the discovery check (see [reachable]) to the address
// actually dialed, so a name that resolves inward is refused as its
// literal address would be, a DNS answer that changes between a check and
// the dial (rebinding) included.
//
// The hosts the owner wrote (the server's, authServerMetadataUrl's) are
// dialed as before: the owner chose them. How far in the server is comes
// from its URL, else from the addresses its name resolves to, so a server
// on a private network may name an authorization server there.
type dialGuard struct {
	own      []string // lower-case host names the owner wrote
	base     []string // the owner's URLs: the server's, authServerMetadataUrl
	resolver *net.Resolver
}

// guardedClient is the client of one server entry's OAuth requests: no
// proxy from the environment (the requests carry codes, secrets and
// tokens, and the checks must see the real peer), no connection kept
// between requests (each dial is checked for the entry that makes it),
// redirects protected.
func guardedClient(serverURL, asMetaURL string, r *net.Resolver) *http.Client {
	g := &dialGuard{resolver: r}
	for _, raw := range []string{serverURL, asMetaURL} {
		if u, err := url.Parse(raw); err == nil && u.Host != "" {
			g.own = append(g.own, strings.ToLower(u.Hostname()))
			g.base = append(g.base, raw)
		}
	}
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.Proxy = nil
	t.DisableKeepAlives = true
	t.DialContext = g.dial
	return ProtectRedirects(&http.Client{Transport: t})
}

func (g *dialGuard) dial(ctx context.Context, network, addr string) (net.Conn, error) {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, fmt.Errorf("dial %s: %w", addr, err)
	}
	d := &net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second, Resolver: g.resolver}
	if !slices.Contains(g.own, strings.ToLower(host)) {
		d.Control = func(_, address string, _ syscall.RawConn) error { return g.allow(ctx, host, address) }
	}
	return d.DialContext(ctx, network, addr)
}

// allow refuses address, the one host resolved to, when it is further in
// than the server.
func (g *dialGuard) allow(ctx context.Context, host, address string) error {
	ap, err := netip.ParseAddrPort(address)
	if err != nil {
		return fmt.Errorf("dial %s: %w", host, err)
	}
	r := reachOfAddr(ap.Addr())
	if r == reachPublic || r <= g.reach(ctx, r) {
		return nil
	}
	return &DialRefusedError{Host: host, Addr: ap.Addr().Unmap(), reach: r}
}

// reach is how far in the server is, looked at only as far as need: its
// URL's literal host first, then what its name resolves to. A name that
// does not resolve counts as public.
func (g *dialGuard) reach(ctx context.Context, need reach) reach {
	out := reachPublic
	for _, b := range g.base {
		out = max(out, reachOf(b))
	}
	for _, b := range g.base {
		if out >= need {
			break
		}
		u, err := url.Parse(b)
		if err != nil {
			continue
		}
		addrs, err := g.lookup(ctx, u.Hostname())
		if err != nil {
			continue
		}
		for _, a := range addrs {
			out = max(out, reachOfAddr(a))
		}
	}
	return out
}

func (g *dialGuard) lookup(ctx context.Context, host string) ([]netip.Addr, error) {
	r := g.resolver
	if r == nil {
		r = net.DefaultResolver
	}
	return r.LookupNetIP(ctx, "ip", host)
}
