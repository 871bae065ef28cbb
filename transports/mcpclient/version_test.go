package mcpclient_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/plexus-gw/plexus"
	"github.com/plexus-gw/plexus/transports/mcpclient"
)

// versionServer is greetServer over Streamable HTTP (stateless when
// restricted to versions, as 2026-07-28 is). It records the MCP-Protocol-Version header and the
// JSON-RPC method (Mcp-Method, or "" for a request without it) of each POST.
type versionServer struct {
	ts *httptest.Server

	mu    sync.Mutex
	posts []string // "<version header> <Mcp-Method header>"
}

func newVersionServer(t *testing.T, versions []string, refuse ...string) *versionServer {
	t.Helper()
	srv := greetServer(versions, refuse...)
	s := &versionServer{}
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, &mcp.StreamableHTTPOptions{Stateless: len(versions) > 0})
	s.ts = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost {
			s.mu.Lock()
			s.posts = append(s.posts, r.Header.Get("Mcp-Protocol-Version")+" "+r.Header.Get("Mcp-Method"))
			s.mu.Unlock()
		}
		h.ServeHTTP(w, r)
	}))
	// Registered before the client's cleanup, so it runs after the client
	// has let go of its streams.
	t.Cleanup(s.ts.Close)
	return s
}

// greetServer is the SDK's server with a tool greet, restricted to the
// versions given (all when none), refusing the methods in refuse with
// Method not found.
func greetServer(versions []string, refuse ...string) *mcp.Server {
	srv := mcp.NewServer(&mcp.Implementation{Name: "versioned", Version: "1"}, &mcp.ServerOptions{SupportedProtocolVersions: versions})
	type in struct {
		Name string `json:"name"`
	}
	type out struct {
		Greeting string `json:"greeting"`
	}
	mcp.AddTool(srv, &mcp.Tool{Name: "greet"}, func(_ context.Context, _ *mcp.CallToolRequest, i in) (*mcp.CallToolResult, out, error) {
		return nil, out{Greeting: "hello " + i.Name}, nil
	})
	srv.AddReceivingMiddleware(func(next mcp.MethodHandler) mcp.MethodHandler {
		return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
			if slices.Contains(refuse, method) {
				return nil, &jsonrpc.Error{Code: jsonrpc.CodeMethodNotFound, Message: "method not found: " + method}
			}
			return next(ctx, method, req)
		}
	})
	return srv
}

// runOnlyServer is the stdio server of TestMain's "sdk-0728": it speaks
// 2026-07-28 only and has no initialize.
func runOnlyServer() error {
	return greetServer([]string{"2026-07-28"}, "initialize").Run(context.Background(), &mcp.StdioTransport{})
}

func (s *versionServer) seen() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.posts)
}

// TestProtocolFallback: Plexus asks for 2025-11-25 first and keeps it with
// a server that speaks it; a server that refuses it (a 400 naming the
// version, or no initialize at all) is connected at 2026-07-28 the way the
// SDK's client does (server/discover), and its tools are listed and called
// with the headers that version requires.
func TestProtocolFallback(t *testing.T) {
	for _, tc := range []struct {
		name     string
		versions []string
		refuse   []string
		want     string // the negotiated version
	}{
		{name: "Legacy", want: "2025-11-25"},
		{name: "Only0728", versions: []string{"2026-07-28"}, want: "2026-07-28"},
		{name: "NoInitialize", versions: []string{"2026-07-28"}, refuse: []string{"initialize"}, want: "2026-07-28"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			failOnLeakedGoroutines(t)
			s := newVersionServer(t, tc.versions, tc.refuse...)
			h := startClient(t, "v", mcpclient.ServerConfig{URL: s.ts.URL + "/mcp"}, mcpclient.Options{})
			h.waitReady(t)
			if pv := h.entry(t, "mcp.v.greet").MCP.ProtocolVersion; pv != tc.want {
				t.Errorf("protocol version %s, want %s", pv, tc.want)
			}
			if got := h.ok(t, "mcp.v.greet", map[string]any{"name": "Ada"}); !strings.Contains(firstText(t, got), "hello Ada") {
				t.Errorf("result %v", got)
			}
			posts := s.seen()
			if tc.want == "2025-11-25" {
				for _, p := range posts {
					if strings.Contains(p, "2026-07-28") || strings.Contains(p, "server/discover") {
						t.Errorf("a 2025-11-25 server was asked %q; all: %q", p, posts)
					}
				}
				return
			}
			for _, want := range []string{"2026-07-28 server/discover", "2026-07-28 tools/list", "2026-07-28 tools/call"} {
				if !slices.Contains(posts, want) {
					t.Errorf("no POST %q; all: %q", want, posts)
				}
			}
		})
	}
}

// TestProtocolFallbackRefusedBoth: a server that refuses 2025-11-25 and
// 2026-07-28 alike stays unavailable with the SDK's error, after asking
// for each version per connect (2025-11-25 dressed, then plain).
func TestProtocolFallbackRefusedBoth(t *testing.T) {
	failOnLeakedGoroutines(t)
	s := newVersionServer(t, []string{"2026-07-28"}, "initialize", "server/discover")
	h := startClient(t, "v", mcpclient.ServerConfig{URL: s.ts.URL + "/mcp"}, mcpclient.Options{})
	eventually(t, 10*time.Second, "unavailable", func() bool {
		return h.c.Health(context.Background()).Status == plexus.HealthUnavailable
	})
	if hl := h.c.Health(context.Background()); !strings.Contains(hl.Detail, `calling "initialize": method not found`) {
		t.Errorf("health detail %q", hl.Detail)
	}
	h.stop()
	posts := s.seen()
	if !slices.Contains(posts, "2026-07-28 server/discover") {
		t.Errorf("2026-07-28 was not tried: %q", posts)
	}
}

// TestProtocolFallbackStdio: a stdio server that has no initialize (the
// SDK's, speaking 2026-07-28 only) is started again and connected at
// 2026-07-28.
func TestProtocolFallbackStdio(t *testing.T) {
	failOnLeakedGoroutines(t)
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	h := startClient(t, "v", mcpclient.ServerConfig{Command: exe, Env: map[string]string{helperEnv: "sdk-0728"}}, mcpclient.Options{})
	h.waitReady(t)
	if pv := h.entry(t, "mcp.v.greet").MCP.ProtocolVersion; pv != "2026-07-28" {
		t.Errorf("protocol version %s, want 2026-07-28", pv)
	}
	if got := h.ok(t, "mcp.v.greet", map[string]any{"name": "Ada"}); !strings.Contains(firstText(t, got), "hello Ada") {
		t.Errorf("result %v", got)
	}
	if !strings.Contains(h.logs.String(), "refused protocol 2025-11-25") {
		t.Errorf("no fallback logged:\n%s", h.logs)
	}
}
