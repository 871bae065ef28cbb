package planexe

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"regexp"
	"strings"
	"sync"
	"time"
)

// DefaultTaskDelay is how long each task of the stand-in planner takes when
// [Options.TaskDelay] is zero: long enough that a run is observably running
// and can be stopped half-way, short enough for a demo.
const DefaultTaskDelay = 75 * time.Millisecond

// DefaultMaxReadBytes bounds the content of one artifact.read (§13.3).
const DefaultMaxReadBytes = 4 << 20

// DefaultMaxWriteBytes bounds the content of one artifact.write.
const DefaultMaxWriteBytes = 4 << 20

// Options configure an [Engine]. The zero value is a working configuration.
type Options struct {
	// TaskDelay is how long each task takes. Zero means DefaultTaskDelay; a
	// negative value means no delay at all.
	TaskDelay time.Duration
	// Now is the clock for timestamps (events, created_at, updated_at). The
	// task delay and max_runtime_sec use real timers regardless.
	Now func() time.Time
	// Logger receives what only an operator should see: internal errors with
	// their causes. Nil discards.
	Logger *slog.Logger
	// MaxReadBytes and MaxWriteBytes bound one read and one write; zero means
	// the defaults.
	MaxReadBytes  int64
	MaxWriteBytes int64
	// RedactPrompts keeps the idea out of the event stream (§12.3); the
	// prompt.md artifact and run.log still hold it.
	RedactPrompts bool
	// RequireIdentity refuses every call from a caller that asserts no
	// identity (see [MetaUserID]).
	RequireIdentity bool
}

// Engine runs PlanExe sessions under one root folder. It is safe for
// concurrent use. Each run is a goroutine owned by the Engine: [Engine.Close]
// stops every run (they end "stopped" with reason server_shutdown, resumable
// after a restart) and waits for them.
//
// Lock order: a session's mu before Engine.mu; never take a session's mu
// while holding Engine.mu.
type Engine struct {
	root   *os.Root
	opts   Options
	pipe   *pipeline
	ctx    context.Context // parent of every run
	cancel context.CancelCauseFunc
	runs   sync.WaitGroup

	mu       sync.Mutex // guards the fields below
	sessions map[string]*session
	requests map[string]string // owner + "\x00" + client_request_id → session id
	closed   bool
}

var (
	errShutdown      = errors.New("server shutting down")
	errStopRequested = errors.New("stop requested")
	errMaxRuntime    = errors.New("max_runtime_sec exceeded")
)

// NewEngine opens (creating it if needed) the root folder and loads the
// sessions a previous process left there. A run that was running when that
// process died is recorded as stopped with reason "interrupted".
func NewEngine(root string, opts Options) (*Engine, error) {
	if root == "" {
		return nil, errors.New("planexe: empty root folder")
	}
	if opts.TaskDelay == 0 {
		opts.TaskDelay = DefaultTaskDelay
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.MaxReadBytes <= 0 {
		opts.MaxReadBytes = DefaultMaxReadBytes
	}
	if opts.MaxWriteBytes <= 0 {
		opts.MaxWriteBytes = DefaultMaxWriteBytes
	}
	if err := os.MkdirAll(root, 0o700); err != nil {
		return nil, fmt.Errorf("create root folder: %w", err)
	}
	r, err := os.OpenRoot(root)
	if err != nil {
		return nil, fmt.Errorf("open root folder: %w", err)
	}
	ctx, cancel := context.WithCancelCause(context.Background())
	e := &Engine{
		root:     r,
		opts:     opts,
		pipe:     newPipeline(),
		ctx:      ctx,
		cancel:   cancel,
		sessions: make(map[string]*session),
		requests: make(map[string]string),
	}
	if err := e.load(); err != nil {
		cancel(err)
		r.Close()
		return nil, err
	}
	return e, nil
}

// Close stops every run, waits for their goroutines, and releases the
// folders. Calls after Close fail with INTERNAL_ERROR.
func (e *Engine) Close() error {
	e.mu.Lock()
	if e.closed {
		e.mu.Unlock()
		return nil
	}
	e.closed = true
	sessions := make([]*session, 0, len(e.sessions))
	for _, s := range e.sessions {
		sessions = append(sessions, s)
	}
	e.mu.Unlock()

	e.cancel(errShutdown)
	e.runs.Wait()
	var errs []error
	for _, s := range sessions {
		errs = append(errs, s.out.Close(), s.dir.Close())
	}
	errs = append(errs, e.root.Close())
	return errors.Join(errs...)
}

func (e *Engine) now() time.Time { return e.opts.Now().UTC() }

// MetaUserID is the key in a tool call's _meta under which a caller (or a
// gateway speaking for it) asserts its identity (§12.2). The server does not
// authenticate it: it scopes sessions to whoever the transport in front of
// it vouches for.
const MetaUserID = "planexe/user_id"

// lookup returns the session id for a caller asserting identity user.
func (e *Engine) lookup(id, user string) (*session, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.closed {
		return nil, newError(CodeInternal, nil, "the server is shutting down")
	}
	s, ok := e.sessions[id]
	if !ok {
		return nil, newError(CodeSessionNotFound, map[string]any{"session_id": clip(id)}, "no session %q", clip(id))
	}
	if !e.permits(s.metadata.UserID, user) {
		return nil, newError(CodePermissionDenied, map[string]any{"session_id": id},
			"session %s belongs to another user", id)
	}
	return s, nil
}

// permits reports whether a caller asserting identity user may use a session
// owned by owner. An anonymous caller is the local owner of the process
// unless RequireIdentity says callers must name themselves.
func (e *Engine) permits(owner, user string) bool {
	switch {
	case user == "" && e.opts.RequireIdentity:
		return false
	case owner == "" || user == "":
		return true
	}
	return owner == user
}

var sessionIDPattern = regexp.MustCompile(`^pxe_\d{4}_\d{2}_\d{2}__[0-9a-f]{8}$`)

func (e *Engine) newSessionID() (string, error) {
	var b [4]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", fmt.Errorf("session id: %w", err)
	}
	return "pxe_" + e.now().Format("2006_01_02") + "__" + hex.EncodeToString(b[:]), nil
}

