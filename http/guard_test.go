package http

import (
	"fmt"
	"net/url"
	"strings"
	"testing"

	"github.com/plexus-gw/plexus"
)

func TestValidHost(t *testing.T) {
	tests := []struct {
		host string
		port int
		want bool
	}{
		{"127.0.0.1:7077", 7077, true},
		{"localhost:7077", 7077, true},
		{"[::1]:7077", 7077, true},
		{"LOCALHOST:7077", 7077, true},
		{"LocalHost:7077", 7077, true},

		{"", 7077, false},
		{"127.0.0.1", 7077, false},
		{"localhost", 7077, false},
		{"[::1]", 7077, false},
		{"::1:7077", 7077, false},
		{"127.0.0.1:7078", 7077, false},
		{"127.0.0.1:07077", 7077, false},
		{"127.0.0.1:", 7077, false},
		{"localhost.:7077", 7077, false},
		{"127.0.0.1.:7077", 7077, false},
		{"127.0.0.1.nip.io:7077", 7077, false},
		{"localhost.evil.com:7077", 7077, false},
		{"evil.com:7077", 7077, false},
		{"evil.com", 7077, false},
		{"127.0.0.2:7077", 7077, false},
		{"0.0.0.0:7077", 7077, false},
		{"[0:0:0:0:0:0:0:1]:7077", 7077, false},
		{" localhost:7077", 7077, false},
		{"localhost:7077 ", 7077, false},
		{"user@localhost:7077", 7077, false},
		{"127.0.0.1:0", 0, false},
		{"127.0.0.1:70000", 70000, false},
	}
	for _, tt := range tests {
		if got := ValidHost(tt.host, tt.port); got != tt.want {
			t.Errorf("ValidHost(%q, %d) = %v, want %v", tt.host, tt.port, got, tt.want)
		}
	}
}

func TestCanonicalOrigin(t *testing.T) {
	tests := []struct {
		in, want string
		ok       bool
	}{
		{"http://localhost:3000", "http://localhost:3000", true},
		{"HTTP://LocalHost:3000", "http://localhost:3000", true},
		{"app://plexus", "app://plexus", true},
		{"http://localhost:3000/", "", false},
		{"http://localhost:3000/x", "", false},
		{"http://localhost:3000?q", "", false},
		{"http://u@localhost:3000", "", false},
		{"null", "", false},
		{"", "", false},
		{"localhost:3000", "", false},
	}
	for _, tt := range tests {
		got, ok := canonicalOrigin(tt.in)
		if got != tt.want || ok != tt.ok {
			t.Errorf("canonicalOrigin(%q) = %q, %v; want %q, %v", tt.in, got, ok, tt.want, tt.ok)
		}
	}
}

