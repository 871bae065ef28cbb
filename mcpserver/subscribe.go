package mcpserver

import (
	"context"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// watches are the resources host sessions subscribed to, by URI: one
// upstream subscription per URI, however many sessions watch it. An update
// goes to the sessions here (each through its own SDK server, hosts.go)
// whose view still shows the resource; a session whose view no longer does
// stops watching it (narrow, deliver), and the last one's leaving
// unsubscribes upstream. A URI is watched through one capability at a
// time, so that an update of one server's resource never reaches a session
// that subscribed to another's under the same URI.
type watches struct {
	// mu is never held across an upstream call: a server that does not
	// answer would hold every host's refresh, initialize and update with
	// it. A URI being subscribed upstream has a pending watch the others
	// wait on.
	mu    sync.Mutex
	byURI map[string]*watch
	// ending are the sessions whose end is awaited, to drop their watches.
	ending map[*mcp.ServerSession]bool
}

type watch struct {
	id       string // the capability the URI is watched through
	unsub    func()
	sessions map[*mcp.ServerSession]bool
	// ready is closed once the upstream subscription is made or refused;
	// until then the watch is pending (no sessions, no unsub).
	ready chan struct{}
}

// subscribe answers resources/subscribe for a resource of the view (or a
// URI one of its templates expands to): the resource's server is asked to
// say when it changes. A URI outside the view is refused, nothing asked.
func (s *Server) subscribe(ctx context.Context, req *mcp.SubscribeRequest) error {
	if req.Session == nil {
		return refuse("no Plexus session")
	}
	l, h := linkOf(req), s.hosts.of(req.Session)
	if l == nil && h != nil && h.listen {
		// The SDK subscribes a subscriptions/listen stream's resources
		// with a request of its own making, which carries no link.
		l = h.l
	}
	if l == nil {
		return refuse("no Plexus session")
	}
	if ip := req.Session.InitializeParams(); (h == nil || !h.listen) && (ip == nil || ip.ProtocolVersion >= newProtocol) {
		return refuse("resources/subscribe needs an MCP session: a sessionless (%s) host subscribes through subscriptions/listen", newProtocol)
	}
	c, err := s.catalog(ctx, l)
	if err != nil {
		return err
	}
	uri := req.Params.URI
	entry, _, err := c.resource(uri)
	if err != nil {
		return err
	}
	return s.watch(ctx, l, req.Session, entry.ID, uri)
}

// watch makes ss a watcher of uri through capability id, subscribing
// upstream (outside w.mu) when no one watches it yet; a subscribe of the
// same URI meanwhile waits for that one's outcome.
func (s *Server) watch(ctx context.Context, l *link, ss *mcp.ServerSession, id, uri string) error {
	w := &s.watches
	for {
		w.mu.Lock()
		cur := w.byURI[uri]
		switch {
		case cur != nil && cur.id != id:
			w.mu.Unlock()
			return &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams,
				Message: "the URI " + clip(uri, 200) + " is already watched through another server's resource: subscribe later"}
		case cur != nil && cur.pending():
			w.mu.Unlock()
			select { // pending: its outcome decides
			case <-cur.ready:
				continue
			case <-ctx.Done():
				return ctx.Err()
			}
		case cur == nil:
			cur = &watch{id: id, sessions: map[*mcp.ServerSession]bool{}, ready: make(chan struct{})}
			if w.byURI == nil {
				w.byURI, w.ending = map[string]*watch{}, map[*mcp.ServerSession]bool{}
			}
			w.byURI[uri] = cur
			w.mu.Unlock()
			unsub, err := s.b.Upstream.SubscribeResource(ctx, l.creds(), id, uri, func() { s.updates.add(uri) })
			w.mu.Lock()
			if err != nil {
				delete(w.byURI, uri)
				close(cur.ready)
				w.mu.Unlock()
				return s.gatewayError(l, err)
			}
			cur.unsub = unsub
			close(cur.ready)
		}
		cur.sessions[ss] = true
		if !w.ending[ss] {
			w.ending[ss] = true
			go s.dropAtEnd(ss)
		}
		w.mu.Unlock()
		return nil
	}
}

// unsubscribe answers resources/unsubscribe: the session no longer
// watches uri, and the last session's leaving unsubscribes upstream.
func (s *Server) unsubscribe(_ context.Context, req *mcp.UnsubscribeRequest) error {
	if req.Session == nil {
		return refuse("no Plexus session")
	}
	s.watches.mu.Lock()
	unsub := s.watches.leave(req.Session, req.Params.URI)
	s.watches.mu.Unlock()
	runAll(unsub)
	return nil
}

