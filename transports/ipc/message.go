package ipc

import (
	"encoding/json"
	"fmt"
	"log/slog"
)

// Message types of §4 (v1 MVP set). core.* are sent by Core (Plexus),
// agent.* by the agent.
const (
	TypeAgentHello            = "agent.hello"             // §4.1.1
	TypeCoreWelcome           = "core.welcome"            // §4.1.2
	TypeCoreGoodbye           = "core.goodbye"            // §4.1.3
	TypeAgentToolsRegister    = "agent.tools.register"    // §4.2.1
	TypeCoreToolsRegistered   = "core.tools.registered"   // §4.2.2
	TypeAgentToolsUnregister  = "agent.tools.unregister"  // §4.2.3
	TypeCoreToolsUnregistered = "core.tools.unregistered" // §4.2.3, "Core MAY respond"
	TypeCoreToolCall          = "core.tool.call"          // §4.3.1
	TypeAgentToolStream       = "agent.tool.stream"       // §4.3.2
	TypeAgentToolResult       = "agent.tool.result"       // §4.3.3
	TypeCoreToolCancel        = "core.tool.cancel"        // §4.4.1
	TypeAgentToolCancelAck    = "agent.tool.cancel_ack"   // §4.4.2
	TypeAgentHeartbeat        = "agent.heartbeat"         // §4.5.1
	TypeCorePing              = "core.ping"               // §4.5.2
	TypeAgentPong             = "agent.pong"              // §4.5.2
)

// KnownType reports whether t is one of the message types of §4.
// [TypeCoreError] is not: it is Plexus's own answer, never received.
func KnownType(t string) bool {
	switch t {
	case TypeAgentHello, TypeCoreWelcome, TypeCoreGoodbye,
		TypeAgentToolsRegister, TypeCoreToolsRegistered,
		TypeAgentToolsUnregister, TypeCoreToolsUnregistered,
		TypeCoreToolCall, TypeAgentToolStream, TypeAgentToolResult,
		TypeCoreToolCancel, TypeAgentToolCancelAck,
		TypeAgentHeartbeat, TypeCorePing, TypeAgentPong:
		return true
	}
	return false
}

// Hello is the payload of agent.hello (§4.1.1).
//
// SessionToken is the one secret the protocol carries (§7.1): Hello's String
// and LogValue redact it, and it must never be journaled or logged.
type Hello struct {
	SessionToken string        `json:"session_token"`
	AgentID      string        `json:"agent_id"`
	AgentVersion string        `json:"agent_version"`
	ManifestHash string        `json:"manifest_hash,omitempty"`
	Protocol     HelloProtocol `json:"protocol"`
	SDK          *SDK          `json:"sdk,omitempty"`
}

// HelloProtocol is agent.hello's protocol object.
type HelloProtocol struct {
	SupportedVersions []int    `json:"supported_versions"`
	Capabilities      []string `json:"capabilities"`
}

// SDK is agent.hello's optional sdk object.
type SDK struct {
	Name    string `json:"name"`
	Version string `json:"version"`
}

// String shows h without its session token.
func (h Hello) String() string {
	return fmt.Sprintf("agent.hello{agent_id:%q agent_version:%q session_token:[redacted]}", h.AgentID, h.AgentVersion)
}

// LogValue logs h without its session token.
func (h Hello) LogValue() slog.Value {
	return slog.GroupValue(
		slog.String("agent_id", h.AgentID),
		slog.String("agent_version", h.AgentVersion),
		slog.String("manifest_hash", h.ManifestHash),
	)
}

// Welcome is the payload of core.welcome (§4.1.2).
type Welcome struct {
	AcceptedVersion     int        `json:"accepted_version"`
	SessionID           string     `json:"session_id"`
	HeartbeatIntervalMS int64      `json:"heartbeat_interval_ms"`
	MaxFrameBytes       int        `json:"max_frame_bytes"`
	Server              ServerInfo `json:"server"`
}

// ServerInfo is core.welcome's server object.
type ServerInfo struct {
	CoreVersion string `json:"core_version"`
	InstanceID  string `json:"instance_id"`
}

// Goodbye is the payload of core.goodbye (§4.1.3).
type Goodbye struct {
	Reason       string `json:"reason"`
	RetryAfterMS int64  `json:"retry_after_ms,omitempty"`
}

// ToolsRegister is the payload of agent.tools.register (§4.2.1).
type ToolsRegister struct {
	Tools   []Tool `json:"tools"`
	Replace bool   `json:"replace,omitempty"`
}

// Tool is one tool an agent declares (§4.2.1). ToolID must be namespaced
// "<agent_id>/<tool_name>"; Name is the part after the slash.
type Tool struct {
	ToolID            string          `json:"tool_id"`
	Name              string          `json:"name"`
	Description       string          `json:"description"`
	InputSchema       json.RawMessage `json:"input_schema"`
	OutputSchema      json.RawMessage `json:"output_schema,omitempty"`
	Capabilities      []string        `json:"capabilities,omitempty"`
	SideEffects       bool            `json:"side_effects,omitempty"`
	RequiresDirective bool            `json:"requires_directive,omitempty"`
	Tags              []string        `json:"tags,omitempty"`
}

