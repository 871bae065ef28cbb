package mcpserver_test

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/plexus-gw/plexus"
	"github.com/plexus-gw/plexus/auth"
	"github.com/plexus-gw/plexus/gateway"
	plexushttp "github.com/plexus-gw/plexus/http"
	"github.com/plexus-gw/plexus/internal/plexustest"
	"github.com/plexus-gw/plexus/journal"
	"github.com/plexus-gw/plexus/mcpserver"
	"github.com/plexus-gw/plexus/registry"
	"github.com/plexus-gw/plexus/scaffold"
	"github.com/plexus-gw/plexus/sources/portal"
	"github.com/plexus-gw/plexus/transports/mcpclient"
)

// fixture is the front door as the daemon composes it: a real journal in a
// temporary home, the registry with a portal folder and an MCP server
// ingested over Streamable HTTP, the gateway, and the loopback HTTP server
// with /mcp mounted behind its guard, on 127.0.0.1:0.
type fixture struct {
	t    *testing.T
	home *scaffold.Home
	db   *journal.DB
	gw   *gateway.Gateway
	base string // http://127.0.0.1:<port>
	url  string // base + /mcp
	logs *syncBuffer
	// upstream counts the calls the ingested MCP server received.
	upstream *upstream
	// portalDir is the folder of the portal "docs".
	portalDir string
	// hosts is the HTTP transport of the fixture's MCP clients.
	hosts *http.Transport
	// ctx lives as long as the fixture; reg and mcpT take more sources
	// (see addMCP); front is the front door.
	ctx   context.Context
	reg   *registry.Registry
	mcpT  *mcpclient.Transport
	front *mcpserver.Server
	log   *slog.Logger
}

// syncBuffer is a log sink written by the daemon's goroutines.
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

func newFixture(t *testing.T, opts mcpserver.Options) *fixture {
	t.Helper()
	return newFixtureWith(t, opts, gateway.StreamLimits{})
}

// newFixtureWith is newFixture with the gateway's event-stream caps.
func newFixtureWith(t *testing.T, opts mcpserver.Options, streams gateway.StreamLimits) *fixture {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	return newFixtureOn(t, opts, streams, ln)
}

