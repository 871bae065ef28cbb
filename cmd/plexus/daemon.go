package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"runtime"
	"strconv"
	"sync"
	"time"

	"github.com/plexus-gw/plexus"
	"github.com/plexus-gw/plexus/auth"
	"github.com/plexus-gw/plexus/gateway"
	plexushttp "github.com/plexus-gw/plexus/http"
	"github.com/plexus-gw/plexus/inbox"
	"github.com/plexus-gw/plexus/ipchost"
	"github.com/plexus-gw/plexus/journal"
	"github.com/plexus-gw/plexus/mcphost"
	"github.com/plexus-gw/plexus/platform"
	"github.com/plexus-gw/plexus/registry"
	"github.com/plexus-gw/plexus/scaffold"
	"github.com/plexus-gw/plexus/sources/portal"
	"github.com/plexus-gw/plexus/transports/cliexec"
	"github.com/plexus-gw/plexus/transports/ipc"
	"github.com/plexus-gw/plexus/transports/localrest"
	"github.com/plexus-gw/plexus/transports/mcpclient"
	"github.com/plexus-gw/plexus/transports/skill"
	"github.com/plexus-gw/plexus/transports/stdio"
	"github.com/plexus-gw/plexus/transports/workflow"
	"github.com/plexus-gw/plexus/watcher"
)

// inboxDebounce is how long the decision folders must stay quiet before a
// look: short, because a move is the owner waiting for an answer, and long
// enough to take an editor's save (temp file, rename) as one change.
const inboxDebounce = 10 * time.Millisecond

// daemonOptions configure one gateway process. Addr "" means network.json's
// bind and port.
type daemonOptions struct {
	Home       string
	Addr       string
	Logger     *slog.Logger
	Authorizer plexus.Authorizer // nil means the shipped UserConfirmAuthorizer
	// RateLimit is calls per second per agent (burst 4×); 0 means 50.
	RateLimit float64
	// Clock drives every expiry (tokens, windows, codes, pending); nil means
	// time.Now. Tests move it to expire things without sleeping.
	Clock func() time.Time
	// Owner names who decides by moving files; nil means deciderIdentity.
	Owner func() string
	// InboxInterval is the period of the full inbox reconcile; 0 means
	// inbox.DefaultInterval.
	InboxInterval time.Duration
	// Env is the environment transports' children start from (PATH is
	// enriched, PLEXUS_* dropped); nil means the daemon's own.
	Env []string
	// HealthTTL is how long a source's health probe is trusted; 0 means
	// registry.DefaultHealthTTL.
	HealthTTL time.Duration
	// IPC tunes the ipc providers' hub (heartbeats, backoffs, grace);
	// its zero value is the default. The socket, logger and callbacks are
	// the daemon's.
	IPC ipc.HubOptions
}

// daemon is one wired gateway: the journal, the registry and its
// transports, the gateway and the loopback server. This is the only place
// the packages meet.
type daemon struct {
	home *scaffold.Home
	db   *journal.DB
	reg  *registry.Registry
	gw   *gateway.Gateway
	srv  *plexushttp.Server
	ln   net.Listener
	log  *slog.Logger
	// Files as API: the reconciler, the watcher that hints it, and the
	// owner's notify command.
	inbox  *inbox.Reconciler
	watch  *watcher.Watcher
	notify *inbox.Notifier
	// providers runs the ipc tool providers of providers.json.
	providers *ipchost.Supervisor
	// rest and stdio are the transports that hold connections or child
	// processes between calls; Close ends them at shutdown.
	rest  *localrest.Transport
	stdio *stdio.Transport
	plat  *platform.Services
	// mcp runs the servers of mcp.json, each a source behind the mcp
	// transport.
	mcp *mcphost.Manager
}