// TestGuard sends raw requests to a real listener with every Host and Origin
// of the matrix and checks the guard answers host_forbidden in the route's
// shape before the gateway is reached, and lets the good ones through.
func TestGuard(t *testing.T) {
	const allowed = "http://localhost:5173"
	api := &stubAPI{InvokeResp: plexus.InvokeResponse{ID: "x", OK: true, AuditID: "evt_1"}}
	ts := mustServe(t, api, Options{AllowedOrigins: []string{allowed, "not an origin"}})
	p := ts.Port

	endpoints := []struct {
		name, method, path, body string
		invoke                   bool
		unknown                  bool
	}{
		{name: "wellknown", method: "GET", path: "/.well-known/plexus"},
		{name: "invoke", method: "POST", path: "/invoke", body: `{"id":"x"}`, invoke: true},
		{name: "manifest", method: "GET", path: "/manifest"},
		{name: "enroll", method: "POST", path: "/agents/enroll", body: `{"code":"plx_enroll_x"}`},
		{name: "admin", method: "POST", path: "/admin/api/key/rotate"},
		{name: "prune", method: "POST", path: "/admin/api/journal/prune", body: `{"before":"2026-01-01T00:00:00Z"}`},
		{name: "unknown", method: "GET", path: "/no/such/thing", unknown: true},
	}
	cases := []struct {
		name, host string
		origin     string // "" = no Origin header
		ok         bool
	}{
		{"ipv4", fmt.Sprintf("127.0.0.1:%d", p), "", true},
		{"localhost", fmt.Sprintf("localhost:%d", p), "", true},
		{"ipv6", fmt.Sprintf("[::1]:%d", p), "", true},
		{"upper", fmt.Sprintf("LOCALHOST:%d", p), "", true},
		{"allowed origin", fmt.Sprintf("127.0.0.1:%d", p), allowed, true},
		{"allowed origin any case", fmt.Sprintf("127.0.0.1:%d", p), "http://LOCALHOST:5173", true},

		{"evil", "evil.com", "", false},
		{"evil with port", fmt.Sprintf("evil.com:%d", p), "", false},
		{"no port", "127.0.0.1", "", false},
		{"other port", fmt.Sprintf("127.0.0.1:%d", p+1), "", false},
		{"trailing dot", fmt.Sprintf("localhost.:%d", p), "", false},
		{"empty", "", "", false},
		{"nip.io", fmt.Sprintf("127.0.0.1.nip.io:%d", p), "", false},
		{"evil origin", fmt.Sprintf("127.0.0.1:%d", p), "http://evil.com", false},
		{"self origin", fmt.Sprintf("127.0.0.1:%d", p), fmt.Sprintf("http://127.0.0.1:%d", p), true},
		{"self origin, another name", fmt.Sprintf("127.0.0.1:%d", p), fmt.Sprintf("http://localhost:%d", p), false},
		{"self origin ipv6", fmt.Sprintf("[::1]:%d", p), fmt.Sprintf("http://[::1]:%d", p), true},
		{"self origin by localhost", fmt.Sprintf("localhost:%d", p), fmt.Sprintf("http://localhost:%d", p), false},
		{"self origin, https", fmt.Sprintf("127.0.0.1:%d", p), fmt.Sprintf("https://127.0.0.1:%d", p), false},
		{"self origin with a path", fmt.Sprintf("127.0.0.1:%d", p), fmt.Sprintf("http://127.0.0.1:%d/x", p), false},
		{"rebinding: own origin, foreign host", fmt.Sprintf("evil.com:%d", p), fmt.Sprintf("http://evil.com:%d", p), false},
		{"null origin", fmt.Sprintf("127.0.0.1:%d", p), "null", false},
		{"allowed origin other port", fmt.Sprintf("127.0.0.1:%d", p), "http://localhost:5174", false},
		{"allowed origin other scheme", fmt.Sprintf("127.0.0.1:%d", p), "https://localhost:5173", false},
	}
	for _, ep := range endpoints {
		for _, tc := range cases {
			t.Run(ep.name+"/"+tc.name, func(t *testing.T) {
				before := len(api.Calls())
				hdr := map[string]string{}
				if tc.origin != "" {
					hdr["Origin"] = tc.origin
				}
				resp := rawDo(t, ts.Addr, ep.method, ep.path, tc.host, hdr, ep.body)
				called := len(api.Calls()) > before

				if !tc.ok {
					if resp.Status != 403 {
						t.Fatalf("status = %d, want 403 (body %s)", resp.Status, resp.Body)
					}
					if called {
						t.Errorf("gateway called %v on a forbidden request", api.Calls()[before:])
					}
					if ep.invoke {
						ir := invokeOf(t, resp)
						if ir.ID != "" || ir.OK || ir.AuditID != "" || ir.Error == nil || ir.Error.Code != plexus.CodeHostForbidden {
							t.Errorf("invoke denial = %+v", ir)
						}
						return
					}
					if got := errorOf(t, resp).Code; got != plexus.CodeHostForbidden {
						t.Errorf("code = %q, want host_forbidden", got)
					}
					return
				}

				if resp.Status == 403 {
					t.Fatalf("status = 403 for an allowed request (body %s)", resp.Body)
				}
				if ep.unknown {
					if resp.Status != 404 || errorOf(t, resp).Code != plexus.CodeNotFound {
						t.Errorf("unknown route: %d %s", resp.Status, resp.Body)
					}
				} else if !called {
					t.Errorf("gateway not called on an allowed request (%d %s)", resp.Status, resp.Body)
				}
			})
		}
	}
}

func TestOriginForm(t *testing.T) {
	tests := []struct {
		target string
		want   bool
	}{
		{"/", true},
		{"/invoke", true},
		{"/events?lastEventId=3", true},
		{"//evil.com/invoke", true}, // a path, not an authority: the Host header still decides
		{"*", true},

		{"http://127.0.0.1:7077/invoke", false},
		{"http://evil.com/invoke", false},
		{"HTTP://localhost:7077/", false},
		{"https://127.0.0.1:7077/", false},
		{"127.0.0.1:7077", false},
		{"evil.com:443", false},
		{"invoke", false},
	}
	for _, tt := range tests {
		u, err := url.ParseRequestURI(tt.target)
		if err != nil {
			u = nil // an unparseable target is refused too
		}
		if got := originForm(tt.target, u); got != tt.want {
			t.Errorf("originForm(%q) = %v, want %v", tt.target, got, tt.want)
		}
	}
}

