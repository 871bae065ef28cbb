// Package daemon is the one composition root of the Plexus gateway: it
// opens the journal under PLEXUS_HOME, builds the registry with every
// transport, the gateway, the files-as-API services, the MCP servers'
// manager and the ipc providers' supervisor, binds the loopback listener,
// and runs them all until its context ends. `plexus serve` parses flags and
// calls it; the end-to-end suites start it in-process with their own clock.
// This is the only package where the others meet.
package daemon

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
	"time"

	"github.com/plexus-gw/plexus"
	"github.com/plexus-gw/plexus/auth"
	"github.com/plexus-gw/plexus/console"
	"github.com/plexus-gw/plexus/gateway"
	plexushttp "github.com/plexus-gw/plexus/http"
	"github.com/plexus-gw/plexus/inbox"
	"github.com/plexus-gw/plexus/ipchost"
	"github.com/plexus-gw/plexus/journal"
	"github.com/plexus-gw/plexus/mcphost"
	"github.com/plexus-gw/plexus/mcpserver"
	"github.com/plexus-gw/plexus/platform"
	"github.com/plexus-gw/plexus/registry"
	"github.com/plexus-gw/plexus/scaffold"
	"github.com/plexus-gw/plexus/sources/portal"
	"github.com/plexus-gw/plexus/telemetry"
	"github.com/plexus-gw/plexus/transports/cliexec"
	"github.com/plexus-gw/plexus/transports/ipc"
	"github.com/plexus-gw/plexus/transports/localrest"
	"github.com/plexus-gw/plexus/transports/mcpclient"
	"github.com/plexus-gw/plexus/transports/skill"
	"github.com/plexus-gw/plexus/transports/stdio"
	"github.com/plexus-gw/plexus/transports/workflow"
	"github.com/plexus-gw/plexus/watcher"
)

// InboxDebounce is how long the decision folders must stay quiet before a
// look: short, because a move is the owner waiting for an answer, and long
// enough to take an editor's save (temp file, rename) as one change.
const InboxDebounce = 10 * time.Millisecond

// Options configure one gateway process. Addr "" means network.json's
// bind and port.
type Options struct {
	Home       string
	Addr       string
	Logger     *slog.Logger
	Authorizer plexus.Authorizer // nil means the shipped UserConfirmAuthorizer
	// RateLimit, when set, replaces auth-config.json's default calls per
	// second per agent (burst 4×), at start and at each edit; per-agent
	// overrides still apply.
	RateLimit float64
	// Clock drives every expiry (tokens, windows, codes, pending); nil means
	// time.Now. Tests move it to expire things without sleeping.
	Clock func() time.Time
	// Owner names who decides by moving files (for `plexus serve`, `git
	// config user.email`, else $USER); it is called for each decision made
	// by a move, so a slow one should remember its answer. Required.
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
	// PruneEvery is the period of the journal's pruning (journal.Pruner);
	// 0 means journal.DefaultPruneEvery.
	PruneEvery time.Duration
	// Tracing receives the daemon's spans (Run shuts it down); nil means
	// OTLP when OTEL_EXPORTER_OTLP_ENDPOINT is set in Env, else none.
	Tracing *telemetry.Tracing
	// SignIn, when set, replaces the daemon's OAuth client as what starts
	// the sign-in of a remote MCP server the owner approves in the inbox
	// (gateway.Deps.SignIn): the end-to-end suites record the calls.
	SignIn gateway.SignInStarter
}

// Daemon is one wired gateway: the journal, the registry and its
// transports, the gateway and the loopback server.
type Daemon struct {
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
	// front is the MCP front door; views are the owner's per-agent views
	// of it, reloaded on viewWatch's hints.
	front     *mcpserver.Server
	views     *mcpserver.ViewFile
	viewWatch *watcher.Watcher
	// obs holds the metrics and the tracer (telemetry.go).
	obs *observability
	// pruner keeps journal.db bounded (prune.go).
	pruner *journal.Pruner
	// limitWatch hints edits of auth-config.json, whose limits apply
	// without a restart.
	limitWatch *watcher.Watcher
	rateLimit  float64 // Options.RateLimit, applied at each edit too
	// console is the owner's web console at /console/.
	console *console.Console
	// signIn is the OAuth client of remote MCP servers and the owner's
	// sign-in to them (signin.go).
	signIn *signIns
}

