package mcpserver

import (
	"context"

	"github.com/plexus-gw/plexus"
	"github.com/plexus-gw/plexus/gateway"
)

// What the front door consumes of the gateway, in three small groups;
// *gateway.Gateway implements them all. Every method may be called
// concurrently from any request's goroutine, answers a *plexus.Error (via
// error) whose Code says what went wrong, and keeps no ctx past its return
// except Subscribe, whose stream lives until ctx ends.

// Sessions opens a Plexus session for a PAT and shows it its manifest.
type Sessions interface {
	// Handshake with c.Bearer set takes the PAT path: the session belongs
	// to the PAT's agent.
	Handshake(ctx context.Context, c gateway.Credentials, req plexus.HandshakeRequest) (plexus.HandshakeResponse, error)
	Manifest(ctx context.Context, c gateway.Credentials) (plexus.ManifestResponse, error)
	// SessionAgent names the agent of c's session ("" for the owner's or
	// an anonymous one), or says the session is over (session_expired):
	// the revocation sweep's check (sweep.go), one read of the session and
	// its agent where a manifest would also read the agent's grants and
	// copy every entry.
	SessionAgent(ctx context.Context, c gateway.Credentials) (string, error)
	// Revision is the catalog's current revision (a manifest's Revision),
	// read without a transaction: tools/call keeps a manifest's tools
	// while it stays current (index.go).
	Revision() int64
	// StateGeneration changes whenever a token, session, agent or grant
	// does (a revocation, a grant, an expiry swept), read without a
	// transaction: a kept catalog is served only while it stays the same,
	// so a revoked agent's host meets the session check again at once.
	StateGeneration() uint64
}

// Grants asks for grants and learns the owner's decisions.
type Grants interface {
	// RequestGrants answers a token, or a pending notice, never both nil.
	RequestGrants(ctx context.Context, c gateway.Credentials, req plexus.GrantRequest) (*plexus.ScopedToken, *plexus.GrantPendingResponse, error)
	// WouldAllow says which capabilities a request would get without the
	// owner (the gateway's own Authorizer, nothing written).
	WouldAllow(ctx context.Context, c gateway.Credentials, ids []string) (map[string]bool, error)
	// GrantStatus carries the token only for the session that asked.
	GrantStatus(ctx context.Context, c gateway.Credentials, pendingID string) (plexus.GrantStatusResponse, error)
	// Subscribe streams the session's events (grant_resolved among them)
	// until ctx ends or the subscriber falls too far behind.
	Subscribe(ctx context.Context, c gateway.Credentials, lastEventID int64) (<-chan plexus.Event, error)
	// CallAbandoned journals a call that waited for the owner and never
	// ran, its caller gone first (an invoke.failed row).
	CallAbandoned(ctx context.Context, c gateway.Credentials, call gateway.AbandonedCall) error
}

// Invoker runs a call under a scoped token.
type Invoker interface {
	// InvokeStream hands the call's progress to sink as it happens (calls
	// never overlap, all before it returns).
	InvokeStream(ctx context.Context, c gateway.Credentials, req plexus.InvokeRequest, sink func(plexus.InvokeProgressEvent)) plexus.InvokeResponse
}

// Backend is the gateway as the front door sees it; Sessions, Grants and
// Invoke are required.
type Backend struct {
	Sessions Sessions
	Grants   Grants
	Invoke   Invoker
	// Agents names a session's agent, for its owner's view (Options.Views);
	// nil shows every agent the default view.
	Agents Agents
	// Changes streams the catalog's changes, for list_changed ([Server.Run]);
	// nil sends none.
	Changes Changes
	// Upstream passes completions and resource subscriptions to the
	// items' own servers; nil declares neither capability.
	Upstream Upstream
}

var (
	_ Sessions = (*gateway.Gateway)(nil)
	_ Grants   = (*gateway.Gateway)(nil)
	_ Invoker  = (*gateway.Gateway)(nil)
)
