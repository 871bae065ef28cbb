package plexus

import (
	"encoding/json"
	"fmt"
	"time"
)

// TrustWindowKind is one of the durations a human may pick at approval.
type TrustWindowKind string

// Trust-window kinds (§4d). UntilRevoked is a far-future sentinel that only
// an explicit revoke ends; Custom carries Ms, clamped to maxTrustWindowMs.
const (
	WindowOnce         TrustWindowKind = "once"
	Window1h           TrustWindowKind = "1h"
	Window1d           TrustWindowKind = "1d"
	Window7d           TrustWindowKind = "7d"
	WindowUntilRevoked TrustWindowKind = "until-revoked"
	WindowCustom       TrustWindowKind = "custom"
)

// TrustWindow is how long a grant stands before Plexus re-asks.
type TrustWindow struct {
	Kind TrustWindowKind `json:"kind"`
	Ms   int64           `json:"ms,omitempty"`
}

// UntilRevokedHorizon is how far in the future an until-revoked grant's
// expiresAt is stamped: far enough to never matter, small enough to stay a
// valid RFC 3339 timestamp everywhere.
const UntilRevokedHorizon = 100 * 365 * 24 * time.Hour

// ScopeMatch is one value predicate inside a [ScopeConstraint]. Field is a
// dotted path into the call input. Supported ops are "eq", "prefix" and "in";
// anything else (including the reserved "regex") fails closed.
type ScopeMatch struct {
	Field   string `json:"field"`
	Op      string `json:"op"`
	Value   any    `json:"value,omitempty"`
	Values  []any  `json:"values,omitempty"`
	Pattern string `json:"pattern,omitempty"`
}

// PathPrefixConstraint confines a path-valued input field under one of Allow.
type PathPrefixConstraint struct {
	Field string   `json:"field"`
	Allow []string `json:"allow"`
}

// AllowConstraint requires an input field to equal one of Values exactly.
type AllowConstraint struct {
	Field  string   `json:"field"`
	Values []string `json:"values"`
}

// ScopeConstraint narrows a scope to calls whose input satisfies every present
// predicate (AND). It can only narrow: outside it the scope is inert and the
// call is denied grant_required. Evaluation fails closed.
type ScopeConstraint struct {
	PathPrefix *PathPrefixConstraint `json:"pathPrefix,omitempty"`
	Allow      *AllowConstraint      `json:"allow,omitempty"`
	Match      []ScopeMatch          `json:"match,omitempty"`
}

// TokenScope is one (capability × verbs) line a token carries.
type TokenScope struct {
	ID             string           `json:"id"`
	Verbs          []Verb           `json:"verbs"`
	SynthesizedFor string           `json:"synthesizedFor,omitempty"`
	Constraint     *ScopeConstraint `json:"constraint,omitempty"`
}

// TransitiveGrant surfaces the member scopes a workflow grant pulls in.
type TransitiveGrant struct {
	WorkflowID   string       `json:"workflowId"`
	MemberScopes []TokenScope `json:"memberScopes"`
}

// Decision outcomes of a grant decision on the wire.
const (
	DecisionAllow = "allow"
	DecisionDeny  = "deny"
)

// GrantDecision is one requested grant in PUT /grants. On the wire it may be
// the bare string "allow" or "deny", normalized here.
type GrantDecision struct {
	Decision    string           `json:"decision"`
	Verbs       []Verb           `json:"verbs,omitempty"`
	TrustWindow *TrustWindow     `json:"trustWindow,omitempty"`
	Purpose     string           `json:"purpose,omitempty"`
	Constraint  *ScopeConstraint `json:"constraint,omitempty"`
}

// UnmarshalJSON accepts both the object form and the "allow"/"deny" shorthand.
func (d *GrantDecision) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err == nil {
		if s != DecisionAllow && s != DecisionDeny {
			return fmt.Errorf("grant decision %q: want \"allow\" or \"deny\"", s)
		}
		*d = GrantDecision{Decision: s}
		return nil
	}
	type plain GrantDecision
	var p plain
	if err := json.Unmarshal(b, &p); err != nil {
		return err
	}
	if p.Decision != DecisionAllow && p.Decision != DecisionDeny {
		return fmt.Errorf("grant decision %q: want \"allow\" or \"deny\"", p.Decision)
	}
	*d = GrantDecision(p)
	return nil
}

// StandingGrant is one row of the standing-grant ledger (GET /grants).
type StandingGrant struct {
	AgentID          string           `json:"agentId"`
	CapabilityID     string           `json:"capabilityId"`
	Verbs            []Verb           `json:"verbs"`
	Provenance       Provenance       `json:"provenance"`
	Sensitivity      Sensitivity      `json:"sensitivity,omitempty"`
	GrantedAt        time.Time        `json:"grantedAt"`
	ExpiresAt        time.Time        `json:"expiresAt"`
	TrustWindow      TrustWindow      `json:"trustWindow"`
	Standing         bool             `json:"standing"`
	SynthesizedFor   string           `json:"synthesizedFor,omitempty"`
	Constraint       *ScopeConstraint `json:"constraint,omitempty"`
	BundleID         string           `json:"bundleId,omitempty"`
	TopLevelDisabled bool             `json:"topLevelDisabled,omitempty"`
}

// PendingNarration is the gateway-authored one-liner every agent relays for a
// pending capability, so narration cannot drift or be spoofed by agent text.
type PendingNarration struct {
	ID                 string      `json:"id"`
	Verbs              []Verb      `json:"verbs"`
	Provenance         Provenance  `json:"provenance"`
	Sensitivity        Sensitivity `json:"sensitivity"`
	DefaultTrustWindow TrustWindow `json:"defaultTrustWindow"`
	Summary            string      `json:"summary"`
	NotificationLine   string      `json:"notificationLine,omitempty"`
	// Reach is what the entry touches, for an extension's entry (nil for
	// the others, and for decisions put up before Plexus recorded it).
	Reach *Reach `json:"reach,omitempty"`
}

// Authorizer outcomes.
const (
	OutcomeAllow   = "allow"
	OutcomeDeny    = "deny"
	OutcomePending = "pending"
)

// AuthorizationContext is what the gateway hands an [Authorizer] for one
// requested grant.
type AuthorizationContext struct {
	SessionID string
	AgentID   string
	// Anonymous is true for anon:* sessions, which never hold standing trust.
	Anonymous        bool
	Entry            Entry
	RequestedVerbs   []Verb
	HasPriorApproval bool
	// RevokedTombstone is true when (agent, capability) was revoked and not
	// re-approved since: an auto-allowable read then pends instead.
	RevokedTombstone bool
}

// AuthorizationDecision is an [Authorizer]'s verdict on one requested grant.
type AuthorizationDecision struct {
	ID                     string
	Outcome                string
	Verbs                  []Verb
	Reason                 string
	Provenance             Provenance
	Sensitivity            Sensitivity
	RecommendedTrustWindow TrustWindow
}
