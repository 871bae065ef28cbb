package plexus

import (
	"encoding/json"
	"slices"
	"time"
)

// Verb is a permission verb an entry can require and a grant can confer.
type Verb string

// The three verbs of the protocol. Default policy is default-deny and
// default-read-only: a bare "allow" grants [VerbRead] only.
const (
	VerbRead    Verb = "read"
	VerbWrite   Verb = "write"
	VerbExecute Verb = "execute"
)

// Valid reports whether v is one of the three verbs.
func (v Verb) Valid() bool { return v == VerbRead || v == VerbWrite || v == VerbExecute }

// Mutating reports whether v changes state (write or execute).
func (v Verb) Mutating() bool { return v == VerbWrite || v == VerbExecute }

// CoversVerbs reports whether have contains every verb in need.
func CoversVerbs(have, need []Verb) bool {
	for _, n := range need {
		if !slices.Contains(have, n) {
			return false
		}
	}
	return true
}

// NormalizeVerbs returns verbs de-duplicated in the canonical order
// read, write, execute. Unknown verbs are dropped; callers validate first.
func NormalizeVerbs(verbs []Verb) []Verb {
	out := make([]Verb, 0, 3)
	for _, v := range []Verb{VerbRead, VerbWrite, VerbExecute} {
		if slices.Contains(verbs, v) {
			out = append(out, v)
		}
	}
	return out
}

// EntryKind discriminates the three isomorphic entry kinds.
type EntryKind string

// Entry kinds.
const (
	KindCapability EntryKind = "capability"
	KindSkill      EntryKind = "skill"
	KindWorkflow   EntryKind = "workflow"
)

// TransportKind names the wire an entry is reached over.
type TransportKind string

// Transport kinds (§3). skill and workflow are sentinels with no external wire.
// "portal" is Plexus's first-party folder transport.
const (
	TransportLocalREST TransportKind = "local-rest"
	TransportStdio     TransportKind = "stdio"
	TransportIPC       TransportKind = "ipc"
	TransportMCP       TransportKind = "mcp"
	TransportCLI       TransportKind = "cli"
	TransportSkill     TransportKind = "skill"
	TransportWorkflow  TransportKind = "workflow"
	TransportPortal    TransportKind = "portal"
)

// Provenance is the 3-class source-class of a capability (§4d).
type Provenance string

// Provenance classes.
const (
	ProvenanceFirstParty Provenance = "first-party"
	ProvenanceManaged    Provenance = "managed"
	ProvenanceExtension  Provenance = "extension"
)

// Sensitivity is the gateway-derived risk tier used for narration.
type Sensitivity string

// Sensitivity tiers, ordered low < elevated < high.
const (
	SensitivityLow      Sensitivity = "low"
	SensitivityElevated Sensitivity = "elevated"
	SensitivityHigh     Sensitivity = "high"
)

// Rank orders sensitivities so that the maximum can be taken (workflows roll
// up their members' sensitivity, max wins).
func (s Sensitivity) Rank() int {
	switch s {
	case SensitivityLow:
		return 1
	case SensitivityElevated:
		return 2
	case SensitivityHigh:
		return 3
	}
	return 0
}

// HealthStatus is a per-source health value.
type HealthStatus string

// Health values.
const (
	HealthOK          HealthStatus = "ok"
	HealthDegraded    HealthStatus = "degraded"
	HealthUnavailable HealthStatus = "unavailable"
	HealthUnknown     HealthStatus = "unknown"
)

// Health is the per-source health snapshot stamped onto entries at
// serialization time. Advisory only: it gates nothing.
type Health struct {
	Status    HealthStatus `json:"status"`
	Detail    string       `json:"detail,omitempty"`
	CheckedAt *time.Time   `json:"checkedAt,omitempty"`
	// Restarts counts the times a source that keeps a connection or a
	// process (an MCP server) re-established it since Plexus started it;
	// absent for sources that keep none.
	Restarts int `json:"restarts,omitempty"`
	// NeedsSignIn is set while a remote MCP server waits for the owner to
	// sign Plexus in to it (OAuth): Status is unavailable, Detail names the
	// command that fixes it, and nothing is retried until then.
	NeedsSignIn bool `json:"needsSignIn,omitempty"`
}

