package plexus

import (
	"encoding/json"
	"time"
)

// SessionHeader is the header that identifies a handshake session.
const SessionHeader = "X-Plexus-Session"

// ConnectionKeyHeader is the alternative header existing admin clients send
// the connection-key in.
const ConnectionKeyHeader = "X-Plexus-Connection-Key"

// ViaHeader lets an owner's client say which channel a decision came
// through ("cli"); absent, the admin API is recorded.
const ViaHeader = "X-Plexus-Via"

// Credential prefixes. They make a leaked secret recognisable to scanners
// and to the redaction pass.
const (
	PrefixConnectionKey = "plx_live_"
	PrefixPAT           = "plx_agent_"
	PrefixEnrollCode    = "plx_enroll_"
)

// GatewayInfo identifies the gateway instance.
type GatewayInfo struct {
	Name     string `json:"name"`
	Version  string `json:"version"`
	Protocol string `json:"protocol"`
	BaseURL  string `json:"baseUrl"`
	Instance string `json:"instance,omitempty"`
}

// RequestShapeHint tells a cold agent the exact request to send.
type RequestShapeHint struct {
	URL     string            `json:"url"`
	Method  string            `json:"method"`
	Auth    string            `json:"auth"`
	Headers map[string]string `json:"headers,omitempty"`
	Body    map[string]any    `json:"body"`
}

// AuthRequestShapes holds the request shapes of the three endpoints a cold
// integrator would otherwise reverse-engineer.
type AuthRequestShapes struct {
	Handshake    RequestShapeHint `json:"handshake"`
	GrantRequest RequestShapeHint `json:"grantRequest"`
	Invoke       RequestShapeHint `json:"invoke"`
}

// EnrollmentAdvertisement describes the one-time code → PAT redeem.
type EnrollmentAdvertisement struct {
	URL        string            `json:"url"`
	Method     string            `json:"method"`
	Auth       string            `json:"auth"`
	Body       map[string]string `json:"body"`
	Success    map[string]string `json:"success"`
	ErrorCodes []ErrorCode       `json:"errorCodes"`
	PATStorage string            `json:"patStorage"`
}

// AuthAdvertisement is the auth block of .well-known: where every endpoint
// lives. It carries no secret, and no connection-key field at all.
type AuthAdvertisement struct {
	EnrollmentURL      string                   `json:"enrollmentUrl"`
	Enrollment         *EnrollmentAdvertisement `json:"enrollment,omitempty"`
	HandshakeURL       string                   `json:"handshakeUrl"`
	GrantsURL          string                   `json:"grantsUrl"`
	GrantRequestURL    string                   `json:"grantRequestUrl"`
	GrantRequestMethod string                   `json:"grantRequestMethod"`
	SessionHeader      string                   `json:"sessionHeader"`
	RefreshURL         string                   `json:"refreshUrl"`
	RevokeURL          string                   `json:"revokeUrl"`
	GrantStatusURL     string                   `json:"grantStatusUrl"`
	InvokeURL          string                   `json:"invokeUrl"`
	ManifestURL        string                   `json:"manifestUrl"`
	EventsURL          string                   `json:"eventsUrl"`
	GrantsListURL      string                   `json:"grantsListUrl"`
	TokenScheme        string                   `json:"tokenScheme"`
	RequestShapes      *AuthRequestShapes       `json:"requestShapes,omitempty"`
}

// WellKnownDocument is the body of GET /.well-known/plexus.
type WellKnownDocument struct {
	Gateway      GatewayInfo       `json:"gateway"`
	Capabilities []Summary         `json:"capabilities"`
	Auth         AuthAdvertisement `json:"auth"`
}

// EnrollRequest is the body of POST /agents/enroll.
type EnrollRequest struct {
	Code string `json:"code"`
}

// EnrollResponse returns the PAT exactly once.
type EnrollResponse struct {
	PAT     string `json:"pat"`
	AgentID string `json:"agentId"`
}

// ClientInfo is free-form client metadata sent at handshake. AgentID is
// metadata only on the PAT path: the verified id always wins.
type ClientInfo struct {
	Name    string `json:"name,omitempty"`
	Version string `json:"version,omitempty"`
	AgentID string `json:"agentId,omitempty"`
}

// HandshakeRequest is the body of POST /link/handshake. ConnectionKey is set
// only on the admin path.
type HandshakeRequest struct {
	ConnectionKey string      `json:"connectionKey,omitempty"`
	Client        *ClientInfo `json:"client,omitempty"`
}

// Manifest is the full, callable view of the machine for one session.
type Manifest struct {
	Gateway   GatewayInfo `json:"gateway"`
	SessionID string      `json:"sessionId"`
	ExpiresAt time.Time   `json:"expiresAt"`
	Revision  int64       `json:"revision"`
	Entries   []Entry     `json:"entries"`
}

// HandshakeResponse is the body of a successful handshake.
type HandshakeResponse struct {
	SessionID string    `json:"sessionId"`
	ExpiresAt time.Time `json:"expiresAt"`
	GrantsURL string    `json:"grantsUrl"`
	Manifest  Manifest  `json:"manifest"`
}

