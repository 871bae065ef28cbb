package gateway

// The values the edges hand the gateway with a request. The edges declare
// the narrow interfaces they consume themselves (http/backend.go); every
// method they call returns a *plexus.Error (via error) whose Code the edge
// maps to its representation.

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
