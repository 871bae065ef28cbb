package oauth

import (
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/modelcontextprotocol/go-sdk/oauthex"

	"github.com/plexus-gw/plexus/internal/plexustest"
	"github.com/plexus-gw/plexus/platform"
)

func TestPRMCandidates(t *testing.T) {
	challenge := []oauthex.Challenge{{Scheme: "bearer", Params: map[string]string{"resource_metadata": "https://mcp.example/meta"}}}
	for _, tc := range []struct {
		name, server string
		ch           []oauthex.Challenge
		want         []prmCandidate
	}{
		{"Challenge", "https://mcp.example/v1/mcp", challenge, []prmCandidate{
			{"https://mcp.example/meta", "https://mcp.example/v1/mcp"},
			{"https://mcp.example/.well-known/oauth-protected-resource/v1/mcp", "https://mcp.example/v1/mcp"},
			{"https://mcp.example/.well-known/oauth-protected-resource", "https://mcp.example"},
		}},
		{"WellKnown", "https://mcp.example/mcp", nil, []prmCandidate{
			{"https://mcp.example/.well-known/oauth-protected-resource/mcp", "https://mcp.example/mcp"},
			{"https://mcp.example/.well-known/oauth-protected-resource", "https://mcp.example"},
		}},
		{"Root", "https://mcp.example", nil, []prmCandidate{
			{"https://mcp.example/.well-known/oauth-protected-resource", "https://mcp.example"},
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := prmCandidates(tc.server, tc.ch)
			if !cmp.Equal(got, tc.want, cmp.AllowUnexported(prmCandidate{})) {
				t.Errorf("prmCandidates = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestScopeSets(t *testing.T) {
	a, b := []string{"read", "offline_access"}, []string{"read", "write"}
	if got, want := union(a, b), []string{"read", "offline_access", "write"}; !cmp.Equal(got, want) {
		t.Errorf("union = %v, want %v", got, want)
	}
	if got, want := minus(b, a), []string{"write"}; !cmp.Equal(got, want) {
		t.Errorf("minus = %v, want %v", got, want)
	}
	if got := minus(a, a); got != nil {
		t.Errorf("minus of a set by itself = %v, want nil", got)
	}
}

func TestSafeCode(t *testing.T) {
	for in, want := range map[string]string{
		"invalid_grant":          "invalid_grant",
		"":                       "",
		"bad code <b>":           "",
		"at-123.x":               "at-123.x",
		string(make([]byte, 65)): "",
	} {
		if got := safeCode(in); got != want {
			t.Errorf("safeCode(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestDiscoverStaysOut: what the upstream names may not reach further in
// than the server: a public server's challenge naming resource metadata
// on loopback is not fetched, nor is an issuer on loopback; a redirect
// from a public URL into loopback or a private network is refused.
func TestDiscoverStaysOut(t *testing.T) {
	var mu sync.Mutex
	hits := 0
	inside := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		hits++
		mu.Unlock()
		http.NotFound(w, r)
	}))
	defer inside.Close()
	m := New(Options{Store: platform.New(platform.Options{Home: plexustest.TempHome(t).Dir}),
		CallbackURL: func(int) string { return "http://127.0.0.1:1/oauth/callback" }})
	defer m.Close()
	ch := []oauthex.Challenge{{Scheme: "bearer", Params: map[string]string{"resource_metadata": inside.URL + "/.well-known/oauth-protected-resource"}}}
	if _, err := m.discover(t.Context(), m.client("https://mcp.invalid/mcp", ""), "https://mcp.invalid/mcp", ch, ""); err == nil {
		t.Errorf("discovery for an unreachable public server succeeded")
	}
	mu.Lock()
	if hits != 0 {
		t.Errorf("the loopback server named by a public server's challenge was asked %d times", hits)
	}
	mu.Unlock()
	if _, err := m.authServerMeta(t.Context(), m.client("https://mcp.invalid/mcp", ""), inside.URL, "", "https://mcp.invalid/mcp"); err == nil || !strings.Contains(err.Error(), "loopback") {
		t.Errorf("authServerMeta of a loopback issuer for a public server: err = %v, want refused", err)
	}

	check := ProtectRedirects(http.DefaultClient).CheckRedirect
	for _, tc := range []struct {
		from, to string
		ok       bool
	}{
		{"https://as.example/a", "https://as.example/b", true},
		{"https://as.example/a", "http://127.0.0.1/x", false},
		{"https://as.example/a", "https://10.0.0.5/x", false},
		{"https://as.example/a", "https://169.254.169.254/latest", false},
		{"http://127.0.0.1:1/a", "http://127.0.0.1:2/b", true},
		{"https://10.0.0.4/a", "https://10.0.0.5/b", true},
	} {
		from, err := http.NewRequest(http.MethodGet, tc.from, nil)
		if err != nil {
			t.Fatal(err)
		}
		to, err := http.NewRequest(http.MethodGet, tc.to, nil)
		if err != nil {
			t.Fatal(err)
		}
		if err := check(to, []*http.Request{from}); (err == nil) != tc.ok {
			t.Errorf("redirect %s → %s: err = %v, want ok %v", tc.from, tc.to, err, tc.ok)
		}
	}
}

// TestSecretNameFits: every server name's sign-in has a valid secret name
// (at most 64 characters), and two long names that share a beginning
// have two.
func TestSecretNameFits(t *testing.T) {
	long := strings.Repeat("a", 58)
	for _, n := range []string{"gh", long + "1", long + "22", strings.Repeat("b", 64)} {
		if got := secretName(n); !platform.ValidSecretName(got) {
			t.Errorf("secretName(%q) = %q, not a valid secret name", n, got)
		}
	}
	if secretName(long+"1") == secretName(long+"2") {
		t.Errorf("two long names share the secret %q", secretName(long+"1"))
	}
	if got := secretName("gh"); got != "oauth.gh" {
		t.Errorf("secretName(gh) = %q, want oauth.gh", got)
	}
}

// TestDiscoverStaysOutByName: the same, for names the upstream gives that
// resolve to loopback (the literal check takes a name for the internet):
// the dial refuses them, so the loopback server is never asked, and the
// error names the host.
func TestDiscoverStaysOutByName(t *testing.T) {
	var conns atomic.Int32 // connections made to it, https or not
	inside := httptest.NewUnstartedServer(http.NotFoundHandler())
	inside.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			conns.Add(1)
		}
	}
	inside.Start()
	defer inside.Close()
	named := "https://" + net.JoinHostPort("loop.test", strconv.Itoa(inside.Listener.Addr().(*net.TCPAddr).Port))
	m := New(Options{Store: platform.New(platform.Options{Home: plexustest.TempHome(t).Dir}), Resolver: dnsServer(t, testNames),
		CallbackURL: func(int) string { return "http://127.0.0.1:1/oauth/callback" }})
	defer m.Close()
	const server = "https://mcp.invalid/mcp"
	ch := []oauthex.Challenge{{Scheme: "bearer", Params: map[string]string{"resource_metadata": named + "/.well-known/oauth-protected-resource"}}}
	if _, err := m.discover(t.Context(), m.client(server, ""), server, ch, ""); err == nil {
		t.Errorf("discovery for an unreachable public server succeeded")
	}
	_, err := m.authServerMeta(t.Context(), m.client(server, ""), named, "", server)
	if err == nil || !strings.Contains(err.Error(), "loop.test resolves to 127.0.0.1, on loopback") {
		t.Errorf("authServerMeta of an issuer named loop.test for a public server: err = %v, want refused naming the host", err)
	}
	if n := conns.Load(); n != 0 {
		t.Errorf("the loopback server named by a public server was connected to %d times", n)
	}
}
