package mcpserver

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"net/http"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Each MCP session (2025-11-25), and each subscriptions/listen stream of a
// sessionless (2026-07-28) host, is served by an SDK server of its own. The
// SDK sends list_changed and resources/updated to every session of a
// server (on 2026-07-28, every listen stream that asked for them) and has
// no way to address one session, while what a host is shown is its agent's
// view: with one session per server, the front door decides for each
// session whether it is told. A server is small (a few maps); the other
// sessionless requests, which are told nothing, share one.

// newServerKey carries an initialize request's newServer to sessionServer.
type newServerKey struct{}

// newServer is the SDK server of the session an initialize opens, made at
// the SDK's first ask (it asks twice per request: for the protocol
// versions, then for the session).
type newServer struct {
	once sync.Once
	srv  *mcp.Server
}

// sessionServer is the SDK server for a request: a new one for an
// initialize or a listen stream (ServeHTTP marks them), else the shared one
// (for a request of a session, the SDK then only reads its protocol
// versions: the session's own server serves the request).
func (s *Server) sessionServer(r *http.Request) *mcp.Server {
	ns, ok := r.Context().Value(newServerKey{}).(*newServer)
	if !ok {
		return s.shared
	}
	ns.once.Do(func() { ns.srv = s.newSDKServer() })
	return ns.srv
}

// A host is one MCP session (or listen stream), its own SDK server and its
// link.
type host struct {
	srv *mcp.Server
	ss  *mcp.ServerSession
	l   *link
	// listen is set for a sessionless host's subscriptions/listen stream.
	listen bool
	// shown are the fingerprints of the lists the session was last
	// shown or told about (valid when known); guarded by Server.refreshMu.
	shown listPrints
	known bool
}

// hosts are the live sessions' hosts. A session that ended is dropped
// when the hosts are next read (its server then has no session).
type hosts struct {
	// refreshMu orders the comparisons of the sessions' lists (refresh,
	// addHost); it is taken before mu and before watches.mu.
	refreshMu sync.Mutex
	mu        sync.Mutex
	bySession map[*mcp.ServerSession]*host
}

// live answers the hosts whose session is open, forgetting the others.
func (hs *hosts) live() []*host {
	hs.mu.Lock()
	defer hs.mu.Unlock()
	out := make([]*host, 0, len(hs.bySession))
	for ss, h := range hs.bySession {
		if !h.open() {
			delete(hs.bySession, ss)
			continue
		}
		out = append(out, h)
	}
	return out
}

// open reports whether the host's session is still its server's.
func (h *host) open() bool {
	for ss := range h.srv.Sessions() {
		if ss == h.ss {
			return true
		}
	}
	return false
}

func (hs *hosts) of(ss *mcp.ServerSession) *host {
	hs.mu.Lock()
	defer hs.mu.Unlock()
	return hs.bySession[ss]
}

// addHost records a session its initialize just opened, with the lists its
// host is about to be shown, which later changes are compared with.
func (s *Server) addHost(ctx context.Context, srv *mcp.Server, ss *mcp.ServerSession, l *link, listen bool) {
	h := &host{srv: srv, ss: ss, l: l, listen: listen}
	s.hosts.live() // forgets the sessions that ended
	s.hosts.mu.Lock()
	if s.hosts.bySession == nil {
		s.hosts.bySession = map[*mcp.ServerSession]*host{}
	}
	s.hosts.bySession[ss] = h
	s.hosts.mu.Unlock()
	s.hosts.refreshMu.Lock()
	defer s.hosts.refreshMu.Unlock()
	if c, err := s.catalog(ctx, l); err == nil {
		h.shown, h.known = printsOf(c), true
	}
}

// listPrints fingerprint what tools/list, resources/list with
// resources/templates/list, and prompts/list answer.
type listPrints struct{ tools, resources, prompts [32]byte }

// printsOf is c's lists' fingerprints; a nil c (the session ended) shows
// nothing.
func printsOf(c *catalog) listPrints {
	if c == nil {
		return listPrints{}
	}
	return listPrints{tools: fingerprint(c.listedTools()),
		resources: fingerprint([]any{c.listedResources(), c.listedTemplates()}), prompts: fingerprint(c.listedPrompts())}
}

func fingerprint(v any) [32]byte {
	raw, err := json.Marshal(v)
	if err != nil {
		// Lists are built from decoded JSON: they encode. Should one not,
		// it counts as changed.
		raw = []byte(err.Error())
	}
	return sha256.Sum256(raw)
}

// refresh compares each session's lists now with those it was last shown,
// and sends list_changed for those that differ to that session alone; and
// ends the session's subscriptions to resources its view no longer shows.
// The shared server is told nothing: a listen stream is never its (the SDK
// requires Mcp-Method on a sessionless request, and ServeHTTP gives a
// listen its own server), and its other sessions last one request.
func (s *Server) refresh(ctx context.Context) {
	s.hosts.refreshMu.Lock()
	defer s.hosts.refreshMu.Unlock()
	for _, h := range s.hosts.live() {
		c, err := s.catalog(ctx, h.l)
		if err != nil {
			c = nil // the session ended, or cannot be shown anything now
		}
		now := printsOf(c)
		sendListChanged(h.srv, !h.known || now.tools != h.shown.tools,
			!h.known || now.resources != h.shown.resources, !h.known || now.prompts != h.shown.prompts)
		h.shown, h.known = now, true
		s.narrow(h.ss, c)
	}
}