// Create creates a session and its output namespace (§6.1).
func (e *Engine) Create(_ context.Context, user string, req CreateRequest) (CreateResponse, error) {
	idea := strings.TrimSpace(req.Idea)
	if idea == "" {
		return CreateResponse{}, newError(CodeInvalidArgument, map[string]any{"field": "idea"}, "idea is required")
	}
	if len(idea) > 64<<10 {
		return CreateResponse{}, newError(CodeInvalidArgument, map[string]any{"field": "idea"}, "idea is longer than 64 KiB")
	}
	var cfg Config
	if req.Config != nil {
		cfg = *req.Config
	}
	if cfg.MaxRuntimeSec < 0 || cfg.MaxRuntimeSec > maxRuntimeLimit {
		return CreateResponse{}, newError(CodeInvalidArgument, map[string]any{"field": "config.max_runtime_sec"},
			"max_runtime_sec must be between 0 (the default, %d) and %d", defaultMaxRuntimeSec, maxRuntimeLimit)
	}
	if cfg.Luigi != nil && cfg.Luigi.Workers < 0 {
		return CreateResponse{}, newError(CodeInvalidArgument, map[string]any{"field": "config.luigi.workers"}, "luigi.workers must not be negative")
	}
	var md Metadata
	if req.Metadata != nil {
		md = *req.Metadata
	}
	switch {
	case user == "" && e.opts.RequireIdentity:
		return CreateResponse{}, newError(CodePermissionDenied, nil, "this server requires callers to assert an identity in _meta[%q]", MetaUserID)
	case user != "" && md.UserID == "":
		md.UserID = user
	case user != "" && md.UserID != user:
		return CreateResponse{}, newError(CodePermissionDenied, map[string]any{"user_id": md.UserID},
			"a caller cannot create a session for another user")
	}

	e.mu.Lock()
	defer e.mu.Unlock()
	if e.closed {
		return CreateResponse{}, newError(CodeInternal, nil, "the server is shutting down")
	}
	key := md.UserID + "\x00" + req.ClientRequestID
	if req.ClientRequestID != "" {
		if id, ok := e.requests[key]; ok {
			s := e.sessions[id]
			if s.idea != idea || !sameJSON(s.config, cfg) || !sameJSON(s.metadata, md) {
				return CreateResponse{}, newError(CodeConflict, map[string]any{"client_request_id": clip(req.ClientRequestID), "session_id": id},
					"client_request_id was already used for a different create")
			}
			return s.createResponse(), nil
		}
	}
	var s *session
	for attempt := 0; ; attempt++ {
		id, err := e.newSessionID()
		if err == nil {
			s, err = e.newSession(id, idea, cfg, md, req.ClientRequestID)
		}
		if err == nil {
			break
		}
		// 32 random bits a day rarely collide; when they do, draw again.
		if !errors.Is(err, fs.ErrExist) || attempt == 3 {
			return CreateResponse{}, internalError("create a session", err)
		}
	}
	id := s.id
	e.sessions[id] = s
	if req.ClientRequestID != "" {
		e.requests[key] = id
	}
	return s.createResponse(), nil
}

