// Package http is the loopback HTTP edge of Plexus: it binds the listener,
// guards every request against DNS rebinding and foreign origins, decodes the
// wire bodies of specs/plexus-protocol-m0.txt §2, hands them with the caller's
// raw credentials to the gateway through the narrow interfaces of a
// [Backend] (backend.go), and maps the answer's error code to an
// HTTP status through one table (status.go).
//
// It must never interpret a credential (the gateway decides what a bearer,
// connection-key or session means), never answer /invoke with anything but an
// InvokeResponse, never let a request reach the gateway before the Host/Origin
// guard has passed it, and never log headers, bodies, query strings or
// credentials.
//
// Other packages import it as plexushttp.
package http

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	nethttp "net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

// Defaults applied to the zero value of each [Options] field.
const (
	DefaultAddr              = "127.0.0.1:7077"
	DefaultMaxBodyBytes      = 1 << 20
	DefaultReadHeaderTimeout = 10 * time.Second
	DefaultReadTimeout       = time.Minute
	// DefaultWriteTimeout is generous because an /invoke waits for the
	// software behind a capability (an MCP tool, a workflow fan-out).
	DefaultWriteTimeout    = 5 * time.Minute
	DefaultIdleTimeout     = 2 * time.Minute
	DefaultHeartbeat       = 15 * time.Second
	DefaultShutdownTimeout = 5 * time.Second
)

// Options configures a [Server]. The zero value of every field selects its
// default; a negative timeout disables that timeout.
type Options struct {
	// Addr is the authority to bind ("127.0.0.1:7077"; port 0 picks one).
	// The Host guard compares against the port actually bound.
	Addr string
	// AllowedOrigins lists the browser origins (scheme://host[:port]) that
	// may call the gateway; they also get CORS answers. Empty means no
	// browser origin at all, not even the gateway's own: agent CLIs send no
	// Origin header and are unaffected.
	AllowedOrigins []string
	// MaxBodyBytes caps every request body (default 1 MiB).
	MaxBodyBytes int64
	Logger       *slog.Logger

	ReadHeaderTimeout time.Duration
	ReadTimeout       time.Duration
	// WriteTimeout bounds a whole response. /events clears it (and the read
	// deadline) for its own connection, since a stream lives for hours.
	WriteTimeout time.Duration
	IdleTimeout  time.Duration
	// Heartbeat is the interval of the ": ping" comment on /events.
	Heartbeat time.Duration
	// ShutdownTimeout bounds the graceful drain when Serve's context ends.
	ShutdownTimeout time.Duration
	// Providers serves /admin/api/providers; nil answers not_found there.
	Providers ProvidersAPI
	// MCP serves /mcp, the MCP front door (every method: it answers 405
	// itself), after the guard; it checks the bearer itself. Nil answers
	// not_found there.
	MCP nethttp.Handler
	// Metrics serves /metrics (metrics.go); nil answers not_found there.
	Metrics MetricsAPI
	// Console serves the owner's web console under /console/ (every
	// method), after the guard; it checks its own session. Nil answers
	// not_found there.
	Console nethttp.Handler
	// SignIn serves the owner's sign-in to remote MCP servers under
	// /admin/api/mcp/ (mcpsignin.go), behind the connection-key; nil
	// answers not_found there. It needs Backend.Owner.
	SignIn SignInAPI
	// OAuthCallback serves GET /oauth/callback, where an authorization
	// server sends the owner's browser back; it checks the state itself.
	// Nil answers not_found there.
	OAuthCallback nethttp.Handler
}

// Server is the loopback HTTP server. Create it with [New]; bind with
// [Server.Listen] and run it with [Server.Serve], or mount [Server.Handler].
// Serve may be called once.
type Server struct {
	b       Backend
	opts    Options
	log     *slog.Logger
	origins map[string]bool // canonical allowed origins
	mux     *nethttp.ServeMux
	handler nethttp.Handler

	// port is the bound port the Host guard compares against; written by
	// Listen/Serve, read by every request.
	port atomic.Int32

	// encBufs holds writeJSON's response buffers (*bytes.Buffer), so the
	// hot /invoke path does not allocate one per call.
	encBufs sync.Pool
	// bodyBufs holds the buffers /invoke bodies are read into (*[]byte).
	bodyBufs sync.Pool
	hdr      jsonHeaders

	// streams ends every open /events stream when shutdown begins: Shutdown
	// waits for connections to go idle, and a stream never does.
	streams    context.Context
	endStreams context.CancelFunc
}

