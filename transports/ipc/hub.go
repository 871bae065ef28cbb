package ipc

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"os/exec"
	"slices"
	"sync"
	"time"

	"github.com/plexus-gw/plexus"
)

// Binaries is the part of the platform seam the hub launches providers
// with (platform.Services implements it): Resolve finds a bare command on
// the enriched PATH at each launch, Env is the base environment of every
// child (the hub adds the provider's env entries and its session
// variables, nothing else), and Command and Start build and start the
// child the platform's one way. All must be safe for concurrent use; Env
// returns a slice the caller may change.
type Binaries interface {
	Resolve(name string) (string, error)
	Env() []string
	// Command builds the child: exactly env, its own process group.
	Command(ctx context.Context, path string, args, env []string) *exec.Cmd
	// Start starts cmd and records it, so that a daemon that crashes does
	// not leave it running; done is called once cmd has been waited for.
	Start(cmd *exec.Cmd) (done func(), err error)
}

// Environment variables a launched provider gets (§5.2: "names are
// implementation-specific"). The token's is the only secret; it is never
// put on the command line, in a log or in the journal.
const (
	EnvSocket       = "PLEXUS_SOCKET"
	EnvSessionToken = "PLEXUS_SESSION_TOKEN"
	EnvProviderID   = "PLEXUS_PROVIDER_ID"
)

// Defaults of [HubOptions].
const (
	DefaultTokenTTL         = 30 * time.Second
	DefaultMissedHeartbeats = 3
	DefaultMaxInflight      = 256
	DefaultCallTimeout      = 60 * time.Second
	DefaultMinBackoff       = 500 * time.Millisecond
	DefaultMaxBackoff       = 30 * time.Second
	DefaultResetAfter       = time.Minute
	DefaultStopGrace        = 2 * time.Second
	// MaxCallTimeout caps the timeout of any one call.
	MaxCallTimeout = 10 * time.Minute
)

// HubOptions configure a [Hub]. Only SocketPath is required; every other
// zero value means its default.
type HubOptions struct {
	// SocketPath is the unix socket providers connect to
	// (PLEXUS_HOME/run/ipc.sock in the daemon).
	SocketPath string
	// HeartbeatInterval is announced in core.welcome; 5s when 0.
	HeartbeatInterval time.Duration
	// MissedHeartbeats is how many intervals may pass without a heartbeat
	// before the provider is marked unavailable and stopped; 3 when 0.
	MissedHeartbeats int
	// HelloTimeout bounds the wait for agent.hello on a new connection.
	HelloTimeout time.Duration
	// TokenTTL is how long a launch's session token stays valid for its
	// hello; [DefaultTokenTTL] when 0. A provider that has not connected
	// by TokenTTL+HelloTimeout after its launch is stopped.
	TokenTTL time.Duration
	// MaxFrameBytes is the frame limit of providers that set none.
	MaxFrameBytes int
	// MaxInflight is the max_inflight_requests of one connection (§2.2);
	// [DefaultMaxInflight] when 0. A call beyond it is rate_limited.
	MaxInflight int
	// CallTimeout bounds a call whose context has no deadline;
	// [DefaultCallTimeout] when 0, capped at [MaxCallTimeout].
	CallTimeout time.Duration
	// MinBackoff and MaxBackoff bound the wait before a relaunch, doubling
	// with each consecutive failure; ResetAfter is how long a process must
	// have run for its end to count as the first.
	MinBackoff, MaxBackoff, ResetAfter time.Duration
	// StopGrace is how long a stopping provider has after core.goodbye,
	// and again after SIGTERM, before the next step.
	StopGrace time.Duration
	// Clock stamps envelopes and judges heartbeats and token expiry; nil
	// means time.Now. Backoffs, grace periods and the heartbeat check's
	// ticker run on real time.
	Clock func() time.Time
	// Logger gets process and connection events at debug level and the
	// providers' stderr lines (bounded, the token redacted); never a token
	// or call content. Nil discards.
	Logger *slog.Logger
	// Note journals what the hub observed (see the package doc for the
	// actions). Payloads hold ids, sizes, reasons and exit statuses only.
	// Called from the hub's goroutines; must not block for long. Optional.
	Note func(action, target, traceID string, payload map[string]any)
	// OnTools is called after a provider's registered tools changed, on
	// the goroutine of the registration, before core.tools.registered is
	// sent: the daemon refreshes the provider's source (a new revision,
	// manifest_changed). Optional.
	OnTools func(providerID string)
	// OnHealth is called when a provider's health changed (the daemon
	// pushes it into the registry, which fires source_status). Calls for
	// one provider never overlap. Optional.
	OnHealth func(providerID string, h plexus.Health)
	// CoreVersion and InstanceID go into core.welcome.
	CoreVersion, InstanceID string
}

