package mcpserver

import (
	"context"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// watches are the resources host sessions subscribed to, by URI: one
// upstream subscription per URI, however many sessions watch it. The SDK
// keeps which sessions subscribed to a URI and sends its updates to them
// alone (and forgets a session that ends); this keeps the upstream side.
// A URI is watched through one capability at a time, so that an update of
// one server's resource never reaches a session that subscribed to
// another's under the same URI.
type watches struct {
	// mu is held across an upstream subscribe or unsubscribe, so that the
	// two never cross for a URI.
	mu    sync.Mutex
	byURI map[string]*watch
	// ending are the sessions whose end is awaited, to drop their watches.
	ending map[*mcp.ServerSession]bool
}

type watch struct {
	id       string // the capability the URI is watched through
	unsub    func()
	sessions map[*mcp.ServerSession]bool
}

// subscribe answers resources/subscribe for a resource of the view (or a
// URI one of its templates expands to): the resource's server is asked to
// say when it changes. A URI outside the view is refused, nothing asked.
func (s *Server) subscribe(ctx context.Context, req *mcp.SubscribeRequest) error {
	l := linkOf(req)
	if l == nil || req.Session == nil {
		return refuse("no Plexus session")
	}
	if ip := req.Session.InitializeParams(); ip == nil || ip.ProtocolVersion >= newProtocol {
		return refuse("resources/subscribe needs an MCP session: a sessionless (%s) host cannot be sent updates this way", newProtocol)
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
	w := &s.watches
	w.mu.Lock()
	defer w.mu.Unlock()
	cur := w.byURI[uri]
	switch {
	case cur != nil && cur.id != entry.ID:
		return &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams,
			Message: "the URI " + clip(uri, 200) + " is already watched through another server's resource: subscribe later"}
	case cur == nil:
		unsub, err := s.b.Upstream.SubscribeResource(ctx, l.creds(), entry.ID, uri, func() { s.resourceUpdated(uri) })
		if err != nil {
			return s.gatewayError(l, err)
		}
		cur = &watch{id: entry.ID, unsub: unsub, sessions: map[*mcp.ServerSession]bool{}}
		if w.byURI == nil {
			w.byURI, w.ending = map[string]*watch{}, map[*mcp.ServerSession]bool{}
		}
		w.byURI[uri] = cur
	}
	cur.sessions[req.Session] = true
	if !w.ending[req.Session] {
		w.ending[req.Session] = true
		go s.dropAtEnd(req.Session)
	}
	return nil
}

// unsubscribe answers resources/unsubscribe: the session no longer
// watches uri, and the last session's leaving unsubscribes upstream.
func (s *Server) unsubscribe(_ context.Context, req *mcp.UnsubscribeRequest) error {
	if req.Session == nil {
		return refuse("no Plexus session")
	}
	s.watches.mu.Lock()
	defer s.watches.mu.Unlock()
	s.watches.leave(req.Session, req.Params.URI)
	return nil
}

// leave drops ss from uri's watch; w.mu is held.
func (w *watches) leave(ss *mcp.ServerSession, uri string) {
	cur := w.byURI[uri]
	if cur == nil {
		return
	}
	delete(cur.sessions, ss)
	if len(cur.sessions) == 0 {
		delete(w.byURI, uri)
		cur.unsub()
	}
}

// dropAtEnd waits for ss to end (the host's DELETE, its idle timeout, the
// server's close) and drops its watches.
func (s *Server) dropAtEnd(ss *mcp.ServerSession) {
	if err := ss.Wait(); err != nil {
		s.log.Debug("MCP session ended", "err", err)
	}
	w := &s.watches
	w.mu.Lock()
	defer w.mu.Unlock()
	delete(w.ending, ss)
	for uri := range w.byURI {
		w.leave(ss, uri)
	}
}

// resourceUpdated tells the sessions that subscribed to uri that it
// changed; the SDK sends it to them and no other.
func (s *Server) resourceUpdated(uri string) {
	if err := s.sdk.ResourceUpdated(context.Background(), &mcp.ResourceUpdatedNotificationParams{URI: uri}); err != nil {
		s.log.Debug("notifications/resources/updated not sent", "err", err)
	}
}
