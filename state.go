package plexus

import (
	"context"
	"encoding/json"
	"errors"
	"time"
)

// ErrNotFound is returned by state lookups that find nothing.
var ErrNotFound = errors.New("not found")

// Agent is an enrolled (or connected, not yet enrolled) agent identity.
type Agent struct {
	ID        string    `json:"agentId"`
	Label     string    `json:"label,omitempty"`
	CreatedAt time.Time `json:"createdAt"`
	// PATHash is the keyed hash of the agent's PAT; empty until enrolled.
	PATHash    []byte     `json:"-"`
	EnrolledAt *time.Time `json:"enrolledAt,omitempty"`
	RevokedAt  *time.Time `json:"revokedAt,omitempty"`
}

// EnrollCode is a one-time enrollment code, stored by keyed hash only.
type EnrollCode struct {
	Hash       []byte
	AgentID    string
	CreatedAt  time.Time
	ExpiresAt  time.Time
	ConsumedAt *time.Time
	TraceID    string
}

// SessionKind is how a session was bootstrapped.
type SessionKind string

// Session kinds: under a PAT, under the connection-key, or anonymous.
const (
	SessionAgent SessionKind = "agent"
	SessionAdmin SessionKind = "admin"
	SessionAnon  SessionKind = "anon"
)

// Session is a handshake session.
type Session struct {
	ID            string
	AgentID       string
	Kind          SessionKind
	ClientName    string
	ClientVersion string
	CreatedAt     time.Time
	ExpiresAt     time.Time
	RevokedAt     *time.Time
	// KeyEpoch is the connection-key generation an admin session was opened
	// under; rotating the key ends every admin session of older epochs.
	KeyEpoch int64
}

// Live reports whether s can still be used at now.
func (s *Session) Live(now time.Time) bool {
	return s.RevokedAt == nil && now.Before(s.ExpiresAt)
}

// Grant is a persisted grant: the standing-grant ledger row plus bookkeeping.
// One live grant exists per (agent, capability); a newer approval replaces it.
type Grant struct {
	ID string
	StandingGrant
	PendingID string
	TraceID   string
	RevokedAt *time.Time
	// UsedAt is set when a once grant has served its single invocation.
	UsedAt *time.Time
}

// Live reports whether g can authorize a call at now.
func (g *Grant) Live(now time.Time) bool {
	if g.RevokedAt != nil || g.UsedAt != nil {
		return false
	}
	if !g.Standing {
		return true // a once grant lives until used or revoked
	}
	return now.Before(g.ExpiresAt)
}

// TokenRecord is the jti registry row of a minted token. The token string
// itself is never stored.
type TokenRecord struct {
	JTI            string
	AgentID        string
	SessionID      string
	Scopes         []TokenScope
	IssuedAt       time.Time
	ExpiresAt      time.Time
	GrantExpiresAt time.Time
	RevokedAt      *time.Time
	RevokeReason   string
	TraceID        string
}

// Pending-decision kinds.
const (
	PendingGrant     = "grant"
	PendingExtension = "extension"
	PendingInstall   = "install"
	// PendingDefinition is an ingested definition (an MCP tool) that changed
	// after the owner added its server: held out until approved.
	PendingDefinition = "definition"
	// PendingSignIn is a remote MCP server that wants Plexus to sign in to
	// it (OAuth). Plexus puts it up itself, never an agent: approving it
	// starts the sign-in.
	PendingSignIn = "signin"
)

// PendingItem is one capability a pending grant decision covers.
type PendingItem struct {
	CapabilityID string           `json:"capabilityId"`
	Verbs        []Verb           `json:"verbs"`
	TrustWindow  TrustWindow      `json:"trustWindow"`
	Constraint   *ScopeConstraint `json:"constraint,omitempty"`
	Provenance   Provenance       `json:"provenance"`
	Sensitivity  Sensitivity      `json:"sensitivity"`
	// Members are the synthesized scopes a workflow item brings.
	Members []TokenScope `json:"members,omitempty"`
}

