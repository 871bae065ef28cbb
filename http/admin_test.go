package http

import (
	"context"

	"github.com/plexus-gw/plexus"
	"github.com/plexus-gw/plexus/gateway"
)

// stubOwner is the OwnerCheck of a stubAPI: it answers AdminErr.
type stubOwner struct{ *stubAPI }

func (s stubOwner) AdminCheck(_ context.Context, c gateway.Credentials) error {
	s.record("AdminCheck", c, nil)
	return s.AdminErr
}

// stubAdmin is the AdminAPI of a stubAPI.
type stubAdmin struct{ *stubAPI }

func (s stubAdmin) ConnectAgent(_ context.Context, c gateway.Credentials, req plexus.ConnectRequest) (plexus.ConnectResponse, error) {
	s.record("ConnectAgent", c, req)
	return plexus.ConnectResponse{AgentID: req.AgentID}, s.Err
}

// ConnectSelected records as ConnectAgent does, with the selection: one
// connect, in the other implementation's form.
func (s stubAdmin) ConnectSelected(_ context.Context, c gateway.Credentials, req plexus.ConnectRequest, sel gateway.Selection) (plexus.ConnectResponse, []plexus.Declined, error) {
	s.record("ConnectAgent", c, []any{req, sel})
	return plexus.ConnectResponse{AgentID: req.AgentID}, []plexus.Declined{{ID: "skipped.cap", Reason: "r"}}, s.Err
}

func (s stubAdmin) RevokeAgent(_ context.Context, c gateway.Credentials, req plexus.AgentRevokeRequest) (plexus.AgentRevokeResponse, error) {
	s.record("RevokeAgent", c, req)
	return plexus.AgentRevokeResponse{OK: true}, s.Err
}

func (s stubAdmin) AdminAgents(_ context.Context, c gateway.Credentials) ([]plexus.Agent, error) {
	s.record("AdminAgents", c, nil)
	return nil, s.Err
}

func (s stubAdmin) RotateKey(_ context.Context, c gateway.Credentials) (plexus.KeyRotateResponse, error) {
	s.record("RotateKey", c, nil)
	return plexus.KeyRotateResponse{}, s.Err
}

func (s stubAdmin) Status(_ context.Context, c gateway.Credentials) (plexus.StatusResponse, error) {
	s.record("Status", c, nil)
	return plexus.StatusResponse{}, s.Err
}

func (s stubAdmin) PruneJournal(_ context.Context, c gateway.Credentials, req plexus.JournalPruneRequest) (plexus.JournalPruneResponse, error) {
	s.record("PruneJournal", c, req)
	return plexus.JournalPruneResponse{}, s.Err
}

func (s stubAdmin) Integration(_ context.Context, c gateway.Credentials, agentID string) (plexus.IntegrationResponse, error) {
	s.record("Integration", c, agentID)
	return plexus.IntegrationResponse{AgentID: agentID}, s.Err
}

// stubDecisions is the DecisionsAPI of a stubAPI.
type stubDecisions struct{ *stubAPI }

func (s stubDecisions) AdminGrants(_ context.Context, c gateway.Credentials) (plexus.GrantsListResponse, error) {
	s.record("AdminGrants", c, nil)
	return plexus.GrantsListResponse{}, s.Err
}

func (s stubDecisions) AdminShowPending(_ context.Context, c gateway.Credentials, id string) (plexus.Pending, error) {
	s.record("AdminShowPending", c, id)
	return plexus.Pending{ID: id}, s.Err
}

func (s stubDecisions) AdminPending(_ context.Context, c gateway.Credentials) (plexus.PendingListResponse, error) {
	s.record("AdminPending", c, nil)
	return plexus.PendingListResponse{}, s.Err
}

func (s stubDecisions) AdminDecide(_ context.Context, c gateway.Credentials, id string, req plexus.DecideRequest) (plexus.Pending, error) {
	s.record("AdminDecide", c, []any{id, req})
	return plexus.Pending{ID: id}, s.Err
}

// stubSources is the SourcesAPI of a stubAPI.
type stubSources struct{ *stubAPI }

func (s stubSources) AddSource(_ context.Context, c gateway.Credentials, cfg plexus.SourceConfig, _ gateway.SourceOptions) (plexus.SourceConfig, error) {
	s.record("AddSource", c, cfg)
	if s.AddedSource != nil {
		return *s.AddedSource, s.Err
	}
	return cfg, s.Err
}

func (s stubSources) RemoveSource(_ context.Context, c gateway.Credentials, id string, _ gateway.SourceOptions) error {
	s.record("RemoveSource", c, id)
	return s.Err
}

func (s stubSources) Sources(_ context.Context, c gateway.Credentials) ([]plexus.SourceConfig, error) {
	s.record("Sources", c, nil)
	return s.SourceList, s.Err
}
