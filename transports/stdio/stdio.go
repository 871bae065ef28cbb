// Package stdio is the stdio transport: it keeps a long-lived subprocess
// per extension tool and calls it over newline-delimited JSON on its stdin
// and stdout (extension spec §2.2, §4: "a persistent protocol process").
//
// # Route
//
// An entry's route ([plexus.ExtensionRoute]) carries the declaration's
// route object:
//
//	{
//	  "bin": "mytool",          // required; resolved on the platform's PATH ([Binaries])
//	  "args": ["--serve"],      // optional argv, passed as is, never through a shell
//	  "method": "notes.read",   // optional; the request's method, default the entry id
//	  "timeoutMs": 30000,       // optional; default Options.Timeout, capped at 10 min
//	  "secret": {"name": "tool-token", "attach": "env", "as": "TOOL_TOKEN"}  // optional
//	}
//
// secret must name a secret the manifest declares in its secrets; attach
// and as default to that declaration's, and attach may only be "env". The
// value is read when the process starts and put into its environment; a
// secret changed later reaches the tool at its next start.
//
// One process serves every entry of a source that names the same bin,
// args and secret binding; calls to it run concurrently.
//
// # Wire protocol
//
// Each way, one JSON object per line, UTF-8, ended by "\n" (NDJSON). Plexus
// writes requests to the tool's stdin:
//
//	{"id": "3fa9c1d27e04-1a", "method": "notes.read", "params": {"path": "a.md"}}
//
// id is an opaque string, unique for the life of the process; params is the
// call's input object ({} when there is none). The tool writes, in any order
// and at any time, one response per request to its stdout:
//
//	{"id": "3fa9c1d27e04-1a", "result": <any JSON value>}
//	{"id": "3fa9c1d27e04-1a", "error": {"message": "no such note", "code": "not_found"}}
//
// A response with a non-null "error" fails the call with transport_error
// carrying the message (and the code as detail; a bare string is accepted
// as the message); otherwise "result" (null when absent) is the call's
// data. Requests may be answered out of order and concurrently: they are
// matched by id. A line that is not a JSON object with a string "id", or
// whose id no call waits for (one that timed out, say), is ignored and
// logged by its length, never its content; a blank line is skipped. A line longer than [Options.MaxLine] (4 MiB by
// default) is a protocol violation: the process is killed and every call in
// flight fails with transport_error. stderr is not part of the protocol:
// its last 4 KiB are kept, and when the process exits its last line (at
// most 200 bytes, the secret redacted) goes into the exit's log line and
// the cause of the calls' "process exited" error — for logs, never the
// wire. A tool should exit when its stdin reaches end-of-file.
//
// # Lifecycle
//
// A process starts on the first call that needs it (there is no Run: the
// transport owns its goroutines, and [Transport.Close] stops them). When it
// dies, every call in flight fails with transport_error ("the process
// exited: …") and the next call starts it again — but not before a backoff
// that doubles from Options.MinBackoff to Options.MaxBackoff with each
// consecutive death, and resets once a process stayed up
// Options.ResetAfter; meanwhile calls fail fast with source_unavailable
// ("restarting in …"). A binary that cannot be resolved or started is
// source_unavailable and backs off the same way. A call that times out
// fails with transport_error; the process keeps running and the late
// response is dropped. [Transport.Health] reports a source ok while its
// processes run, degraded while one backs off after a crash, and
// unavailable when one cannot be started.
//
// The package must never run a tool through a shell, never let a secret's
// value out (not into a result, an error, its cause or a log: what the tool
// echoes is redacted), never log what a tool returns, and never leave a
// process or goroutine behind after Close. It runs on Linux and macOS.
package stdio

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/plexus-gw/plexus"
)

// Binaries is the part of the platform seam that finds a binary, gives the
// base environment of a child and starts it the platform's one way
// (platform.Services implements it). Resolve is called at every process
// start; all must be safe for concurrent use, and Env returns a slice the
// caller may change.
type Binaries interface {
	Resolve(name string) (string, error)
	// Env is the base environment; the transport adds the route's secret
	// and nothing else.
	Env() []string
	// Command builds the child: exactly env, its own process group.
	Command(ctx context.Context, path string, args, env []string) *exec.Cmd
	// Start starts cmd and records it, so that a daemon that crashes does
	// not leave it running; done is called once cmd has been waited for.
	Start(cmd *exec.Cmd) (done func(), err error)
}

