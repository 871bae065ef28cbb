package gateway

// This file is the surface the http package and cmd/plexus call. Each method
// returns a *plexus.Error (via error) whose Code the edge maps to a status.

import (
	"context"

	"github.com/plexus-gw/plexus"
)

// Credentials presented on a request, as the edge found them. The gateway
// decides what they mean; the edge never interprets a credential itself.
type Credentials struct {
	// Bearer is the Authorization: Bearer value (a PAT, a JWT or a
	// connection-key), without the scheme.
	Bearer string
	// ConnectionKey is the X-Plexus-Connection-Key header value.
	ConnectionKey string
	// SessionID is the X-Plexus-Session header value.
	SessionID string
	// Remote is the caller's address, for the journal only: every local
	// process shares 127.0.0.1, so nothing is throttled or decided by it.
	Remote string
	// PeerUID looks up the local user owning the client's end of the
	// connection (Linux: /proc/net/tcp); ok is false when unknown. It is a
	// func so the lookup runs only where it matters (the handshake). Nil
	// means unknown.
	PeerUID func() (uid int, ok bool)
	// Via names the channel an admin request came through when the client
	// says so (the X-Plexus-Via header: "cli"); "" means the admin API.
	Via string
}

// SourceOptions modify AddSource and RemoveSource.
type SourceOptions struct {
	// Replace lets AddSource re-register a source the owner added before,
	// of the same kind, in place: one revision, one manifest_changed.
	Replace bool
	// PurgeGrants makes RemoveSource revoke every grant of the source's
	// entries, and the tokens carrying them (an extension's removal).
	PurgeGrants bool
}

// API is what the loopback HTTP server needs from the gateway. It exists so
// that http tests can state exactly which operations they exercise; *Gateway
// implements it.
type API interface {
	WellKnown() plexus.WellKnownDocument
	Enroll(ctx context.Context, remote string, req plexus.EnrollRequest) (plexus.EnrollResponse, error)
	// Handshake takes the PAT path when c.Bearer is set and the admin path
	// when req.ConnectionKey is set; both set, or neither, is an error. The
	// two paths never fall through to each other.
	Handshake(ctx context.Context, c Credentials, req plexus.HandshakeRequest) (plexus.HandshakeResponse, error)
	Manifest(ctx context.Context, c Credentials) (plexus.ManifestResponse, error)
	// RequestGrants answers a token, or a pending notice, never both nil.
	RequestGrants(ctx context.Context, c Credentials, req plexus.GrantRequest) (*plexus.ScopedToken, *plexus.GrantPendingResponse, error)
	GrantStatus(ctx context.Context, c Credentials, pendingID string) (plexus.GrantStatusResponse, error)
	Refresh(ctx context.Context, c Credentials, req plexus.RefreshRequest) (plexus.RefreshResponse, error)
	Revoke(ctx context.Context, c Credentials, req plexus.RevokeRequest) (plexus.RevokeResponse, error)
	StandingGrants(ctx context.Context, c Credentials) (plexus.GrantsListResponse, error)
	// Invoke always answers an InvokeResponse; a denial has OK false and an
	// Error whose code the edge maps to the HTTP status.
	Invoke(ctx context.Context, c Credentials, req plexus.InvokeRequest) plexus.InvokeResponse
	// InvokeStream is Invoke that hands the call's progress to sink as it
	// happens (calls never overlap, all before it returns).
	InvokeStream(ctx context.Context, c Credentials, req plexus.InvokeRequest, sink func(plexus.InvokeProgressEvent)) plexus.InvokeResponse
	// RegisterExtension puts an agent's manifest up for the owner; the
	// response carries the pending id (never registers at once).
	RegisterExtension(ctx context.Context, c Credentials, req plexus.ExtensionRegisterRequest) (plexus.ExtensionRegisterResponse, error)
	// Subscribe opens an event stream for the session c names. Events after
	// lastEventID are replayed from the journal first (without tokens). The
	// channel closes when ctx ends or the subscriber falls too far behind.
	Subscribe(ctx context.Context, c Credentials, lastEventID int64) (<-chan plexus.Event, error)

	// Admin plane: every method checks the connection-key in c first.
	AdminCheck(ctx context.Context, c Credentials) error
	ConnectAgent(ctx context.Context, c Credentials, req plexus.ConnectRequest) (plexus.ConnectResponse, error)
	RevokeAgent(ctx context.Context, c Credentials, req plexus.AgentRevokeRequest) (plexus.AgentRevokeResponse, error)
	AdminGrants(ctx context.Context, c Credentials) (plexus.GrantsListResponse, error)
	AdminPending(ctx context.Context, c Credentials) (plexus.PendingListResponse, error)
	// AdminShowPending returns one decision, pending or decided.
	AdminShowPending(ctx context.Context, c Credentials, id string) (plexus.Pending, error)
	AdminDecide(ctx context.Context, c Credentials, pendingID string, req plexus.DecideRequest) (plexus.Pending, error)
	RotateKey(ctx context.Context, c Credentials) (plexus.KeyRotateResponse, error)
	Integration(ctx context.Context, c Credentials, agentID string) (plexus.IntegrationResponse, error)
	AdminAgents(ctx context.Context, c Credentials) ([]plexus.Agent, error)
	// AddSource persists an owner-configured source (Kind "portal" with
	// Config {"path": …, "alias": …}) and brings it online at once.
	AddSource(ctx context.Context, c Credentials, cfg plexus.SourceConfig, opts SourceOptions) (plexus.SourceConfig, error)
	RemoveSource(ctx context.Context, c Credentials, id string, opts SourceOptions) error
	// AddExtension registers the owner's manifest at once (managed),
	// replacing one of theirs with the same source; RemoveExtension removes
	// an extension and purges its grants.
	AddExtension(ctx context.Context, c Credentials, m plexus.ExtensionManifest) (plexus.ExtensionRegisterResponse, error)
	RemoveExtension(ctx context.Context, c Credentials, source string) error
	Sources(ctx context.Context, c Credentials) ([]plexus.SourceConfig, error)
	// Status is a small health summary for `plexus status`.
	Status(ctx context.Context, c Credentials) (plexus.StatusResponse, error)
}
