package mcpclient

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os/exec"
	"slices"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/plexus-gw/plexus"
)

// Defaults of [Options].
const (
	DefaultMinBackoff = 200 * time.Millisecond
	DefaultMaxBackoff = 30 * time.Second
	DefaultStopGrace  = 2 * time.Second
)

// Limits of the session's own requests (a call is bounded by its caller's
// context alone).
const (
	connectTimeout = 30 * time.Second // start, initialize
	listTimeout    = 60 * time.Second // one listing of every primitive, paged
	keepAlive      = 30 * time.Second // ping interval that detects a hung server
)

// Options are a client's settings; the zero value is the default.
type Options struct {
	// Logger receives connection events; nil discards them. It never gets
	// an env or header value, an input or a result.
	Logger *slog.Logger
	// Env is the base environment of a stdio server's child: the caller
	// passes platform.Services.Env. The config's env is added on top
	// (replacing a variable of the same name), and nothing else.
	Env []string
	// Processes finds, builds and records a stdio server's process; it is
	// required for a stdio server. platform.Services implements it.
	Processes Processes
	// OnChange is called, from Run's goroutine and not under a lock, after
	// the entries Scan returns changed (after a listing or a re-connection).
	OnChange func()
	// OnHealth is called, from Run's goroutine and not under a lock, when
	// the health status changes (ok when a session is up and listed,
	// unavailable with a reason while it is not).
	OnHealth func(plexus.Health)
	// MinBackoff and MaxBackoff bound the wait before reconnecting: it
	// doubles from MinBackoff with each consecutive failure, up to
	// MaxBackoff, and starts over once a session stayed up MaxBackoff.
	// Zero means [DefaultMinBackoff], [DefaultMaxBackoff].
	MinBackoff, MaxBackoff time.Duration
	// SignIn signs in to a url server that asks for it (OAuth); nil
	// sends no credential but the configured headers.
	SignIn *SignIn
	// StopGrace is how long a stdio server has to exit after its stdin is
	// closed, and again after SIGTERM, before SIGKILL. Zero means
	// [DefaultStopGrace].
	StopGrace time.Duration
}

// Processes is the part of the platform seam a stdio server is started
// with: the platform's one way to start a child. Its methods are called
// from Run's goroutine.
type Processes interface {
	// Resolve returns the absolute path of a bare command name.
	Resolve(name string) (string, error)
	// Command builds the child: exactly env, its own process group.
	Command(ctx context.Context, path string, args, env []string) *exec.Cmd
	// Track records cmd, once the SDK has started it, so that a daemon
	// that crashes does not leave it running; done is called once the
	// session has ended and the group has been swept.
	Track(cmd *exec.Cmd) (done func(), err error)
}

// Client is Plexus's persistent MCP client of one configured server, and
// the [plexus.Source] of the entries that server's tools, resources,
// resource templates and prompts project to. [Client.Run] owns the session;
// every other method is safe for concurrent use and never blocks on the
// network but Dispatch (through [Transport]).
//
// State: Run's goroutine alone connects, lists and closes. It publishes
// under mu the live session (sess), the health and the view (the latest
// projection and what is held), which the other methods read. No lock is
// held across I/O or a callback.
type Client struct {
	name   string
	source string
	cfg    ServerConfig
	log    *slog.Logger
	opts   Options
	red    redactor

	minBack, maxBack, grace time.Duration
	httpBase                *http.Transport // url servers: one per client, closed by Run

	ready      chan struct{}
	readyOnce  sync.Once
	wake       chan struct{} // capacity 1: the owner signed in (SignedIn)
	signInLost atomic.Bool   // a call found the session needs sign-in
	running    atomic.Bool
	tokens     atomic.Uint64 // progress tokens handed out

	// watch are the resource subscriptions, renewed on each new session
	// (upstream.go)
	watch watchers

	// owned by Run's goroutine
	cur        listing // the latest listing of every primitive
	lastStderr string  // the last stderr line of a server that failed to start
	plainHello bool    // the server refused a dressed initialize (connect)

	mu        sync.RWMutex
	sess      *session      // the live session; nil while there is none
	health    plexus.Health // guarded by mu
	restarts  int           // sessions established after the first; guarded by mu
	connected bool          // a session was established once; guarded by mu
	view      view          // guarded by mu

	// refused holds the skills refused, by SKILL.md URI, and why
	// (skills.go); guarded by mu.
	refused map[string]skillRefusal
}