// Hub is Core's whole ipc side: it launches the declared tool providers
// with a fresh session token each, serves the socket they connect back to,
// keeps each provider's registered tools as the entries of a
// [plexus.Source], and is the [plexus.Transport] of kind ipc that calls
// them. See the package doc.
//
// Use: [NewHub], [Hub.Listen] (binds synchronously), [Hub.Add] the
// providers, [Hub.Run] until ctx ends; Add and [Hub.Remove] work while it
// runs. Run's end stops every provider (core.goodbye, grace, SIGTERM,
// SIGKILL to its process group) and returns once every goroutine the hub
// started has.
//
// Lock order: Hub.mu, then provider.healthMu, then provider.mu, then
// session.mu. No lock is held while writing to a connection, waiting for a
// process or calling an option's callback.
type Hub struct {
	opts   HubOptions
	bins   Binaries
	srv    *Server
	tokens *Tokens
	log    *slog.Logger

	mu        sync.Mutex
	providers map[string]*provider // guarded by mu
	runCtx    context.Context      // Run's; nil until Run starts; guarded by mu
	stopped   bool                 // Run has ended; guarded by mu
	wg        sync.WaitGroup       // supervisors and their process waiters
}

var (
	_ plexus.Transport = (*Hub)(nil)
	_ Handler          = (*Hub)(nil)
)

// NewHub checks opts and fills in the defaults. bins is required.
func NewHub(bins Binaries, opts HubOptions) (*Hub, error) {
	if bins == nil {
		return nil, errors.New("ipc hub: a Binaries is required")
	}
	if opts.MissedHeartbeats < 0 || opts.TokenTTL < 0 || opts.MaxInflight < 0 || opts.CallTimeout < 0 ||
		opts.MinBackoff < 0 || opts.MaxBackoff < 0 || opts.ResetAfter < 0 || opts.StopGrace < 0 {
		return nil, errors.New("ipc hub: negative limit")
	}
	opts.MissedHeartbeats = cmpOr(opts.MissedHeartbeats, DefaultMissedHeartbeats)
	opts.TokenTTL = cmpOr(opts.TokenTTL, DefaultTokenTTL)
	opts.MaxInflight = cmpOr(opts.MaxInflight, DefaultMaxInflight)
	opts.CallTimeout = min(cmpOr(opts.CallTimeout, DefaultCallTimeout), MaxCallTimeout)
	opts.MinBackoff = cmpOr(opts.MinBackoff, DefaultMinBackoff)
	opts.MaxBackoff = max(cmpOr(opts.MaxBackoff, DefaultMaxBackoff), opts.MinBackoff)
	opts.ResetAfter = cmpOr(opts.ResetAfter, DefaultResetAfter)
	opts.StopGrace = cmpOr(opts.StopGrace, DefaultStopGrace)
	opts.HeartbeatInterval = cmpOr(opts.HeartbeatInterval, defaultHeartbeatInterval)
	if opts.Clock == nil {
		opts.Clock = time.Now
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.Note == nil {
		opts.Note = func(string, string, string, map[string]any) {}
	}
	if opts.OnTools == nil {
		opts.OnTools = func(string) {}
	}
	if opts.OnHealth == nil {
		opts.OnHealth = func(string, plexus.Health) {}
	}
	h := &Hub{
		opts:      opts,
		bins:      bins,
		tokens:    NewTokens(opts.TokenTTL, opts.Clock),
		log:       opts.Logger,
		providers: make(map[string]*provider),
	}
	srv, err := NewServer(ServerOptions{
		SocketPath:        opts.SocketPath,
		MaxFrameBytes:     opts.MaxFrameBytes,
		HeartbeatInterval: opts.HeartbeatInterval,
		HelloTimeout:      opts.HelloTimeout,
		Auth:              h.tokens,
		Clock:             opts.Clock,
		Logger:            opts.Logger,
		OnRefused:         h.refused,
		CoreVersion:       opts.CoreVersion,
		InstanceID:        opts.InstanceID,
		Handler:           h,
		FrameLimit:        h.frameLimit,
	})
	if err != nil {
		return nil, err
	}
	h.srv = srv
	return h, nil
}

// cmpOr returns a unless it is zero or negative, and b then.
func cmpOr[T int | time.Duration](a, b T) T {
	if a > 0 {
		return a
	}
	return b
}

// Listen binds the socket (see [Server.Listen]), so that providers can be
// launched as soon as Run starts.
func (h *Hub) Listen() error { return h.srv.Listen() }

// Close releases the socket of a hub that was listening but will not Run
// (its owner failed to start). After Run, it is a no-op.
func (h *Hub) Close() { _ = h.srv.Close() }

// SocketPath is the socket providers are told to connect to.
func (h *Hub) SocketPath() string { return h.opts.SocketPath }

// Run launches every added provider, serves the socket and watches
// heartbeats until ctx ends; then it stops every provider, closes the
// socket and waits for everything it started. Call it once, after Listen.
func (h *Hub) Run(ctx context.Context) error {
	h.mu.Lock()
	if h.runCtx != nil || h.stopped {
		h.mu.Unlock()
		return errors.New("ipc hub: Run called twice")
	}
	h.runCtx = ctx
	for _, p := range h.providers {
		h.startLocked(ctx, p)
	}
	h.mu.Unlock()

	// The server outlives the supervisors, so that a stopping provider
	// can still be sent its core.goodbye.
	srvCtx, stopSrv := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- h.srv.Serve(srvCtx) }()
	monitored := make(chan struct{})
	go func() {
		defer close(monitored)
		h.monitor(ctx)
	}()

	<-ctx.Done()
	h.mu.Lock()
	h.stopped = true
	ps := slices.Collect(maps.Values(h.providers))
	h.mu.Unlock()
	for _, p := range ps {
		p.stop() // the supervisors saw ctx end too: this only waits
	}
	h.wg.Wait()
	<-monitored
	stopSrv()
	err := <-served
	if errors.Is(err, ErrServerClosed) {
		err = nil
	}
	return err
}

