package mcphost

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/plexus-gw/plexus"
	"github.com/plexus-gw/plexus/registry"
	"github.com/plexus-gw/plexus/scaffold"
	"github.com/plexus-gw/plexus/transports/mcpclient"
	"github.com/plexus-gw/plexus/watcher"
)

// Registry is what the manager needs of the registry: each server is a
// source, added once it listed (or after a wait), refreshed when it lists
// something new, removed when it stops. Safe for concurrent use: the
// manager calls it from each server's goroutines.
type Registry interface {
	Add(ctx context.Context, src plexus.Source) (registry.AddResult, error)
	Refresh(ctx context.Context, id string) error
	Remove(ctx context.Context, id string) error
	ReportHealth(id string, h plexus.Health)
}

// Journal is what the manager needs of the gateway: journal what it did,
// forget a removed server's pins, and report a journal write that failed
// where there is no caller to return it to. Safe for concurrent use.
type Journal interface {
	Note(ctx context.Context, action, target, traceID string, payload map[string]any)
	ForgetPins(ctx context.Context, source string) error
	JournalFailed(what string, err error)
}

// SignIns is what the manager needs of the OAuth client (the daemon hands
// in the oauth package's manager): a url server's handler, the test for an
// error that means the owner must sign in, and the logout of a server
// that left mcp.json. Safe for concurrent use.
type SignIns interface {
	Handler(server, serverURL string, cfg SignInConfig) auth.OAuthHandler
	Needed(err error) bool
	Forget(ctx context.Context, server string)
}

// Config is what a [Manager] runs with; every field is required except
// Logger (nil discards) and SignIns (nil: no server signs in).
type Config struct {
	// Home is PLEXUS_HOME; the manager reads Home/mcp.json.
	Home      string
	Registry  Registry
	Journal   Journal
	Pins      mcpclient.PinCheck
	Transport *mcpclient.Transport
	// Secret looks up a ${secret:NAME} when a server starts.
	Secret func(name string) (string, error)
	// Env is the base environment of a stdio server's child.
	Env       []string
	Processes mcpclient.Processes
	Logger    *slog.Logger
	SignIns   SignIns
}

// mcpReadyWait is how long a newly started server may take to list its
// definitions before its source is registered anyway (empty, and
// unavailable until it answers): a slow server delays nothing else.
const mcpReadyWait = 10 * time.Second

// Manager runs the servers of mcp.json: it reads the file at start and
// whenever it changes, starts each server's client, registers it as the
// source mcp:<name> (through the pins: a changed definition is held), and
// restarts or stops a server whose entry changed or went away. A file
// that does not parse changes nothing: the servers keep running as they
// were, and the problem is logged and journaled once.
type Manager struct {
	cfg   Config
	path  string
	log   *slog.Logger
	watch *watcher.Watcher

	mu       sync.Mutex // guards servers and lastErr
	servers  map[string]*mcpRunning
	lastErr  string
	problems map[string]string // server → the problem last journaled for it
}

// mcpRunning is one started server.
type mcpRunning struct {
	raw     json.RawMessage
	client  *mcpclient.Client
	signsIn bool // the client has an OAuth handler
	cancel  context.CancelFunc
	done    chan struct{} // closed when the client's Run and registration returned
}

// New builds the manager and its watch on cfg.Home/mcp.json; [Manager.Run]
// starts the servers.
func New(cfg Config) (*Manager, error) {
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	w, err := watcher.New([]string{cfg.Home}, watcher.Options{Logger: log, Settled: true,
		Only: func(name string) bool { return name == scaffold.FileMCPConfig }})
	if err != nil {
		return nil, err
	}
	return &Manager{cfg: cfg, path: filepath.Join(cfg.Home, scaffold.FileMCPConfig), log: log,
		watch: w, servers: map[string]*mcpRunning{}, problems: map[string]string{}}, nil
}

