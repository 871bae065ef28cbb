package oauth

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"

	"golang.org/x/net/dns/dnsmessage"
)

// dnsServer is a real DNS server on loopback UDP answering A and AAAA
// queries from names (fully qualified), and a resolver that asks only it:
// the names the tests use resolve where a hostile upstream's would.
func dnsServer(t *testing.T, names map[string]string) *net.Resolver {
	t.Helper()
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := pc.Close(); err != nil {
			t.Errorf("close the DNS server: %v", err)
		}
	})
	go func() {
		buf := make([]byte, 1500)
		for {
			n, from, err := pc.ReadFrom(buf)
			if err != nil {
				return // closed
			}
			if out := dnsAnswer(buf[:n], names); out != nil {
				if _, err := pc.WriteTo(out, from); err != nil {
					return
				}
			}
		}
	}()
	addr := pc.LocalAddr().String()
	return &net.Resolver{PreferGo: true, Dial: func(ctx context.Context, _, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, "udp", addr)
	}}
}

func dnsAnswer(query []byte, names map[string]string) []byte {
	var p dnsmessage.Parser
	h, err := p.Start(query)
	if err != nil {
		return nil
	}
	q, err := p.Question()
	if err != nil {
		return nil
	}
	b := dnsmessage.NewBuilder(nil, dnsmessage.Header{ID: h.ID, Response: true, Authoritative: true})
	b.EnableCompression()
	if b.StartQuestions() != nil || b.Question(q) != nil || b.StartAnswers() != nil {
		return nil
	}
	if a, err := netip.ParseAddr(names[strings.ToLower(q.Name.String())]); err == nil {
		rh := dnsmessage.ResourceHeader{Name: q.Name, Class: dnsmessage.ClassINET, TTL: 0}
		switch {
		case q.Type == dnsmessage.TypeA && a.Is4():
			err = b.AResource(rh, dnsmessage.AResource{A: a.As4()})
		case q.Type == dnsmessage.TypeAAAA && a.Is6():
			err = b.AAAAResource(rh, dnsmessage.AAAAResource{AAAA: a.As16()})
		}
		if err != nil {
			return nil
		}
	}
	out, err := b.Finish()
	if err != nil {
		return nil
	}
	return out
}

var testNames = map[string]string{
	"mcp.public.test.": "203.0.113.7", // TEST-NET-3: public as far as the guard knows
	"corp.test.":       "10.0.0.9",
	"srv.test.":        "127.0.0.1",
	"loop.test.":       "127.0.0.1",
	"v6.test.":         "::1",
	"ten.test.":        "10.0.0.5",
	"meta.test.":       "169.254.169.254",
	"ula.test.":        "fd00::1",
	"zero.test.":       "0.0.0.0",
	"pin.test.":        "127.0.0.1",
}

// TestDialGuard: a host name the upstream names is refused when the
// address it resolves to is further in than the MCP server, whatever its
// name says (the literal check takes a name for the internet); the dial
// to a name that stays within the server's reach goes through. The DNS
// answers come from a real DNS server on loopback.
func TestDialGuard(t *testing.T) {
	var hits atomic.Int32
	target := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		http.NotFound(w, r)
	}))
	defer target.Close()
	port := target.Listener.Addr().(*net.TCPAddr).AddrPort().Port()
	at := func(host string) string {
		return "http://" + net.JoinHostPort(host, strconv.Itoa(int(port))) + "/.well-known/x?token=canary"
	}
	res := dnsServer(t, testNames)
	for _, tc := range []struct {
		name, server, pin, target string
		refused                   string // the reach refused, "" for let through
	}{
		{"PublicServerLoopbackName", "https://mcp.public.test/mcp", "", "loop.test", "loopback"},
		{"PublicServerLoopbackV6", "https://mcp.public.test/mcp", "", "v6.test", "loopback"},
		{"PublicServerUnspecified", "https://mcp.public.test/mcp", "", "zero.test", "loopback"},
		{"PublicServerPrivate", "https://mcp.public.test/mcp", "", "ten.test", "a private network"},
		{"PublicServerLinkLocal", "https://mcp.public.test/mcp", "", "meta.test", "a private network"},
		{"PublicServerULA", "https://mcp.public.test/mcp", "", "ula.test", "a private network"},
		{"PrivateServerLoopback", "https://corp.test/mcp", "", "loop.test", "loopback"},
		{"LiteralLoopbackServer", "http://127.0.0.1:1/mcp", "", "loop.test", ""},
		{"NamedLoopbackServer", "http://srv.test:1/mcp", "", "loop.test", ""},
		{"PinnedByOwner", "https://mcp.public.test/mcp", at("pin.test"), "pin.test", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := hits.Load()
			c := guardedClient(tc.server, tc.pin, res)
			resp, err := c.Get(at(tc.target))
			if tc.refused == "" {
				if err != nil {
					t.Fatalf("GET %s for %s: %v, want let through", tc.target, tc.server, err)
				}
				if err := resp.Body.Close(); err != nil {
					t.Error(err)
				}
				if hits.Load() != before+1 {
					t.Errorf("the server at %s was not asked", tc.target)
				}
				return
			}
			var de *DialRefusedError
			if !errors.As(err, &de) {
				t.Fatalf("GET %s for %s: err = %v, want a DialRefusedError", tc.target, tc.server, err)
			}
			if de.Host != tc.target || de.where() != tc.refused {
				t.Errorf("refused %s on %s, want %s on %s", de.Host, de.where(), tc.target, tc.refused)
			}
			if msg := de.Error(); !strings.Contains(msg, tc.target) || strings.Contains(msg, "canary") {
				t.Errorf("error %q: want the host named, nothing of the request", msg)
			}
			if hits.Load() != before {
				t.Errorf("the server at %s was asked", tc.target)
			}
		})
	}
}

