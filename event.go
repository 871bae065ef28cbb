package plexus

import (
	"encoding/json"
	"time"
)

// Event types carried on /events.
const (
	EventManifestChanged = "manifest_changed"
	EventGrantResolved   = "grant_resolved"
	EventTokenRevoked    = "token_revoked"
	EventSourceStatus    = "source_status"
)

// Event is one /events message. Audience: an empty AgentID and SessionID
// means every session; otherwise the event goes only to that agent's
// sessions, or, when SessionID is set, to that one session.
//
// Data is the JSON body sent on the wire. Secret is a second body that rides
// only to the live subscriber of SessionID (a grant_resolved token); it is
// never persisted, so a replayed event carries Data alone.
type Event struct {
	ID        int64           `json:"id"`
	Type      string          `json:"type"`
	At        time.Time       `json:"at"`
	AgentID   string          `json:"-"`
	SessionID string          `json:"-"`
	Data      json.RawMessage `json:"data"`
	Secret    json.RawMessage `json:"-"`
}

// ManifestChangedEvent tells agents to re-fetch GET /manifest.
type ManifestChangedEvent struct {
	Type     string `json:"type"`
	Revision int64  `json:"revision"`
	Changed  *struct {
		Added   []string `json:"added,omitempty"`
		Removed []string `json:"removed,omitempty"`
		Updated []string `json:"updated,omitempty"`
	} `json:"changed,omitempty"`
}

// GrantResolvedEvent says a pending grant was decided. Token is present only
// on live delivery to the session that asked.
type GrantResolvedEvent struct {
	Type      string       `json:"type"`
	PendingID string       `json:"pendingId"`
	Decision  string       `json:"decision"`
	Token     *ScopedToken `json:"token,omitempty"`
}

// TokenRevokedEvent says a held token was revoked.
type TokenRevokedEvent struct {
	Type   string `json:"type"`
	JTI    string `json:"jti"`
	Reason string `json:"reason,omitempty"`
}

// SourceStatusEvent says a source's availability changed.
type SourceStatusEvent struct {
	Type      string `json:"type"`
	Source    string `json:"source"`
	Available bool   `json:"available"`
	Reason    string `json:"reason,omitempty"`
}
