package ipc

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// Authenticator checks the session_token of agent.hello (§5.3). It returns
// the provider the token was issued to; the server refuses a hello whose
// agent_id is not that provider.
//
// Implementations compare tokens in constant time, must be safe for
// concurrent use (each connection calls it from its own goroutine), and must
// never log the token. The server never logs it either.
type Authenticator interface {
	Authenticate(token string) (providerID string, ok bool)
}

// Refusal reasons passed to [ServerOptions.OnRefused]. The values are
// stable strings, fit to be journaled as they are.
const (
	RefusedFrame        = "frame"               // a frame broke §2; detail: kind and sizes
	RefusedEnvelope     = "envelope"            // a frame was not a §3 envelope; detail: field, problem
	RefusedHelloTimeout = "hello_timeout"       // no agent.hello within HelloTimeout
	RefusedNoHello      = "no_hello"            // the first message was not agent.hello
	RefusedUnauthorized = "unauthorized"        // bad token, or agent_id not the token's provider
	RefusedVersion      = "unsupported_version" // no common protocol version
)

// ServerOptions configures a [Server]. Only SocketPath and Auth are
// required; every other zero value means its default.
type ServerOptions struct {
	// SocketPath is the unix socket to listen on. Its parent folder is
	// created 0700 when missing and refused when group or others have any
	// permission on it: the folder is what keeps other users off the
	// socket between bind and chmod.
	SocketPath string
	// MaxFrameBytes is the frame limit enforced and announced in
	// core.welcome; DefaultMaxFrameBytes when 0.
	MaxFrameBytes int
	// HeartbeatInterval is announced in core.welcome; 5s when 0.
	HeartbeatInterval time.Duration
	// HelloTimeout is how long a new connection has to send a valid
	// agent.hello before it is closed; 5s when 0.
	HelloTimeout time.Duration
	// Auth checks hello tokens. Required.
	Auth Authenticator
	// Clock stamps envelopes and session times; time.Now when nil.
	// Deadlines on the socket use the real time regardless.
	Clock func() time.Time
	// Logger gets connection-level debug events, never a token or payload
	// bytes; discarded when nil.
	Logger *slog.Logger
	// OnRefused is how refused frames, hellos and tokens reach the
	// journal: reason is one of the Refused* constants, detail holds
	// sizes, kinds and agent ids only, never payload bytes nor the token.
	// It is called from connection goroutines, concurrently, and must not
	// block for long. Optional.
	OnRefused func(reason string, detail map[string]any)
	// CoreVersion and InstanceID are sent in core.welcome's server object.
	CoreVersion string
	InstanceID  string
	// Handler takes over each welcomed session: its heartbeats and its
	// tool messages. Without one, tool messages are answered
	// [CodeUnsupported] and heartbeats are only recorded. Optional.
	Handler Handler
	// FrameLimit returns the frame limit of an authenticated provider's
	// session (announced in its core.welcome and enforced from then on);
	// 0 means MaxFrameBytes. The hello itself is read under MaxFrameBytes.
	// Optional.
	FrameLimit func(providerID string) int
}

// Handler is what a [Server] hands a welcomed session to. The server calls
// it from the session's connection goroutine, one call at a time and in the
// order the frames arrived (§2.3): Opened once, then Heartbeat and Message
// as messages come, then Closed once the connection is closed. A slow call
// delays the session's next message, so a Handler hands long work to the
// goroutine waiting for it rather than doing it inline. Different sessions'
// calls run concurrently.
type Handler interface {
	// Opened is called after core.welcome was written, before the
	// session's first message is read.
	Opened(s *Session)
	// Heartbeat is called for each agent.heartbeat whose session_id is
	// the session's; the server has recorded it in [Server.Sessions].
	Heartbeat(s *Session, hb Heartbeat)
	// Message handles agent.tools.register, agent.tools.unregister,
	// agent.tool.stream, agent.tool.result, agent.tool.cancel_ack and
	// agent.pong. An error means the connection can no longer be written
	// to, and ends it.
	Message(s *Session, env Envelope) error
	// Closed is called once, after the connection was closed (by the
	// peer, a frame error, [Session.Close] or the server's shutdown).
	Closed(s *Session)
}