// view is what Scan, Definitions and Dispatch see.
type view struct {
	proj    projection
	visible []plexus.Entry
	sig     [32]byte
	set     bool // a listing was applied
}

var _ plexus.Source = (*Client)(nil)

// New returns the client of the server name configured by cfg. name must
// be a slug ([ValidName]: ^[a-z0-9][a-z0-9_-]{0,59}$); it becomes the
// source id "mcp:<name>" and the middle of every entry id
// "mcp.<name>.…". The error is a *[ConfigError].
func New(name string, cfg ServerConfig, opts Options) (*Client, error) {
	if !ValidName(name) {
		return nil, &ConfigError{Server: name, Field: "name", Problem: "a server name must match ^[a-z0-9][a-z0-9_-]{0,59}$ (lower-case letters, digits, '-', '_')"}
	}
	if err := cfg.Validate(); err != nil {
		var ce *ConfigError
		if errors.As(err, &ce) {
			ce.Server = name
		}
		return nil, err
	}
	if cfg.Command != "" && opts.Processes == nil {
		return nil, errors.New("mcpclient: a stdio server needs Options.Processes")
	}
	if opts.SignIn != nil && (cfg.URL == "" || opts.SignIn.Handler == nil) {
		return nil, errors.New("mcpclient: Options.SignIn needs a url server and a Handler")
	}
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	c := &Client{
		name:    name,
		source:  "mcp:" + name,
		cfg:     cfg,
		opts:    opts,
		red:     newRedactor(cfg),
		minBack: cmpOr(opts.MinBackoff, DefaultMinBackoff),
		maxBack: cmpOr(opts.MaxBackoff, DefaultMaxBackoff),
		grace:   cmpOr(opts.StopGrace, DefaultStopGrace),
		ready:   make(chan struct{}),
		wake:    make(chan struct{}, 1),
		health:  plexus.Health{Status: plexus.HealthUnknown, Detail: "not connected yet"},
	}
	c.maxBack = max(c.maxBack, c.minBack)
	c.log = slog.New(redactHandler{Handler: log.Handler(), r: c.red}).With("server", name)
	if cfg.URL != "" {
		c.httpBase = http.DefaultTransport.(*http.Transport).Clone()
		c.httpBase.Proxy = nil // the configured server, directly: headers are secrets
		// Concurrent calls keep their connections (net/http keeps two idle).
		c.httpBase.MaxIdleConnsPerHost = 64
	}
	return c, nil
}

// cmpOr returns a unless it is zero or negative, and b then.
func cmpOr(a, b time.Duration) time.Duration {
	if a > 0 {
		return a
	}
	return b
}

// Name returns the server's configured name.
func (c *Client) Name() string { return c.name }

// ID returns the source id, "mcp:<name>".
func (c *Client) ID() string { return c.source }

// Provenance returns managed: the owner configured the server.
func (*Client) Provenance() plexus.Provenance { return plexus.ProvenanceManaged }

// Ready is closed after the first successful listing.
func (c *Client) Ready() <-chan struct{} { return c.ready }

// Scan returns the entries of the latest listing (every one: [Pinned]
// holds those whose definition changed).
// It never touches the network: while the server is away it returns what
// was last listed (and Health says unavailable); before the first listing
// it returns none.
//
// The entries are copies, but what they point to (io, mcp, grants, the
// raw bytes) is the client's, shared by every scan and never written: the
// registry stamps only the entries' own fields (as it does an extension's
// scan), and per-entry copies of those parts were megabytes a scan with
// 10k tools.
func (c *Client) Scan(context.Context) ([]plexus.Entry, error) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	out := make([]plexus.Entry, len(c.view.visible))
	copy(out, c.view.visible)
	return out, nil
}