// Run applies mcp.json at start and after every change until ctx ends,
// then stops every server.
func (m *Manager) Run(ctx context.Context) error {
	wctx, cancel := context.WithCancel(ctx)
	werr := make(chan error, 1)
	go func() { werr <- m.watch.Run(wctx) }()
	defer func() {
		cancel()
		<-werr
		m.stopAll()
	}()
	for {
		select {
		case <-ctx.Done():
			return nil
		case _, ok := <-m.watch.Hints():
			if !ok {
				return nil
			}
			m.reload(ctx)
		case err := <-werr:
			werr <- err // for the deferred wait
			if err != nil && ctx.Err() == nil {
				return err
			}
			return nil
		}
	}
}

// reload brings the running servers in line with the file.
func (m *Manager) reload(ctx context.Context) {
	doc, err := ReadFile(m.path)
	if err != nil {
		m.mu.Lock()
		again := m.lastErr == err.Error()
		m.lastErr = err.Error()
		m.mu.Unlock()
		if !again {
			m.log.Error("mcp.json not applied; the servers keep running as they were", "err", err)
			m.note(ctx, "mcp.config_invalid", "mcp.json", map[string]any{"problem": err.Error()})
		}
		return
	}
	m.mu.Lock()
	m.lastErr = ""
	m.mu.Unlock()
	want := map[string]bool{}
	for _, name := range doc.Names() {
		want[name] = true
		s, err := doc.Server(name)
		if err != nil {
			m.problem(ctx, name, err.Error())
			continue // a broken entry leaves its server as it was
		}
		m.mu.Lock()
		cur := m.servers[name]
		m.mu.Unlock()
		switch {
		case s.Disabled:
			if cur != nil {
				m.stop(ctx, name, "disabled in mcp.json", false)
			}
		case cur != nil && bytes.Equal(cur.raw, s.Raw):
		default:
			if cur != nil {
				m.stop(ctx, name, "its entry in mcp.json changed", false)
			}
			m.start(ctx, s)
		}
	}
	m.mu.Lock()
	var gone []string
	for name := range m.servers {
		if !want[name] {
			gone = append(gone, name)
		}
	}
	for name := range m.problems {
		if !want[name] {
			delete(m.problems, name)
		}
	}
	m.mu.Unlock()
	for _, name := range gone {
		m.stop(ctx, name, "removed from mcp.json", true)
	}
}

// problem logs and journals a server's problem once (until it changes).
func (m *Manager) problem(ctx context.Context, name, problem string) {
	m.mu.Lock()
	again := m.problems[name] == problem
	m.problems[name] = problem
	m.mu.Unlock()
	if again {
		return
	}
	m.log.Error("MCP server not started", "server", name, "problem", problem)
	m.note(ctx, "mcp.server_failed", "mcp:"+name, map[string]any{"server": name, "problem": problem})
}

func (m *Manager) note(ctx context.Context, action, target string, payload map[string]any) {
	m.cfg.Journal.Note(ctx, action, target, "", payload)
}