// Session is one welcomed connection as a [Handler] sees it. Its methods
// are safe for concurrent use.
type Session struct {
	c          *conn
	info       SessionInfo
	peerClosed atomic.Bool
}

// ClosedByPeer reports, once the session is closed, whether the agent
// ended it (end of stream at a frame boundary, or a reset) rather than the
// server (a frame that broke §2, a goodbye, a Close).
func (s *Session) ClosedByPeer() bool { return s.peerClosed.Load() }

// ID is the session_id sent in core.welcome.
func (s *Session) ID() string { return s.info.ID }

// ProviderID is the provider the session's token was issued to.
func (s *Session) ProviderID() string { return s.info.ProviderID }

// AgentVersion is the agent_version of the session's agent.hello.
func (s *Session) AgentVersion() string { return s.info.AgentVersion }

// Since is when core.welcome was sent, by the server's clock.
func (s *Session) Since() time.Time { return s.info.Since }

// MaxFrameBytes is the frame limit announced to this session.
func (s *Session) MaxFrameBytes() int { return s.c.max }

// Send stamps env with a fresh id and the server's clock and writes it,
// within the server's write timeout. A payload over the session's frame
// limit is refused with a [*FrameError] and nothing is written.
func (s *Session) Send(env Envelope) error { return s.c.send(env) }

// Goodbye sends core.goodbye with reason (a safe reason code) and closes
// the connection. It is a no-op once the connection is closed.
func (s *Session) Goodbye(reason string) { s.c.goodbye(reason) }

// Close closes the connection without a goodbye.
func (s *Session) Close() { s.c.close() }

// supportedVersions are the protocol versions this server speaks (§6.1).
var supportedVersions = []int{Version}

const (
	defaultHeartbeatInterval = 5 * time.Second
	defaultHelloTimeout      = 5 * time.Second
	// writeTimeout bounds every write, so a peer that stops reading cannot
	// hold a connection goroutine (or Close) forever.
	writeTimeout = 5 * time.Second
	// goodbyeTimeout bounds the core.goodbye write at shutdown.
	goodbyeTimeout = time.Second
	// staleDialTimeout is how long Listen waits for an existing socket to
	// answer before deciding it is stale.
	staleDialTimeout = 500 * time.Millisecond
	// GoodbyeShutdown is the core.goodbye reason sent when the server stops.
	GoodbyeShutdown = "shutdown"
)

// ErrServerClosed is returned by Listen and Serve after Close.
var ErrServerClosed = errors.New("ipc server closed")

// SessionInfo is one welcomed session, for health reporting.
type SessionInfo struct {
	ID           string
	ProviderID   string
	AgentID      string
	AgentVersion string
	// Since is when core.welcome was sent.
	Since time.Time
	// LastHeartbeat is when the last agent.heartbeat arrived (zero before
	// the first), and Status the health it reported.
	LastHeartbeat time.Time
	Status        string
}

// Server is Core's side of the ipc transport: it accepts agent connections
// on a unix socket, runs the agent.hello / core.welcome handshake (§4.1:
// token, version negotiation) and then reads each session's frames,
// recording heartbeats (§4.5.1) and handing the session's messages to its
// [Handler] (the [Hub]); without one, tool messages get a structured
// [CodeUnsupported] error.
//
// Use: [NewServer], [Server.Listen] (binds synchronously), [Server.Serve]
// (blocks until ctx ends or [Server.Close]). Ending either sends
// core.goodbye to every welcomed session, closes every connection, removes
// the socket file and waits for every goroutine the server started.
type Server struct {
	opts ServerOptions

	// mu guards the fields below. It and a conn's wmu are never held at
	// the same time, so there is no lock order to keep.
	mu       sync.Mutex
	ln       *net.UnixListener
	serving  bool
	closed   bool
	cancel   context.CancelFunc // Serve's; nil until Serve starts
	done     chan struct{}      // closed when Serve has cleaned up
	conns    map[*conn]struct{}
	sessions map[string]*SessionInfo
}

