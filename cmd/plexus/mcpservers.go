package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"path/filepath"
	"sync"
	"time"

	"github.com/plexus-gw/plexus"
	"github.com/plexus-gw/plexus/gateway"
	"github.com/plexus-gw/plexus/platform"
	"github.com/plexus-gw/plexus/registry"
	"github.com/plexus-gw/plexus/scaffold"
	"github.com/plexus-gw/plexus/transports/mcpclient"
	"github.com/plexus-gw/plexus/watcher"
)

// mcpReadyWait is how long a newly started server may take to list its
// definitions before its source is registered anyway (empty, and
// unavailable until it answers): a slow server delays nothing else.
const mcpReadyWait = 10 * time.Second

// mcpManager runs the servers of mcp.json: it reads the file at start and
// whenever it changes, starts each server's client, registers it as the
// source mcp:<name> (through the pins: a changed definition is held), and
// restarts or stops a server whose entry changed or went away. A file
// that does not parse changes nothing: the servers keep running as they
// were, and the problem is logged and journaled once.
type mcpManager struct {
	path  string
	plat  *platform.Services
	reg   *registry.Registry
	gw    *gateway.Gateway
	tr    *mcpclient.Transport
	log   *slog.Logger
	watch *watcher.Watcher

	mu       sync.Mutex // guards servers and lastErr
	servers  map[string]*mcpRunning
	lastErr  string
	problems map[string]string // server → the problem last journaled for it
}

// mcpRunning is one started server.
type mcpRunning struct {
	raw    json.RawMessage
	client *mcpclient.Client
	cancel context.CancelFunc
	done   chan struct{} // closed when the client's Run and registration returned
}

func newMCPManager(home string, plat *platform.Services, reg *registry.Registry, gw *gateway.Gateway, tr *mcpclient.Transport, log *slog.Logger) (*mcpManager, error) {
	w, err := watcher.New([]string{home}, watcher.Options{Logger: log,
		Only: func(name string) bool { return name == scaffold.FileMCPConfig }})
	if err != nil {
		return nil, err
	}
	return &mcpManager{path: filepath.Join(home, scaffold.FileMCPConfig), plat: plat, reg: reg, gw: gw, tr: tr, log: log,
		watch: w, servers: map[string]*mcpRunning{}, problems: map[string]string{}}, nil
}

// Run applies mcp.json at start and after every change until ctx ends,
// then stops every server.
func (m *mcpManager) Run(ctx context.Context) error {
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
func (m *mcpManager) reload(ctx context.Context) {
	doc, err := readMCPDoc(m.path)
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
	for _, name := range doc.names() {
		want[name] = true
		s, err := doc.server(name)
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
func (m *mcpManager) problem(ctx context.Context, name, problem string) {
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

func (m *mcpManager) note(ctx context.Context, action, target string, payload map[string]any) {
	m.gw.Note(ctx, action, target, "", payload)
}

// start launches server s. Its secrets are read now, so a secret set or
// changed later takes effect when the entry is next changed or Plexus
// restarts.
func (m *mcpManager) start(ctx context.Context, s mcpServer) {
	lookup := m.plat.Secret
	env, err := resolveSecrets(s.Env, lookup)
	if err == nil {
		var h map[string]string
		h, err = resolveSecrets(s.Headers, lookup)
		s.Headers = h
	}
	if err != nil {
		m.problem(ctx, s.Name, err.Error())
		return
	}
	var c *mcpclient.Client
	rctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	c, err = mcpclient.New(s.Name, mcpclient.ServerConfig{Command: s.Command, Args: s.Args, Env: env, URL: s.URL, Headers: s.Headers},
		mcpclient.Options{Logger: m.log, Env: m.plat.Env(), Processes: m.plat,
			OnChange: func() { m.refresh(c) },
			OnHealth: func(h plexus.Health) {
				// A server being stopped (removed, changed, shutdown) is
				// not an outage: its source goes with it.
				if rctx.Err() == nil {
					m.reg.ReportHealth(c.ID(), h)
				}
			},
		})
	if err != nil {
		cancel()
		m.problem(ctx, s.Name, err.Error())
		return
	}
	src := &pinnedSource{Client: c, gw: m.gw}
	run := &mcpRunning{raw: s.Raw, client: c, cancel: cancel, done: make(chan struct{})}
	m.mu.Lock()
	delete(m.problems, s.Name)
	m.servers[s.Name] = run
	m.mu.Unlock()
	m.tr.Attach(c)
	m.note(ctx, "mcp.server_started", c.ID(), map[string]any{"server": s.Name, "at": s.describe()})
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
		case <-time.After(mcpReadyWait):
		case <-rctx.Done():
			return
		}
		if _, err := m.reg.Add(rctx, src); err != nil && rctx.Err() == nil {
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
func (m *mcpManager) refresh(c *mcpclient.Client) {
	if c == nil {
		return
	}
	if err := m.reg.Refresh(context.Background(), c.ID()); err != nil && !errors.Is(err, registry.ErrUnknownSource) {
		m.log.Warn("rescan MCP server", "server", c.Name(), "err", err)
	}
}

// stop ends server name: its client, its source and its routes. forget
// drops its pins too (it left mcp.json: adding it again starts afresh).
func (m *mcpManager) stop(ctx context.Context, name, why string, forget bool) {
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
	m.tr.Detach(id)
	if err := m.reg.Remove(ctx, id); err != nil && !errors.Is(err, registry.ErrUnknownSource) {
		m.log.Warn("unregister MCP server", "server", name, "err", err)
	}
	m.note(ctx, "mcp.server_stopped", id, map[string]any{"server": name, "why": why})
	if forget {
		if err := m.gw.ForgetPins(ctx, id); err != nil {
			// The server is gone all the same; its pins stay until the
			// next removal, and the status shows the failed write.
			m.gw.JournalFailed("forget pins "+id, err)
		}
	}
}

// stopAll ends every server at shutdown; their sources go with the
// registry, and their pins stay.
func (m *mcpManager) stopAll() {
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

// pinnedSource is an MCP server's source as the registry sees it: the
// client's projection minus the tools whose definition changed since the
// owner accepted it (gateway.CheckPins). A pin check that fails fails the
// scan, so the registry keeps what it had rather than serve unchecked
// definitions.
type pinnedSource struct {
	*mcpclient.Client
	gw *gateway.Gateway
}

func (p *pinnedSource) Scan(ctx context.Context) ([]plexus.Entry, error) {
	entries, err := p.Client.Scan(ctx)
	if err != nil {
		return nil, err
	}
	var defs []gateway.Definition
	for _, d := range p.Client.Definitions() {
		if d.Primitive != "tool" {
			continue // tools are pinned; resources and prompts are read-only data (docs/mcp.md)
		}
		defs = append(defs, gateway.Definition{EntryID: d.EntryID, Primitive: d.Primitive, Name: d.Name, Hash: d.Hash, Raw: d.Raw})
	}
	held, err := p.gw.CheckPins(ctx, p.ID(), defs)
	if err != nil {
		return nil, err
	}
	if len(held) == 0 {
		return entries, nil
	}
	out := entries[:0:0]
	for _, e := range entries {
		if !held[e.ID] {
			out = append(out, e)
		}
	}
	return out, nil
}
