package http

import (
	nethttp "net/http"
	"slices"
	"strings"

	"github.com/plexus-gw/plexus"
)

// discoveryPath is where a lost client starts over.
const discoveryPath = "/.well-known/plexus"

// routes registers the endpoints of every group the backend serves.
// Anything unmatched falls to fallback, which answers 404 or 405 in the
// uniform envelope (net/http's own answers are plain text).
func (s *Server) routes() {
	m, b := s.mux, s.b
	// Agent plane (§2).
	if b.Agents != nil {
		m.HandleFunc("GET "+discoveryPath, s.handleWellKnown)
		m.HandleFunc("POST /agents/enroll", s.handleEnroll)
		m.HandleFunc("POST /link/handshake", s.handleHandshake)
		m.HandleFunc("GET /manifest", s.handleManifest)
	}
	if b.Grants != nil {
		m.HandleFunc("PUT /grants", s.handleRequestGrants)
		m.HandleFunc("GET /grants", s.handleStandingGrants)
		m.HandleFunc("GET /grants/status", s.handleGrantStatus)
		m.HandleFunc("POST /grants/refresh", s.handleRefresh)
		m.HandleFunc("POST /grants/revoke", s.handleRevoke)
	}
	if b.Invoke != nil {
		m.HandleFunc("POST /invoke", s.handleInvoke)
	}
	if b.Events != nil {
		m.HandleFunc("GET /events", s.handleEvents)
	}
	if b.Extensions != nil {
		m.HandleFunc("POST /extensions", s.handleRegisterExtension)
		m.HandleFunc("DELETE /extensions/{source}", s.handleRemoveExtension)
		m.HandleFunc("POST /admin/api/extensions", s.handleAddExtension)
	}

	// Owner plane, connection-key gated by the gateway.
	if b.Admin != nil {
		m.HandleFunc("POST /admin/api/agents/connect", s.handleConnectAgent)
		m.HandleFunc("POST /admin/api/agents/revoke", s.handleRevokeAgent)
		m.HandleFunc("GET /admin/api/agents", s.handleAdminAgents)
		m.HandleFunc("POST /admin/api/key/rotate", s.handleRotateKey)
		m.HandleFunc("GET /admin/api/status", s.handleStatus)
		m.HandleFunc("POST /admin/api/journal/prune", s.handlePruneJournal)
		m.HandleFunc("GET /integration/{agentId}", s.handleIntegration)
	}
	if b.Decisions != nil {
		m.HandleFunc("GET /admin/api/grants", s.handleAdminGrants)
		m.HandleFunc("GET /admin/api/pending", s.handleAdminPending)
		m.HandleFunc("GET /admin/api/pending/{id}", s.handleAdminShowPending)
		m.HandleFunc("POST /admin/api/pending/{id}/approve", s.handleDecide("approve"))
		m.HandleFunc("POST /admin/api/pending/{id}/deny", s.handleDecide("deny"))
		m.HandleFunc("POST /admin/api/pending/{id}", s.handleDecide(""))
	}
	if b.Sources != nil {
		m.HandleFunc("GET /admin/api/sources", s.handleSources)
		m.HandleFunc("POST /admin/api/sources", s.handleAddSource)
		m.HandleFunc("DELETE /admin/api/sources/{id}", s.handleRemoveSource)
	}
	if b.Owner != nil {
		s.providerRoutes()
	}
	s.signInRoutes()
	if s.opts.MCP != nil {
		m.HandleFunc(mcpPath, s.handleMCP)
	}
	if s.opts.Metrics != nil {
		m.HandleFunc("GET "+metricsPath, s.handleMetrics)
	}
	if s.opts.Console != nil {
		m.Handle("/console/", s.opts.Console)
	}

	m.HandleFunc("/", s.fallback)
}

// probeMethods are the methods fallback tries to tell 405 from 404.
var probeMethods = []string{nethttp.MethodGet, nethttp.MethodPost, nethttp.MethodPut, nethttp.MethodDelete, nethttp.MethodPatch}

// fallback answers what no route matched: 405 with Allow when the path is
// served under another method, else 404 pointing at discovery.
func (s *Server) fallback(w nethttp.ResponseWriter, r *nethttp.Request) {
	var allow []string
	for _, m := range probeMethods {
		probe := r.Clone(r.Context())
		probe.Method = m
		if _, pattern := s.mux.Handler(probe); pattern != "/" && pattern != "" {
			allow = append(allow, m)
			if m == nethttp.MethodGet {
				allow = append(allow, nethttp.MethodHead)
			}
		}
	}
	if len(allow) == 0 {
		s.writeError(w, r, &plexus.Error{Code: plexus.CodeNotFound, Message: "no such endpoint; start at " + discoveryPath})
		return
	}
	slices.Sort(allow)
	w.Header().Set("Allow", strings.Join(allow, ", "))
	msg := "method " + r.Method + " is not allowed here; use " + strings.Join(allow, " or ")
	if isInvoke(r) {
		// /invoke answers nothing but an InvokeResponse; no union code means
		// "wrong method", internal_error is the catch-all.
		s.writeInvokeDenial(w, r, "", &plexus.ErrorBody{Code: plexus.CodeInternalError, Message: msg}, nethttp.StatusMethodNotAllowed)
		return
	}
	b := &plexus.ErrorBody{Code: plexus.CodeInvalidRequest, Message: msg}
	s.writeJSON(w, r, nethttp.StatusMethodNotAllowed, plexus.ErrorResponse{Error: b})
}

// handleRegisterExtension answers 202 with the pending registration: an
// agent's extension waits for the owner.
func (s *Server) handleRegisterExtension(w nethttp.ResponseWriter, r *nethttp.Request) {
	var req plexus.ExtensionRegisterRequest
	c, ok := s.decodeSession(w, r, &req, &req.SessionID)
	if !ok {
		return
	}
	resp, err := s.b.Extensions.RegisterExtension(r.Context(), c, req)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	s.writeJSON(w, r, nethttp.StatusAccepted, resp)
}
