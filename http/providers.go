package http

import (
	"context"
	nethttp "net/http"

	"github.com/plexus-gw/plexus"
)

// ProvidersAPI is the owner's view of the ipc tool providers declared in
// PLEXUS_HOME/providers.json (cmd wires the ipc hub's manager). Both
// methods must be safe for concurrent use; a ReloadProviders error that is
// not a *plexus.Error is a server fault.
type ProvidersAPI interface {
	// Providers lists every declared provider's live state.
	Providers(ctx context.Context) ([]plexus.ProviderStatus, error)
	// ReloadProviders makes the running providers match providers.json:
	// new ones launched, removed ones stopped, changed ones restarted. A
	// file that breaks a rule changes nothing (invalid_request).
	ReloadProviders(ctx context.Context) (plexus.ProvidersReloadResponse, error)
}

// providerRoutes registers the owner-plane provider endpoints:
//
//	GET  /admin/api/providers         → ProvidersResponse
//	POST /admin/api/providers/reload  → ProvidersReloadResponse
//
// Both take the connection-key, checked by the gateway before anything
// else, and answer not_found when the gateway was built without providers.
func (s *Server) providerRoutes() {
	s.mux.HandleFunc("GET /admin/api/providers", s.handleProviders)
	s.mux.HandleFunc("POST /admin/api/providers/reload", s.handleReloadProviders)
}

// providers checks the caller is the owner and that providers are served.
func (s *Server) providers(w nethttp.ResponseWriter, r *nethttp.Request) (ProvidersAPI, bool) {
	if err := s.b.Owner.AdminCheck(r.Context(), credentials(r)); err != nil {
		s.writeError(w, r, err)
		return nil, false
	}
	if s.opts.Providers == nil {
		s.writeError(w, r, plexus.Errorf(plexus.CodeNotFound, "this gateway serves no ipc providers"))
		return nil, false
	}
	return s.opts.Providers, true
}

func (s *Server) handleProviders(w nethttp.ResponseWriter, r *nethttp.Request) {
	p, ok := s.providers(w, r)
	if !ok {
		return
	}
	list, err := p.Providers(r.Context())
	if list == nil {
		list = []plexus.ProviderStatus{}
	}
	s.reply(w, r, plexus.ProvidersResponse{Providers: list}, err)
}

func (s *Server) handleReloadProviders(w nethttp.ResponseWriter, r *nethttp.Request) {
	p, ok := s.providers(w, r)
	if !ok {
		return
	}
	resp, err := p.ReloadProviders(r.Context())
	s.reply(w, r, resp, err)
}