// New returns a server that answers with b. It does not bind.
func New(b Backend, opts Options) *Server {
	if b.Owner == nil && (b.Admin != nil || b.Decisions != nil || b.Sources != nil || b.Extensions != nil || opts.Providers != nil) {
		panic("plexushttp.New: an owner-plane group without Backend.Owner")
	}
	if opts.Addr == "" {
		opts.Addr = DefaultAddr
	}
	if opts.MaxBodyBytes <= 0 {
		opts.MaxBodyBytes = DefaultMaxBodyBytes
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	opts.ReadHeaderTimeout = orDefault(opts.ReadHeaderTimeout, DefaultReadHeaderTimeout)
	opts.ReadTimeout = orDefault(opts.ReadTimeout, DefaultReadTimeout)
	opts.WriteTimeout = orDefault(opts.WriteTimeout, DefaultWriteTimeout)
	opts.IdleTimeout = orDefault(opts.IdleTimeout, DefaultIdleTimeout)
	opts.Heartbeat = orDefault(opts.Heartbeat, DefaultHeartbeat)
	opts.ShutdownTimeout = orDefault(opts.ShutdownTimeout, DefaultShutdownTimeout)

	s := &Server{b: b, opts: opts, log: opts.Logger, hdr: newJSONHeaders()}
	s.streams, s.endStreams = context.WithCancel(context.Background())
	if _, p, err := net.SplitHostPort(opts.Addr); err == nil {
		if n, err := strconv.Atoi(p); err == nil {
			s.port.Store(int32(n))
		}
	}
	s.origins = s.allowedOrigins(opts.AllowedOrigins)
	s.mux = nethttp.NewServeMux()
	s.routes()
	// Logging observes the guard's refusals too; it reads nothing the guard
	// has not yet vetted except method, path and status.
	s.handler = s.logRequests(s.guard(s.mux))
	return s
}

func orDefault(d, def time.Duration) time.Duration {
	switch {
	case d == 0:
		return def
	case d < 0:
		return 0
	}
	return d
}

// Port returns the port the Host guard currently accepts.
func (s *Server) Port() int { return int(s.port.Load()) }

func (s *Server) learnPort(ln net.Listener) {
	if a, ok := ln.Addr().(*net.TCPAddr); ok {
		s.port.Store(int32(a.Port))
	}
}

// Serve serves on ln until ctx ends, then shuts down gracefully within
// Options.ShutdownTimeout: open /events streams are ended at once, other
// requests may finish. It returns nil after a clean shutdown.
func (s *Server) Serve(ctx context.Context, ln net.Listener) error {
	s.learnPort(ln)
	srv := &nethttp.Server{
		Handler:           s.handler,
		ReadHeaderTimeout: s.opts.ReadHeaderTimeout,
		ReadTimeout:       s.opts.ReadTimeout,
		WriteTimeout:      s.opts.WriteTimeout,
		IdleTimeout:       s.opts.IdleTimeout,
		MaxHeaderBytes:    64 << 10,
		ErrorLog:          slog.NewLogLogger(s.log.Handler(), slog.LevelWarn),
	}
	srv.RegisterOnShutdown(s.endStreams)

	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()

	select {
	case err := <-errc:
		s.endStreams()
		return fmt.Errorf("serve: %w", err)
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.Background(), s.opts.ShutdownTimeout)
	defer cancel()
	err := srv.Shutdown(sctx)
	if err != nil {
		err = errors.Join(fmt.Errorf("shutdown: %w", err), srv.Close())
	}
	if serr := <-errc; !errors.Is(serr, nethttp.ErrServerClosed) {
		err = errors.Join(err, fmt.Errorf("serve: %w", serr))
	}
	return err
}
