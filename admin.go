package plexus

import "time"

// ConnectGrant is one starting standing grant the owner hands an agent when
// connecting it. Verbs default to read.
type ConnectGrant struct {
	CapabilityID string           `json:"capabilityId"`
	Verbs        []Verb           `json:"verbs,omitempty"`
	TrustWindow  *TrustWindow     `json:"trustWindow,omitempty"`
	Constraint   *ScopeConstraint `json:"constraint,omitempty"`
}

// ConnectRequest is the body of POST /admin/api/agents/connect.
type ConnectRequest struct {
	AgentID string         `json:"agentId"`
	Label   string         `json:"label,omitempty"`
	Grants  []ConnectGrant `json:"grants,omitempty"`
}

// ConnectResponse carries the one-time enrollment code (shown once) and the
// command that redeems it.
type ConnectResponse struct {
	AgentID        string          `json:"agentId"`
	Code           string          `json:"code"`
	ExpiresAt      time.Time       `json:"expiresAt"`
	InstallCommand string          `json:"installCommand"`
	Grants         []StandingGrant `json:"grants"`
	Declined       []Declined      `json:"declined,omitempty"`
}

// AgentRevokeRequest is the body of POST /admin/api/agents/revoke.
type AgentRevokeRequest struct {
	AgentID string `json:"agentId"`
	Reason  string `json:"reason,omitempty"`
}

// AgentRevokeResponse reports what revoking an agent ended.
type AgentRevokeResponse struct {
	OK              bool     `json:"ok"`
	AgentID         string   `json:"agentId"`
	RevokedSessions []string `json:"revokedSessions"`
	RevokedJTIs     []string `json:"revokedJtis"`
	RevokedGrants   int      `json:"revokedGrants"`
}

// DecideRequest is the body of POST /admin/api/pending/{id}[/approve|/deny].
// Window, Verbs and Capabilities may only narrow what was asked.
type DecideRequest struct {
	Action       string       `json:"action,omitempty"`
	Reason       string       `json:"reason,omitempty"`
	TrustWindow  *TrustWindow `json:"trustWindow,omitempty"`
	Verbs        []Verb       `json:"verbs,omitempty"`
	Capabilities []string     `json:"capabilities,omitempty"`
}

// Decision is one decision on a pending request, whichever channel made it.
type Decision struct {
	PendingID string
	Approve   bool
	// Withdraw closes the request without granting or denying it (its file
	// was deleted from the inbox); Approve must then be false.
	Withdraw bool
	// DecidedBy names who decided (an owner name, "system"); Via the channel.
	DecidedBy string
	Via       string
	Reason    string
	// Narrowing applied before approval; each may only narrow the request.
	TrustWindow  *TrustWindow
	Verbs        []Verb
	Capabilities []string
	// Items narrows capability by capability (an owner's edit of a decision
	// file): the capabilities kept, each with its verbs, window and
	// constraint, none wider than asked. It excludes the three fields above.
	Items []ItemDecision
}

// ItemDecision is what is approved of one requested capability. Empty
// fields keep what was asked.
type ItemDecision struct {
	CapabilityID string
	Verbs        []Verb
	TrustWindow  *TrustWindow
	Constraint   *ScopeConstraint
}

// PendingListResponse is the body of GET /admin/api/pending.
type PendingListResponse struct {
	Pending []Pending `json:"pending"`
}

// KeyRotateResponse returns the new connection-key once.
type KeyRotateResponse struct {
	ConnectionKey   string   `json:"connectionKey"`
	RevokedSessions []string `json:"revokedSessions"`
	RevokedJTIs     []string `json:"revokedJtis"`
}

// IntegrationResponse is the body of GET /integration/{agentId}.
type IntegrationResponse struct {
	AgentID        string `json:"agentId"`
	BaseURL        string `json:"baseUrl"`
	InstallCommand string `json:"installCommand"`
	Enrolled       bool   `json:"enrolled"`
	Instructions   string `json:"instructions"`
}

// StatusResponse is the body of GET /admin/api/status.
type StatusResponse struct {
	Gateway  GatewayInfo    `json:"gateway"`
	Home     string         `json:"home"`
	Revision int64          `json:"revision"`
	Entries  int            `json:"entries"`
	Sources  []SourceStatus `json:"sources"`
	Agents   int            `json:"agents"`
	Pending  int            `json:"pending"`
	Grants   int            `json:"grants"`
	Started  time.Time      `json:"started"`
	// SameUserAgents are the agents seen, since the gateway started, handshaking
	// from the owner's own OS user: they can read PLEXUS_HOME and move files.
	SameUserAgents []string `json:"sameUserAgents,omitempty"`
	// Journal is set once a journal write has failed since the gateway
	// started: rows that are missing, or calls refused for want of them.
	Journal *JournalHealth `json:"journal,omitempty"`
	// Limits are the call-rate limits and the failed-credential throttle
	// in force (auth-config.json).
	Limits *Limits `json:"limits,omitempty"`
}

// JournalHealth counts the journal writes that failed since the gateway
// started, and names the latest.
type JournalHealth struct {
	WriteFailures int64      `json:"writeFailures"`
	LastFailure   *time.Time `json:"lastFailure,omitempty"`
	// LastWhat is the row or operation that failed last (an action type
	// and its target, never content).
	LastWhat string `json:"lastWhat,omitempty"`
	// MirrorFailures counts appends to the audit mirror (audit/*.jsonl)
	// that failed; AnchorFailures, writes of journal.anchor. Neither fails
	// a transaction (the database row is the authority), so the owner
	// learns of them here and from `plexus journal verify`.
	MirrorFailures int64 `json:"mirrorFailures,omitempty"`
	AnchorFailures int64 `json:"anchorFailures,omitempty"`
}

// SourceStatus is one source's line in StatusResponse.
type SourceStatus struct {
	ID         string     `json:"id"`
	Provenance Provenance `json:"provenance"`
	Entries    int        `json:"entries"`
	Health     Health     `json:"health"`
	// Held are the source's entries held out of the manifest while a changed
	// definition waits for the owner.
	Held []string `json:"held,omitempty"`
}

// JournalPruneRequest is the body of POST /admin/api/journal/prune: delete
// the activity rows written before Before (at least a day before the
// gateway's now). Force prunes rows that do not verify; the journal then
// records their problems, and verify keeps reporting them.
type JournalPruneRequest struct {
	Before time.Time `json:"before"`
	Force  bool      `json:"force,omitempty"`
}

// JournalPruneResponse says what a prune did: rows 1..Through are gone
// (Rows of them by this prune), and row Checkpoint records the last batch.
// Unverified are the problems of the rows a forced prune deleted anyway.
type JournalPruneResponse struct {
	Rows       int64            `json:"rows"`
	Through    int64            `json:"through"`
	Checkpoint int64            `json:"checkpoint"`
	Unverified []JournalProblem `json:"unverified,omitempty"`
}

// JournalProblem is one thing wrong with the journal, as `plexus journal
// verify` names it: the row (0 for the journal as a whole), a kind, and
// what was found.
type JournalProblem struct {
	ID     int64  `json:"id"`
	Kind   string `json:"kind"`
	Detail string `json:"detail"`
}