// IOSchema carries an entry's JSON Schemas verbatim (raw bytes, so an
// ingested schema is never rewritten).
type IOSchema struct {
	Input  json.RawMessage `json:"input,omitempty"`
	Output json.RawMessage `json:"output,omitempty"`
}

// SkillRef is a back-link from a capability to a skill entry that teaches it.
type SkillRef struct {
	ID    string `json:"id"`
	Label string `json:"label"`
}

// WorkflowMember is one ordered member of a workflow entry: the member id and
// the maximum verbs the workflow may exercise on it.
type WorkflowMember struct {
	ID    string `json:"id"`
	Verbs []Verb `json:"verbs"`
}

// SkillBody is the body of a skill entry.
type SkillBody struct {
	Format   string `json:"format"`
	Markdown string `json:"markdown,omitempty"`
	Ref      string `json:"ref,omitempty"`
}

// MCPPassthrough is the verbatim MCP provenance of an ingested entry.
type MCPPassthrough struct {
	ServerID        string          `json:"serverId"`
	ProtocolVersion string          `json:"protocolVersion"`
	Primitive       string          `json:"primitive"`
	OriginName      string          `json:"originName"`
	Raw             json.RawMessage `json:"raw"`
}

// Entry is the canonical self-describe entry (CapabilityEntry): capability,
// skill or workflow, discriminated by Kind.
type Entry struct {
	ID        string           `json:"id"`
	Source    string           `json:"source"`
	Kind      EntryKind        `json:"kind"`
	Label     string           `json:"label"`
	Describe  string           `json:"describe"`
	IO        *IOSchema        `json:"io,omitempty"`
	Grants    []Verb           `json:"grants"`
	Transport TransportKind    `json:"transport"`
	Skills    []SkillRef       `json:"skills,omitempty"`
	Members   []WorkflowMember `json:"members,omitempty"`
	Body      *SkillBody       `json:"body,omitempty"`
	MCP       *MCPPassthrough  `json:"mcp,omitempty"`

	Provenance             Provenance     `json:"provenance,omitempty"`
	Sensitivity            Sensitivity    `json:"sensitivity,omitempty"`
	RecommendedTrustWindow *TrustWindow   `json:"recommendedTrustWindow,omitempty"`
	Standing               *bool          `json:"standing,omitempty"`
	Health                 *Health        `json:"health,omitempty"`
	Version                string         `json:"version,omitempty"`
	Extras                 map[string]any `json:"extras,omitempty"`

	// Route is transport-private routing configuration (a portal's root, a
	// cli argv template, …). Only the owning transport reads it; it is never
	// serialized to an agent, the manifest, .well-known or the journal.
	Route json.RawMessage `json:"-"`
}

// Summary is the .well-known projection of an entry: enough to window-shop,
// not enough to call (no schemas, no skill bodies, no mcp.raw).
type Summary struct {
	ID                     string        `json:"id"`
	Source                 string        `json:"source"`
	Kind                   EntryKind     `json:"kind"`
	Label                  string        `json:"label"`
	Summary                string        `json:"summary"`
	Grants                 []Verb        `json:"grants"`
	Transport              TransportKind `json:"transport"`
	Provenance             Provenance    `json:"provenance,omitempty"`
	Sensitivity            Sensitivity   `json:"sensitivity,omitempty"`
	RecommendedTrustWindow *TrustWindow  `json:"recommendedTrustWindow,omitempty"`
	Health                 *Health       `json:"health,omitempty"`
}

// Summarize projects e to its .well-known summary. The summary text is the
// first sentence of Describe, capped at 160 characters.
func (e Entry) Summarize() Summary {
	return Summary{
		ID: e.ID, Source: e.Source, Kind: e.Kind, Label: e.Label,
		Summary: firstSentence(e.Describe, 160), Grants: e.Grants, Transport: e.Transport,
		Provenance: e.Provenance, Sensitivity: e.Sensitivity,
		RecommendedTrustWindow: e.RecommendedTrustWindow, Health: e.Health,
	}
}

func firstSentence(s string, max int) string {
	r := []rune(s)
	for i, c := range r {
		if c == '.' && (i+1 == len(r) || r[i+1] == ' ' || r[i+1] == '\n') {
			r = r[:i+1]
			break
		}
	}
	if len(r) > max {
		return string(r[:max-1]) + "…"
	}
	return string(r)
}
