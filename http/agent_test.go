package http

import (
	"context"

	"github.com/plexus-gw/plexus"
	"github.com/plexus-gw/plexus/gateway"
)

// stubAgents is the AgentAPI of a stubAPI.
type stubAgents struct{ *stubAPI }

func (s stubAgents) WellKnown() plexus.WellKnownDocument {
	s.record("WellKnown", gateway.Credentials{}, nil)
	return plexus.WellKnownDocument{Gateway: plexus.GatewayInfo{Name: "plexus", Protocol: plexus.ProtocolFamily}}
}

func (s stubAgents) Enroll(_ context.Context, remote string, req plexus.EnrollRequest) (plexus.EnrollResponse, error) {
	s.record("Enroll", gateway.Credentials{Remote: remote}, req)
	return plexus.EnrollResponse{PAT: "plx_agent_x", AgentID: "a1"}, s.Err
}

func (s stubAgents) HandshakeStream(_ context.Context, c gateway.Credentials, req plexus.HandshakeRequest) (gateway.HandshakeStream, error) {
	s.record("Handshake", c, req)
	m := s.manifest()
	return gateway.HandshakeStream{Head: plexus.HandshakeResponse{SessionID: "sess_1", Manifest: m.Head}, Manifest: m}, s.Err
}

func (s stubAgents) ManifestStream(_ context.Context, c gateway.Credentials) (gateway.ManifestStream, error) {
	s.record("Manifest", c, nil)
	return s.manifest(), s.Err
}

// manifest streams the stub's ManifestEntries.
func (s stubAgents) manifest() gateway.ManifestStream {
	return gateway.ManifestStream{Head: plexus.Manifest{SessionID: "sess_1", Revision: 7}, Entries: func(yield func(*plexus.Entry) bool) {
		var e plexus.Entry // one copy reused, as the registry's iterator does
		for i := range s.ManifestEntries {
			e = s.ManifestEntries[i]
			if !yield(&e) {
				return
			}
		}
	}}
}

// stubGrants is the GrantsAPI of a stubAPI.
type stubGrants struct{ *stubAPI }

func (s stubGrants) RequestGrants(_ context.Context, c gateway.Credentials, req plexus.GrantRequest) (*plexus.ScopedToken, *plexus.GrantPendingResponse, error) {
	s.record("RequestGrants", c, req)
	return s.Token, s.Pending, s.Err
}

func (s stubGrants) GrantStatus(_ context.Context, c gateway.Credentials, id string) (plexus.GrantStatusResponse, error) {
	s.record("GrantStatus", c, id)
	return plexus.GrantStatusResponse{PendingID: id, State: plexus.StatePending}, s.Err
}

func (s stubGrants) Refresh(_ context.Context, c gateway.Credentials, req plexus.RefreshRequest) (plexus.RefreshResponse, error) {
	s.record("Refresh", c, req)
	return plexus.RefreshResponse{}, s.Err
}

func (s stubGrants) Revoke(_ context.Context, c gateway.Credentials, req plexus.RevokeRequest) (plexus.RevokeResponse, error) {
	s.record("Revoke", c, req)
	return plexus.RevokeResponse{OK: true}, s.Err
}

func (s stubGrants) StandingGrants(_ context.Context, c gateway.Credentials) (plexus.GrantsListResponse, error) {
	s.record("StandingGrants", c, nil)
	return plexus.GrantsListResponse{Grants: []plexus.StandingGrant{}}, s.Err
}

// stubExtensions is the ExtensionsAPI of a stubAPI.
type stubExtensions struct{ *stubAPI }

func (s stubExtensions) RegisterExtension(_ context.Context, c gateway.Credentials, req plexus.ExtensionRegisterRequest) (plexus.ExtensionRegisterResponse, error) {
	s.record("RegisterExtension", c, req)
	return plexus.ExtensionRegisterResponse{}, s.Err
}

func (s stubExtensions) AddExtension(_ context.Context, c gateway.Credentials, m plexus.ExtensionManifest) (plexus.ExtensionRegisterResponse, error) {
	s.record("AddExtension", c, m)
	return plexus.ExtensionRegisterResponse{OK: true, Source: m.Source}, s.Err
}

func (s stubExtensions) RemoveExtension(_ context.Context, c gateway.Credentials, source string) error {
	s.record("RemoveExtension", c, source)
	return s.Err
}