// Pending is a decision waiting for the owner (or decided: State says which).
type Pending struct {
	ID        string             `json:"id"`
	Kind      string             `json:"kind"`
	AgentID   string             `json:"agentId"`
	SessionID string             `json:"sessionId"`
	State     string             `json:"state"`
	CreatedAt time.Time          `json:"createdAt"`
	ExpiresAt time.Time          `json:"expiresAt"`
	DecidedAt *time.Time         `json:"decidedAt,omitempty"`
	DecidedBy string             `json:"decidedBy,omitempty"`
	Via       string             `json:"via,omitempty"`
	Reason    string             `json:"reason,omitempty"`
	Items     []PendingItem      `json:"items"`
	Narration []PendingNarration `json:"pendingNarration,omitempty"`
	// Purpose is the agent's free text: transparency only, capped at 280.
	Purpose  string         `json:"purpose,omitempty"`
	BundleID string         `json:"bundleId,omitempty"`
	Bundle   *BundleRequest `json:"bundle,omitempty"`
	TraceID  string         `json:"traceId"`
	// SameUser is true when the request came over a connection owned by the
	// owner's own OS user: that agent could move its own decision file.
	SameUser bool `json:"sameUser,omitempty"`
	// Extension is the manifest an agent asked to register (Kind
	// extension); approving it registers exactly this.
	Extension *ExtensionManifest `json:"extension,omitempty"`
	// Definition is the changed definition a Kind definition decision puts
	// up; approving it pins (and serves) exactly Definition.New.
	Definition *DefinitionChange `json:"definition,omitempty"`
	// SignIn is the sign-in a Kind signin decision asks for and, once
	// approved, how its start went.
	SignIn *SignInDecision `json:"signIn,omitempty"`
}

// DefinitionChange is an ingested entry's definition that no longer matches
// its pin: what the owner approved before (Old, OldHash) and what the
// server serves now (New, NewHash). Old and New are the server's JSON
// objects, compacted when stored (the hashes never depend on spacing).
type DefinitionChange struct {
	Source    string          `json:"source"`
	EntryID   string          `json:"entryId"`
	Primitive string          `json:"primitive"`
	Name      string          `json:"name"`
	OldHash   string          `json:"oldHash"`
	NewHash   string          `json:"newHash"`
	Old       json.RawMessage `json:"old"`
	New       json.RawMessage `json:"new"`
}

// Pin is the definition of an ingested entry the owner accepted (by adding
// its server, or by approving a change): served while the server's
// definition hashes the same.
type Pin struct {
	Source     string
	EntryID    string
	Hash       string
	Definition json.RawMessage
	PendingID  string // the approval that set it; "" when pinned on adding the server
	PinnedAt   time.Time
}

// Decision-file folders under PLEXUS_HOME (docs/files-as-api.md).
const (
	FolderInbox    = "inbox"
	FolderActive   = "active"
	FolderRejected = "rejected"
	FolderArchive  = "archive"
)

// DecisionFile records the file the daemon last wrote for a decision: where
// and with which sha256. A file whose sum differs is the owner's edit and is
// never overwritten. Folder is "" once the owner deleted a decided file, so
// that it is not written again.
type DecisionFile struct {
	PendingID string
	Folder    string
	Sum       string
	// Prev are the copies this write replaced and the daemon removes right
	// after recording it: a crash in between leaves one behind, and this is
	// how the next look knows it for the daemon's own leftover.
	Prev      []FilePlace
	WrittenAt time.Time
}

// FilePlace is one copy of a decision file: its folder and sha256.
type FilePlace struct {
	Folder string `json:"folder"`
	Sum    string `json:"sum"`
}

// SourceConfig is an owner-configured source persisted across restarts.
type SourceConfig struct {
	ID         string          `json:"id"`
	Kind       string          `json:"kind"`
	Provenance Provenance      `json:"provenance"`
	Config     json.RawMessage `json:"config"`
	CreatedAt  time.Time       `json:"createdAt"`
}

// SourceKindExtension is the source kind of a registered extension: its
// config is the manifest.
const SourceKindExtension = "extension"

// Store is the durable state behind the gateway. Every state transition runs
// in one Update together with the activity rows that record it, so the two
// commit or roll back together.
//
// Update serializes writers (one writer connection, BEGIN IMMEDIATE). When
// durable is true the commit is synchronous=FULL: use it for decisions,
// grants and revocations, anything acknowledged to someone. Concurrent
// non-durable updates may share one commit (group commit), each fn isolated
// so that its failure rolls back only its own work; a fn may therefore run
// on another caller's goroutine and must not wait on another Update caller.
// Update returns only after the commit that holds fn's work. View runs on a
// reader connection and never blocks the writer.
type Store interface {
	Update(ctx context.Context, durable bool, fn func(tx StateTx) error) error
	View(ctx context.Context, fn func(tx StateTx) error) error
}

// StateTx is the set of state operations one transaction offers. Lookups
// return an error wrapping [ErrNotFound] when nothing matches. Calling a
// mutating method inside View returns an error.
type StateTx interface {
	ActivityRecorder
	AgentState
	SessionState
	GrantState
	TokenState
	PendingState
	DecisionFileState
	MetaState
	PinState
	InvocationState
}

