package mcpserver

import (
	"context"
	"log/slog"
	"net/http"
	"time"

	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/plexus-gw/plexus"
)

// Defaults applied to the zero value of each [Options] field.
const (
	DefaultApprovalWait     = 120 * time.Second
	DefaultProgressInterval = 5 * time.Second
	DefaultSessionIdle      = 30 * time.Minute
	DefaultMaxBodyBytes     = 1 << 20
	DefaultInputWait        = 10 * time.Minute
)

// newProtocol is the first protocol version served sessionless (SEP-2575).
const newProtocol = "2026-07-28"

// Options configures a [Server]; the zero value of every field selects its
// default.
type Options struct {
	// ApprovalWait is how long a tools/call that needs the owner's
	// approval waits for it before answering how to approve.
	ApprovalWait time.Duration
	// ProgressInterval is how often a waiting call tells the host it is
	// still waiting (a progress notification, when the host sent a
	// progressToken).
	ProgressInterval time.Duration
	// Inbox and Active are the decision-file folders of PLEXUS_HOME, named
	// in the answer of a call whose wait ended undecided.
	Inbox, Active string
	// SessionIdle closes an MCP session (2025-11-25) that saw no request
	// for this long.
	SessionIdle time.Duration
	// MaxBodyBytes caps a request body.
	MaxBodyBytes int64
	// InputWait is how long a sessionless host's call that asked the
	// host something (an input_required result) is held for its answer.
	InputWait time.Duration
	// PeerUID looks up the OS user of a request's client, for the
	// gateway's same-user check at handshake; nil means unknown.
	PeerUID func(r *http.Request) func() (int, bool)
	Logger  *slog.Logger
	// Clock is the time links expire by; nil is time.Now.
	Clock func() time.Time
	// Views is the owner's view of each agent (needs Backend.Agents); nil
	// shows every agent the default view.
	Views Views
	// SessionCheck is how often Run looks for hosts whose Plexus session
	// ended (the agent revoked, the session expired), to end them and
	// their subscriptions; it asks the gateway only when its state
	// changed or a link's time is up.
	SessionCheck time.Duration
	// ListensPerAgent caps the subscriptions/listen streams one agent
	// holds open at once; one more is answered 429.
	ListensPerAgent int
	// Middleware wraps every request the front door receives, outermost
	// first (the daemon's tracing).
	Middleware []mcp.Middleware
}

// Server is the MCP front door, an http.Handler for /mcp. Mount it behind
// the loopback Host/Origin guard: it checks the bearer, not the Host.
type Server struct {
	b     Backend
	opts  Options
	log   *slog.Logger
	links *links
	// watches are the hosts' resource subscriptions (subscribe.go).
	watches watches
	// inputs are the sessionless hosts' calls held for their answers
	// (inputs.go).
	inputs exchanges
	// hosts are the MCP sessions (2025-11-25), each served by an SDK
	// server of its own (hosts.go), so that a notification reaches that
	// session alone.
	hosts hosts
	// calls are the hosts' calls in flight, each tied to its caller
	// (callers.go).
	calls inflight
	// sopts are the options of every SDK server the front door makes.
	sopts mcp.ServerOptions
	// listens count the listen streams open per agent (listens.go).
	listens listenSlots
	// shared is the SDK server of the sessionless (2026-07-28) requests,
	// and the one the SDK asks for the protocol versions served.
	shared *mcp.Server
	// kick asks Run to compare the sessions' lists again (capacity 1:
	// ViewsChanged); updates are the resources whose update Run delivers.
	kick    chan struct{}
	updates *pendingUpdates

	// stateful serves 2025-11-25 and earlier (sessions, initialize);
	// stateless serves 2026-07-28 (no sessions, per-request metadata).
	// Both sit behind withLink, which hands the request's link to the
	// SDK as its TokenInfo.
	stateful, stateless http.Handler
}

var _ http.Handler = (*Server)(nil)

