package oauth_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/plexus-gw/plexus"
	"github.com/plexus-gw/plexus/internal/oauthtest"
	"github.com/plexus-gw/plexus/internal/plexustest"
	"github.com/plexus-gw/plexus/oauth"
	"github.com/plexus-gw/plexus/platform"
)

const server = "remote"

// harness is a Manager wired as the daemon wires it, against the fixture:
// the real secrets store in a temporary home, the callback on a loopback
// server, a settable clock, and everything the Manager tells the daemon
// recorded.
type harness struct {
	t     *testing.T
	as    *oauthtest.Server
	m     *oauth.Manager
	store *platform.Services
	// wrap, when set, stands between the Manager and the store (a test
	// holding a write to see what runs meanwhile).
	wrap  func(oauth.Store) oauth.Store
	home  string
	clock *plexustest.Clock
	cb    *httptest.Server

	mu       sync.Mutex // guards the records below
	needs    []plexus.SignInRequest
	signedIn []string
	rows     []string // journal rows as JSON
	logs     syncBuffer
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func newHarness(t *testing.T, opts oauthtest.Options) *harness {
	t.Helper()
	h := &harness{t: t, as: oauthtest.New(t, opts), clock: plexustest.NewClock(time.Now())}
	h.home = plexustest.TempHome(t).Dir
	h.store = platform.New(platform.Options{Home: h.home})
	h.newManager()
	return h
}

// newManager builds a fresh Manager on the same store: a daemon restart.
func (h *harness) newManager() {
	mux := http.NewServeMux()
	var m *oauth.Manager
	var st oauth.Store = h.store
	if h.wrap != nil {
		st = h.wrap(st)
	}
	mux.Handle("/oauth/callback", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { m.Callback().ServeHTTP(w, r) }))
	h.cb = httptest.NewServer(mux)
	h.t.Cleanup(h.cb.Close)
	m = oauth.New(oauth.Options{
		Store: st,
		Now:   h.clock.Now,
		CallbackURL: func(port int) string {
			if port != 0 {
				return fmt.Sprintf("http://127.0.0.1:%d/callback", port)
			}
			return h.cb.URL + "/oauth/callback"
		},
		NeedsSignIn: func(r plexus.SignInRequest) {
			h.mu.Lock()
			defer h.mu.Unlock()
			h.needs = append(h.needs, r)
		},
		SignedIn: func(s string) {
			h.mu.Lock()
			defer h.mu.Unlock()
			h.signedIn = append(h.signedIn, s)
		},
		Journal: func(_ context.Context, action, s string, payload map[string]any) {
			b, err := json.Marshal(map[string]any{"action": action, "server": s, "payload": payload})
			if err != nil {
				h.t.Errorf("journal payload does not encode: %v", err)
			}
			h.mu.Lock()
			defer h.mu.Unlock()
			h.rows = append(h.rows, string(b))
		},
		Logger: slog.New(slog.NewTextHandler(&h.logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
	})
	h.m = m
	h.t.Cleanup(m.Close) // no login outlives its test
}

func (h *harness) handler(cfg oauth.Config) auth.OAuthHandler {
	return h.m.Handler(server, h.as.URL, cfg)
}

// login runs the owner's sign-in with the test as the browser.
func (h *harness) login() {
	h.t.Helper()
	flow, err := h.m.Login(h.t.Context(), server)
	if err != nil {
		h.t.Fatalf("Login: %v", err)
	}
	status, body := oauthtest.Browse(h.t, flow.URL)
	if status != http.StatusOK || !strings.Contains(body, "Signed in to remote") {
		h.t.Fatalf("callback answered %d %q, want 200 and the signed-in page", status, body)
	}
	if err := <-flow.Done; err != nil {
		h.t.Fatalf("flow: %v", err)
	}
}

// connect opens a real MCP session through the handler and calls the
// fixture's scopes tool; it returns the scopes the token carried.
func (h *harness) connect(oh auth.OAuthHandler) (string, error) {
	h.t.Helper()
	ctx, cancel := context.WithTimeout(h.t.Context(), 30*time.Second)
	defer cancel()
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "plexus-test"}, nil).Connect(ctx, &mcp.StreamableClientTransport{
		Endpoint: h.as.URL, OAuthHandler: oh, HTTPClient: oauth.ProtectRedirects(http.DefaultClient), MaxRetries: -1,
	}, nil)
	if err != nil {
		return "", err
	}
	defer cs.Close()
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "scopes"})
	if err != nil {
		return "", err
	}
	return res.Content[0].(*mcp.TextContent).Text, nil
}

// stored returns the sign-in blob the store holds ("" when none).
func (h *harness) stored() map[string]any {
	h.t.Helper()
	v, err := h.store.Secret("oauth." + server)
	if errors.Is(err, plexus.ErrNotFound) {
		return nil
	}
	if err != nil {
		h.t.Fatalf("read the stored sign-in: %v", err)
	}
	var out map[string]any
	if err := json.Unmarshal([]byte(v), &out); err != nil {
		h.t.Fatalf("the stored sign-in is not JSON: %v", err)
	}
	return out
}

func tokenOf(blob map[string]any, field string) string {
	tok, _ := blob["token"].(map[string]any)
	s, _ := tok[field].(string)
	return s
}

func (h *harness) needsRequests() []plexus.SignInRequest {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]plexus.SignInRequest(nil), h.needs...)
}

func (h *harness) signedInCalls() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]string(nil), h.signedIn...)
}

func (h *harness) journalRows() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]string(nil), h.rows...)
}

func (h *harness) hasRow(action string) bool {
	for _, r := range h.journalRows() {
		if strings.Contains(r, `"action":"`+action+`"`) {
			return true
		}
	}
	return false
}

func freePort(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	if err := ln.Close(); err != nil {
		t.Fatal(err)
	}
	return port
}
