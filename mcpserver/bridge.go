package mcpserver

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/plexus-gw/plexus"
)

// BridgeOptions configures [Bridge].
type BridgeOptions struct {
	// Endpoint is the daemon's /mcp URL (http://127.0.0.1:7077/mcp).
	Endpoint string
	// PAT is the agent's credential, sent on every request to Endpoint
	// and nowhere else.
	PAT string
	// StartHint tells the host's user how to start the daemon when it is
	// not running ("start it with: plexus serve").
	StartHint string
	Logger    *slog.Logger
}

// Bridge serves one MCP host over t (stdio, for a host that launches a
// command) by forwarding its tools/list and tools/call to the daemon's
// front door as the agent whose PAT it holds: the same view, grants, waits
// and journal rows as over HTTP, with the call's progress relayed back and
// the host's cancellation forwarded. It connects to the daemon at the
// host's first request (so the daemon records the host's name), and again
// after the daemon restarted; while the daemon is down each request is
// answered an error saying so and how to start it. It returns when the
// host closes the connection or ctx ends.
func Bridge(ctx context.Context, t mcp.Transport, o BridgeOptions) error {
	if err := loopbackEndpoint(o.Endpoint); err != nil {
		return err
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	b := &bridge{o: o, ctx: ctx, calls: map[string]progressTarget{}, pumped: map[jsonrpc.ID]context.CancelFunc{}}
	// Completions and subscriptions are forwarded as the front door takes
	// them (bridge_primitives.go); the SDK sends the daemon's updates on
	// to the host when it subscribed.
	srv := mcp.NewServer(&mcp.Implementation{Name: "plexus", Title: "Plexus", Version: plexus.Version},
		&mcp.ServerOptions{Logger: o.Logger, Capabilities: withLogging(&mcp.ServerCapabilities{Tools: &mcp.ToolCapabilities{ListChanged: true},
			Resources: &mcp.ResourceCapabilities{ListChanged: true, Subscribe: true}, Prompts: &mcp.PromptCapabilities{ListChanged: true},
			Completions: &mcp.CompletionCapabilities{}}),
			CompletionHandler: b.complete, SubscribeHandler: b.subscribe, UnsubscribeHandler: b.unsubscribe})
	srv.AddReceivingMiddleware(b.middleware)
	srv.AddReceivingMiddleware(recovered(o.Logger))
	b.srv = srv
	err := srv.Run(ctx, hostTransport{Transport: t, b: b})
	cancel()
	ht := b.close()
	b.wg.Wait()
	if ht != nil {
		// What the bridge's requests left idle is closed with it, a
		// connection dialed for a call that then took another among
		// them: the daemon would count that one new, not idle, and its
		// graceful shutdown would wait on it.
		ht.CloseIdleConnections()
	}
	return err
}

// loopbackEndpoint refuses an endpoint the agent's PAT must not be sent
// to: anything but http:// on 127.0.0.1, localhost or [::1] with a port. A
// host's config names the endpoint (--addr), and a config planted in a
// project could otherwise send the stored credential off the machine.
func loopbackEndpoint(endpoint string) error {
	u, err := url.Parse(endpoint)
	if err == nil && u.Scheme == "http" && u.User == nil && u.Port() != "" {
		switch u.Hostname() {
		case "127.0.0.1", "localhost", "::1":
			return nil
		}
	}
	return fmt.Errorf("mcp serve: %q is not the gateway's loopback address (http://127.0.0.1:<port>): the agent's credential is only sent there", endpoint)
}

// bridge forwards one host's requests to the daemon.
type bridge struct {
	o   BridgeOptions
	srv *mcp.Server // the host's side, for list_changed
	// ctx lives as long as the bridge: its goroutines (pumped calls and
	// the daemon's requests asked of the host, bridgepump.go) end with it,
	// and wg counts them.
	ctx context.Context
	wg  sync.WaitGroup

	mu sync.Mutex // guards up, dialing, ended, upTransport, calls, host, pumped and pc
	up *mcp.ClientSession
	// dialing is the connection to the daemon being opened, if one is
	// (sessionFor); ended is set when the bridge closed.
	dialing *dialing
	ended   bool
	// upTransport carries up's requests, and its pumped calls' (on the
	// same keep-alive connections).
	upTransport *http.Transport
	calls       map[string]progressTarget // the daemon-side progress token → the host's
	counter     atomic.Uint64
	// host is the host's connection, for what the fast path sends it.
	host mcp.Connection
	// pumped cancels each pumped call, by the host's request id; pc is
	// their way to up's daemon session.
	pumped map[jsonrpc.ID]context.CancelFunc
	pc     *pumpConn
}

// progressTarget is where a forwarded call's progress goes on the host's
// side.
type progressTarget struct {
	ctx   context.Context
	ss    *mcp.ServerSession
	token any
}

func (b *bridge) middleware(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		// A request ends with the bridge too (a signal): the SDK's
		// server closes the host's session only once its requests have
		// returned, and a call waiting for the owner would hold the
		// bridge, and its daemon session, open until the wait ends.
		ctx, cancel := context.WithCancelCause(ctx)
		defer cancel(nil)
		stop := context.AfterFunc(b.ctx, func() { cancel(context.Cause(b.ctx)) })
		defer stop()
		switch method {
		case "tools/list":
			up, err := b.session(ctx, req)
			if err != nil {
				return nil, err
			}
			// Fresh params: the host's _meta may carry its own
			// protocol version, which is not this connection's.
			params := &mcp.ListToolsParams{}
			if p := req.(*mcp.ListToolsRequest).Params; p != nil {
				params.Cursor = p.Cursor
			}
			res, err := up.ListTools(ctx, params)
			return res, b.failed(up, err)
		case "tools/call":
			up, err := b.session(ctx, req)
			if err != nil {
				return nil, err
			}
			return b.call(ctx, up, req.(*mcp.CallToolRequest))
		case "resources/list", "resources/templates/list", "resources/read", "prompts/list", "prompts/get":
			up, err := b.session(ctx, req)
			if err != nil {
				return nil, err
			}
			res, err := forwardPrimitive(ctx, up, method, req)
			return res, b.failed(up, err)
		}
		return next(ctx, method, req)
	}
}