// Definitions returns every primitive of the latest listing, held or not.
func (c *Client) Definitions() []Definition {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return slices.Clone(c.view.proj.defs)
}

// Health follows the connection: ok while a session is up and listed,
// unavailable with the reason while Run reconnects (or has stopped),
// unknown before the first attempt.
func (c *Client) Health(context.Context) plexus.Health {
	c.mu.RLock()
	h := c.health
	c.mu.RUnlock()
	now := time.Now()
	h.CheckedAt = &now
	return h
}

// PID returns the process id of the running stdio server, or 0 when none
// runs (or the server is reached over HTTP).
func (c *Client) PID() int {
	c.mu.RLock()
	defer c.mu.RUnlock()
	if c.sess == nil || c.sess.cmd == nil || c.sess.cmd.Process == nil {
		return 0
	}
	return c.sess.cmd.Process.Pid
}

// Run owns the session: it connects (starting a stdio server, or opening a
// Streamable HTTP session), initializes, lists every primitive paged to
// exhaustion and keeps the session, re-listing a primitive when the server
// says its list changed. When the session is lost (the process died, the
// HTTP session is gone, a keep-alive ping went unanswered) it reconnects
// with backoff and lists again. It returns nil when ctx ends, having closed
// the session and stopped the server's process group; it may be called
// once.
func (c *Client) Run(ctx context.Context) error {
	if !c.running.CompareAndSwap(false, true) {
		return errors.New("mcpclient: Run called twice")
	}
	defer func() {
		if c.httpBase != nil {
			c.httpBase.CloseIdleConnections()
		}
		c.setHealth(plexus.HealthUnavailable, "stopped")
	}()
	failures := 0
	for {
		c.drainWake()
		s, err := c.start(ctx)
		var why string
		if err == nil {
			up := time.Now()
			why = c.serve(ctx, s)
			if ctx.Err() != nil {
				return nil
			}
			if time.Since(up) >= c.maxBack {
				failures = 0
			}
			if c.signInLost.Swap(false) {
				err = errSignIn
			}
		}
		if ctx.Err() != nil {
			return nil
		}
		if c.needsSignIn(err) {
			// Nothing is retried until the owner signs in: a loop would
			// knock at the server and its authorization server for ever.
			failures = 0
			if !c.waitSignIn(ctx) {
				return nil
			}
			continue
		}
		if err != nil {
			why = err.Error()
			c.logConnectFailure(why)
		}
		failures++
		wait := c.backoff(failures)
		c.setHealth(plexus.HealthUnavailable, fmt.Sprintf("%s; reconnecting in %s", why, wait))
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil
		case <-t.C:
		}
	}
}

func (c *Client) logConnectFailure(why string) {
	if c.lastStderr != "" {
		c.log.Warn("mcp: cannot connect", "err", why, "stderr", c.lastStderr)
	} else {
		c.log.Warn("mcp: cannot connect", "err", why)
	}
}

// backoff is the wait after the n-th consecutive failure (n ≥ 1).
func (c *Client) backoff(n int) time.Duration {
	d := c.minBack
	for i := 1; i < n && d < c.maxBack; i++ {
		d *= 2
	}
	return min(d, c.maxBack)
}

// start connects, lists and publishes a session.
func (c *Client) start(ctx context.Context) (*session, error) {
	s, err := c.connect(ctx)
	if err != nil {
		return nil, err
	}
	lctx, cancel := context.WithTimeout(ctx, listTimeout)
	l, err := c.list(lctx, s, allPrimitives)
	cancel()
	if err != nil {
		c.close(s)
		if c.needsSignIn(err) {
			return nil, fmt.Errorf("list: %w", errSignIn)
		}
		return nil, fmt.Errorf("list: %s", c.red.err(err))
	}
	c.cur = l
	c.mu.Lock()
	c.sess = s
	if c.connected {
		c.restarts++
	}
	c.connected = true
	c.mu.Unlock()
	c.watch.renew(ctx, c, s)
	c.apply()
	c.setHealth(plexus.HealthOK, "")
	c.readyOnce.Do(func() { close(c.ready) })
	attrs := []any{"protocolVersion", s.pv, "tools", len(l.tools), "resources", len(l.resources), "templates", len(l.templates), "prompts", len(l.prompts), "skills", len(l.skills)}
	if s.cmd != nil {
		attrs = append(attrs, "pid", s.pid())
	}
	c.log.Info("mcp: connected", attrs...)
	return s, nil
}