// NewServer checks opts and fills in the defaults. It does not touch the
// file system: [Server.Listen] does.
func NewServer(opts ServerOptions) (*Server, error) {
	if opts.SocketPath == "" {
		return nil, errors.New("ipc server: SocketPath is required")
	}
	if opts.Auth == nil {
		return nil, errors.New("ipc server: Auth is required")
	}
	if opts.MaxFrameBytes < 0 || opts.HeartbeatInterval < 0 || opts.HelloTimeout < 0 {
		return nil, errors.New("ipc server: negative limit")
	}
	if opts.MaxFrameBytes == 0 {
		opts.MaxFrameBytes = DefaultMaxFrameBytes
	}
	opts.MaxFrameBytes = effectiveMax(opts.MaxFrameBytes)
	if opts.HeartbeatInterval == 0 {
		opts.HeartbeatInterval = defaultHeartbeatInterval
	}
	if opts.HelloTimeout == 0 {
		opts.HelloTimeout = defaultHelloTimeout
	}
	if opts.Clock == nil {
		opts.Clock = time.Now
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.OnRefused == nil {
		opts.OnRefused = func(string, map[string]any) {}
	}
	return &Server{
		opts:     opts,
		conns:    make(map[*conn]struct{}),
		sessions: make(map[string]*SessionInfo),
	}, nil
}

// Listen prepares the socket folder and binds the socket, synchronously, so
// that agents can be launched as soon as it returns.
//
// The folder is created 0700 if missing and refused if group or others have
// any permission bit. An existing file at SocketPath is replaced only if it
// is a socket nothing answers on (left by a crashed server); a live socket
// is refused, and so is any other kind of file. The socket is chmod 0600
// right after bind; in between, the 0700 folder keeps others out.
func (s *Server) Listen() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case s.closed:
		return ErrServerClosed
	case s.ln != nil:
		return errors.New("ipc server: already listening")
	}
	path := s.opts.SocketPath
	if err := prepareDir(filepath.Dir(path)); err != nil {
		return err
	}
	if err := removeStale(path); err != nil {
		return err
	}
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: path, Net: "unix"})
	if err != nil {
		return fmt.Errorf("ipc listen: %w", err)
	}
	// Close unlinks the socket file: that is how Close removes it, with
	// no window in which a successor's socket could be removed instead.
	ln.SetUnlinkOnClose(true)
	if err := os.Chmod(path, 0o600); err != nil {
		ln.Close()
		return fmt.Errorf("ipc listen: chmod socket: %w", err)
	}
	s.ln = ln
	return nil
}

func prepareDir(dir string) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("ipc listen: socket folder: %w", err)
	}
	fi, err := os.Stat(dir)
	if err != nil {
		return fmt.Errorf("ipc listen: socket folder: %w", err)
	}
	if !fi.IsDir() {
		return fmt.Errorf("ipc listen: socket folder %s is not a folder", dir)
	}
	if perm := fi.Mode().Perm(); perm&0o077 != 0 {
		return fmt.Errorf("ipc listen: socket folder %s has mode %04o, want no group or other permission (0700)", dir, perm)
	}
	return nil
}

// removeStale removes path if it is a socket that refuses connections.
func removeStale(path string) error {
	fi, err := os.Lstat(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("ipc listen: %w", err)
	}
	if fi.Mode().Type() != fs.ModeSocket {
		return fmt.Errorf("ipc listen: %s exists and is not a socket", path)
	}
	c, err := net.DialTimeout("unix", path, staleDialTimeout)
	if err == nil {
		c.Close()
		return fmt.Errorf("ipc listen: %s is in use by a live server", path)
	}
	if !errors.Is(err, syscall.ECONNREFUSED) {
		// Something may be there but slow (a timeout), or the file went
		// away: never remove what we are unsure about.
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		return fmt.Errorf("ipc listen: probe existing socket: %w", err)
	}
	if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("ipc listen: remove stale socket: %w", err)
	}
	return nil
}