// startDaemon initializes PLEXUS_HOME on first start, verifies it, opens the
// journal, loads the owner's sources and binds the listener. It does not
// serve yet: call run.
func startDaemon(ctx context.Context, o daemonOptions) (d *daemon, err error) {
	log := o.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if _, err := scaffold.Init(o.Home, scaffold.InitOptions{NewConnectionKey: auth.NewConnectionKey}); err != nil {
		return nil, fmt.Errorf("initialize %s: %w", o.Home, err)
	}
	if err := scaffold.Verify(o.Home); err != nil {
		return nil, err
	}
	home, err := scaffold.Load(o.Home)
	if err != nil {
		return nil, err
	}
	addr := o.Addr
	if addr == "" {
		addr = net.JoinHostPort(home.Network.Bind, strconv.Itoa(home.Network.Port))
	}

	db, err := journal.Open(ctx, home.Journal, journal.Options{AuditDir: home.Audit, Logger: log, Clock: o.Clock,
		ChainKey: home.ChainKey, AnchorPath: home.Anchor})
	if err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			db.Close()
		}
	}()
	hasher, err := auth.NewHasher(home.HashKey)
	if err != nil {
		return nil, fmt.Errorf("hash-key: %w", err)
	}
	signer, err := auth.NewSigner(home.SigningKey, "plexus", o.Clock)
	if err != nil {
		return nil, fmt.Errorf("signing-key: %w", err)
	}
	rate := o.RateLimit
	if rate == 0 {
		rate = 50
	}
	limiter, err := auth.NewRateLimiter(rate, int(rate*4), o.Clock)
	if err != nil {
		return nil, err
	}
	authorizer := o.Authorizer
	if authorizer == nil {
		authorizer = auth.UserConfirmAuthorizer{}
	}

	d = &daemon{home: home, db: db, log: log}
	// The registry calls back into the gateway, which needs the registry:
	// the callbacks close over d and run only after both exist.
	d.reg = registry.New(registry.Options{
		HealthTTL:     o.HealthTTL,
		Logger:        log,
		Clock:         o.Clock,
		Sensitivity:   auth.Sensitivity,
		DefaultWindow: auth.DefaultWindow,
		OnChange: func(rev int64, added, removed, updated []string) {
			d.gw.OnRegistryChange(rev, added, removed, updated)
		},
		OnSourceStatus: func(source string, h plexus.Health) { d.gw.OnSourceStatus(source, h) },
	})
	d.reg.AddTransport(portal.NewTransport())
	env := o.Env
	if env == nil {
		env = os.Environ()
	}
	userHome, _ := os.UserHomeDir() // without one, the ~ folders are left out of the enriched PATH
	plat := platform.New(platform.Options{Home: home.Dir, UserHome: userHome, Env: env, GOOS: runtime.GOOS, Logger: log})
	d.plat = plat
	d.rest = localrest.New(plat, plat, localrest.Options{})
	defer func() {
		if err != nil {
			d.rest.Close()
		}
	}()
	d.reg.AddTransport(d.rest)
	d.reg.AddTransport(cliexec.New(plat, plat, cliexec.Options{}))
	d.stdio = stdio.New(plat, plat, stdio.Options{Logger: log}) // backoffs run on real time, whatever the daemon's clock
	defer func() {
		if err != nil {
			d.stdio.Close()
		}
	}()
	d.reg.AddTransport(d.stdio)
	d.providers, err = ipchost.New(d.reg, home.Dir, home.SocketDir, plat, o.IPC, log, d.note)
	if err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			d.providers.Hub().Close()
		}
	}()
	d.reg.AddTransport(d.providers.Hub())
	d.reg.AddTransport(skill.Transport{})
	d.reg.AddTransport(workflow.New(d.reg.Entry))
	mcpTransport := mcpclient.NewTransport()
	d.reg.AddTransport(mcpTransport)

	// Bind before anything serves, so the base URL and the Host guard know
	// the real port (":0" in tests) and a taken port fails at start.
	d.ln, err = net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("listen on %s: %w (is another plexus running? set --addr or network.json)", addr, err)
	}
	baseURL := "http://" + d.ln.Addr().String()

	d.gw, err = gateway.New(gateway.Config{BaseURL: baseURL, Home: home.Dir,
		SameUser: gateway.SameUserPolicy{Detect: true, OwnerUID: os.Getuid(), Refuse: home.Auth.StrictSameUser},
		Streams:  gateway.StreamLimits{PerSession: home.Auth.MaxStreamsPerSession, PerAgent: home.Auth.MaxStreamsPerAgent},
	}, gateway.Deps{
		Store: db, Events: db, Registry: d.reg, Signer: signer, Hasher: hasher,
		Trust:      auth.Policy{TokenLifetime: home.Auth.TokenLifetime(), MaxTrustWindow: home.Auth.MaxTrustWindow()},
		Authorizer: authorizer, Throttle: auth.NewThrottle(o.Clock), Limiter: limiter,
		Sources:       d.sourceFactory,
		ConnectionKey: home.ConnectionKey,
		SaveConnectionKey: func(key string) error {
			return scaffold.WriteConnectionKey(home.Dir, key)
		},
		Logger: log, Clock: o.Clock,
		// Set before serving starts, so every call sees d.inbox.
		OnDecision: func(id string) { d.inbox.Touch(id) },
		// The path a decision shows is the one the cli and stdio transports run.
		Binaries: d.plat.Resolve,
	})
	if err != nil {
		d.ln.Close()
		return nil, err
	}
	// Before any child starts: what a crashed run left goes first.
	d.reapChildren(ctx)
	owner := o.Owner
	if owner == nil {
		owner = sync.OnceValue(deciderIdentity)
	}
	d.notify = inbox.NewNotifier(home.Auth.Notify, d.plat, log)
	d.inbox, err = inbox.New(inbox.Config{Home: home.Dir, Owner: owner, Clock: o.Clock, Logger: log,
		Notify: d.notify.Send, Interval: o.InboxInterval, JournalFailed: d.gw.JournalFailed,
		Installed: func(source string) bool { _, ok := d.reg.Source(source); return ok }}, db, d.gw)
	if err != nil {
		d.ln.Close()
		return nil, err
	}
	d.watch, err = watcher.New([]string{home.Inbox, home.Active, home.Rejected, home.Archive},
		watcher.Options{Debounce: inboxDebounce, Logger: log})
	if err != nil {
		d.ln.Close()
		return nil, err
	}
	d.mcp, err = mcphost.New(mcphost.Config{Home: home.Dir, Registry: d.reg, Journal: d.gw, Pins: d.checkPins,
		Transport: mcpTransport, Secret: plat.Secret, Env: plat.Env(), Processes: plat, Logger: log})
	if err != nil {
		d.ln.Close()
		return nil, err
	}
	d.srv = plexushttp.New(httpBackend(d.gw), plexushttp.Options{Addr: d.ln.Addr().String(), AllowedOrigins: home.Network.AllowedOrigins, Logger: log,
		Providers: d.providers})
	if err := d.gw.LoadSources(ctx); err != nil {
		d.ln.Close()
		return nil, err
	}
	d.providers.Load(ctx)
	return d, nil
}