// Add declares provider id with cfg (checked by [ValidateProvider]) and,
// if Run is running, launches it. It returns the source holding the
// provider's tools, for the registry. Adding an id that is already declared
// is an error; remove it first.
func (h *Hub) Add(id string, cfg plexus.ProviderConfig) (plexus.Source, error) {
	cfg, err := ValidateProvider(id, cfg)
	if err != nil {
		return nil, err
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.stopped {
		return nil, errors.New("ipc hub: stopped")
	}
	if _, ok := h.providers[id]; ok {
		return nil, fmt.Errorf("ipc hub: provider %q is already declared", id)
	}
	p := newProvider(h, id, cfg)
	h.providers[id] = p
	if h.runCtx != nil {
		h.startLocked(h.runCtx, p)
	}
	return p.src, nil
}

// startLocked starts p's supervisor under ctx. h.mu is held.
func (h *Hub) startLocked(ctx context.Context, p *provider) {
	if p.cancel != nil {
		return
	}
	pctx, cancel := context.WithCancel(ctx)
	p.cancel = cancel
	h.wg.Add(1)
	go func() {
		defer h.wg.Done()
		defer close(p.done)
		h.supervise(pctx, p)
	}()
}

// Remove stops provider id (core.goodbye, then its process group is
// stopped) and forgets it, waiting until its process is gone. Calls in
// flight fail with source_unavailable.
func (h *Hub) Remove(id string) error {
	h.mu.Lock()
	p, ok := h.providers[id]
	if ok {
		delete(h.providers, id)
	}
	h.mu.Unlock()
	if !ok {
		return fmt.Errorf("ipc hub: no provider %q", id)
	}
	p.stop()
	h.tokens.Revoke(id)
	return nil
}

// Config returns provider id's declaration (with defaults filled in).
func (h *Hub) Config(id string) (plexus.ProviderConfig, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	p, ok := h.providers[id]
	if !ok {
		return plexus.ProviderConfig{}, false
	}
	return p.cfg, true
}

// IDs returns the declared providers' ids, sorted.
func (h *Hub) IDs() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return slices.Sorted(maps.Keys(h.providers))
}

// Status returns every declared provider's live state, sorted by id.
func (h *Hub) Status() []plexus.ProviderStatus {
	h.mu.Lock()
	ps := slices.Collect(maps.Values(h.providers))
	h.mu.Unlock()
	out := make([]plexus.ProviderStatus, 0, len(ps))
	for _, p := range ps {
		out = append(out, p.status())
	}
	slices.SortFunc(out, func(a, b plexus.ProviderStatus) int {
		if a.ID < b.ID {
			return -1
		}
		if a.ID > b.ID {
			return 1
		}
		return 0
	})
	return out
}

// Kind returns [plexus.TransportIPC].
func (*Hub) Kind() plexus.TransportKind { return plexus.TransportIPC }

func (h *Hub) provider(id string) *provider {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.providers[id]
}

// frameLimit is the Server's FrameLimit: the provider's max_frame_bytes.
func (h *Hub) frameLimit(providerID string) int {
	if p := h.provider(providerID); p != nil {
		return p.cfg.MaxFrameBytes
	}
	return 0
}

// refused is the Server's OnRefused: an ipc.refused row, without the token
// or payload bytes (the server never puts them in detail).
func (h *Hub) refused(reason string, detail map[string]any) {
	payload := map[string]any{"reason": reason}
	maps.Copy(payload, detail)
	target := "ipc"
	if id, ok := detail["provider_id"].(string); ok && id != "" {
		target = id
	} else if id, ok := detail["agent_id"].(string); ok && ValidProviderID(id) && h.provider(id) != nil {
		target = id
	}
	h.opts.Note("ipc.refused", target, "", payload)
}

// note journals one of the hub's observations about provider p.
func (h *Hub) note(action string, p *provider, traceID string, payload map[string]any) {
	h.opts.Note(action, p.id, traceID, payload)
}