// Addr is the socket path, once listening.
func (s *Server) Addr() string { return s.opts.SocketPath }

// Serve accepts connections until ctx ends or Close is called, then sends
// core.goodbye to welcomed sessions, closes every connection, removes the
// socket file and waits for its goroutines. It returns nil after such a
// stop, and the accept error otherwise (after the same clean-up).
func (s *Server) Serve(ctx context.Context) error {
	s.mu.Lock()
	switch {
	case s.closed:
		s.mu.Unlock()
		return ErrServerClosed
	case s.ln == nil:
		s.mu.Unlock()
		return errors.New("ipc server: Serve before Listen")
	case s.serving:
		s.mu.Unlock()
		return errors.New("ipc server: already serving")
	}
	ctx, cancel := context.WithCancel(ctx)
	s.serving, s.cancel, s.done = true, cancel, make(chan struct{})
	ln, done := s.ln, s.done
	s.mu.Unlock()
	defer close(done)
	defer cancel()

	// wg counts every goroutine this call starts: the listener closer and
	// one per connection.
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		<-ctx.Done()
		ln.Close() // unblocks AcceptUnix
	}()

	var err error
	for {
		nc, aerr := ln.AcceptUnix()
		if aerr != nil {
			if ctx.Err() != nil {
				break
			}
			if errors.Is(aerr, net.ErrClosed) {
				err = fmt.Errorf("ipc accept: %w", aerr)
				break
			}
			// Out of file descriptors and the like: wait a little and
			// go on rather than stop serving every agent.
			s.opts.Logger.Warn("ipc accept", "err", aerr)
			select {
			case <-ctx.Done():
			case <-time.After(50 * time.Millisecond):
			}
			continue
		}
		c := &conn{nc: nc, s: s, max: s.opts.MaxFrameBytes}
		s.mu.Lock()
		s.conns[c] = struct{}{}
		s.mu.Unlock()
		wg.Add(1)
		go func() {
			defer wg.Done()
			s.serveConn(c)
		}()
	}
	cancel()
	s.mu.Lock()
	s.closed = true
	conns := make([]*conn, 0, len(s.conns))
	for c := range s.conns {
		conns = append(conns, c)
	}
	s.mu.Unlock()
	for _, c := range conns {
		c.goodbye(GoodbyeShutdown)
	}
	wg.Wait()
	return err
}

// Close stops the server as ctx's end would, and waits until Serve has
// cleaned up. Without Serve, it closes the listener (removing the socket
// file). It is safe to call more than once.
func (s *Server) Close() error {
	s.mu.Lock()
	cancel, done, ln, serving := s.cancel, s.done, s.ln, s.serving
	s.closed = true
	s.mu.Unlock()
	if serving {
		cancel()
		<-done
		return nil
	}
	if ln != nil {
		ln.Close()
	}
	return nil
}

// Sessions returns the welcomed sessions that are still connected, oldest
// first.
func (s *Server) Sessions() []SessionInfo {
	s.mu.Lock()
	out := make([]SessionInfo, 0, len(s.sessions))
	for _, si := range s.sessions {
		out = append(out, *si)
	}
	s.mu.Unlock()
	slices.SortFunc(out, func(a, b SessionInfo) int {
		if c := a.Since.Compare(b.Since); c != 0 {
			return c
		}
		if a.ID < b.ID {
			return -1
		}
		return 1
	})
	return out
}

func (s *Server) refuse(reason string, detail map[string]any) {
	s.opts.OnRefused(reason, detail)
}

func frameDetail(fe *FrameError) map[string]any {
	return map[string]any{
		"kind":     string(fe.Kind),
		"declared": fe.Declared,
		"max":      fe.Max,
		"got":      fe.Got,
		"want":     fe.Want,
		"offset":   fe.Offset,
	}
}

// clip bounds a peer-chosen string before it goes into a refusal's detail:
// a hello is up to MaxFrameBytes, the journal should not be.
func clip(s string) string {
	const max = 128
	if len(s) <= max {
		return s
	}
	return strings.ToValidUTF8(s[:max], "") + "…"
}

