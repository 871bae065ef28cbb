package http

import (
	"context"
	nethttp "net/http"

	"github.com/plexus-gw/plexus"
)

// SignInAPI is the owner's sign-in to remote MCP servers (OAuth), which
// the daemon wires to the oauth package and the MCP servers' manager.
// Every method must be safe for concurrent use; an error that is not a
// *plexus.Error is a server fault.
type SignInAPI interface {
	// StartLogin begins a sign-in to server and answers the URL to open.
	StartLogin(ctx context.Context, server string) (plexus.MCPLoginResponse, error)
	// WaitLogin waits, at most a while, for the sign-in to server to end.
	WaitLogin(ctx context.Context, server string) (plexus.MCPLoginStatus, error)
	// Logout revokes and deletes server's tokens.
	Logout(ctx context.Context, server string) (plexus.MCPLogoutResponse, error)
}

// callbackPath is where an authorization server sends the owner's browser
// back after a sign-in (the redirect URI).
const callbackPath = "/oauth/callback"

// signInRoutes registers the owner's sign-in endpoints and the callback:
//
//	POST /admin/api/mcp/{server}/login       → MCPLoginResponse
//	POST /admin/api/mcp/{server}/login/wait  → MCPLoginStatus
//	POST /admin/api/mcp/{server}/logout      → MCPLogoutResponse
//	GET  /oauth/callback                     (the browser's redirect)
//
// The admin routes take the connection-key alone. The callback takes no
// credential: the browser that comes back carries none, and the state it
// brings is the credential (one use, bound to one login, ten minutes);
// the handler answers anything else with an error page and nothing more.
func (s *Server) signInRoutes() {
	if s.opts.SignIn != nil && s.b.Owner != nil {
		s.mux.HandleFunc("POST /admin/api/mcp/{server}/login", s.handleStartLogin)
		s.mux.HandleFunc("POST /admin/api/mcp/{server}/login/wait", s.handleWaitLogin)
		s.mux.HandleFunc("POST /admin/api/mcp/{server}/logout", s.handleLogout)
	}
	if s.opts.OAuthCallback != nil {
		s.mux.Handle("GET "+callbackPath, s.opts.OAuthCallback)
	}
}

// owner checks the connection-key before a sign-in route does anything.
func (s *Server) owner(w nethttp.ResponseWriter, r *nethttp.Request) bool {
	if err := s.b.Owner.AdminCheck(r.Context(), credentials(r)); err != nil {
		s.writeError(w, r, err)
		return false
	}
	return true
}

func (s *Server) handleStartLogin(w nethttp.ResponseWriter, r *nethttp.Request) {
	if !s.owner(w, r) {
		return
	}
	resp, err := s.opts.SignIn.StartLogin(r.Context(), r.PathValue("server"))
	s.reply(w, r, resp, err)
}

func (s *Server) handleWaitLogin(w nethttp.ResponseWriter, r *nethttp.Request) {
	if !s.owner(w, r) {
		return
	}
	resp, err := s.opts.SignIn.WaitLogin(r.Context(), r.PathValue("server"))
	s.reply(w, r, resp, err)
}

func (s *Server) handleLogout(w nethttp.ResponseWriter, r *nethttp.Request) {
	if !s.owner(w, r) {
		return
	}
	resp, err := s.opts.SignIn.Logout(r.Context(), r.PathValue("server"))
	s.reply(w, r, resp, err)
}