// serve keeps s until it is lost or ctx ends, re-listing what the server
// says changed; it returns why the session ended, having closed it.
func (c *Client) serve(ctx context.Context, s *session) string {
	// unpublish comes before close, so that no call starts on a session
	// that is going away.
	unpublish := func() {
		c.mu.Lock()
		c.sess = nil
		c.mu.Unlock()
	}
	for {
		select {
		case <-ctx.Done():
			unpublish()
			c.close(s)
			return "stopped"
		case <-s.lost:
			unpublish()
			why := c.close(s)
			if s.cmd != nil {
				c.log.Warn("mcp: session lost", "why", why, "stderr", c.red.string(s.stderr.lastLine()))
			} else {
				c.log.Warn("mcp: session lost", "why", why)
			}
			return "session lost: " + why
		case <-s.changed.ch:
			which := s.changed.take()
			lctx, cancel := context.WithTimeout(ctx, listTimeout)
			l, err := c.list(lctx, s, which)
			cancel()
			if err != nil {
				// A lost session shows on s.lost; anything else keeps the
				// previous listing until the next change or connection.
				select {
				case <-s.lost:
				default:
					c.log.Warn("mcp: re-listing failed; the previous listing stays", "err", c.red.err(err))
				}
				continue
			}
			c.cur = merge(c.cur, l, which)
			c.apply()
		}
	}
}

// apply projects the current listing, publishes the view and calls
// OnChange if what Scan returns changed.
func (c *Client) apply() {
	proj := project(c.name, c.source, c.cur, c.log)
	visible := proj.entries
	sig := signature(visible)
	c.mu.Lock()
	changed := !c.view.set || sig != c.view.sig
	c.view = view{proj: proj, visible: visible, sig: sig, set: true}
	if c.cur.skillsListed {
		c.refused = nil // a refused skill is refused until its server lists its skills again
		c.cur.skillsListed = false
	}
	c.mu.Unlock()
	if changed && c.opts.OnChange != nil {
		c.opts.OnChange()
	}
}

// signature identifies a set of entries: their ids with the bytes they are
// projected from (raw definition and protocol version), in id order.
func signature(entries []plexus.Entry) [32]byte {
	sorted := slices.Clone(entries)
	sort.Slice(sorted, func(i, j int) bool { return sorted[i].ID < sorted[j].ID })
	h := sha256.New()
	for _, e := range sorted {
		fmt.Fprintf(h, "%d:%s %d:%s %d:", len(e.ID), e.ID, len(e.MCP.ProtocolVersion), e.MCP.ProtocolVersion, len(e.MCP.Raw))
		h.Write(e.MCP.Raw)
	}
	var out [32]byte
	h.Sum(out[:0])
	return out
}

// setHealth publishes the health and calls OnHealth when the status
// changed.
func (c *Client) setHealth(st plexus.HealthStatus, detail string) {
	c.setHealthSignIn(st, detail, false)
}

// setHealthSignIn is setHealth with the needs-sign-in mark.
func (c *Client) setHealthSignIn(st plexus.HealthStatus, detail string, signIn bool) {
	c.mu.Lock()
	changed := c.health.Status != st || c.health.NeedsSignIn != signIn
	h := plexus.Health{Status: st, Detail: detail, Restarts: c.restarts, NeedsSignIn: signIn}
	c.health = h
	c.mu.Unlock()
	if changed && c.opts.OnHealth != nil {
		now := time.Now()
		h.CheckedAt = &now
		c.opts.OnHealth(h)
	}
}

// current returns the live session, or nil and why there is none.
func (c *Client) current() (*session, string) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	if c.sess != nil {
		return c.sess, ""
	}
	return nil, c.health.Detail
}