// newID is a fresh unpredictable identifier (128 random bits, base32).
func newID() string { return rand.Text() }

// conn is one agent connection. Its goroutine (serveConn) owns reading;
// wmu serializes writes between that goroutine, Serve's shutdown and a
// Handler's senders.
type conn struct {
	nc *net.UnixConn
	s  *Server
	// max is the frame limit: the server's until the welcome, then the
	// session's. Written by the connection goroutine before the welcome is
	// sent (and so before any Session exists), read-only after.
	max int

	wmu     sync.Mutex
	welcome bool // core.welcome was sent: goodbye is due at shutdown
	closed  bool
}

// send stamps env with a fresh id and the clock, and writes it.
func (c *conn) send(env Envelope) error {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	return c.sendLocked(env, writeTimeout)
}

func (c *conn) sendLocked(env Envelope, timeout time.Duration) error {
	if c.closed {
		return net.ErrClosed
	}
	env.V = Version
	env.ID = newID()
	env.TS = c.s.opts.Clock().UTC()
	b, err := EncodeEnvelope(env)
	if err != nil {
		return err
	}
	if err := c.nc.SetWriteDeadline(time.Now().Add(timeout)); err != nil {
		return err
	}
	return WriteFrame(c.nc, b, c.max)
}

// goodbye sends core.goodbye if the session was welcomed, then closes.
func (c *conn) goodbye(reason string) {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	if c.welcome && !c.closed {
		p, _ := json.Marshal(Goodbye{Reason: reason})
		if err := c.sendLocked(Envelope{Type: TypeCoreGoodbye, Payload: p}, goodbyeTimeout); err != nil {
			c.s.opts.Logger.Debug("ipc goodbye", "err", err)
		}
	}
	c.closeLocked()
}

func (c *conn) close() {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	c.closeLocked()
}

func (c *conn) closeLocked() {
	if !c.closed {
		c.closed = true
		c.nc.Close()
	}
}

// serveConn runs one connection: the handshake, then the session's frames.
func (s *Server) serveConn(c *conn) {
	var sess *Session
	defer func() {
		c.close()
		s.mu.Lock()
		delete(s.conns, c)
		if sess != nil {
			delete(s.sessions, sess.info.ID)
		}
		s.mu.Unlock()
		if sess != nil && s.opts.Handler != nil {
			s.opts.Handler.Closed(sess)
		}
	}()
	sess = s.handshake(c)
	if sess == nil {
		return
	}
	if s.opts.Handler != nil {
		s.opts.Handler.Opened(sess)
	}
	s.session(c, sess)
}

// handshake reads agent.hello and answers core.welcome (§4.1). It returns
// the new session, or nil when the connection is to be closed.
func (s *Server) handshake(c *conn) *Session {
	if err := c.nc.SetReadDeadline(time.Now().Add(s.opts.HelloTimeout)); err != nil {
		return nil
	}
	env, hello, ok := s.readHello(c)
	if !ok {
		return nil
	}
	provider, version, ok := s.admitHello(c, env, hello)
	if !ok {
		return nil
	}
	return s.welcome(c, env, hello, provider, version)
}

// readHello reads the first message, which must be a well-formed
// agent.hello; anything else is refused on the record and answered.
func (s *Server) readHello(c *conn) (Envelope, Hello, bool) {
	b, err := ReadFrame(c.nc, s.opts.MaxFrameBytes)
	if err != nil {
		s.readFailed(err, "hello")
		return Envelope{}, Hello{}, false
	}
	env, err := DecodeEnvelope(b)
	if err != nil {
		s.badEnvelope(c, Envelope{}, err, "hello")
		return Envelope{}, Hello{}, false
	}
	if env.Type != TypeAgentHello {
		detail := map[string]any{"type": "unknown"}
		if KnownType(env.Type) {
			detail["type"] = env.Type
		}
		s.refuse(RefusedNoHello, detail)
		c.send(ErrorReply(env, CodeUnexpectedType, "the first message must be agent.hello"))
		return Envelope{}, Hello{}, false
	}
	hello, err := DecodePayload[Hello](env)
	if err != nil {
		s.badEnvelope(c, env, err, "hello")
		return Envelope{}, Hello{}, false
	}
	return env, hello, true
}