// Secrets reads a named secret's value (platform.Services implements it).
// It is called when a process whose route names a secret starts. A secret
// that is not set is an error wrapping [plexus.ErrNotFound] (or
// [fs.ErrNotExist]). Implementations must be safe for concurrent use.
type Secrets interface {
	Secret(name string) (string, error)
}

// Defaults of [Options].
const (
	DefaultMaxLine    = 4 << 20
	DefaultMinBackoff = 100 * time.Millisecond
	DefaultMaxBackoff = 10 * time.Second
	DefaultResetAfter = 30 * time.Second
	DefaultStopGrace  = 2 * time.Second
)

// Options are the transport's settings; the zero value is the default.
type Options struct {
	// Timeout bounds a call whose route sets no timeoutMs. Zero means
	// [DefaultTimeout]; it is capped, like timeoutMs, at [MaxTimeout].
	Timeout time.Duration
	// MaxLine caps a response line in bytes; zero means [DefaultMaxLine].
	MaxLine int
	// MinBackoff and MaxBackoff bound the wait before a dead process is
	// started again; zero means [DefaultMinBackoff], [DefaultMaxBackoff].
	MinBackoff, MaxBackoff time.Duration
	// ResetAfter is how long a process must have run for its death to
	// count as the first; zero means [DefaultResetAfter].
	ResetAfter time.Duration
	// StopGrace is how long Close waits after closing a process's stdin,
	// and again after SIGTERM, before the next step; zero means
	// [DefaultStopGrace].
	StopGrace time.Duration
	// Logger receives process events (never a line's content or a
	// secret); nil discards them.
	Logger *slog.Logger
	// Now is the clock of backoffs and health; nil means time.Now.
	Now func() time.Time
}

// Transport is the stdio transport. It is safe for concurrent use.
//
// Lock order: Transport.mu, then supervisor.mu, then process.mu; no lock
// is held while writing to or waiting for a process.
type Transport struct {
	bins    Binaries
	secrets Secrets
	log     *slog.Logger
	now     func() time.Time
	timeout time.Duration
	maxLine int
	minBack time.Duration
	maxBack time.Duration
	reset   time.Duration
	grace   time.Duration

	mu     sync.Mutex
	sups   map[string]*supervisor // by route key; guarded by mu
	closed bool                   // guarded by mu

	wg sync.WaitGroup // every reader and watcher goroutine
}

var _ plexus.Transport = (*Transport)(nil)

