package http

import (
	"encoding/json"
	nethttp "net/http"
	"time"

	"github.com/plexus-gw/plexus"
	"github.com/plexus-gw/plexus/gateway"
)

// The owner plane under /admin/api/ and GET /integration/{agentId}. Every
// call hands the caller's credentials to the gateway, which checks the
// connection-key first. When the edge refuses a request before calling the
// gateway (a bad body, a contradictory action), it asks AdminCheck first, so
// a caller without the key always learns "unauthorized" and nothing about
// what a valid request would look like.

// adminFail answers err for a request the edge refuses, unless the caller
// is not the owner, in which case that is the answer.
func (s *Server) adminFail(w nethttp.ResponseWriter, r *nethttp.Request, c gateway.Credentials, err error) {
	if aerr := s.b.Owner.AdminCheck(r.Context(), c); aerr != nil {
		s.writeError(w, r, aerr)
		return
	}
	s.writeError(w, r, err)
}

// AgentsResponse is the body of GET /admin/api/agents.
type AgentsResponse struct {
	Agents []plexus.Agent `json:"agents"`
}

// SourcesResponse is the body of GET /admin/api/sources.
type SourcesResponse struct {
	Sources []SourceView `json:"sources"`
}

// SourceView is the wire form of a [plexus.SourceConfig]: Config travels as
// the JSON value it holds (a portal's {"path": …, "alias": …}), not as the
// base64 a byte slice would marshal to.
type SourceView struct {
	ID         string            `json:"id"`
	Kind       string            `json:"kind"`
	Provenance plexus.Provenance `json:"provenance,omitempty"`
	Config     json.RawMessage   `json:"config,omitempty"`
	CreatedAt  time.Time         `json:"createdAt,omitzero"`
}

func sourceView(c plexus.SourceConfig) SourceView {
	v := SourceView{ID: c.ID, Kind: c.Kind, Provenance: c.Provenance, CreatedAt: c.CreatedAt}
	if json.Valid(c.Config) {
		v.Config = json.RawMessage(c.Config)
	}
	return v
}

// RemoveSourceResponse is the body of DELETE /admin/api/sources/{id}.
type RemoveSourceResponse struct {
	OK bool   `json:"ok"`
	ID string `json:"id"`
}

// handleConnectAgent answers 201 Created: it creates the agent. It also
// takes the TypeScript implementation's body (connectBody), so its
// management client and scripts connect agents here unchanged.
func (s *Server) handleConnectAgent(w nethttp.ResponseWriter, r *nethttp.Request) {
	c := credentials(r)
	var body connectBody
	if err := s.decode(w, r, &body, false); err != nil {
		s.adminFail(w, r, c, err)
		return
	}
	if !body.selects() {
		resp, err := s.b.Admin.ConnectAgent(r.Context(), c, body.ConnectRequest)
		if err != nil {
			s.writeError(w, r, err)
			return
		}
		s.writeJSON(w, r, nethttp.StatusCreated, resp)
		return
	}
	sel, err := body.selection()
	if err != nil {
		s.adminFail(w, r, c, err)
		return
	}
	resp, skipped, err := s.b.Admin.ConnectSelected(r.Context(), c, body.ConnectRequest, sel)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	s.writeJSON(w, r, nethttp.StatusCreated, selectedResponse(resp, skipped))
}

func (s *Server) handleRevokeAgent(w nethttp.ResponseWriter, r *nethttp.Request) {
	c := credentials(r)
	var req plexus.AgentRevokeRequest
	if err := s.decode(w, r, &req, false); err != nil {
		s.adminFail(w, r, c, err)
		return
	}
	resp, err := s.b.Admin.RevokeAgent(r.Context(), c, req)
	s.reply(w, r, resp, err)
}

func (s *Server) handleAdminAgents(w nethttp.ResponseWriter, r *nethttp.Request) {
	agents, err := s.b.Admin.AdminAgents(r.Context(), credentials(r))
	if agents == nil {
		agents = []plexus.Agent{}
	}
	s.reply(w, r, AgentsResponse{Agents: agents}, err)
}

func (s *Server) handleAdminGrants(w nethttp.ResponseWriter, r *nethttp.Request) {
	resp, err := s.b.Decisions.AdminGrants(r.Context(), credentials(r))
	s.reply(w, r, resp, err)
}

func (s *Server) handleAdminPending(w nethttp.ResponseWriter, r *nethttp.Request) {
	resp, err := s.b.Decisions.AdminPending(r.Context(), credentials(r))
	s.reply(w, r, resp, err)
}

func (s *Server) handleAdminShowPending(w nethttp.ResponseWriter, r *nethttp.Request) {
	resp, err := s.b.Decisions.AdminShowPending(r.Context(), credentials(r), r.PathValue("id"))
	s.reply(w, r, resp, err)
}