// call forwards one tools/call (name and arguments; none of the host's
// _meta, which names its own protocol version), with a progress token of
// its own when the host sent one, mapped back to the host's for the call's
// duration.
func (b *bridge) call(ctx context.Context, up *mcp.ClientSession, req *mcp.CallToolRequest) (mcp.Result, error) {
	p := &mcp.CallToolParams{Name: req.Params.Name, Arguments: req.Params.Arguments}
	if len(req.Params.Arguments) == 0 {
		p.Arguments = map[string]any{}
	}
	if tok := req.Params.GetProgressToken(); tok != nil {
		own := "bridge-" + strconv.FormatUint(b.counter.Add(1), 10)
		b.mu.Lock()
		b.calls[own] = progressTarget{ctx: ctx, ss: req.Session, token: tok}
		b.mu.Unlock()
		defer func() {
			b.mu.Lock()
			delete(b.calls, own)
			b.mu.Unlock()
		}()
		p.SetProgressToken(own)
	}
	res, err := up.CallTool(ctx, p)
	return res, b.failed(up, err)
}

// relay hands the daemon's progress for a forwarded call to the host.
func (b *bridge) relay(_ context.Context, req *mcp.ProgressNotificationClientRequest) {
	own, _ := req.Params.ProgressToken.(string)
	b.mu.Lock()
	t, ok := b.calls[own]
	b.mu.Unlock()
	if !ok {
		return
	}
	params := *req.Params
	params.ProgressToken = t.token
	if err := t.ss.NotifyProgress(t.ctx, &params); err != nil {
		b.o.Logger.Debug("relay progress to the host", "err", err)
	}
}