// New returns a stdio transport that resolves binaries with bins and reads
// secrets from sec. Both are required.
func New(bins Binaries, sec Secrets, opts Options) *Transport {
	if bins == nil || sec == nil {
		panic("stdio.New: a Binaries and a Secrets are required")
	}
	t := &Transport{
		bins:    bins,
		secrets: sec,
		log:     opts.Logger,
		now:     opts.Now,
		timeout: min(cmpOr(opts.Timeout, DefaultTimeout), MaxTimeout),
		maxLine: cmpOr(opts.MaxLine, DefaultMaxLine),
		minBack: cmpOr(opts.MinBackoff, DefaultMinBackoff),
		maxBack: cmpOr(opts.MaxBackoff, DefaultMaxBackoff),
		reset:   cmpOr(opts.ResetAfter, DefaultResetAfter),
		grace:   cmpOr(opts.StopGrace, DefaultStopGrace),
		sups:    make(map[string]*supervisor),
	}
	t.maxBack = max(t.maxBack, t.minBack)
	if t.log == nil {
		t.log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	if t.now == nil {
		t.now = time.Now
	}
	return t
}

// cmpOr returns a unless it is zero or negative, and b then.
func cmpOr[T int | time.Duration](a, b T) T {
	if a > 0 {
		return a
	}
	return b
}

// Kind returns [plexus.TransportStdio].
func (*Transport) Kind() plexus.TransportKind { return plexus.TransportStdio }

// Dispatch sends the input to the entry's process as one request and
// returns its response (see the package doc for the protocol). Every
// failure is a result with OK false: a process that cannot be started, or
// is waiting to be restarted, is source_unavailable; a bad route, a secret
// not set, an error response, a timeout, cancellation, a process that dies
// or breaks the protocol during the call is transport_error.
func (t *Transport) Dispatch(ctx context.Context, entry plexus.Entry, input map[string]any, _ plexus.DispatchContext) plexus.TransportResult {
	data, perr := t.dispatch(ctx, entry, input)
	return plexus.DispatchResult(entry.ID, data, perr)
}

func (t *Transport) dispatch(ctx context.Context, entry plexus.Entry, input map[string]any) (any, *plexus.Error) {
	rt, perr := parseRoute(entry.Route, entry.ID, t.timeout)
	if perr != nil {
		return nil, perr
	}
	if err := ctx.Err(); err != nil {
		return nil, plexus.WrapError(plexus.CodeTransportError, err, "call cancelled")
	}
	s, perr := t.supervisor(entry.Source, rt)
	if perr != nil {
		return nil, perr
	}
	p, perr := t.process(s, rt)
	if perr != nil {
		return nil, perr
	}
	callCtx, cancel := context.WithTimeout(ctx, rt.timeout)
	defer cancel()
	r := p.call(callCtx, rt.method, input)
	red := redactor(p.secret)
	switch {
	case r.fail != nil:
		if ctx.Err() == nil && errors.Is(callCtx.Err(), context.DeadlineExceeded) && r.fail.Err != nil && errors.Is(r.fail.Err, context.DeadlineExceeded) {
			return nil, plexus.WrapError(plexus.CodeTransportError, r.fail.Err, fmt.Sprintf("%s %s timed out after %s", rt.bin, rt.method, rt.timeout))
		}
		f := *r.fail // shared by every call the process failed
		f.Message = rt.bin + " " + rt.method + ": " + f.Message
		return nil, &f
	case r.err != nil:
		return nil, toolError(r.err, rt, red)
	}
	var data any
	if len(r.result) > 0 {
		if err := json.Unmarshal(r.result, &data); err != nil {
			return nil, plexus.WrapError(plexus.CodeTransportError, err, "the response's result is not valid JSON")
		}
	}
	return red.value(data), nil
}

// toolError turns the error object of a response into the call's error.
func toolError(raw json.RawMessage, rt *route, red redactor) *plexus.Error {
	var obj struct {
		Message string `json:"message"`
		Code    any    `json:"code"`
	}
	var msg string
	if err := json.Unmarshal(raw, &obj); err == nil {
		msg = obj.Message
	} else {
		_ = json.Unmarshal(raw, &msg)
	}
	msg = strings.TrimSpace(red.string(msg))
	if len(msg) > 1000 {
		msg = msg[:1000] + "…"
	}
	if msg == "" {
		msg = "the tool answered with an error"
	}
	e := plexus.Errorf(plexus.CodeTransportError, "%s %s: %s", rt.bin, rt.method, strings.ToValidUTF8(msg, "\uFFFD"))
	if obj.Code != nil {
		e.Detail = map[string]any{"code": red.value(obj.Code)}
	}
	return e
}

// supervisor is the process of one route key across restarts.
type supervisor struct {
	source string
	bin    string

	mu          sync.Mutex
	proc        *process  // the running process; nil when none
	closed      bool      // set by Close: nothing starts any more
	failures    int       // consecutive deaths and failed starts
	retryAt     time.Time // no start before this
	lastErr     string    // why the last process ended or failed to start
	startFailed bool      // the last attempt could not start a process
}

// supervisor returns the supervisor of rt's process, made on first use.
func (t *Transport) supervisor(source string, rt *route) (*supervisor, *plexus.Error) {
	key := rt.key(source)
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed {
		return nil, plexus.Errorf(plexus.CodeSourceUnavailable, "the stdio transport is closed")
	}
	s := t.sups[key]
	if s == nil {
		s = &supervisor{source: source, bin: rt.bin}
		t.sups[key] = s
	}
	return s, nil
}

// process returns s's running process, starting one if none runs and the
// backoff allows. Starting holds s.mu, so concurrent first calls start one
// process, not several.
func (t *Transport) process(s *supervisor, rt *route) (*process, *plexus.Error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case s.closed:
		return nil, plexus.Errorf(plexus.CodeSourceUnavailable, "the stdio transport is closed")
	case s.proc != nil:
		return s.proc, nil
	}
	now := t.now()
	if wait := s.retryAt.Sub(now); wait > 0 {
		return nil, plexus.Errorf(plexus.CodeSourceUnavailable, "%s: restarting in %s (%s)", rt.bin, roundUp(wait), s.lastErr)
	}
	p, perr := t.start(rt)
	if perr != nil {
		if perr.Code == plexus.CodeSourceUnavailable {
			s.failed(now, t.backoff(s.failures+1), perr.Message, true)
			t.log.Warn("stdio: cannot start the process", "source", s.source, "bin", rt.bin, "err", perr.Error())
		}
		return nil, perr
	}
	p.started = now
	s.proc, s.startFailed = p, false
	t.log.Info("stdio: process started", "source", s.source, "bin", rt.bin, "pid", p.pid)
	t.wg.Add(2)
	go func() {
		defer t.wg.Done()
		p.read()
	}()
	go t.watch(s, p)
	return p, nil
}