// admitHello checks a hello's agent id, session token and protocol
// versions, in that order, and answers the token's provider and the
// version both speak. A refusal is on the record and answered with a
// core.welcome carrying the error.
func (s *Server) admitHello(c *conn, env Envelope, hello Hello) (string, int, bool) {
	refuseWelcome := func(code, message string) {
		c.send(Envelope{
			Type:      TypeCoreWelcome,
			InReplyTo: env.ID,
			RequestID: env.RequestID,
			Error:     &Error{Code: code, Message: message},
		})
	}
	if hello.AgentID == "" {
		s.refuse(RefusedEnvelope, map[string]any{"stage": "hello", "field": "payload.agent_id", "problem": problemMissing})
		refuseWelcome(CodeInvalidEnvelope, "agent.hello: payload.agent_id is missing")
		return "", 0, false
	}
	// Token first: an unauthenticated peer learns nothing else.
	provider, ok := "", false
	if hello.SessionToken != "" {
		provider, ok = s.opts.Auth.Authenticate(hello.SessionToken)
	}
	if !ok || provider != hello.AgentID {
		detail := map[string]any{"agent_id": clip(hello.AgentID)}
		if ok {
			detail["problem"] = "agent_id is not the token's provider"
			detail["provider_id"] = provider
		}
		s.refuse(RefusedUnauthorized, detail)
		refuseWelcome(CodeUnauthorized, "session token refused")
		return "", 0, false
	}
	version := negotiate(hello.Protocol.SupportedVersions)
	if version == 0 {
		s.refuse(RefusedVersion, map[string]any{
			"agent_id":           clip(hello.AgentID),
			"supported_versions": hello.Protocol.SupportedVersions[:min(len(hello.Protocol.SupportedVersions), 16)],
		})
		refuseWelcome(CodeUnsupportedVersion, fmt.Sprintf("no common protocol version; this gateway speaks %v", supportedVersions))
		return "", 0, false
	}
	return provider, version, true
}

// welcome registers the admitted provider's session and answers
// core.welcome; it answers nil when the welcome cannot be written.
func (s *Server) welcome(c *conn, env Envelope, hello Hello, provider string, version int) *Session {
	log := s.opts.Logger
	if s.opts.FrameLimit != nil {
		if n := s.opts.FrameLimit(provider); n > 0 {
			c.max = effectiveMax(n)
		}
	}
	now := s.opts.Clock()
	info := &SessionInfo{
		ID:           newID(),
		ProviderID:   provider,
		AgentID:      hello.AgentID,
		AgentVersion: hello.AgentVersion,
		Since:        now,
	}
	p, err := json.Marshal(Welcome{
		AcceptedVersion:     version,
		SessionID:           info.ID,
		HeartbeatIntervalMS: s.opts.HeartbeatInterval.Milliseconds(),
		MaxFrameBytes:       c.max,
		Server:              ServerInfo{CoreVersion: s.opts.CoreVersion, InstanceID: s.opts.InstanceID},
	})
	if err != nil {
		return nil
	}
	// Registered before the welcome is written, so that an agent which has
	// read its welcome finds itself in Sessions.
	s.mu.Lock()
	s.sessions[info.ID] = info
	s.mu.Unlock()
	c.wmu.Lock()
	err = c.sendLocked(Envelope{Type: TypeCoreWelcome, Payload: p, InReplyTo: env.ID, RequestID: env.RequestID}, writeTimeout)
	c.welcome = err == nil
	c.wmu.Unlock()
	if err != nil {
		log.Debug("ipc welcome", "err", err)
		s.mu.Lock()
		delete(s.sessions, info.ID)
		s.mu.Unlock()
		return nil
	}
	if err := c.nc.SetReadDeadline(time.Time{}); err != nil {
		return nil
	}
	log.Debug("ipc session welcomed", "session_id", info.ID, "agent_id", info.AgentID)
	return &Session{c: c, info: *info}
}