// newFixtureOn is newFixtureWith serving on ln, at the address ln reports.
func newFixtureOn(t *testing.T, opts mcpserver.Options, streams gateway.StreamLimits, ln net.Listener) *fixture {
	t.Helper()
	f := &fixture{t: t, home: plexustest.TempHome(t), logs: &syncBuffer{}, upstream: newUpstream(t),
		hosts: http.DefaultTransport.(*http.Transport).Clone()}
	log := slog.New(slog.NewTextHandler(f.logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	f.db = plexustest.MustOpenHomeJournal(t, f.home, nil)
	ctx, cancel := context.WithCancel(context.Background())
	reg := registry.New(registry.Options{Logger: log, Sensitivity: auth.Sensitivity, DefaultWindow: auth.DefaultWindow,
		OnChange:       func(rev int64, added, removed, updated []string) { f.gw.OnRegistryChange(rev, added, removed, updated) },
		OnSourceStatus: func(source string, h plexus.Health) { f.gw.OnSourceStatus(source, h) }})
	reg.AddTransport(portal.NewTransport())
	mcpT := mcpclient.NewTransport()
	reg.AddTransport(mcpT)
	f.gw = mustGateway(t, f.home, f.db, reg, gateway.Config{BaseURL: "http://" + ln.Addr().String(), Home: f.home.Dir, Streams: streams}, log)
	opts.Inbox, opts.Active, opts.Logger, opts.PeerUID = f.home.Inbox, f.home.Active, log, plexushttp.PeerUID
	front := mcpserver.New(mcpserver.Backend{Sessions: f.gw, Grants: f.gw, Invoke: f.gw, Agents: f.gw, Changes: f.gw, Upstream: f.gw}, opts)
	f.ctx, f.reg, f.mcpT, f.front, f.log = ctx, reg, mcpT, front, log
	srv := plexushttp.New(plexushttp.Backend{Agents: f.gw, Grants: f.gw, Invoke: f.gw, Events: f.gw},
		plexushttp.Options{Addr: ln.Addr().String(), Logger: log, MCP: front})
	var wg sync.WaitGroup
	wg.Add(3)
	go func() {
		defer wg.Done()
		if err := front.Run(ctx); err != nil {
			t.Errorf("front door: %v", err)
		}
	}()
	go func() {
		defer wg.Done()
		if err := f.gw.Run(ctx); err != nil {
			t.Errorf("gateway: %v", err)
		}
	}()
	go func() {
		defer wg.Done()
		if err := srv.Serve(ctx, ln); err != nil {
			t.Errorf("serve: %v", err)
		}
	}()
	client := f.addSources(ctx, reg, mcpT, log)
	t.Cleanup(func() {
		// A connection the clients dialed but never used would hold the
		// server's graceful shutdown for 5 s (net/http counts a new
		// connection idle only after that).
		f.hosts.CloseIdleConnections()
		cancel()
		wg.Wait()
		client.wait()
	})
	f.base = "http://" + ln.Addr().String()
	f.url = f.base + "/mcp"
	return f
}

// mustGateway builds the gateway the way the daemon does, deciding with the
// owner-confirms policy.
func mustGateway(t *testing.T, home *scaffold.Home, db *journal.DB, reg *registry.Registry, cfg gateway.Config, log *slog.Logger) *gateway.Gateway {
	t.Helper()
	signer, err := auth.NewSigner(home.SigningKey, "plexus", nil)
	if err != nil {
		t.Fatal(err)
	}
	hasher, err := auth.NewHasher(home.HashKey)
	if err != nil {
		t.Fatal(err)
	}
	gw, err := gateway.New(cfg, gateway.Deps{Store: db, Events: db, Registry: reg,
		Signer: signer, Hasher: hasher, Authorizer: auth.UserConfirmAuthorizer{}, Throttle: auth.NewThrottle(nil),
		ConnectionKey: home.ConnectionKey, Logger: log,
		Sources: func(plexus.SourceConfig) (plexus.Source, error) { return nil, errors.New("no owner sources here") }})
	if err != nil {
		t.Fatal(err)
	}
	return gw
}

// runningClient is the ingested MCP server's client, run until the test ends.
type runningClient struct{ done chan struct{} }

func (c runningClient) wait() { <-c.done }

// addSources adds the portal "docs" (read and write entries) and the MCP
// server "up" (its tools: see newUpstream).
func (f *fixture) addSources(ctx context.Context, reg *registry.Registry, mcpT *mcpclient.Transport, log *slog.Logger) runningClient {
	t := f.t
	dir := t.TempDir()
	f.portalDir = dir
	if err := os.WriteFile(filepath.Join(dir, "hello.txt"), []byte("hello from the portal"), 0o600); err != nil {
		t.Fatal(err)
	}
	src, err := portal.NewSource("docs", dir)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := reg.Add(ctx, src); err != nil {
		t.Fatal(err)
	}
	c, err := mcpclient.New("up", mcpclient.ServerConfig{URL: f.upstream.url}, mcpclient.Options{Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	mcpT.Attach(c)
	rc := runningClient{done: make(chan struct{})}
	go func() {
		defer close(rc.done)
		if err := c.Run(ctx); err != nil && ctx.Err() == nil {
			t.Errorf("mcp client: %v", err)
		}
	}()
	select {
	case <-c.Ready():
	case <-time.After(30 * time.Second):
		t.Fatal("the upstream MCP server was not listed")
	}
	if _, err := reg.Add(ctx, c); err != nil {
		t.Fatal(err)
	}
	return rc
}

// agent connects an agent (with the owner's starting grants) and enrolls
// it, answering its PAT.
func (f *fixture) agent(id string, grants ...plexus.ConnectGrant) string {
	f.t.Helper()
	ctx := context.Background()
	conn, err := f.gw.ConnectAgent(ctx, gateway.Credentials{ConnectionKey: f.home.ConnectionKey},
		plexus.ConnectRequest{AgentID: id, Grants: grants})
	if err != nil {
		f.t.Fatal(err)
	}
	enr, err := f.gw.Enroll(ctx, "127.0.0.1", plexus.EnrollRequest{Code: conn.Code})
	if err != nil {
		f.t.Fatal(err)
	}
	return enr.PAT
}

// standing is the owner's until-revoked starting grant of id.
func standing(id string, verbs ...plexus.Verb) plexus.ConnectGrant {
	return plexus.ConnectGrant{CapabilityID: id, Verbs: verbs, TrustWindow: &plexus.TrustWindow{Kind: plexus.WindowUntilRevoked}}
}

// bearerTransport adds the agent's PAT to every request, as a host's
// config does.
type bearerTransport struct {
	pat  string
	base http.RoundTripper
}

func (b bearerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.pat)
	return b.base.RoundTrip(r)
}

// connect opens an MCP session as the host name, over real Streamable HTTP,
// with the official Go SDK client.
func (f *fixture) connect(pat, name string, opts *mcp.ClientOptions) *mcp.ClientSession {
	f.t.Helper()
	return f.connectVersion(pat, name, "2025-11-25", opts)
}

func (f *fixture) connectVersion(pat, name, version string, opts *mcp.ClientOptions) *mcp.ClientSession {
	f.t.Helper()
	c := mcp.NewClient(&mcp.Implementation{Name: name, Version: "1.2.3"}, opts)
	tr := &mcp.StreamableClientTransport{Endpoint: f.url,
		HTTPClient: &http.Client{Transport: bearerTransport{pat: pat, base: f.hosts}}}
	cs, err := c.Connect(context.Background(), tr, &mcp.ClientSessionOptions{ProtocolVersion: version})
	if err != nil {
		f.t.Fatalf("connect: %v", err)
	}
	f.t.Cleanup(func() {
		if err := cs.Close(); err != nil {
			f.t.Logf("close session: %v", err)
		}
	})
	return cs
}

// actions lists the journal's rows' action types.
func (f *fixture) actions() []string {
	f.t.Helper()
	rows, err := f.db.Activity(context.Background(), journal.Filter{})
	if err != nil {
		f.t.Fatal(err)
	}
	out := make([]string, len(rows))
	for i, r := range rows {
		out[i] = r.ActionType
	}
	return out
}

// pendingIDs lists the decisions waiting for the owner.
func (f *fixture) pendingIDs() []string {
	f.t.Helper()
	resp, err := f.gw.AdminPending(context.Background(), gateway.Credentials{ConnectionKey: f.home.ConnectionKey})
	if err != nil {
		f.t.Fatal(err)
	}
	var ids []string
	for _, p := range resp.Pending {
		ids = append(ids, p.ID)
	}
	return ids
}

// awaitPending waits until one decision waits for the owner, and answers it.
func (f *fixture) awaitPending() string {
	f.t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		if ids := f.pendingIDs(); len(ids) > 0 {
			return ids[0]
		}
		time.Sleep(10 * time.Millisecond)
	}
	f.t.Fatal("no decision was put up")
	return ""
}

// decide is the owner's decision through the one decision function.
func (f *fixture) decide(id string, approve bool, reason string) {
	f.t.Helper()
	if _, err := f.gw.Decide(context.Background(), plexus.Decision{PendingID: id, Approve: approve,
		DecidedBy: "owner", Via: "cli", Reason: reason}); err != nil {
		f.t.Fatal(err)
	}
}

// upstream is an MCP server on the official Go SDK, over Streamable HTTP
// on 127.0.0.1, that Plexus ingests as "up": "count" reports progress,
// "block" runs until it is cancelled, "wipe" is destructive (execute).
type upstream struct {
	url string
	mu  sync.Mutex
	// calls counts each tool's calls; cancelled is closed when "block"
	// saw its context end.
	calls     map[string]int
	cancelled chan struct{}
	// release ends every held "count" call.
	release     chan struct{}
	releaseOnce sync.Once
}

func (u *upstream) releaseHeld() { u.releaseOnce.Do(func() { close(u.release) }) }

func newUpstream(t *testing.T) *upstream {
	u := &upstream{calls: map[string]int{}, cancelled: make(chan struct{}), release: make(chan struct{})}
	t.Cleanup(u.releaseHeld)
	s := mcp.NewServer(&mcp.Implementation{Name: "up", Version: "1"}, nil)
	ro, destructive := true, true
	type countIn struct {
		N int `json:"n"`
		// Hold keeps the call running after its progress until the test
		// releases it, so the progress is seen while the call runs.
		Hold bool `json:"hold,omitempty"`
	}
	type countOut struct {
		Counted int `json:"counted"`
	}
	mcp.AddTool(s, &mcp.Tool{Name: "count", Description: "counts to n, reporting progress",
		Annotations: &mcp.ToolAnnotations{ReadOnlyHint: ro}},
		func(ctx context.Context, req *mcp.CallToolRequest, in countIn) (*mcp.CallToolResult, countOut, error) {
			u.hit("count")
			for i := 1; i <= in.N; i++ {
				if tok := req.Params.GetProgressToken(); tok != nil {
					if err := req.Session.NotifyProgress(ctx, &mcp.ProgressNotificationParams{ProgressToken: tok,
						Progress: float64(i), Total: float64(in.N), Message: "step"}); err != nil {
						return nil, countOut{}, err
					}
				}
			}
			if in.Hold {
				select {
				case <-u.release:
				case <-ctx.Done():
					return nil, countOut{}, ctx.Err()
				}
			}
			return nil, countOut{Counted: in.N}, nil
		})
	var once sync.Once
	mcp.AddTool(s, &mcp.Tool{Name: "block", Description: "runs until cancelled",
		Annotations: &mcp.ToolAnnotations{ReadOnlyHint: ro}},
		func(ctx context.Context, req *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, struct{}, error) {
			u.hit("block")
			<-ctx.Done()
			once.Do(func() { close(u.cancelled) })
			return nil, struct{}{}, ctx.Err()
		})
	mcp.AddTool(s, &mcp.Tool{Name: "wipe", Description: "deletes everything",
		Annotations: &mcp.ToolAnnotations{DestructiveHint: &destructive}},
		func(ctx context.Context, req *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, struct{}, error) {
			u.hit("wipe")
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "wiped"}}}, struct{}{}, nil
		})
	ts := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s }, nil))
	t.Cleanup(ts.Close)
	u.url = ts.URL
	return u
}

func (u *upstream) hit(tool string) {
	u.mu.Lock()
	defer u.mu.Unlock()
	u.calls[tool]++
}

func (u *upstream) count(tool string) int {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.calls[tool]
}