// New returns the front door answering with b.
func New(b Backend, opts Options) *Server {
	if b.Sessions == nil || b.Grants == nil || b.Invoke == nil {
		panic("mcpserver.New: every Backend group is required")
	}
	if opts.ApprovalWait <= 0 {
		opts.ApprovalWait = DefaultApprovalWait
	}
	if opts.ProgressInterval <= 0 {
		opts.ProgressInterval = DefaultProgressInterval
	}
	if opts.SessionCheck <= 0 {
		opts.SessionCheck = DefaultSessionCheck
	}
	if opts.ListensPerAgent <= 0 {
		opts.ListensPerAgent = DefaultListensPerAgent
	}
	if opts.SessionIdle <= 0 {
		opts.SessionIdle = DefaultSessionIdle
	}
	if opts.InputWait <= 0 {
		opts.InputWait = DefaultInputWait
	}
	if opts.MaxBodyBytes <= 0 {
		opts.MaxBodyBytes = DefaultMaxBodyBytes
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.Clock == nil {
		opts.Clock = time.Now
	}
	s := &Server{b: b, opts: opts, log: opts.Logger, links: newLinks(opts.Clock),
		kick: make(chan struct{}, 1), updates: newPendingUpdates()}
	caps := withLogging(&mcp.ServerCapabilities{Tools: &mcp.ToolCapabilities{ListChanged: true},
		Resources: &mcp.ResourceCapabilities{ListChanged: true}, Prompts: &mcp.PromptCapabilities{ListChanged: true}})
	s.sopts = mcp.ServerOptions{
		Logger: opts.Logger,
		// Logging: the ingested servers' log messages, relayed to the host
		// whose call they came with (relay.go).
		Capabilities: caps,
		Instructions: "Plexus governs these tools: a call the owner has not pre-authorized waits for the owner's approval, and a call the owner denies answers why.",
	}
	if b.Upstream != nil {
		// Completions and subscriptions pass through to the items'
		// servers (upstream.go, subscribe.go).
		caps.Completions, caps.Resources.Subscribe = &mcp.CompletionCapabilities{}, true
		s.sopts.CompletionHandler, s.sopts.SubscribeHandler, s.sopts.UnsubscribeHandler = s.complete, s.subscribe, s.unsubscribe
	}
	s.shared = s.newSDKServer()
	withLink := auth.RequireBearerToken(linkToken, nil)
	s.stateful = withLink(mcp.NewStreamableHTTPHandler(s.sessionServer, &mcp.StreamableHTTPOptions{
		Logger: opts.Logger, SessionTimeout: opts.SessionIdle, MaxRequestBodyBytes: opts.MaxBodyBytes,
	}))
	s.stateless = withLink(mcp.NewStreamableHTTPHandler(s.sessionServer, &mcp.StreamableHTTPOptions{
		Stateless: true, PropagateRequestCancellation: true,
		Logger: opts.Logger, MaxRequestBodyBytes: opts.MaxBodyBytes,
	}))
	return s
}

// newSDKServer is an SDK server answering through the front door.
func (s *Server) newSDKServer() *mcp.Server {
	sopts := s.sopts
	srv := mcp.NewServer(&mcp.Implementation{Name: "plexus", Title: "Plexus", Version: plexus.Version}, &sopts)
	srv.AddReceivingMiddleware(s.middleware(srv))
	srv.AddReceivingMiddleware(s.opts.Middleware...)
	srv.AddReceivingMiddleware(recovered(s.log)) // last added, outermost
	return srv
}

// Sessions counts the MCP sessions open now (for /metrics): the hosts'
// sessions, and the sessionless requests being served.
func (s *Server) Sessions() int {
	n := len(s.hosts.live())
	for range s.shared.Sessions() {
		n++
	}
	return n
}

// ServeHTTP matches the request's bearer to a Plexus session (a link) and
// hands it to the SDK's handler for its protocol version. A request that
// bears no PAT, or one the gateway refuses, is answered 401 here and
// reaches nothing else.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	bearer, ok := bearerOf(r)
	if !ok {
		unauthorized(w, "this endpoint needs Authorization: Bearer <the agent's PAT (plx_agent_…)>")
		return
	}
	sessionless := r.Header.Get("Mcp-Protocol-Version") >= newProtocol
	var l *link
	var refusal *refusal
	if sessionless {
		l, refusal = s.sessionlessLink(r, bearer)
	} else {
		l, refusal = s.sessionLink(r, bearer)
	}
	if refusal != nil {
		refusal.write(w)
		return
	}
	r = r.WithContext(context.WithValue(r.Context(), linkKey{}, l))
	if sessionless {
		if s.paramHeaders(w, r, l) {
			return
		}
		if r.Header.Get(methodHeader) == "subscriptions/listen" {
			// A listen stream is the session a sessionless host is told
			// things on: it gets an SDK server of its own (hosts.go), and
			// holds one of its agent's slots while it lasts (listens.go).
			release, ok := s.listens.take(l, s.opts.ListensPerAgent)
			if !ok {
				tooManyListens(s.opts.ListensPerAgent).write(w)
				return
			}
			defer release()
			r = r.WithContext(context.WithValue(r.Context(), newServerKey{}, &newServer{}))
		}
		s.stateless.ServeHTTP(w, r)
		return
	}
	if r.Header.Get(sessionHeader) == "" {
		// An initialize: the session it opens gets an SDK server of its own.
		r = r.WithContext(context.WithValue(r.Context(), newServerKey{}, &newServer{}))
	}
	if r.Method != http.MethodDelete {
		s.stateful.ServeHTTP(w, r)
		return
	}
	// The host ends its session: its calls end first, as the SDK closes
	// the session only once they returned.
	id := r.Header.Get(sessionHeader)
	s.calls.end(id)
	s.stateful.ServeHTTP(w, r)
	s.calls.forget(id)
	s.links.drop(id)
}