// negotiate returns the highest version in both theirs and
// supportedVersions, or 0.
func negotiate(theirs []int) int {
	best := 0
	for _, v := range theirs {
		if v > best && slices.Contains(supportedVersions, v) {
			best = v
		}
	}
	return best
}

// readFailed reports why reading stopped: a frame error is refused, a
// hello deadline is refused, a clean EOF or a closed connection is not.
func (s *Server) readFailed(err error, stage string) {
	var fe *FrameError
	var ne net.Error
	switch {
	case errors.As(err, &fe):
		d := frameDetail(fe)
		d["stage"] = stage
		s.refuse(RefusedFrame, d)
	case stage == "hello" && errors.As(err, &ne) && ne.Timeout():
		s.refuse(RefusedHelloTimeout, map[string]any{"timeout_ms": s.opts.HelloTimeout.Milliseconds()})
	case errors.Is(err, io.EOF), errors.Is(err, net.ErrClosed):
	default:
		s.opts.Logger.Debug("ipc read", "stage", stage, "err", err)
	}
}

// badEnvelope answers a message that is not a valid envelope or payload.
func (s *Server) badEnvelope(c *conn, req Envelope, err error, stage string) {
	code, detail := CodeInvalidEnvelope, map[string]any{"stage": stage}
	var ee *EnvelopeError
	if errors.As(err, &ee) {
		code = ee.Code()
		detail["field"], detail["problem"] = ee.Field, ee.Problem
	}
	s.refuse(RefusedEnvelope, detail)
	c.send(ErrorReply(req, code, err.Error()))
}

// session reads a welcomed session's frames until EOF, a frame error or
// the connection's close at shutdown.
func (s *Server) session(c *conn, sess *Session) {
	for {
		b, err := ReadFrame(c.nc, c.max)
		if err != nil {
			if errors.Is(err, io.EOF) || errors.Is(err, syscall.ECONNRESET) {
				sess.peerClosed.Store(true)
			}
			s.readFailed(err, "session")
			return
		}
		env, err := DecodeEnvelope(b)
		if err != nil {
			// The stream is still at a frame boundary: answer and go on.
			s.badEnvelope(c, Envelope{}, err, "session")
			continue
		}
		if err := s.dispatch(c, sess, env); err != nil {
			return
		}
	}
}

// dispatch handles one message of a welcomed session. An error means the
// connection cannot be written to any more.
func (s *Server) dispatch(c *conn, sess *Session, env Envelope) error {
	id := sess.info.ID
	switch env.Type {
	case TypeAgentHeartbeat:
		hb, err := DecodePayload[Heartbeat](env)
		if err != nil {
			s.badEnvelope(c, env, err, "session")
			return nil
		}
		if hb.SessionID != id {
			return c.send(ErrorReply(env, CodeInvalidSession, "agent.heartbeat: session_id is not this connection's session"))
		}
		now := s.opts.Clock()
		s.mu.Lock()
		if si := s.sessions[id]; si != nil {
			si.LastHeartbeat, si.Status = now, hb.Status
		}
		s.mu.Unlock()
		if s.opts.Handler != nil {
			s.opts.Handler.Heartbeat(sess, hb)
		}
		return nil
	case TypeAgentToolsRegister, TypeAgentToolsUnregister, TypeAgentToolStream,
		TypeAgentToolResult, TypeAgentToolCancelAck, TypeAgentPong:
		if s.opts.Handler != nil {
			return s.opts.Handler.Message(sess, env)
		}
		return c.send(ErrorReply(env, CodeUnsupported, env.Type+" is not handled by this server"))
	}
	if KnownType(env.Type) {
		// A second agent.hello, or a core.* type sent by the agent.
		return c.send(ErrorReply(env, CodeUnexpectedType, env.Type+" is not expected from an agent in a session"))
	}
	// §6.2: an unknown type gets a structured error if it expects a reply.
	// Core cannot tell whether it does, so it always answers.
	return c.send(ErrorReply(env, CodeUnknownType, "unknown message type"))
}
