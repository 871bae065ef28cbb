package http

import (
	"context"

	"github.com/plexus-gw/plexus"
	"github.com/plexus-gw/plexus/gateway"
)

// What the server consumes, one narrow interface per handler group, so that
// a handler's test stubs only the methods its group calls. *gateway.Gateway
// implements them all. Every method may be called concurrently, from any
// request's goroutine; each answers a *plexus.Error (via error) whose Code
// the edge maps to a status (status.go), and none keeps ctx past its return
// except Subscribe, whose stream lives until ctx ends.

// AgentAPI serves discovery and the agent's way in (agent.go).
type AgentAPI interface {
	WellKnown() plexus.WellKnownDocument
	Enroll(ctx context.Context, remote string, req plexus.EnrollRequest) (plexus.EnrollResponse, error)
	// Handshake takes the PAT path when c.Bearer is set and the admin path
	// when req.ConnectionKey is set; both set, or neither, is an error. The
	// two paths never fall through to each other.
	// The manifest's entries are streamed to the agent one at a time.
	HandshakeStream(ctx context.Context, c gateway.Credentials, req plexus.HandshakeRequest) (gateway.HandshakeStream, error)
	ManifestStream(ctx context.Context, c gateway.Credentials) (gateway.ManifestStream, error)
}

// GrantsAPI serves an agent's grants and tokens (agent.go).
type GrantsAPI interface {
	// RequestGrants answers a token, or a pending notice, never both nil.
	RequestGrants(ctx context.Context, c gateway.Credentials, req plexus.GrantRequest) (*plexus.ScopedToken, *plexus.GrantPendingResponse, error)
	GrantStatus(ctx context.Context, c gateway.Credentials, pendingID string) (plexus.GrantStatusResponse, error)
	Refresh(ctx context.Context, c gateway.Credentials, req plexus.RefreshRequest) (plexus.RefreshResponse, error)
	Revoke(ctx context.Context, c gateway.Credentials, req plexus.RevokeRequest) (plexus.RevokeResponse, error)
	StandingGrants(ctx context.Context, c gateway.Credentials) (plexus.GrantsListResponse, error)
}

// InvokeAPI serves /invoke (agent.go, stream.go).
type InvokeAPI interface {
	// Invoke always answers an InvokeResponse; a denial has OK false and an
	// Error whose code the edge maps to the HTTP status.
	Invoke(ctx context.Context, c gateway.Credentials, req plexus.InvokeRequest) plexus.InvokeResponse
	// InvokeStream is Invoke that hands the call's progress to sink as it
	// happens (calls never overlap, all before it returns).
	InvokeStream(ctx context.Context, c gateway.Credentials, req plexus.InvokeRequest, sink func(plexus.InvokeProgressEvent)) plexus.InvokeResponse
}

// EventsAPI serves /events (events.go).
type EventsAPI interface {
	// Subscribe opens an event stream for the session c names. Events after
	// lastEventID are replayed from the journal first (without tokens). The
	// channel closes when ctx ends or the subscriber falls too far behind.
	Subscribe(ctx context.Context, c gateway.Credentials, lastEventID int64) (<-chan plexus.Event, error)
}

// ExtensionsAPI serves extensions: an agent's registration (which never
// registers at once: the response carries the pending id), the owner's own,
// and their removal (routes.go, admin.go).
type ExtensionsAPI interface {
	RegisterExtension(ctx context.Context, c gateway.Credentials, req plexus.ExtensionRegisterRequest) (plexus.ExtensionRegisterResponse, error)
	// AddExtension registers the owner's manifest at once (managed),
	// replacing one of theirs with the same source; RemoveExtension removes
	// an extension and purges its grants.
	AddExtension(ctx context.Context, c gateway.Credentials, m plexus.ExtensionManifest) (plexus.ExtensionRegisterResponse, error)
	RemoveExtension(ctx context.Context, c gateway.Credentials, source string) error
}