// middleware answers the methods the front door implements itself, from the
// request's link: initialize (to bind the MCP session to it, and it to
// srv, its SDK server), the tools, resources and prompts. Everything else
// is the SDK's.
func (s *Server) middleware(srv *mcp.Server) mcp.Middleware {
	return func(next mcp.MethodHandler) mcp.MethodHandler {
		return s.methods(srv, next)
	}
}

func (s *Server) methods(srv *mcp.Server, next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		l := linkOf(req)
		if l == nil {
			return next(ctx, method, req)
		}
		switch method {
		case "initialize":
			res, err := next(ctx, method, req)
			if err == nil {
				s.links.bind(req.GetSession().ID(), l)
				if ss, ok := req.GetSession().(*mcp.ServerSession); ok && srv != s.shared {
					s.addHost(ctx, srv, ss, l, false)
				}
			}
			return res, err
		case "subscriptions/listen":
			// The stream's session is a host like an initialized one, until
			// the stream ends; the resources it names are subscribed through
			// the subscribe handler, which finds the link here.
			if ss, ok := req.GetSession().(*mcp.ServerSession); ok && srv != s.shared {
				s.addHost(ctx, srv, ss, l, true)
			}
			return next(ctx, method, req)
		case "tools/list":
			res, err := s.listTools(ctx, l)
			if err != nil {
				return nil, err
			}
			return shaped(req, res), nil
		case "tools/call":
			reserveStack(false)
			ctx, h := s.calls.hold(ctx, req)
			defer h.release()
			call := req.(*mcp.CallToolRequest)
			res, err := s.multiRound(ctx, l, req, method, call.Params.Name, func(ctx context.Context) (mcp.Result, error) {
				return s.callTool(ctx, l, call)
			})
			if err != nil {
				return nil, err
			}
			return shaped(req, res), nil
		case "resources/read", "prompts/get":
			reserveStack(false)
			ctx, h := s.calls.hold(ctx, req)
			defer h.release()
			res, err := s.multiRound(ctx, l, req, method, roundName(req), func(ctx context.Context) (mcp.Result, error) {
				return s.primitives(ctx, l, method, req)
			})
			if err != nil {
				return nil, err
			}
			return shaped(req, res), nil
		case "resources/list", "resources/templates/list", "prompts/list":
			res, err := s.primitives(ctx, l, method, req)
			if err != nil {
				return nil, err
			}
			return shaped(req, res), nil
		}
		return next(ctx, method, req)
	}
}

// roundName is what a prompts/get or resources/read names: its prompt or
// URI.
func roundName(req mcp.Request) string {
	switch p := req.GetParams().(type) {
	case *mcp.GetPromptParams:
		return p.Name
	case *mcp.ReadResourceParams:
		return p.URI
	}
	return ""
}