// Start initializes PLEXUS_HOME on first start, verifies it, opens the
// journal, loads the owner's sources and binds the listener. It does not
// serve yet: call Run. An error leaves nothing open.
func Start(ctx context.Context, o Options) (*Daemon, error) {
	if o.Owner == nil {
		return nil, errors.New("daemon options: Owner is required (who decides by moving files)")
	}
	log := o.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	home, err := prepareHome(o.Home)
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
	d := &Daemon{home: home, db: db, log: log}
	d.pruner = d.newPruner(o)
	if err := d.start(ctx, o, addr); err != nil {
		d.closeStarted()
		return nil, err
	}
	if err := d.writeAddress(); err != nil {
		d.closeStarted()
		return nil, err
	}
	return d, nil
}

// prepareHome initializes PLEXUS_HOME on first start, verifies it and
// loads it.
func prepareHome(dir string) (*scaffold.Home, error) {
	if _, err := scaffold.Init(dir, scaffold.InitOptions{NewConnectionKey: auth.NewConnectionKey}); err != nil {
		return nil, fmt.Errorf("initialize %s: %w", dir, err)
	}
	if err := scaffold.Verify(dir); err != nil {
		return nil, err
	}
	return scaffold.Load(dir)
}

// start wires the daemon on its open journal, in order: the registry and
// its transports, the listener, the gateway, the files-as-API services and
// the MCP servers, then loads the owner's sources. What it started before
// an error is closed by closeStarted.
func (d *Daemon) start(ctx context.Context, o Options, addr string) error {
	deps, err := gatewayDeps(d.home, o)
	if err != nil {
		return err
	}
	mcpTransport, err := d.addTransports(o)
	if err != nil {
		return err
	}
	// Bind before anything serves, so the base URL and the Host guard know
	// the real port (":0" in tests) and a taken port fails at start.
	d.ln, err = net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("listen on %s: %w (is another plexus running? set --addr or network.json)", addr, err)
	}
	// Before the gateway, which starts the sign-ins the owner approves in
	// the inbox through it.
	d.newSignIns(o)
	if err := d.newGateway(o, deps); err != nil {
		return err
	}
	d.rateLimit = o.RateLimit
	if err := d.watchLimits(); err != nil {
		return err
	}
	// Before any child starts: what a crashed run left goes first.
	d.reapChildren(ctx)
	if err := d.newServices(o, mcpTransport); err != nil {
		return err
	}
	// The MCP front door at /mcp (issue 14), behind the same guard.
	if err := d.newFront(o); err != nil {
		return err
	}
	d.obs.gw = d.gw
	d.newConsole(o)
	d.srv = plexushttp.New(d.observeHTTP(httpBackend(d.gw)), plexushttp.Options{Addr: d.ln.Addr().String(), AllowedOrigins: d.home.Network.AllowedOrigins, Logger: d.log,
		Providers: d.providers, MCP: d.front, Metrics: d.obs, Console: d.console.Handler(),
		SignIn: d.signIn, OAuthCallback: d.signIn.oauth.Callback()})
	if err := d.gw.LoadSources(ctx); err != nil {
		return err
	}
	d.providers.Load(ctx)
	return nil
}

// gatewayDeps builds the gateway's credentials and policies from the home's
// keys and the options: the hasher, the signer, the rate limiter (its
// limits are set by watchLimits) and the authorizer (the owner confirms, unless a test says otherwise).
func gatewayDeps(home *scaffold.Home, o Options) (gateway.Deps, error) {
	hasher, err := auth.NewHasher(home.HashKey)
	if err != nil {
		return gateway.Deps{}, fmt.Errorf("hash-key: %w", err)
	}
	signer, err := auth.NewSigner(home.SigningKey, "plexus", o.Clock)
	if err != nil {
		return gateway.Deps{}, fmt.Errorf("signing-key: %w", err)
	}
	limiter, err := auth.NewRateLimiter(auth.DefaultCallsPerSecond, auth.DefaultCallsPerSecond*auth.DefaultBurstFactor, o.Clock)
	if err != nil {
		return gateway.Deps{}, err
	}
	authorizer := o.Authorizer
	if authorizer == nil {
		authorizer = auth.UserConfirmAuthorizer{}
	}
	return gateway.Deps{Signer: signer, Hasher: hasher, Limiter: limiter, Authorizer: authorizer}, nil
}