// OwnerCheck is the connection-key check of the owner plane. Every owner
// method checks it first itself; the edge asks it only before refusing a
// request it will not hand on (admin.go), and before the providers routes.
type OwnerCheck interface {
	AdminCheck(ctx context.Context, c gateway.Credentials) error
}

// AdminAPI serves the owner's agents, key, status and integration snippets
// (admin.go).
type AdminAPI interface {
	ConnectAgent(ctx context.Context, c gateway.Credentials, req plexus.ConnectRequest) (plexus.ConnectResponse, error)
	// ConnectSelected is ConnectAgent with the TypeScript implementation's
	// selection of capabilities (connect.go); skipped are those not granted.
	ConnectSelected(ctx context.Context, c gateway.Credentials, req plexus.ConnectRequest, sel gateway.Selection) (plexus.ConnectResponse, []plexus.Declined, error)
	RevokeAgent(ctx context.Context, c gateway.Credentials, req plexus.AgentRevokeRequest) (plexus.AgentRevokeResponse, error)
	AdminAgents(ctx context.Context, c gateway.Credentials) ([]plexus.Agent, error)
	RotateKey(ctx context.Context, c gateway.Credentials) (plexus.KeyRotateResponse, error)
	// Status is a small health summary for `plexus status`.
	Status(ctx context.Context, c gateway.Credentials) (plexus.StatusResponse, error)
	Integration(ctx context.Context, c gateway.Credentials, agentID string) (plexus.IntegrationResponse, error)
	// PruneJournal deletes the activity rows written before a cut-off.
	PruneJournal(ctx context.Context, c gateway.Credentials, req plexus.JournalPruneRequest) (plexus.JournalPruneResponse, error)
}

// DecisionsAPI serves the owner's view of grants and pending decisions
// (admin.go).
type DecisionsAPI interface {
	AdminGrants(ctx context.Context, c gateway.Credentials) (plexus.GrantsListResponse, error)
	AdminPending(ctx context.Context, c gateway.Credentials) (plexus.PendingListResponse, error)
	// AdminShowPending returns one decision, pending or decided.
	AdminShowPending(ctx context.Context, c gateway.Credentials, id string) (plexus.Pending, error)
	AdminDecide(ctx context.Context, c gateway.Credentials, pendingID string, req plexus.DecideRequest) (plexus.Pending, error)
}

// SourcesAPI serves the owner's sources (admin.go).
type SourcesAPI interface {
	Sources(ctx context.Context, c gateway.Credentials) ([]plexus.SourceConfig, error)
	// AddSource persists an owner-configured source (Kind "portal" with
	// Config {"path": …, "alias": …}) and brings it online at once.
	AddSource(ctx context.Context, c gateway.Credentials, cfg plexus.SourceConfig, opts gateway.SourceOptions) (plexus.SourceConfig, error)
	RemoveSource(ctx context.Context, c gateway.Credentials, id string, opts gateway.SourceOptions) error
}

// Backend is what a [Server] answers with, one group per field. The routes
// of a nil group are not served (they answer not_found, as any unknown
// path); the daemon sets every group. A group of the owner plane (Admin,
// Decisions, Sources, Extensions) or Options.Providers needs Owner.
type Backend struct {
	Agents     AgentAPI
	Grants     GrantsAPI
	Invoke     InvokeAPI
	Events     EventsAPI
	Extensions ExtensionsAPI
	Owner      OwnerCheck
	Admin      AdminAPI
	Decisions  DecisionsAPI
	Sources    SourcesAPI
}

var (
	_ AgentAPI      = (*gateway.Gateway)(nil)
	_ GrantsAPI     = (*gateway.Gateway)(nil)
	_ InvokeAPI     = (*gateway.Gateway)(nil)
	_ EventsAPI     = (*gateway.Gateway)(nil)
	_ ExtensionsAPI = (*gateway.Gateway)(nil)
	_ OwnerCheck    = (*gateway.Gateway)(nil)
	_ AdminAPI      = (*gateway.Gateway)(nil)
	_ DecisionsAPI  = (*gateway.Gateway)(nil)
	_ SourcesAPI    = (*gateway.Gateway)(nil)
)