// ManifestResponse is the body of GET /manifest.
type ManifestResponse struct {
	Manifest Manifest `json:"manifest"`
}

// GrantContextRef references in-scope task context attached to a bundle.
type GrantContextRef struct {
	Kind     string `json:"kind"`
	SkillID  string `json:"skillId,omitempty"`
	Label    string `json:"label,omitempty"`
	Markdown string `json:"markdown,omitempty"`
}

// BundleRequest is the Mode-2 task-bundle envelope of PUT /grants: the
// request is one named task whose risky members pend together.
type BundleRequest struct {
	Name    string            `json:"name"`
	AgentID string            `json:"agentId,omitempty"`
	Context []GrantContextRef `json:"context,omitempty"`
}

// GrantRequest is the body of PUT /grants.
type GrantRequest struct {
	SessionID string                   `json:"sessionId"`
	Grants    map[string]GrantDecision `json:"grants"`
	Bundle    *BundleRequest           `json:"bundle,omitempty"`
}

// Declined is a requested capability terminally declined by a call.
type Declined struct {
	ID     string `json:"id"`
	Reason string `json:"reason"`
}

// ScopedToken is a minted token with its scopes echoed for convenience.
type ScopedToken struct {
	Token          string            `json:"token"`
	JTI            string            `json:"jti"`
	ExpiresAt      time.Time         `json:"expiresAt"`
	Scopes         []TokenScope      `json:"scopes"`
	Transitive     []TransitiveGrant `json:"transitive,omitempty"`
	GrantExpiresAt *time.Time        `json:"grantExpiresAt,omitempty"`
	TrustWindow    *TrustWindow      `json:"trustWindow,omitempty"`
	Declined       []Declined        `json:"declined,omitempty"`
}

// GrantPendingResponse is the PUT /grants answer when a decision waits for
// the owner.
type GrantPendingResponse struct {
	Status           ErrorCode          `json:"status"`
	PendingID        string             `json:"pendingId"`
	Pending          []string           `json:"pending"`
	StatusURL        string             `json:"statusUrl"`
	PartialToken     *ScopedToken       `json:"partialToken,omitempty"`
	PendingNarration []PendingNarration `json:"pendingNarration,omitempty"`
	Declined         []Declined         `json:"declined,omitempty"`
}

// Pending-decision states.
const (
	StatePending   = "pending"
	StateApproved  = "approved"
	StateDenied    = "denied"
	StateExpired   = "expired"
	StateWithdrawn = "withdrawn"
)

// GrantStatusResponse is the body of GET /grants/status.
type GrantStatusResponse struct {
	PendingID        string             `json:"pendingId"`
	State            string             `json:"state"`
	Capabilities     []string           `json:"capabilities"`
	Token            *ScopedToken       `json:"token,omitempty"`
	PendingNarration []PendingNarration `json:"pendingNarration,omitempty"`
	Reason           string             `json:"reason,omitempty"`
}

// RefreshRequest is the body of POST /grants/refresh.
type RefreshRequest struct {
	SessionID string `json:"sessionId"`
	JTI       string `json:"jti"`
}

// RefreshResponse is a fresh token bounded by the grant's own window.
type RefreshResponse struct {
	Token          string       `json:"token"`
	JTI            string       `json:"jti"`
	ExpiresAt      time.Time    `json:"expiresAt"`
	Scopes         []TokenScope `json:"scopes"`
	GrantExpiresAt time.Time    `json:"grantExpiresAt"`
}

// RevokeRequest selects by JTI, or by AgentID and CapabilityID together.
type RevokeRequest struct {
	JTI          string `json:"jti,omitempty"`
	AgentID      string `json:"agentId,omitempty"`
	CapabilityID string `json:"capabilityId,omitempty"`
	Reason       string `json:"reason,omitempty"`
}

// RevokeResponse reports what a revoke did.
type RevokeResponse struct {
	OK           bool     `json:"ok"`
	RevokedJTIs  []string `json:"revokedJtis"`
	GrantRemoved bool     `json:"grantRemoved"`
	AuditID      string   `json:"auditId"`
}

// GrantsListResponse is the body of GET /grants.
type GrantsListResponse struct {
	Grants []StandingGrant `json:"grants"`
}

// InvokeRequest is the body of POST /invoke.
type InvokeRequest struct {
	ID             string         `json:"id"`
	Input          map[string]any `json:"input,omitempty"`
	IdempotencyKey string         `json:"idempotencyKey,omitempty"`
}

// InvokeResponse is the one result contract of /invoke, for success and for
// every denial. AuditID is "" only for edge denials that fail before the
// pipeline audits.
type InvokeResponse struct {
	ID        string          `json:"id"`
	OK        bool            `json:"ok"`
	Output    any             `json:"output,omitempty"`
	MCPResult json.RawMessage `json:"mcpResult,omitempty"`
	Error     *ErrorBody      `json:"error,omitempty"`
	AuditID   string          `json:"auditId"`
}
