package inbox

import (
	"reflect"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/plexus-gw/plexus"
)

// Format is the value of every decision file's `plexus:` field: the file
// format and its version. A file without it is not a decision file, and a
// later version is refused rather than half understood.
const Format = "decision/1"

// MaxFileSize is the largest decision file [Parse] reads. A rendered file is
// a few KiB; anything near the limit was not written by Plexus.
const MaxFileSize = 256 << 10

// timeLayout is how times are written: RFC 3339, UTC, whole seconds.
const timeLayout = "2006-01-02T15:04:05Z07:00"

// File is what a decision file's frontmatter says, typed. The fields are
// documented, key by key, in docs/files-as-api.md. Times are UTC and zero
// when the file leaves them out.
type File struct {
	// Format is [Format].
	Format string
	// Problem is what Plexus could not apply the last time it read the file.
	Problem string
	// ID is the decision id ("pend_<ULID>"), the same as the file's name.
	ID string
	// Type is the kind of decision: grant, extension or install.
	Type string
	// State is the decision's state when Plexus wrote the file. Moving the
	// file decides; editing State does nothing.
	State   string
	Agent   string
	TraceID string
	Created time.Time
	Expires time.Time
	// SameUser is true when the requesting agent runs as the owner's own OS
	// user, and so could move this file itself.
	SameUser bool
	// Bundle is the name of the task a bundle request was made for, and
	// Purpose the agent's own words: both are the agent's text.
	Bundle       string
	Purpose      string
	Capabilities []FileCapability
	// Reason is the owner's reason, kept when a decision is denied.
	Reason string
	// Decided, DecidedBy and Via record a decision made (by whom, through
	// which channel: file, cli, admin-api, system).
	Decided   time.Time
	DecidedBy string
	Via       string
	// Ended says why an approved decision no longer grants anything.
	Ended string
	// Notes are the keys Plexus does not know, as the owner wrote them.
	Notes Notes
}

// Notes are frontmatter keys of the owner's own (anything Plexus does not
// know), kept in their order so that a rewritten file carries them over:
// nothing the owner wrote into a decision's fields is dropped.
type Notes struct {
	nodes []*yaml.Node // key, value, key, value, …
}

// Len is the number of notes.
func (n Notes) Len() int { return len(n.nodes) / 2 }

// Equal reports whether n and o hold the same keys and values, in order,
// however each is styled (go-cmp uses it).
func (n Notes) Equal(o Notes) bool {
	if len(n.nodes) != len(o.nodes) {
		return false
	}
	for i := range n.nodes {
		var a, b any
		if n.nodes[i].Decode(&a) != nil || o.nodes[i].Decode(&b) != nil || !reflect.DeepEqual(a, b) {
			return false
		}
	}
	return true
}

// FileCapability is one capability of a decision, as the file states it.
// The owner may narrow Verbs, Window and Constraint, or remove the whole
// capability; Provenance, Sensitivity and Members are shown for the owner's
// information and are not the owner's to change.
type FileCapability struct {
	ID          string
	Verbs       []plexus.Verb
	Window      plexus.TrustWindow
	Provenance  plexus.Provenance
	Sensitivity plexus.Sensitivity
	Constraint  *plexus.ScopeConstraint
	// Members are the scopes a workflow capability brings with it, each
	// SynthesizedFor the workflow.
	Members []plexus.TokenScope
}

// Pending is the decision as the file describes it: what a re-render needs,
// without what only the gateway knows (the session, the narration). It is
// for showing a file and for checking round trips, never for deciding: the
// journal's copy of a decision is the one that counts.
func (f *File) Pending() plexus.Pending {
	p := plexus.Pending{
		ID: f.ID, Kind: f.Type, AgentID: f.Agent, State: f.State, TraceID: f.TraceID,
		CreatedAt: f.Created, ExpiresAt: f.Expires,
		DecidedBy: f.DecidedBy, Via: f.Via, Reason: f.Reason, Purpose: f.Purpose,
	}
	if !f.Decided.IsZero() {
		t := f.Decided
		p.DecidedAt = &t
	}
	if f.Bundle != "" {
		p.Bundle = &plexus.BundleRequest{Name: f.Bundle}
	}
	for _, c := range f.Capabilities {
		p.Items = append(p.Items, plexus.PendingItem{
			CapabilityID: c.ID, Verbs: c.Verbs, TrustWindow: c.Window, Constraint: c.Constraint,
			Provenance: c.Provenance, Sensitivity: c.Sensitivity, Members: c.Members,
		})
	}
	return p
}

// Options returns the [RenderOptions] that re-render f as it was written.
func (f *File) Options() RenderOptions {
	return RenderOptions{SameUser: f.SameUser, Note: f.Problem, Ended: f.Ended, Notes: f.Notes}
}