// handleDecide serves the three spellings of a decision. With the action in
// the path the body (a DecideRequest narrowing the approval) is optional and
// an action it names must agree; on the bare path the body's action is
// required.
func (s *Server) handleDecide(pathAction string) nethttp.HandlerFunc {
	return func(w nethttp.ResponseWriter, r *nethttp.Request) {
		c := credentials(r)
		var req plexus.DecideRequest
		if err := s.decode(w, r, &req, pathAction != ""); err != nil {
			s.adminFail(w, r, c, err)
			return
		}
		switch {
		case pathAction != "" && req.Action != "" && req.Action != pathAction:
			s.adminFail(w, r, c, plexus.Errorf(plexus.CodeInvalidRequest, "body action %q contradicts the %s path", req.Action, pathAction))
			return
		case pathAction != "":
			req.Action = pathAction
		case req.Action != "approve" && req.Action != "deny":
			s.adminFail(w, r, c, plexus.Errorf(plexus.CodeInvalidRequest, `action must be "approve" or "deny"`))
			return
		}
		resp, err := s.b.Decisions.AdminDecide(r.Context(), c, r.PathValue("id"), req)
		s.reply(w, r, resp, err)
	}
}

func (s *Server) handleRotateKey(w nethttp.ResponseWriter, r *nethttp.Request) {
	resp, err := s.b.Admin.RotateKey(r.Context(), credentials(r))
	s.reply(w, r, resp, err)
}

// handlePruneJournal is `plexus journal prune` while the daemon runs: the
// body is a JournalPruneRequest.
func (s *Server) handlePruneJournal(w nethttp.ResponseWriter, r *nethttp.Request) {
	c := credentials(r)
	var req plexus.JournalPruneRequest
	if err := s.decode(w, r, &req, false); err != nil {
		s.adminFail(w, r, c, err)
		return
	}
	resp, err := s.b.Admin.PruneJournal(r.Context(), c, req)
	s.reply(w, r, resp, err)
}

func (s *Server) handleStatus(w nethttp.ResponseWriter, r *nethttp.Request) {
	resp, err := s.b.Admin.Status(r.Context(), credentials(r))
	s.reply(w, r, resp, err)
}

func (s *Server) handleSources(w nethttp.ResponseWriter, r *nethttp.Request) {
	cfgs, err := s.b.Sources.Sources(r.Context(), credentials(r))
	views := make([]SourceView, 0, len(cfgs))
	for _, c := range cfgs {
		views = append(views, sourceView(c))
	}
	s.reply(w, r, SourcesResponse{Sources: views}, err)
}

// handleAddSource answers 201 Created with the stored source. The body is a
// SourceView: config is the JSON value itself.
func (s *Server) handleAddSource(w nethttp.ResponseWriter, r *nethttp.Request) {
	c := credentials(r)
	var req SourceView
	if err := s.decode(w, r, &req, false); err != nil {
		s.adminFail(w, r, c, err)
		return
	}
	cfg := plexus.SourceConfig{ID: req.ID, Kind: req.Kind, Provenance: req.Provenance, Config: req.Config}
	got, err := s.b.Sources.AddSource(r.Context(), c, cfg, gateway.SourceOptions{Replace: r.URL.Query().Get("replace") == "true"})
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	s.writeJSON(w, r, nethttp.StatusCreated, sourceView(got))
}

func (s *Server) handleRemoveSource(w nethttp.ResponseWriter, r *nethttp.Request) {
	id := r.PathValue("id")
	err := s.b.Sources.RemoveSource(r.Context(), credentials(r), id, gateway.SourceOptions{PurgeGrants: r.URL.Query().Get("purge") == "grants"})
	s.reply(w, r, RemoveSourceResponse{OK: true, ID: id}, err)
}

// handleAddExtension registers the owner's manifest at once; the body is
// {"manifest": …}, as POST /extensions takes it.
func (s *Server) handleAddExtension(w nethttp.ResponseWriter, r *nethttp.Request) {
	c := credentials(r)
	var req plexus.ExtensionRegisterRequest
	if err := s.decode(w, r, &req, false); err != nil {
		s.adminFail(w, r, c, err)
		return
	}
	resp, err := s.b.Extensions.AddExtension(r.Context(), c, req.Manifest)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	s.writeJSON(w, r, nethttp.StatusCreated, resp)
}

// handleRemoveExtension is DELETE /extensions/{source}, for the owner.
func (s *Server) handleRemoveExtension(w nethttp.ResponseWriter, r *nethttp.Request) {
	source := r.PathValue("source")
	err := s.b.Extensions.RemoveExtension(r.Context(), credentials(r), source)
	s.reply(w, r, RemoveSourceResponse{OK: true, ID: source}, err)
}

func (s *Server) handleIntegration(w nethttp.ResponseWriter, r *nethttp.Request) {
	resp, err := s.b.Admin.Integration(r.Context(), credentials(r), r.PathValue("agentId"))
	s.reply(w, r, resp, err)
}
