package plexus

import "time"

// Actors of an activity row besides an agent id.
const (
	ActorHuman  = "human"
	ActorSystem = "system"
)

// Action types of the rows that tell one call's story. invoke.started is
// committed before the transport is called; invoke.ok or invoke.failed
// follows when it returns. Their payload's idemHash (a keyed hash of the
// caller's idempotency scope, never the key itself) links the rows of calls
// made with an idempotencyKey.
const (
	ActionInvokeStarted = "invoke.started"
	ActionInvokeOK      = "invoke.ok"
	ActionInvokeFailed  = "invoke.failed"
	ActionInvokeDenied  = "invoke.denied"
)

// Channels a decision can arrive through (recorded as payload.via).
const (
	ViaAdminAPI = "admin-api"
	ViaCLI      = "cli"
	ViaConsole  = "console"
	ViaFile     = "file"
	ViaAgent    = "agent"
	ViaSystem   = "system"
)

// Activity is one row of the activity journal, the stable interface scripts
// read (docs/journal.md). Payload must already be safe to persist; the single
// write path redacts it again regardless.
type Activity struct {
	ID         int64          `json:"id"`
	TS         time.Time      `json:"ts"`
	TraceID    string         `json:"trace_id"`
	Actor      string         `json:"actor"`
	AgentID    string         `json:"agent_id,omitempty"`
	ActionType string         `json:"action_type"`
	Target     string         `json:"target,omitempty"`
	Payload    map[string]any `json:"payload,omitempty"`
	PrevHash   string         `json:"prev_hash,omitempty"`
	Hash       string         `json:"hash,omitempty"`
}

// AuditID is the id an activity row is known by on the wire (auditId).
func (a *Activity) AuditID() string {
	if a == nil || a.ID == 0 {
		return ""
	}
	return "evt_" + itoa(a.ID)
}

func itoa(n int64) string {
	if n == 0 {
		return "0"
	}
	var b [20]byte
	i := len(b)
	for n > 0 {
		i--
		b[i] = byte('0' + n%10)
		n /= 10
	}
	return string(b[i:])
}
