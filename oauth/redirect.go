package oauth

import (
	"errors"
	"fmt"
	"net/http"
	"net/netip"
	"net/url"
	"strings"
)

// ProtectRedirects returns a copy of c whose redirects never carry a
// token to another origin. net/http keeps the Authorization header on a
// redirect to the same host name (any port, any scheme) and to its
// subdomains; an MCP server's token is for its own origin only (scheme,
// host and port), so the header is dropped when a redirect leaves it, and
// a redirect from https to http is refused, as is one into loopback or a
// private network from a URL that was not there. The source's transport and the
// Manager use such a client. c's own CheckRedirect, if any, still runs.
func ProtectRedirects(c *http.Client) *http.Client {
	out := *c
	next := c.CheckRedirect
	out.CheckRedirect = func(req *http.Request, via []*http.Request) error {
		prev := via[len(via)-1]
		if prev.URL.Scheme == "https" && req.URL.Scheme != "https" {
			return fmt.Errorf("redirect from %s to plain http refused", prev.URL.Host)
		}
		if origin(req) != origin(via[0]) {
			req.Header.Del("Authorization")
		}
		if err := reachable(req.URL.String(), via[0].URL.String()); err != nil {
			return fmt.Errorf("redirect refused: %w", err)
		}
		if next != nil {
			return next(req, via)
		}
		if len(via) >= 10 {
			return errors.New("stopped after 10 redirects")
		}
		return nil
	}
	return &out
}

// reach is how far in a host is: the internet, a private network, this
// machine. Only literal addresses and "localhost" are known from a URL; a
// name is taken for the internet, and the dial checks the address it
// resolves to ([dialGuard]).
type reach int

const (
	reachPublic reach = iota
	reachPrivate
	reachLoopback
)

func (r reach) where() string {
	switch r {
	case reachLoopback:
		return "loopback"
	case reachPrivate:
		return "a private network"
	}
	return "the internet"
}

func reachOf(raw string) reach {
	u, err := url.Parse(raw)
	if err != nil {
		return reachLoopback // unknown: the most inward, refused from outside
	}
	host := strings.TrimSuffix(strings.ToLower(u.Hostname()), ".")
	if host == "localhost" || strings.HasSuffix(host, ".localhost") {
		return reachLoopback
	}
	ip, err := netip.ParseAddr(host)
	if err != nil {
		return reachPublic
	}
	return reachOfAddr(ip)
}

func reachOfAddr(ip netip.Addr) reach {
	ip = ip.Unmap()
	switch {
	case ip.IsLoopback() || ip.IsUnspecified(): // a dial to 0.0.0.0 or :: reaches this machine
		return reachLoopback
	case ip.IsPrivate() || ip.IsLinkLocalUnicast() || ip.IsLinkLocalMulticast() || sharedAddressSpace(ip):
		return reachPrivate
	}
	return reachPublic
}

// sharedAddressSpace reports whether ip is in 100.64.0.0/10 (RFC 6598):
// not routed on the internet but behind a carrier-grade NAT or in a
// Tailscale tailnet (100.100.100.100 is its resolver), so a network of
// the owner's that [netip.Addr.IsPrivate] does not count.
func sharedAddressSpace(ip netip.Addr) bool {
	return netip.PrefixFrom(netip.AddrFrom4([4]byte{100, 64, 0, 0}), 10).Contains(ip.Unmap())
}

// reachable refuses a URL the upstream named that is further in than
// base, the URL it came from.
func reachable(target, base string) error {
	if reachOf(target) > reachOf(base) {
		return fmt.Errorf("%s is on loopback or a private network, and %s is not", shown(target), shown(base))
	}
	return nil
}

// inner is the one of a and b that reaches further in.
func inner(a, b string) string {
	if reachOf(b) > reachOf(a) {
		return b
	}
	return a
}

func origin(r *http.Request) string {
	host := strings.ToLower(r.URL.Hostname())
	port := r.URL.Port()
	if port == "" {
		port = map[string]string{"http": "80", "https": "443"}[r.URL.Scheme]
	}
	return r.URL.Scheme + "://" + host + ":" + port
}