func sameJSON(a, b any) bool {
	ja, err1 := json.Marshal(a)
	jb, err2 := json.Marshal(b)
	return err1 == nil && err2 == nil && bytes.Equal(ja, jb)
}

// newSession makes the session's folders and first records. It runs under
// Engine.mu and takes the new session's mu, which the lock order allows only
// because no other goroutine can see the session yet.
func (e *Engine) newSession(id, idea string, cfg Config, md Metadata, requestID string) (*session, error) {
	if err := e.root.Mkdir(id, 0o700); err != nil {
		return nil, fmt.Errorf("create session folder: %w", err)
	}
	dir, err := e.root.OpenRoot(id)
	if err != nil {
		return nil, fmt.Errorf("open session folder: %w", err)
	}
	if err := dir.Mkdir("out", 0o755); err != nil {
		dir.Close()
		return nil, fmt.Errorf("create output folder: %w", err)
	}
	out, err := dir.OpenRoot("out")
	if err != nil {
		dir.Close()
		return nil, fmt.Errorf("open output folder: %w", err)
	}
	now := e.now()
	s := &session{
		id: id, dir: dir, out: out,
		idea: idea, config: cfg, metadata: md, clientRequestID: requestID, createdAt: now,
		updatedAt:  now,
		tasks:      make(map[string]*taskRecord),
		provenance: make(map[string]*provenance),
		changed:    make(chan struct{}),
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.save(); err != nil {
		out.Close()
		dir.Close()
		return nil, err
	}
	e.emit(s, "log", map[string]any{"level": "info", "msg": "session created"})
	return s, nil
}

// load reads the sessions under the root folder. A session whose files do
// not parse is skipped and logged, not fatal: one damaged session must not
// take the others down.
func (e *Engine) load() error {
	entries, err := fs.ReadDir(e.root.FS(), ".")
	if err != nil {
		return fmt.Errorf("read root folder: %w", err)
	}
	for _, ent := range entries {
		if !ent.IsDir() || !sessionIDPattern.MatchString(ent.Name()) {
			continue
		}
		s, err := e.loadSession(ent.Name())
		if err != nil {
			e.opts.Logger.Warn("planexe: skipping a session that does not load", "session_id", ent.Name(), "err", err)
			continue
		}
		e.sessions[s.id] = s
		if s.clientRequestID != "" {
			e.requests[s.metadata.UserID+"\x00"+s.clientRequestID] = s.id
		}
	}
	return nil
}

func (e *Engine) loadSession(id string) (*session, error) {
	dir, err := e.root.OpenRoot(id)
	if err != nil {
		return nil, fmt.Errorf("open session folder: %w", err)
	}
	s, err := e.readSession(id, dir)
	if err != nil {
		dir.Close()
		return nil, err
	}
	return s, nil
}

func (e *Engine) readSession(id string, dir *os.Root) (*session, error) {
	raw, err := dir.ReadFile(sessionFileName)
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", sessionFileName, err)
	}
	var sf sessionFile
	if err := json.Unmarshal(raw, &sf); err != nil {
		return nil, fmt.Errorf("parse %s: %w", sessionFileName, err)
	}
	if sf.ID != id {
		return nil, fmt.Errorf("%s names session %q", sessionFileName, sf.ID)
	}
	out, err := dir.OpenRoot("out")
	if err != nil {
		return nil, fmt.Errorf("open output folder: %w", err)
	}
	s := &session{
		id: id, dir: dir, out: out,
		idea: sf.Idea, config: sf.Config, metadata: sf.Metadata, clientRequestID: sf.ClientRequestID,
		createdAt: sf.CreatedAt, updatedAt: sf.UpdatedAt,
		runs: sf.Runs, tasks: sf.Tasks, provenance: sf.Provenance,
		changed: make(chan struct{}),
	}
	if s.tasks == nil {
		s.tasks = make(map[string]*taskRecord)
	}
	if s.provenance == nil {
		s.provenance = make(map[string]*provenance)
	}
	if err := s.loadEvents(); err != nil {
		out.Close()
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, r := range s.runs {
		if r.State == StateRunning {
			// The process that ran it died without stopping it. Its last
			// completed task is on disk, so it is as resumable as a stop.
			r.State, r.StopReason, r.EndedAt = StateStopped, "interrupted", e.now()
			e.emit(s, "run_stopped", map[string]any{"run_id": r.ID, "reason": r.StopReason})
			if err := s.save(); err != nil {
				e.opts.Logger.Error("planexe: record an interrupted run", "session_id", id, "err", err)
			}
		}
	}
	return s, nil
}
