package http

import (
	"context"
	nethttp "net/http"
	"time"
)

// mcpPath is where Options.MCP, the MCP front door, is mounted.
const mcpPath = "/mcp"

// handleMCP hands a request that passed the guard to the MCP front door,
// which checks the bearer itself. A GET is the host's standalone event
// stream: like /events, it lives past the read and write timeouts and ends
// when shutdown begins (Shutdown would wait for it in vain).
func (s *Server) handleMCP(w nethttp.ResponseWriter, r *nethttp.Request) {
	if r.Method == nethttp.MethodGet {
		rc := nethttp.NewResponseController(w)
		if err := rc.SetReadDeadline(time.Time{}); err != nil {
			s.log.Debug("mcp stream: clear read deadline", "err", err)
		}
		if err := rc.SetWriteDeadline(time.Time{}); err != nil {
			s.log.Debug("mcp stream: clear write deadline", "err", err)
		}
		ctx, cancel := context.WithCancel(r.Context())
		defer cancel()
		stop := context.AfterFunc(s.streams, cancel)
		defer stop()
		r = r.WithContext(ctx)
	}
	s.opts.MCP.ServeHTTP(w, r)
}

// PeerUID looks up the OS user of r's client (see the gateway's same-user
// check), for a handler mounted on the server that opens sessions itself
// (Options.MCP).
func PeerUID(r *nethttp.Request) func() (int, bool) {
	// The local address is formatted only when asked: most calls never
	// look up their peer's user.
	remote, local := r.RemoteAddr, r.Context().Value(nethttp.LocalAddrContextKey)
	return func() (int, bool) { return peerUID(remote, localAddrOf(local)) }
}