// TestGuardAbsoluteForm sends absolute-form request lines on the wire: a
// foreign Host header, or a foreign authority in the request line, or both
// good, all answer host_forbidden before the gateway is reached, since
// net/http hides the Host header of such a request from the guard.
func TestGuardAbsoluteForm(t *testing.T) {
	api := &stubAPI{InvokeResp: plexus.InvokeResponse{ID: "x", OK: true, AuditID: "evt_1"}}
	ts := mustServe(t, api, Options{})
	good := fmt.Sprintf("127.0.0.1:%d", ts.Port)
	tests := []struct {
		name, method, target, host, body string
	}{
		{"foreign Host", "GET", "http://" + good + "/.well-known/plexus", "evil.com", ""},
		{"foreign authority", "GET", "http://evil.com/.well-known/plexus", good, ""},
		{"both good", "GET", "http://" + good + "/.well-known/plexus", good, ""},
		{"invoke foreign Host", "POST", "http://" + good + "/invoke", "evil.com:80", `{"id":"x"}`},
		{"authority-form", "CONNECT", good, good, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := len(api.Calls())
			resp := rawDo(t, ts.Addr, tt.method, tt.target, tt.host, nil, tt.body)
			if resp.Status != 403 {
				t.Fatalf("status = %d, want 403 (body %s)", resp.Status, resp.Body)
			}
			if calls := api.Calls(); len(calls) > before {
				t.Errorf("gateway called %v", calls[before:])
			}
			code := errorOf(t, resp).Code
			if tt.method == "POST" {
				code = invokeOf(t, resp).Error.Code
			}
			if code != plexus.CodeHostForbidden {
				t.Errorf("code = %q, want host_forbidden", code)
			}
		})
	}
	if r := rawDo(t, ts.Addr, "GET", "/.well-known/plexus", good, nil, ""); r.Status != 200 {
		t.Errorf("origin-form with the bound Host: status %d, want 200", r.Status)
	}
}

// TestGuardUsesBoundPort checks the guard learns the port Listen bound, not
// the 0 asked for.
func TestGuardUsesBoundPort(t *testing.T) {
	ts := mustServe(t, &stubAPI{}, Options{Addr: "127.0.0.1:0"})
	if ts.Port == 0 {
		t.Fatal("Port() = 0 after Listen")
	}
	if r := rawDo(t, ts.Addr, "GET", "/.well-known/plexus", "127.0.0.1:0", nil, ""); r.Status != 403 {
		t.Errorf("Host with port 0: status %d, want 403", r.Status)
	}
	if r := ts.do(t, "GET", "/.well-known/plexus", nil, ""); r.Status != 200 {
		t.Errorf("bound Host: status %d, want 200", r.Status)
	}
}

func TestCORS(t *testing.T) {
	const allowed = "http://localhost:5173"
	api := &stubAPI{}
	ts := mustServe(t, api, Options{AllowedOrigins: []string{allowed}})
	t.Run("Preflight", func(t *testing.T) {
		resp := ts.do(t, "OPTIONS", "/admin/api/key/rotate", map[string]string{
			"Origin": allowed, "Access-Control-Request-Method": "POST",
			"Access-Control-Request-Headers": "authorization",
		}, "")
		if resp.Status != 204 || resp.Header.Get("Access-Control-Allow-Origin") != allowed {
			t.Errorf("got %d %v", resp.Status, resp.Header)
		}
		if !strings.Contains(resp.Header.Get("Access-Control-Allow-Headers"), "Authorization") {
			t.Errorf("Allow-Headers = %q", resp.Header.Get("Access-Control-Allow-Headers"))
		}
		if len(api.Calls()) != 0 {
			t.Errorf("gateway called: %v", api.Calls())
		}
	})
	t.Run("Simple", func(t *testing.T) {
		resp := ts.do(t, "GET", "/.well-known/plexus", map[string]string{"Origin": allowed}, "")
		if resp.Status != 200 || resp.Header.Get("Access-Control-Allow-Origin") != allowed {
			t.Errorf("got %d %v", resp.Status, resp.Header)
		}
	})
	t.Run("NoOriginNoCORS", func(t *testing.T) {
		resp := ts.do(t, "GET", "/.well-known/plexus", nil, "")
		if resp.Header.Get("Access-Control-Allow-Origin") != "" {
			t.Errorf("CORS header without an Origin: %v", resp.Header)
		}
	})
	t.Run("ForbiddenPreflight", func(t *testing.T) {
		resp := ts.do(t, "OPTIONS", "/invoke", map[string]string{"Origin": "http://evil.com", "Access-Control-Request-Method": "POST"}, "")
		if resp.Status != 403 || resp.Header.Get("Access-Control-Allow-Origin") != "" {
			t.Errorf("got %d %v", resp.Status, resp.Header)
		}
	})
}