// failed records a death or a failed start at now.
func (s *supervisor) failed(now time.Time, backoff time.Duration, why string, start bool) {
	s.failures++
	s.retryAt = now.Add(backoff)
	s.lastErr = why
	s.startFailed = start
}

// backoff is the wait after the n-th consecutive failure (n ≥ 1).
func (t *Transport) backoff(n int) time.Duration {
	d := t.minBack
	for i := 1; i < n && d < t.maxBack; i++ {
		d *= 2
	}
	return min(d, t.maxBack)
}

// start resolves the binary, reads the secret and starts the process.
func (t *Transport) start(rt *route) (*process, *plexus.Error) {
	path, err := t.bins.Resolve(rt.bin)
	if err != nil {
		return nil, plexus.WrapError(plexus.CodeSourceUnavailable, err, fmt.Sprintf("binary %q cannot be found: %v", rt.bin, err))
	}
	if perr := plexus.CheckRuns(rt.bin, path, rt.runs); perr != nil {
		return nil, perr
	}
	env := t.bins.Env()
	var secret string
	if rt.secret != nil {
		var perr *plexus.Error
		if secret, perr = t.secret(rt.secret); perr != nil {
			return nil, perr
		}
		prefix := rt.secret.As + "="
		env = slices.DeleteFunc(env, func(kv string) bool { return strings.HasPrefix(kv, prefix) })
		env = append(env, prefix+secret)
	}
	p, err := startProcess(t.log, t.bins, path, rt.args, env, secret, t.maxLine, t.grace)
	if err != nil {
		err = redactor(secret).err(err)
		return nil, plexus.WrapError(plexus.CodeSourceUnavailable, err, fmt.Sprintf("%s cannot be started: %v", rt.bin, err))
	}
	return p, nil
}

// secret reads the route's secret. Messages name the secret, never its
// value.
func (t *Transport) secret(ref *plexus.ExtensionSecretRef) (string, *plexus.Error) {
	v, err := t.secrets.Secret(ref.Name)
	switch {
	case errors.Is(err, plexus.ErrNotFound) || errors.Is(err, fs.ErrNotExist) || err == nil && v == "":
		return "", plexus.Errorf(plexus.CodeTransportError, "secret %q is not set; run `plexus secrets set %s`", ref.Name, ref.Name)
	case err != nil:
		return "", plexus.WrapError(plexus.CodeTransportError, redactor(v).err(err), fmt.Sprintf("secret %q could not be read", ref.Name))
	case strings.IndexByte(v, 0) >= 0:
		return "", plexus.Errorf(plexus.CodeTransportError, "secret %q holds a NUL byte, which an environment variable cannot carry", ref.Name)
	}
	return v, nil
}