// ToolsRegistered is the payload of core.tools.registered (§4.2.2).
type ToolsRegistered struct {
	Registered []string       `json:"registered"`
	Rejected   []RejectedTool `json:"rejected,omitempty"`
}

// RejectedTool is one entry of core.tools.registered's rejected list.
type RejectedTool struct {
	ToolID string `json:"tool_id"`
	Error  Error  `json:"error"`
}

// ToolsUnregister is the payload of agent.tools.unregister (§4.2.3).
type ToolsUnregister struct {
	ToolIDs []string `json:"tool_ids"`
}

// ToolsUnregistered is the payload of core.tools.unregistered (§4.2.3:
// "Core MAY respond"; the spec leaves the payload open, so Plexus mirrors
// core.tools.registered): the tool_ids removed, and those refused with why.
type ToolsUnregistered struct {
	Unregistered []string       `json:"unregistered"`
	Rejected     []RejectedTool `json:"rejected,omitempty"`
}

// ToolCall is the payload of core.tool.call (§4.3.1). Input is the call's
// raw input: it must never be journaled (Plexus's redaction rule).
type ToolCall struct {
	CallID         string          `json:"call_id"`
	ToolID         string          `json:"tool_id"`
	Input          json.RawMessage `json:"input"`
	TimeoutMS      int64           `json:"timeout_ms,omitempty"`
	IdempotencyKey string          `json:"idempotency_key,omitempty"`
	Caller         *Caller         `json:"caller,omitempty"`
	Context        *CallContext    `json:"context,omitempty"`
}

// Caller is core.tool.call's caller object; Type is one of the Actor*
// constants.
type Caller struct {
	Type string `json:"type"`
	ID   string `json:"id"`
}

// CallContext is core.tool.call's non-secret context object.
type CallContext struct {
	ProjectRoot   string          `json:"project_root,omitempty"`
	ResourcePaths []string        `json:"resource_paths,omitempty"`
	UI            json.RawMessage `json:"ui,omitempty"`
}

// Stream channels of agent.tool.stream (§4.3.2).
const (
	ChannelStdout        = "stdout"
	ChannelStderr        = "stderr"
	ChannelLog           = "log"
	ChannelPartialResult = "partial_result"
	ChannelStatus        = "status"
)

// ToolStream is the payload of agent.tool.stream (§4.3.2). Seq starts at 1
// and increases per call.
type ToolStream struct {
	CallID  string     `json:"call_id"`
	Seq     int64      `json:"seq"`
	Channel string     `json:"channel"`
	Data    StreamData `json:"data"`
	Done    bool       `json:"done,omitempty"`
}

// StreamData is agent.tool.stream's data: Text for stdout, stderr, log and
// status; JSON for partial_result.
type StreamData struct {
	Text string          `json:"text,omitempty"`
	JSON json.RawMessage `json:"json,omitempty"`
}

// Result statuses of agent.tool.result (§4.3.3).
const (
	StatusSucceeded = "succeeded"
	StatusFailed    = "failed"
	StatusCanceled  = "canceled"
)

// ToolResult is the payload of agent.tool.result (§4.3.3), exactly one per
// call_id. StartedAt and FinishedAt are RFC3339 strings as sent.
type ToolResult struct {
	CallID     string          `json:"call_id"`
	Status     string          `json:"status"`
	Output     json.RawMessage `json:"output,omitempty"`
	Error      *Error          `json:"error,omitempty"`
	StartedAt  string          `json:"started_at,omitempty"`
	FinishedAt string          `json:"finished_at,omitempty"`
	Metrics    json.RawMessage `json:"metrics,omitempty"`
}

// ToolCancel is the payload of core.tool.cancel (§4.4.1).
type ToolCancel struct {
	CallID     string `json:"call_id"`
	Reason     string `json:"reason,omitempty"`
	DeadlineMS int64  `json:"deadline_ms,omitempty"`
}

// ToolCancelAck is the payload of agent.tool.cancel_ack (§4.4.2).
type ToolCancelAck struct {
	CallID   string `json:"call_id"`
	Accepted bool   `json:"accepted"`
	Note     string `json:"note,omitempty"`
}

// Health statuses of agent.heartbeat (§4.5.1).
const (
	HealthOK        = "ok"
	HealthDegraded  = "degraded"
	HealthUnhealthy = "unhealthy"
)

// Heartbeat is the payload of agent.heartbeat (§4.5.1).
type Heartbeat struct {
	SessionID     string          `json:"session_id"`
	UptimeMS      int64           `json:"uptime_ms"`
	InflightCalls int             `json:"inflight_calls"`
	Status        string          `json:"status"`
	Details       json.RawMessage `json:"details,omitempty"`
}