// sourceFactory builds a live source from its persisted configuration: the
// one place that knows which kinds of owner-added source exist. An
// extension's workflow members are checked against the registry as it
// stands.
func (d *daemon) sourceFactory(cfg plexus.SourceConfig) (plexus.Source, error) {
	switch cfg.Kind {
	case "portal":
		var pc struct {
			Path  string `json:"path"`
			Alias string `json:"alias"`
		}
		if err := json.Unmarshal(cfg.Config, &pc); err != nil {
			return nil, fmt.Errorf("portal config: %w", err)
		}
		return portal.NewSource(pc.Alias, pc.Path)
	case extensionKind:
		m, err := registry.ParseManifest(cfg.Config)
		if err != nil {
			return nil, err
		}
		// Managed unless stored as an agent's: a stored config can only
		// lower the provenance, never claim first-party.
		prov := plexus.ProvenanceManaged
		if cfg.Provenance == plexus.ProvenanceExtension {
			prov = plexus.ProvenanceExtension
		}
		src, err := registry.NewExtensionSource(m, prov, d.reg.Entry)
		if err != nil {
			return nil, err
		}
		return src.WithHealth(d.reg.CheckRequirements), nil
	}
	return nil, fmt.Errorf("unknown source kind %q (known: portal, extension)", cfg.Kind)
}

// run serves until ctx ends, then shuts everything down in order.
func (d *daemon) run(ctx context.Context) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	serve := func(ctx context.Context) error { return d.srv.Serve(ctx, d.ln) }
	services := []func(context.Context) error{serve, d.gw.Run, d.reg.Run, d.inbox.Run, d.watch.Run, d.notify.Run,
		d.forwardHints, d.mcp.Run, d.providers.Run}
	errc := make(chan error, len(services))
	for _, run := range services {
		go func() { errc <- run(ctx) }()
	}
	var first error
	for range services {
		if err := <-errc; err != nil && first == nil && !errors.Is(err, context.Canceled) {
			first = err
			cancel()
		}
	}
	d.rest.Close()
	if err := d.stdio.Close(); err != nil {
		d.log.Warn("stop stdio tools", "err", err)
	}
	if err := d.db.Close(); err != nil && first == nil {
		first = err
	}
	return first
}

// forwardHints hands the watcher's hints to the reconciler until the
// watcher closes its channel (when ctx ends).
func (d *daemon) forwardHints(context.Context) error {
	for h := range d.watch.Hints() {
		d.inbox.Hint(h.Full, h.Dirs)
	}
	return nil
}

// note journals what the ipc hub observed, through the gateway.
func (d *daemon) note(action, target, trace string, payload map[string]any) {
	d.gw.Note(context.Background(), action, target, trace, payload)
}

// checkPins hands an MCP server's tool definitions to the gateway's pins.
func (d *daemon) checkPins(ctx context.Context, source string, defs []mcpclient.Definition) (map[string]bool, error) {
	var gdefs []gateway.Definition
	for _, def := range defs {
		gdefs = append(gdefs, gateway.Definition{EntryID: def.EntryID, Primitive: def.Primitive, Name: def.Name, Hash: def.Hash, Raw: def.Raw})
	}
	return d.gw.CheckPins(ctx, source, gdefs)
}

func (d *daemon) baseURL() string { return "http://" + d.ln.Addr().String() }