// watch waits for p to end, records the death on s unless Close caused
// it, and then fails the calls in flight. The record comes first, so a
// call that sees its failure and retries finds the backoff in place.
func (t *Transport) watch(s *supervisor, p *process) {
	defer t.wg.Done()
	why := p.wait()
	s.mu.Lock()
	if s.proc == p {
		s.proc = nil
	}
	if !s.closed {
		now := t.now()
		if now.Sub(p.started) >= t.reset {
			s.failures = 0
		}
		back := t.backoff(s.failures + 1)
		s.failed(now, back, "the process "+why, false)
		t.log.Warn("stdio: process exited", "source", s.source, "bin", s.bin, "pid", p.pid, "status", why, "restartIn", back, "stderr", p.stderrTail())
	}
	s.mu.Unlock()
	p.finish(why)
}

var _ plexus.RequirementsChecker = (*Transport)(nil)

// Requirements: a capability on this transport needs its route's binary
// installed, and its source's tool process not failing ([Transport.Health]).
func (t *Transport) Requirements(m plexus.ExtensionManifest, c plexus.ExtensionCapabilityDecl) []plexus.Requirement {
	source := m.Source
	return append(plexus.BinaryRequirement(c.Route, t.bins.Resolve), plexus.Requirement{Key: "process", Stage: plexus.StageProcess,
		Check: func(context.Context) plexus.Health { return t.Health(source) }})
}

// Health reports the processes of source: ok while they run (or none has
// been needed yet: unknown), degraded while one waits to be restarted
// after dying, unavailable when one cannot be started. With several
// processes, the worst wins.
func (t *Transport) Health(source string) plexus.Health {
	now := t.now()
	t.mu.Lock()
	var sups []*supervisor
	for _, s := range t.sups {
		if s.source == source {
			sups = append(sups, s)
		}
	}
	closed := t.closed
	t.mu.Unlock()
	h := plexus.Health{Status: plexus.HealthUnknown, Detail: "not started: the process starts on the first call", CheckedAt: &now}
	if closed {
		h.Status, h.Detail = plexus.HealthUnavailable, "the stdio transport is closed"
		return h
	}
	rank := map[plexus.HealthStatus]int{plexus.HealthUnknown: 0, plexus.HealthOK: 1, plexus.HealthDegraded: 2, plexus.HealthUnavailable: 3}
	for _, s := range sups {
		st, detail := s.health(now)
		if rank[st] > rank[h.Status] {
			h.Status, h.Detail = st, detail
		}
	}
	return h
}

func (s *supervisor) health(now time.Time) (plexus.HealthStatus, string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case s.proc != nil:
		return plexus.HealthOK, ""
	case s.startFailed:
		return plexus.HealthUnavailable, s.lastErr
	case s.failures == 0:
		return plexus.HealthUnknown, "not started: the process starts on the first call"
	}
	next := "restarts on the next call"
	if wait := s.retryAt.Sub(now); wait > 0 {
		next = "restarting in " + roundUp(wait).String()
	}
	return plexus.HealthDegraded, fmt.Sprintf("%s: %s; %s", s.bin, s.lastErr, next)
}

// Close stops every process (stdin closed, then SIGTERM, then SIGKILL to
// its process group, each after Options.StopGrace, and what the process
// left in its group killed once it exited), fails the calls in flight, and waits for every goroutine the transport started. Calls after
// Close fail with source_unavailable. It always returns nil.
func (t *Transport) Close() error {
	t.mu.Lock()
	t.closed = true
	sups := make([]*supervisor, 0, len(t.sups))
	for _, s := range t.sups {
		sups = append(sups, s)
	}
	t.mu.Unlock()

	var stops sync.WaitGroup
	for _, s := range sups {
		s.mu.Lock()
		s.closed = true
		p := s.proc
		s.mu.Unlock()
		if p != nil {
			stops.Go(func() {
				p.stop(t.grace, plexus.Errorf(plexus.CodeTransportError, "the stdio transport was closed during the call"))
			})
		}
	}
	stops.Wait()
	t.wg.Wait()
	return nil
}

// roundUp rounds a wait up to a readable precision.
func roundUp(d time.Duration) time.Duration {
	switch {
	case d >= time.Second:
		return (d + 100*time.Millisecond - 1).Truncate(100 * time.Millisecond)
	case d >= time.Millisecond:
		return (d + time.Millisecond - 1).Truncate(time.Millisecond)
	}
	return d
}