// addTransports builds the registry and every transport, and answers the
// mcp transport the MCP servers' manager feeds.
func (d *Daemon) addTransports(o Options) (*mcpclient.Transport, error) {
	// The registry calls back into the gateway, which needs the registry:
	// the callbacks close over d and run only after both exist.
	d.reg = registry.New(registry.Options{
		HealthTTL:     o.HealthTTL,
		Logger:        d.log,
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
	plat := platform.New(platform.Options{Home: d.home.Dir, UserHome: userHome, Env: env, GOOS: runtime.GOOS, Logger: d.log})
	d.plat = plat
	d.rest = localrest.New(plat, plat, localrest.Options{})
	d.reg.AddTransport(d.rest)
	d.reg.AddTransport(cliexec.New(plat, plat, cliexec.Options{}))
	d.stdio = stdio.New(plat, plat, stdio.Options{Logger: d.log}) // backoffs run on real time, whatever the daemon's clock
	d.reg.AddTransport(d.stdio)
	var err error
	d.providers, err = ipchost.New(d.reg, d.home.Dir, d.home.SocketDir, plat, o.IPC, d.log, d.note)
	if err != nil {
		return nil, err
	}
	d.reg.AddTransport(d.providers.Hub())
	d.reg.AddTransport(skill.Transport{})
	d.reg.AddTransport(workflow.New(d.reg.Entry))
	mcpTransport := mcpclient.NewTransport()
	d.reg.AddTransport(mcpTransport)
	return mcpTransport, nil
}

// newGateway builds the gateway on the journal, the registry and deps
// (from gatewayDeps), serving at the bound listener's address.
func (d *Daemon) newGateway(o Options, deps gateway.Deps) error {
	home := d.home
	deps.Events, deps.Registry = d.db, d.reg
	deps.Trust = auth.Policy{TokenLifetime: home.Auth.TokenLifetime(), MaxTrustWindow: home.Auth.MaxTrustWindow()}
	deps.Throttle = auth.NewThrottle(o.Clock)
	var err error
	if d.obs, err = d.newObservability(o, deps); err != nil {
		return err
	}
	deps.Store = telemetry.Observe(d.db, d.obs.metrics, d.obs.storeTracer())
	deps.Sources = d.sourceFactory
	deps.ConnectionKey = home.ConnectionKey
	deps.SaveConnectionKey = func(key string) error {
		return scaffold.WriteConnectionKey(home.Dir, key)
	}
	deps.Logger, deps.Clock = d.log, o.Clock
	// Set before serving starts, so every call sees d.inbox.
	deps.OnDecision = func(id string) { d.inbox.Touch(id) }
	// The path a decision shows is the one the cli and stdio transports run.
	deps.Binaries = d.plat.Resolve
	deps.PruneJournal = d.pruneJournal
	deps.SignIn = o.SignIn
	if deps.SignIn == nil {
		deps.SignIn = d.signIn // its StartSignIn: the sign-in the owner approved in the inbox
	}
	d.gw, err = gateway.New(gateway.Config{BaseURL: "http://" + d.ln.Addr().String(), Home: home.Dir,
		SameUser: gateway.SameUserPolicy{Detect: true, OwnerUID: os.Getuid(), Refuse: home.Auth.StrictSameUser},
		Streams:  gateway.StreamLimits{PerSession: home.Auth.MaxStreamsPerSession, PerAgent: home.Auth.MaxStreamsPerAgent},
	}, deps)
	return err
}

// newServices builds the services that run beside the gateway: the owner's
// notify command, the inbox reconciler and the watcher that hints it, and
// the manager of mcp.json's servers.
func (d *Daemon) newServices(o Options, mcpTransport *mcpclient.Transport) error {
	home := d.home
	owner := o.Owner
	var hook *inbox.Webhook
	if w := home.Auth.NotifyWebhook; w != nil {
		hook = &inbox.Webhook{URL: w.URL, Topic: w.Topic}
	}
	d.notify = inbox.NewNotifier(home.Auth.Notify, d.plat, d.log, hook)
	var err error
	d.inbox, err = inbox.New(inbox.Config{Home: home.Dir, Owner: owner, Clock: o.Clock, Logger: d.log,
		Notify: d.notify.Send, Interval: o.InboxInterval, JournalFailed: d.gw.JournalFailed,
		Installed: func(source string) bool { _, ok := d.reg.Source(source); return ok }}, d.db, d.gw)
	if err != nil {
		return err
	}
	d.watch, err = watcher.New([]string{home.Inbox, home.Active, home.Rejected, home.Archive},
		watcher.Options{Debounce: InboxDebounce, Logger: d.log})
	if err != nil {
		return err
	}
	d.mcp, err = mcphost.New(mcphost.Config{Home: home.Dir, Registry: d.reg, Journal: d.gw, Pins: d.checkPins,
		Transport: mcpTransport, Secret: d.plat.Secret, Env: d.plat.Env(), Processes: d.plat, Logger: d.log, SignIns: d.signIn})
	return err
}

// closeStarted closes, in reverse order, what a start that failed part way
// had opened: the listener, the ipc hub, the transports' children and
// connections, and the journal. Their errors are not the start's error,
// which the caller returns.
func (d *Daemon) closeStarted() {
	if d.ln != nil {
		d.ln.Close()
	}
	if d.signIn != nil {
		d.signIn.oauth.Close()
	}
	if d.providers != nil {
		d.providers.Hub().Close()
	}
	if d.stdio != nil {
		d.stdio.Close()
	}
	if d.rest != nil {
		d.rest.Close()
	}
	if d.obs != nil {
		if err := d.obs.tracing.Shutdown(context.Background()); err != nil {
			d.log.Warn("stop tracing", "err", err)
		}
	}
	d.db.Close()
}

// sourceFactory builds a live source from its persisted configuration: the
// one place that knows which kinds of owner-added source exist. An
// extension's workflow members are checked against the registry as it
// stands.
func (d *Daemon) sourceFactory(cfg plexus.SourceConfig) (plexus.Source, error) {
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
	case gateway.SourceKindExtension:
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
		src, err := registry.NewExtensionSource(m, prov, d.reg.Entry, d.plat.Resolve)
		if err != nil {
			return nil, err
		}
		return src.WithHealth(d.reg.CheckRequirements), nil
	}
	return nil, fmt.Errorf("unknown source kind %q (known: portal, extension)", cfg.Kind)
}

// Run serves until ctx ends, then shuts everything down in order and
// closes the journal. It returns the first service's failure, if any.
func (d *Daemon) Run(ctx context.Context) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	serve := func(ctx context.Context) error { return d.srv.Serve(ctx, d.ln) }
	services := []func(context.Context) error{serve, d.gw.Run, d.reg.Run, d.inbox.Run, d.watch.Run, d.notify.Run,
		d.forwardHints, d.mcp.Run, d.providers.Run, d.front.Run, d.viewWatch.Run, d.followViews, d.pruner.Run,
		d.limitWatch.Run, d.followLimits, d.console.Run}
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
	d.signIn.oauth.Close() // the sign-ins under way end; their journal rows are written first
	d.rest.Close()
	if err := d.stdio.Close(); err != nil {
		d.log.Warn("stop stdio tools", "err", err)
	}
	if err := d.obs.tracing.Shutdown(ctx); err != nil {
		d.log.Warn("stop tracing", "err", err)
	}
	if err := d.db.Close(); err != nil && first == nil {
		first = err
	}
	if err := d.removeAddress(); err != nil && first == nil {
		first = err
	}
	return first
}

