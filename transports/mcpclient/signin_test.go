package mcpclient_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/plexus-gw/plexus"
	"github.com/plexus-gw/plexus/transports/mcpclient"
	"golang.org/x/oauth2"
)

// bearerServer is an MCP server that admits one bearer token, which the
// test changes (a revocation), and counts every request it gets.
type bearerServer struct {
	ts *httptest.Server

	mu       sync.Mutex
	valid    string
	requests int
}

func newBearerServer(t *testing.T, valid string) *bearerServer {
	t.Helper()
	b := &bearerServer{valid: valid}
	srv := mcp.NewServer(&mcp.Implementation{Name: "protected", Version: "1"}, nil)
	mcp.AddTool(srv, &mcp.Tool{Name: "whoami"}, func(context.Context, *mcp.CallToolRequest, struct{}) (*mcp.CallToolResult, struct{}, error) {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "owner"}}}, struct{}{}, nil
	})
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil)
	b.ts = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b.mu.Lock()
		b.requests++
		ok := b.valid != "" && r.Header.Get("Authorization") == "Bearer "+b.valid
		b.mu.Unlock()
		if !ok {
			w.Header().Set("WWW-Authenticate", `Bearer resource_metadata="`+b.ts.URL+`/.well-known/oauth-protected-resource"`)
			http.Error(w, "unauthorized", http.StatusUnauthorized)
			return
		}
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(func() {
		b.ts.Close()
		// A session whose token was revoked could not be ended by its
		// client (its DELETE was refused): end it here.
		for ss := range srv.Sessions() {
			ss.Close()
		}
	})
	return b
}

func (b *bearerServer) count() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.requests
}

func (b *bearerServer) admit(token string) {
	b.mu.Lock()
	b.valid = token
	b.mu.Unlock()
}

// errNeedsSignIn stands for the oauth package's sentinel.
var errNeedsSignIn = errors.New("needs sign-in")

// tokenHandler is an auth.OAuthHandler holding the token the owner's
// sign-in stored; with none usable it asks for a sign-in, as the oauth
// engine does, and never runs a flow itself.
type tokenHandler struct {
	mu         sync.Mutex
	token      string
	authorizes int
}

func (h *tokenHandler) TokenSource(context.Context) (oauth2.TokenSource, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.token == "" {
		return nil, nil
	}
	return oauth2.StaticTokenSource(&oauth2.Token{AccessToken: h.token}), nil
}

func (h *tokenHandler) Authorize(_ context.Context, _ *http.Request, resp *http.Response) error {
	resp.Body.Close()
	h.mu.Lock()
	h.authorizes++
	h.mu.Unlock()
	return errNeedsSignIn
}

func (h *tokenHandler) store(token string) {
	h.mu.Lock()
	h.token = token
	h.mu.Unlock()
}

// quiet checks that nothing reaches the server for many backoff periods
// while the source waits for its sign-in: no reconnect loop.
func quiet(t *testing.T, b *bearerServer, h *harness) {
	t.Helper()
	n := b.count()
	time.Sleep(300 * time.Millisecond) // 300 of the client's 1 ms backoffs
	if got := b.count(); got != n {
		t.Fatalf("the server got %d requests while the source waited for sign-in; log:\n%s", got-n, h.logs)
	}
}

func TestNeedsSignIn(t *testing.T) {
	failOnLeakedGoroutines(t)
	b := newBearerServer(t, "t1")
	th := &tokenHandler{}
	h := startClient(t, "gh", mcpclient.ServerConfig{URL: b.ts.URL},
		mcpclient.Options{MinBackoff: time.Millisecond, MaxBackoff: time.Millisecond,
			SignIn: &mcpclient.SignIn{Handler: th, Needed: func(err error) bool { return errors.Is(err, errNeedsSignIn) }}})
	waitSignIn := func() {
		t.Helper()
		eventually(t, 10*time.Second, "needs sign-in", func() bool { return h.c.Health(context.Background()).NeedsSignIn })
		hl := h.c.Health(context.Background())
		if hl.Status != plexus.HealthUnavailable || !strings.Contains(hl.Detail, "plexus mcp login gh") {
			t.Fatalf("health %+v, want unavailable naming plexus mcp login gh", hl)
		}
	}

	t.Run("NoLoop", func(t *testing.T) {
		waitSignIn()
		quiet(t, b, h)
	})
	t.Run("ConnectsOnSignedIn", func(t *testing.T) {
		th.store("t1")
		h.c.SignedIn()
		// Said at once: whoever waits for the source after signing in
		// (plexus mcp login) must not read the old "needs sign-in".
		if hl := h.c.Health(context.Background()); hl.NeedsSignIn {
			t.Fatalf("health right after SignedIn: %+v, want no longer needing sign-in", hl)
		}
		h.waitReady(t)
		eventually(t, 10*time.Second, "healthy", func() bool { return h.c.Health(context.Background()).Status == plexus.HealthOK })
		if got := firstText(t, h.ok(t, "mcp.gh.whoami", nil)); got != "owner" {
			t.Errorf("whoami = %q", got)
		}
	})
	t.Run("RevokedMidSession", func(t *testing.T) {
		b.admit("t2") // the server no longer takes t1
		r := h.call(t, context.Background(), "mcp.gh.whoami", nil, nil)
		wantErr(t, r, plexus.CodeSourceUnavailable, "needs sign-in", "plexus mcp login gh")
		waitSignIn()
		r = h.call(t, context.Background(), "mcp.gh.whoami", nil, nil)
		wantErr(t, r, plexus.CodeSourceUnavailable, "plexus mcp login gh")
		quiet(t, b, h)
	})
	t.Run("ReconnectsOnSignedInAgain", func(t *testing.T) {
		th.store("t2")
		h.c.SignedIn()
		eventually(t, 10*time.Second, "healthy again", func() bool { return h.c.Health(context.Background()).Status == plexus.HealthOK })
		if got := firstText(t, h.ok(t, "mcp.gh.whoami", nil)); got != "owner" {
			t.Errorf("whoami = %q", got)
		}
	})
	for _, hl := range h.healthLog() {
		if hl.NeedsSignIn && hl.Status != plexus.HealthUnavailable {
			t.Errorf("health %+v: needs sign-in yet not unavailable", hl)
		}
	}
}
