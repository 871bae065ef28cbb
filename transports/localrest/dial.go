package localrest

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"net/url"
	"strings"
	"syscall"
	"time"

	"github.com/plexus-gw/plexus"
)

// errNotLoopback is returned by the dialer for an address that is not a
// loopback address.
var errNotLoopback = errors.New("not a loopback address")

// loopbackOnly is the dialer's Control hook. It runs on the resolved
// address, after name resolution and before the connection is made, so a
// "localhost" that resolves elsewhere (an edited hosts file) is refused too.
func loopbackOnly(_, address string, _ syscall.RawConn) error {
	host, _, err := net.SplitHostPort(address)
	if err != nil {
		return fmt.Errorf("%w: %s", errNotLoopback, address)
	}
	ip, err := netip.ParseAddr(host)
	if err != nil || !ip.Unmap().IsLoopback() {
		return fmt.Errorf("%w: %s", errNotLoopback, address)
	}
	return nil
}

// parseBase checks the base URL the locator found: plain http, a loopback
// IP or "localhost" (no other name, so no resolver is trusted to keep the
// call on the machine), no credentials, query or fragment.
func parseBase(base string) (*url.URL, error) {
	u, err := url.Parse(base)
	if err != nil {
		return nil, fmt.Errorf("invalid base URL: %w", err)
	}
	if u.Scheme != "http" {
		return nil, fmt.Errorf("base URL scheme %q is not http", u.Scheme)
	}
	if u.User != nil || u.RawQuery != "" || u.Fragment != "" || u.Opaque != "" {
		return nil, errors.New("base URL carries credentials, a query or a fragment")
	}
	host := u.Hostname()
	if !strings.EqualFold(host, "localhost") {
		ip, err := netip.ParseAddr(host)
		if err != nil || ip.Zone() != "" || !ip.Unmap().IsLoopback() {
			return nil, fmt.Errorf("host %q is not a loopback address", host)
		}
	}
	return u, nil
}

// hostPort is the base's dial address, port 80 when it names none.
func hostPort(u *url.URL) string {
	if u.Port() != "" {
		return u.Host
	}
	return net.JoinHostPort(u.Hostname(), "80")
}

// appName names the service in messages.
func appName(h plexus.LocalServiceHint) string {
	if h.App != "" {
		return h.App
	}
	return "local"
}

// locate asks the locator for the service's base URL and checks it.
func (t *Transport) locate(ctx context.Context, hint plexus.LocalServiceHint) (*url.URL, *plexus.Error) {
	base, err := t.locator.Locate(ctx, hint)
	if err != nil {
		return nil, plexus.WrapError(plexus.CodeSourceUnavailable, err,
			fmt.Sprintf("the %s service could not be located", appName(hint)))
	}
	u, err := parseBase(base)
	if err != nil {
		return nil, plexus.WrapError(plexus.CodeTransportError, err,
			fmt.Sprintf("refused to call the %s service: local-rest only calls plain http on loopback (%v)", appName(hint), err))
	}
	return u, nil
}

// Check reports whether the service behind hint accepts connections. It
// only opens and closes a TCP connection (no request, so no secret and no
// authentication is needed), bounded by ctx and by Options.HealthTimeout.
// The detail names the service and its loopback address, nothing else.
func (t *Transport) Check(ctx context.Context, hint plexus.LocalServiceHint) plexus.Health {
	u, perr := t.locate(ctx, hint)
	if perr != nil {
		return plexus.Health{Status: plexus.HealthUnavailable, Detail: perr.Message}
	}
	ctx, cancel := context.WithTimeout(ctx, t.healthTimeout)
	defer cancel()
	addr := hostPort(u)
	conn, err := t.dialer.DialContext(ctx, "tcp", addr)
	if err != nil {
		if errors.Is(err, errNotLoopback) {
			return plexus.Health{Status: plexus.HealthUnavailable, Detail: fmt.Sprintf("the %s service does not resolve to a loopback address", appName(hint))}
		}
		return plexus.Health{Status: plexus.HealthUnavailable, Detail: unreachable(hint, u)}
	}
	conn.Close()
	return plexus.Health{Status: plexus.HealthOK}
}

func unreachable(hint plexus.LocalServiceHint, u *url.URL) string {
	return fmt.Sprintf("the %s service is not reachable at %s; is it running?", appName(hint), u.Redacted())
}

// newDialer is the only way this package opens connections.
func newDialer() *net.Dialer {
	return &net.Dialer{Timeout: 10 * time.Second, KeepAlive: 30 * time.Second, Control: loopbackOnly}
}

var _ plexus.RequirementsChecker = (*Transport)(nil)

// Requirements: an extension's capabilities on this transport need its
// local service answering ([Transport.Check] of the manifest's hint); one
// without a hint needs nothing checked ahead of a call.
func (t *Transport) Requirements(m plexus.ExtensionManifest, _ plexus.ExtensionCapabilityDecl) []plexus.Requirement {
	if m.ServiceHint == nil {
		return nil
	}
	hint := *m.ServiceHint
	return []plexus.Requirement{{Key: "service", Stage: plexus.StageService,
		Check: func(ctx context.Context) plexus.Health { return t.Check(ctx, hint) }}}
}