// start launches server s. Its secrets are read now, so a secret set or
// changed later takes effect when the entry is next changed or Plexus
// restarts.
func (m *Manager) start(ctx context.Context, s Server) {
	lookup := m.cfg.Secret
	env, err := ResolveSecrets(s.Env, lookup)
	if err == nil {
		var h map[string]string
		h, err = ResolveSecrets(s.Headers, lookup)
		s.Headers = h
	}
	if err != nil {
		m.problem(ctx, s.Name, err.Error())
		return
	}
	signIn, err := m.signIn(s)
	if err != nil {
		m.problem(ctx, s.Name, err.Error())
		return
	}
	var c *mcpclient.Client
	// Closed when the server first asks for sign-in: its source is
	// registered then (unavailable, with the fix), not after mcpReadyWait.
	needsSignIn := make(chan struct{})
	var signInOnce sync.Once
	rctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	c, err = mcpclient.New(s.Name, mcpclient.ServerConfig{Command: s.Command, Args: s.Args, Env: env, URL: s.URL, Headers: s.Headers},
		mcpclient.Options{Logger: m.log, Env: slices.Clone(m.cfg.Env), Processes: m.cfg.Processes, SignIn: signIn,
			OnChange: func() { m.refresh(c) },
			OnHealth: func(h plexus.Health) {
				// A server being stopped (removed, changed, shutdown) is
				// not an outage: its source goes with it.
				if rctx.Err() == nil {
					m.cfg.Registry.ReportHealth(c.ID(), h)
				}
				if h.NeedsSignIn {
					signInOnce.Do(func() { close(needsSignIn) })
				}
			},
		})
	if err != nil {
		cancel()
		m.problem(ctx, s.Name, err.Error())
		return
	}
	src := &mcpclient.Pinned{Client: c, Check: m.cfg.Pins}
	run := &mcpRunning{raw: s.Raw, client: c, signsIn: signIn != nil, cancel: cancel, done: make(chan struct{})}
	m.mu.Lock()
	delete(m.problems, s.Name)
	m.servers[s.Name] = run
	m.mu.Unlock()
	m.cfg.Transport.Attach(c)
	m.note(ctx, "mcp.server_started", c.ID(), map[string]any{"server": s.Name, "at": s.Where()})
	var wg sync.WaitGroup
	wg.Add(2)
	go func() {
		defer wg.Done()
		if err := c.Run(rctx); err != nil {
			m.log.Warn("MCP client ended", "server", s.Name, "err", err)
		}
	}()
	go func() {
		defer wg.Done()
		select {
		case <-c.Ready():
		case <-needsSignIn:
		case <-time.After(mcpReadyWait):
		case <-rctx.Done():
			return
		}
		if _, err := m.cfg.Registry.Add(rctx, src); err != nil && rctx.Err() == nil {
			m.log.Error("register MCP server", "server", s.Name, "err", err)
			m.note(rctx, "mcp.server_failed", c.ID(), map[string]any{"server": s.Name, "problem": err.Error()})
		}
	}()
	go func() {
		wg.Wait()
		close(run.done)
	}()
}

// refresh rescans a server's source after it listed something new; before
// its registration there is nothing to rescan (Add scans).
func (m *Manager) refresh(c *mcpclient.Client) {
	if c == nil {
		return
	}
	if err := m.cfg.Registry.Refresh(context.Background(), c.ID()); err != nil && !errors.Is(err, registry.ErrUnknownSource) {
		m.log.Warn("rescan MCP server", "server", c.Name(), "err", err)
	}
}

// stop ends server name: its client, its source and its routes. forget
// drops its pins too (it left mcp.json: adding it again starts afresh).
func (m *Manager) stop(ctx context.Context, name, why string, forget bool) {
	m.mu.Lock()
	run := m.servers[name]
	delete(m.servers, name)
	m.mu.Unlock()
	if run == nil {
		return
	}
	run.cancel()
	<-run.done
	id := run.client.ID()
	m.cfg.Transport.Detach(id)
	if err := m.cfg.Registry.Remove(ctx, id); err != nil && !errors.Is(err, registry.ErrUnknownSource) {
		m.log.Warn("unregister MCP server", "server", name, "err", err)
	}
	m.note(ctx, "mcp.server_stopped", id, map[string]any{"server": name, "why": why})
	if forget && m.cfg.SignIns != nil {
		m.cfg.SignIns.Forget(ctx, name) // its tokens go with it
	}
	if forget {
		if err := m.cfg.Journal.ForgetPins(ctx, id); err != nil {
			// The server is gone all the same; its pins stay until the
			// next removal, and the status shows the failed write.
			m.cfg.Journal.JournalFailed("forget pins "+id, err)
		}
	}
}

// stopAll ends every server at shutdown; their sources go with the
// registry, and their pins stay.
func (m *Manager) stopAll() {
	m.mu.Lock()
	runs := m.servers
	m.servers = map[string]*mcpRunning{}
	m.mu.Unlock()
	for _, run := range runs {
		run.cancel()
	}
	for _, run := range runs {
		<-run.done
	}
}
