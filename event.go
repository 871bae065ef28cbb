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
	EventInvokeProgress  = "invoke_progress"
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

// InvokeProgress is one piece of a running call that a transport relays
// before its result: a chunk of streamed output (an ipc provider's
// agent.tool.stream) or a progress report (an MCP server's
// notifications/progress). It must carry no secret: it reaches the caller
// as it is.
type InvokeProgress struct {
	// Channel says what Data is: "stdout", "stderr", "log", "status" or
	// "partial_result" for a stream chunk, "progress" for a progress report.
	Channel string `json:"channel"`
	// Data is the chunk: {"text": …} or {"json": …} for stream chunks.
	Data any `json:"data,omitempty"`
	// Progress, Total and Message are a progress report's numbers and text.
	Progress *float64 `json:"progress,omitempty"`
	Total    *float64 `json:"total,omitempty"`
	Message  string   `json:"message,omitempty"`
	// Done says the transport will relay no more progress for this call
	// (the result still follows).
	Done bool `json:"done,omitempty"`
}

// InvokeProgressEvent is an InvokeProgress as the caller sees it, on a
// streamed /invoke and, live only, on /events for the invoking session. Seq
// counts from 1 per call (per member call in a workflow), so a reader can
// tell a gap; TraceID ties it to the journal's invoke rows.
type InvokeProgressEvent struct {
	Type    string `json:"type"`
	ID      string `json:"id"`
	TraceID string `json:"traceId,omitempty"`
	Seq     int    `json:"seq"`
	InvokeProgress
}