// forwardHints hands the watcher's hints to the reconciler until the
// watcher closes its channel (when ctx ends).
func (d *Daemon) forwardHints(context.Context) error {
	for h := range d.watch.Hints() {
		d.inbox.Hint(h.Full, h.Dirs)
		d.console.Changed()
	}
	return nil
}

// note journals what the ipc hub observed, through the gateway.
func (d *Daemon) note(action, target, trace string, payload map[string]any) {
	d.gw.Note(context.Background(), action, target, trace, payload)
}

// checkPins hands an MCP server's tool definitions to the gateway's pins.
func (d *Daemon) checkPins(ctx context.Context, source string, defs []mcpclient.Definition) (map[string]bool, error) {
	var gdefs []gateway.Definition
	for _, def := range defs {
		gdefs = append(gdefs, gateway.Definition{EntryID: def.EntryID, Primitive: def.Primitive, Name: def.Name, Hash: def.Hash, Raw: def.Raw})
	}
	return d.gw.CheckPins(ctx, source, gdefs)
}

// What follows is read-only access to the wired parts, for the command
// line's banner and for suites that drive the daemon in-process.

// Home is the loaded PLEXUS_HOME.
func (d *Daemon) Home() *scaffold.Home { return d.home }

// Addr is the bound listener's address (host:port), with the real port
// when Options.Addr asked for ":0".
func (d *Daemon) Addr() string { return d.ln.Addr().String() }

// BaseURL is the loopback API's base URL, http://Addr.
func (d *Daemon) BaseURL() string { return "http://" + d.Addr() }

// Registry is the live registry of sources and entries.
func (d *Daemon) Registry() *registry.Registry { return d.reg }

// Gateway is the gateway the HTTP API serves.
func (d *Daemon) Gateway() *gateway.Gateway { return d.gw }

// Inbox is the files-as-API reconciler of the decision folders.
func (d *Daemon) Inbox() *inbox.Reconciler { return d.inbox }