// leave drops ss from uri's watch; w.mu is held. It answers the upstream
// unsubscribe to make, after w.mu is let go, when ss was the last watcher.
// (The upstream counts its watchers itself, so a subscribe of the URI in
// between keeps the upstream subscription.)
func (w *watches) leave(ss *mcp.ServerSession, uri string) []func() {
	cur := w.byURI[uri]
	if cur == nil || !cur.sessions[ss] {
		return nil
	}
	delete(cur.sessions, ss)
	if len(cur.sessions) > 0 {
		return nil
	}
	delete(w.byURI, uri)
	return []func(){cur.unsub}
}

func (cur *watch) pending() bool {
	select {
	case <-cur.ready:
		return false
	default:
		return true
	}
}

func runAll(fs []func()) {
	for _, f := range fs {
		f()
	}
}

// dropAtEnd waits for ss to end (the host's DELETE, its idle timeout, the
// server's close) and drops its watches.
func (s *Server) dropAtEnd(ss *mcp.ServerSession) {
	if err := ss.Wait(); err != nil {
		s.log.Debug("MCP session ended", "err", err)
	}
	s.watches.drop(ss, nil, true)
}

// drop ends ss's watches (all, or those keep refuses), unsubscribing
// upstream outside w.mu; ended says ss itself ended.
func (w *watches) drop(ss *mcp.ServerSession, keep func(uri, id string) bool, ended bool) {
	var unsubs []func()
	w.mu.Lock()
	if ended {
		delete(w.ending, ss)
	}
	for uri, cur := range w.byURI {
		if cur.sessions[ss] && (keep == nil || !keep(uri, cur.id)) {
			unsubs = append(unsubs, w.leave(ss, uri)...)
		}
	}
	w.mu.Unlock()
	runAll(unsubs)
}

// narrow ends ss's subscriptions to the resources c (its catalog now; nil
// when it is shown nothing) no longer shows through the capability they
// were made through.
func (s *Server) narrow(ss *mcp.ServerSession, c *catalog) {
	s.watches.drop(ss, func(uri, id string) bool { return shows(c, uri, id) }, false)
}

// shows reports whether c shows uri through capability id.
func shows(c *catalog, uri, id string) bool {
	if c == nil {
		return false
	}
	e, _, err := c.resource(uri)
	return err == nil && e.ID == id
}

// pendingUpdates are the URIs an upstream said changed, not yet delivered:
// the upstream's notification handler only marks them (it must not wait on
// the gateway or the network), and Run delivers them. An update marked
// twice before Run delivers it is delivered once.
type pendingUpdates struct {
	mu    sync.Mutex
	uris  map[string]bool
	ready chan struct{} // capacity 1: there are some
}

func newPendingUpdates() *pendingUpdates {
	return &pendingUpdates{uris: map[string]bool{}, ready: make(chan struct{}, 1)}
}

func (p *pendingUpdates) add(uri string) {
	p.mu.Lock()
	p.uris[uri] = true
	p.mu.Unlock()
	select {
	case p.ready <- struct{}{}:
	default: // marked already
	}
}

func (p *pendingUpdates) take() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make([]string, 0, len(p.uris))
	for uri := range p.uris {
		out = append(out, uri)
	}
	clear(p.uris)
	return out
}

// deliver sends notifications/resources/updated of each pending URI to the
// sessions watching it whose view still shows it, each through its own SDK
// server; a session whose view no longer shows it (or that ended) stops
// watching it instead.
func (s *Server) deliver(ctx context.Context) {
	for _, uri := range s.updates.take() {
		for ss, id := range s.watches.watchers(uri) {
			h := s.hosts.of(ss)
			var c *catalog
			if h != nil && h.open() {
				if cur, err := s.catalog(ctx, h.l); err == nil {
					c = cur
				}
			}
			if !shows(c, uri, id) {
				s.watches.mu.Lock()
				var unsub []func()
				if cur := s.watches.byURI[uri]; cur != nil && cur.id == id {
					unsub = s.watches.leave(ss, uri)
				}
				s.watches.mu.Unlock()
				runAll(unsub)
				continue
			}
			if err := h.srv.ResourceUpdated(ctx, &mcp.ResourceUpdatedNotificationParams{URI: uri}); err != nil {
				s.log.Debug("notifications/resources/updated not sent", "err", err)
			}
		}
	}
}

// watchers are the sessions watching uri now, with the capability through
// which they do.
func (w *watches) watchers(uri string) map[*mcp.ServerSession]string {
	w.mu.Lock()
	defer w.mu.Unlock()
	cur := w.byURI[uri]
	if cur == nil {
		return nil
	}
	out := make(map[*mcp.ServerSession]string, len(cur.sessions))
	for ss := range cur.sessions {
		out[ss] = cur.id
	}
	return out
}