// ActivityRecorder appends to the activity journal and the event log.
type ActivityRecorder interface {
	// Record appends a, redacting its payload and chaining its hash, and sets
	// a.ID, a.PrevHash and a.Hash. If the row cannot be written the whole
	// transaction fails: nothing happens without its audit row.
	Record(a *Activity) error
	// Publish persists e (Data only, never Secret) for Last-Event-ID replay
	// and sets e.ID. The caller delivers it live after the commit.
	Publish(e *Event) error
}

// AgentState holds agents and their enrollment codes.
type AgentState interface {
	PutAgent(a *Agent) error
	Agent(id string) (*Agent, error)
	AgentByPATHash(hash []byte) (*Agent, error)
	Agents() ([]Agent, error)
	PutEnrollCode(c *EnrollCode) error
	EnrollCode(hash []byte) (*EnrollCode, error)
	// ConsumeEnrollCode marks the code consumed at now if it was not yet;
	// it reports false when another redemption got there first.
	ConsumeEnrollCode(hash []byte, now time.Time) (bool, error)
}

// SessionState holds handshake sessions.
type SessionState interface {
	PutSession(s *Session) error
	Session(id string) (*Session, error)
	// RevokeSessions ends every live session matching kind (and agentID when
	// non-empty; and only epochs below beforeEpoch when it is > 0) and
	// returns their ids.
	RevokeSessions(kind SessionKind, agentID string, beforeEpoch int64, now time.Time) ([]string, error)
}

// GrantState holds persisted grants.
type GrantState interface {
	// PutGrant inserts or replaces the grant for (AgentID, CapabilityID).
	PutGrant(g *Grant) error
	// Grant returns the latest grant row for (agentID, capabilityID), live or not.
	Grant(agentID, capabilityID string) (*Grant, error)
	// Grants lists grants that are neither revoked nor used nor past their
	// window at now; agentID "" lists every agent's.
	Grants(agentID string, now time.Time) ([]Grant, error)
	// GrantCount counts what Grants("", now) lists.
	GrantCount(now time.Time) (int, error)
	RevokeGrant(id string, now time.Time) error
	MarkGrantUsed(id string, now time.Time) error
}

// TokenState is the jti registry.
type TokenState interface {
	PutToken(t *TokenRecord) error
	Token(jti string) (*TokenRecord, error)
	RevokeToken(jti, reason string, now time.Time) (bool, error)
	// LiveTokens lists unrevoked, unexpired tokens of agentID (all agents when
	// empty), optionally only those carrying a scope for capabilityID or
	// belonging to sessionID.
	LiveTokens(agentID, capabilityID, sessionID string, now time.Time) ([]TokenRecord, error)
}

// PendingState holds pending decisions.
type PendingState interface {
	PutPending(p *Pending) error
	Pending(id string) (*Pending, error)
	// PendingList lists decisions in state ("" for all), oldest first.
	PendingList(state string) ([]Pending, error)
}

// DecisionFileState holds the record of each decision's file.
type DecisionFileState interface {
	DecisionFile(pendingID string) (*DecisionFile, error)
	PutDecisionFile(f *DecisionFile) error
	// DecisionFiles lists the records whose folder is one of folders.
	DecisionFiles(folders ...string) ([]DecisionFile, error)
}

// PinState holds the pinned definitions of ingested sources.
type PinState interface {
	// Pins lists source's pins, by entry id.
	Pins(source string) ([]Pin, error)
	PutPin(p *Pin) error
	// DeletePins forgets every pin of source (the server was removed).
	DeletePins(source string) error
}

// Invocation is what the journal knows of one call made with an
// idempotencyKey: the invoke.started row committed before it was dispatched
// and, once written, the row of its outcome.
type Invocation struct {
	StartedID int64
	// OutcomeID is 0 while no outcome row exists: the call is still running,
	// or the daemon stopped (or could not write to the journal) before its
	// outcome was recorded. Nobody knows then whether its effect happened.
	OutcomeID int64
	OK        bool
	ErrorCode ErrorCode // of a failed outcome
}

// InvocationState finds idempotent calls in the activity journal, which is
// their durable record: it survives a restart, unlike the responses the
// gateway remembers in memory.
type InvocationState interface {
	// Invocation returns the latest call started with keyHash (the
	// payload's idemHash) at or after since.
	Invocation(keyHash string, since time.Time) (*Invocation, error)
}

// MetaState holds small gateway-wide values (the key epoch, the revision)
// and owner-configured sources.
type MetaState interface {
	Meta(key string) (string, error)
	SetMeta(key, value string) error
	PutSource(c *SourceConfig) error
	DeleteSource(id string) error
	Sources() ([]SourceConfig, error)
}