// session is the connection to the daemon, opened (again) when there is
// none, under the host's own client name and version.
func (b *bridge) session(ctx context.Context, req mcp.Request) (*mcp.ClientSession, error) {
	ss, _ := req.GetSession().(*mcp.ServerSession)
	return b.sessionFor(ctx, ss)
}

// sessionFor is [bridge.session] for the host's session ss. One
// connection is opened at a time, without b.mu held: a daemon slow to
// answer initialize must not hold up what else takes the lock (the host's
// next pumped call or cancellation, read on the host's one reader, and
// the progress and answers on their way to the host). Requests that need
// the connection meanwhile wait for that one's outcome, under their own
// context, and share it, an error included; they try again only when the
// request that was connecting left first (its context ended).
func (b *bridge) sessionFor(ctx context.Context, ss *mcp.ServerSession) (*mcp.ClientSession, error) {
	for {
		b.mu.Lock()
		if b.up != nil {
			up := b.up
			b.mu.Unlock()
			return up, nil
		}
		d := b.dialing
		if d == nil {
			break // b.mu still held: this request connects
		}
		b.mu.Unlock()
		select {
		case <-d.done:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		if d.err != nil && !d.left {
			return nil, d.err
		}
	}
	d := &dialing{done: make(chan struct{})}
	b.dialing = d
	b.mu.Unlock()
	up, ht, err := b.connect(ctx, ss)
	b.mu.Lock()
	b.dialing = nil
	switch {
	case err != nil:
		d.err, d.left = b.unreachable(err), ctx.Err() != nil
	case b.ended:
		// The bridge closed meanwhile: close() did not see this one.
		d.err = errors.Join(mcp.ErrConnectionClosed, context.Cause(b.ctx))
	default:
		b.up, b.upTransport = up, ht
	}
	b.mu.Unlock()
	close(d.done)
	if d.err == nil {
		return up, nil
	}
	if up != nil {
		if cerr := up.Close(); cerr != nil {
			b.o.Logger.Debug("close the daemon session", "err", cerr)
		}
	}
	return nil, d.err
}

// dialing is the connection to the daemon being opened; err is set, and
// left when the request opening it left first, before done closes.
type dialing struct {
	done chan struct{}
	err  error
	left bool
}

// connect opens a connection to the daemon under the host's own client
// name and version.
func (b *bridge) connect(ctx context.Context, ss *mcp.ServerSession) (*mcp.ClientSession, *http.Transport, error) {
	impl := &mcp.Implementation{Name: "plexus-mcp-serve", Version: plexus.Version}
	if ss != nil {
		if ip := ss.InitializeParams(); ip != nil && ip.ClientInfo != nil {
			impl = &mcp.Implementation{Name: ip.ClientInfo.Name, Version: ip.ClientInfo.Version}
		}
	}
	opts := b.clientOptions(ss)
	opts.ToolListChangedHandler = func(context.Context, *mcp.ToolListChangedRequest) { sendListChanged(b.srv, true, false, false) }
	opts.ResourceListChangedHandler = func(context.Context, *mcp.ResourceListChangedRequest) { sendListChanged(b.srv, false, true, false) }
	opts.PromptListChangedHandler = func(context.Context, *mcp.PromptListChangedRequest) { sendListChanged(b.srv, false, false, true) }
	opts.ResourceUpdatedHandler = b.updated
	c := mcp.NewClient(impl, opts)
	c.AddReceivingMiddleware(relayRoots(ss))
	// No reconnection attempts: a daemon that is down is said so at once,
	// and the next request connects anew.
	ht := bridgeTransport()
	tr := &mcp.StreamableClientTransport{Endpoint: b.o.Endpoint, MaxRetries: -1, MaxEventSize: bridgeMaxEvent,
		HTTPClient: bridgeClient(bearerRoundTripper{pat: b.o.PAT, base: ht})}
	up, err := c.Connect(ctx, tr, &mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
	return up, ht, err
}

// failed forgets the connection to the daemon when err says it is gone,
// so the next request connects again; err is answered as it is, or as a
// redirect refused.
func (b *bridge) failed(up *mcp.ClientSession, err error) error {
	if errors.Is(err, errRedirected) {
		return b.redirected()
	}
	if err == nil || !connectionLost(err) {
		return err
	}
	b.mu.Lock()
	if b.up == up {
		b.up = nil
	}
	if b.pc != nil && b.pc.up == up {
		b.pc = nil
	}
	b.mu.Unlock()
	if cerr := up.Close(); cerr != nil {
		b.o.Logger.Debug("close the daemon session", "err", cerr)
	}
	return &jsonrpc.Error{Code: jsonrpc.CodeInternalError,
		Message: "the connection to Plexus was lost (did the daemon restart?); call again to reconnect"}
}

// connectionLost reports whether err says the daemon session can serve
// no more calls: the SDK says the connection closed or the session is gone,
// or the error is neither the daemon's answer (a JSON-RPC error) nor a
// cancellation. The SDK reports a failed streamable connection (its
// standalone SSE stream ended with the session) with a plain error, and
// every later call on it fails the same way.
func connectionLost(err error) bool {
	if errors.Is(err, mcp.ErrConnectionClosed) || errors.Is(err, mcp.ErrSessionMissing) {
		return true
	}
	var answer *jsonrpc.Error
	return !errors.As(err, &answer) && !errors.Is(err, context.Canceled) && !errors.Is(err, context.DeadlineExceeded)
}

// unreachable is the host's answer when the daemon cannot be reached or
// refuses the agent: plainly what is wrong and what to do.
func (b *bridge) unreachable(err error) error {
	text := strings.ReplaceAll(err.Error(), b.o.PAT, "[PAT]") // should a library ever quote a header
	var msg string
	switch {
	case errors.Is(err, errRedirected):
		return b.redirected()
	case strings.Contains(text, "401") || strings.Contains(text, "Unauthorized"):
		msg = fmt.Sprintf("Plexus at %s refused this agent's credential (was the agent revoked?): %s", b.o.Endpoint, text)
	default:
		msg = fmt.Sprintf("Plexus is not running at %s (%s)", b.o.Endpoint, text)
		if b.o.StartHint != "" {
			msg += "; " + b.o.StartHint
		}
	}
	return &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: msg}
}

// redirected is the host's answer when the endpoint redirected a request:
// the session goes on, the request is not sent on.
func (b *bridge) redirected() error {
	return &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: fmt.Sprintf(
		"Plexus at %s answered with a redirect, which mcp serve does not follow: the agent's credential is only sent to that address", b.o.Endpoint)}
}

// close ends the daemon session; it returns the transport its requests
// went on, nil when there was none.
func (b *bridge) close() *http.Transport {
	b.mu.Lock()
	b.ended = true
	up, ht := b.up, b.upTransport
	b.up = nil
	b.pc = nil
	b.mu.Unlock()
	if up != nil {
		if err := up.Close(); err != nil {
			b.o.Logger.Debug("close the daemon session", "err", err)
		}
	}
	return ht
}

// bearerRoundTripper adds the agent's PAT to each request of the SDK's
// client to the daemon.
type bearerRoundTripper struct {
	pat  string
	base http.RoundTripper
}

func (t bearerRoundTripper) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+t.pat)
	return t.base.RoundTrip(r)
}

// pumpRoundTripper carries the fast path's requests (bridgepump.go), which
// [pumpConn.post] made with every header already, and notes when the
// daemon no longer knows their session.
type pumpRoundTripper struct {
	base http.RoundTripper
	gone *atomic.Bool
}

func (t pumpRoundTripper) RoundTrip(r *http.Request) (*http.Response, error) {
	resp, err := t.base.RoundTrip(r)
	if err == nil && resp.StatusCode == http.StatusNotFound {
		t.gone.Store(true)
	}
	return resp, err
}