// TestDialGuardPrivate: a server on a private network (by its name's
// address) may name hosts on private networks, not on loopback; a public
// server neither. The policy is a function of the address dialed.
func TestDialGuardPrivate(t *testing.T) {
	res := dnsServer(t, testNames)
	for _, tc := range []struct {
		server, addr string
		ok           bool
	}{
		{"https://corp.test/mcp", "10.0.0.5:443", true},
		{"https://corp.test/mcp", "[fd00::1]:443", true},
		{"https://corp.test/mcp", "127.0.0.1:443", false},
		{"https://10.0.0.9/mcp", "192.168.1.1:443", true},
		{"https://mcp.public.test/mcp", "10.0.0.5:443", false},
		{"https://mcp.public.test/mcp", "[::ffff:10.0.0.5]:443", false},
		{"https://mcp.public.test/mcp", "198.51.100.4:443", true},
		{"https://unresolvable.test/mcp", "10.0.0.5:443", false},
	} {
		g := &dialGuard{base: []string{tc.server}, resolver: res}
		if err := g.allow(t.Context(), "named.test", tc.addr); (err == nil) != tc.ok {
			t.Errorf("server %s dialing %s: err = %v, want ok %v", tc.server, tc.addr, err, tc.ok)
		}
	}
}

// TestDialGuardRefusesSharedAddressSpace: 100.64.0.0/10 (RFC 6598: carrier-
// grade NAT, a Tailscale tailnet with its 100.100.100.100) is a private
// network, in whatever form the address comes: a public server's metadata
// cannot send discovery, registration or token requests into it, by name
// or by a literal URL; a server inside it may.
func TestDialGuardRefusesSharedAddressSpace(t *testing.T) {
	g := &dialGuard{own: []string{"mcp.example.com"}, base: []string{"https://mcp.example.com/mcp"},
		resolver: dnsServer(t, map[string]string{"mcp.example.com.": "93.184.216.34"})}
	for _, a := range []string{"100.100.100.100:443", "100.64.0.1:443", "100.127.255.254:443", "[::ffff:100.101.102.103]:443"} {
		if err := g.allow(context.Background(), "as.example.net", a); err == nil {
			t.Errorf("%s allowed", a)
		}
	}
	for _, a := range []string{"100.63.255.255:443", "100.128.0.1:443"} { // just outside it
		if err := g.allow(context.Background(), "as.example.net", a); err != nil {
			t.Errorf("%s refused: %v", a, err)
		}
	}
	for _, tc := range []struct {
		target, base string
		ok           bool
	}{
		{"https://100.100.100.100/token", "https://mcp.example.com/mcp", false},
		{"https://[::ffff:100.64.0.1]/token", "https://mcp.example.com/mcp", false},
		{"https://100.101.1.2/token", "https://100.64.0.7/mcp", true},
		{"https://127.0.0.1/token", "https://100.64.0.7/mcp", false},
	} {
		if err := reachable(tc.target, tc.base); (err == nil) != tc.ok {
			t.Errorf("reachable(%s, %s) = %v, want ok %v", tc.target, tc.base, err, tc.ok)
		}
	}
	tailnet := &dialGuard{base: []string{"https://100.64.0.7/mcp"}}
	if err := tailnet.allow(context.Background(), "as.tailnet", "100.100.100.100:443"); err != nil {
		t.Errorf("a server in the shared address space refused its own network: %v", err)
	}
}
