package inbox

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/plexus-gw/plexus"
	"github.com/plexus-gw/plexus/auth"
)

// Narrowing is what an edited decision file asks to approve, per
// capability: the request as the gateway put it up, less whatever the owner
// took out. It never holds more than was asked; [Changes] refuses that.
type Narrowing struct {
	PendingID string
	// Capabilities lists the capabilities kept, in the request's order, when
	// the owner removed some; nil means all were kept.
	Capabilities []string
	// Items holds one entry per kept capability, in the request's order,
	// with what the owner approves of it.
	Items []NarrowedItem
	// Reason is the owner's `reason:`, cleaned as the gateway cleans it.
	Reason string
}

// NarrowedItem is what is approved of one capability.
type NarrowedItem struct {
	CapabilityID string
	Verbs        []plexus.Verb
	TrustWindow  plexus.TrustWindow
	Constraint   *plexus.ScopeConstraint
	// Which of the three the owner narrowed.
	VerbsNarrowed, WindowNarrowed, ConstraintNarrowed bool
}

// Narrowed reports whether the owner narrowed anything at all.
func (n Narrowing) Narrowed() bool {
	if n.Capabilities != nil {
		return true
	}
	return slices.ContainsFunc(n.Items, func(it NarrowedItem) bool {
		return it.VerbsNarrowed || it.WindowNarrowed || it.ConstraintNarrowed
	})
}

// Widening is one edit [Changes] refuses.
type Widening struct {
	// Capability is the capability the edit is in, "" for the file's own
	// fields; Field is the frontmatter key ("id", "capabilities", "window").
	Capability string
	Field      string
	Problem    string
	// Forged is true when the file claims to be a decision other than the
	// one the gateway put up (its id, type, agent or trace id differ): such
	// a file is rejected, never sent back for another try.
	Forged bool
}

// WideningError lists every edit of a decision file that Plexus refuses:
// what would grant more than was asked, what changes which decision the file
// is, and what cannot be narrowed from a file. Nothing of such a file is
// applied.
type WideningError struct {
	Widenings []Widening
}

func (e *WideningError) Error() string {
	parts := make([]string, len(e.Widenings))
	for i, w := range e.Widenings {
		parts[i] = w.String()
	}
	return "the edit is refused: " + strings.Join(parts, "; ")
}

// String says where and what, e.g. "portal.notes.write, window: 7d is
// longer than the 1d asked".
func (w Widening) String() string {
	if w.Capability != "" {
		return w.Capability + ", " + w.Field + ": " + w.Problem
	}
	return w.Field + ": " + w.Problem
}

// Forged reports whether any refused edit makes the file a different
// decision than the one the gateway put up.
func (e *WideningError) Forged() bool {
	return slices.ContainsFunc(e.Widenings, func(w Widening) bool { return w.Forged })
}

// Note is the refusal written for the owner, one statement per line, for
// [RenderOptions.Note].
func (e *WideningError) Note() string {
	lines := []string{"this edit was refused, so nothing was approved:"}
	if e.Forged() {
		lines[0] = "this file does not match the decision Plexus put up, so nothing was approved:"
	}
	for _, w := range e.Widenings {
		lines = append(lines, w.String())
	}
	return strings.Join(lines, "\n")
}

// ErrNoFile is returned by [Changes] when there is no edited file to read.
var ErrNoFile = errors.New("no decision file")

// Changes compares the decision file the owner edited with the decision the
// gateway put up (original, from the journal, never from a file) and returns
// the narrowing the edits ask for, or a [*WideningError] naming every edit
// that would widen the request or forge another decision. An unchanged file
// yields a Narrowing with nothing narrowed.
//
// Honored: fewer capabilities (not none), fewer verbs, a window no longer
// than asked (execute's once cannot grow), a constraint that narrows per
// [auth.Narrows]. Refused: a capability or verb added, a longer window, a
// constraint loosened or removed, workflow members edited, and a different
// id, type, agent or trace id (forged). Everything else in the file (state,
// times, provenance, sensitivity, purpose, bundle) is the gateway's and is
// ignored. Changes decides nothing: the caller applies the result through
// the gateway's Decide, which checks the narrowing again.
func Changes(original plexus.Pending, edited *File) (Narrowing, error) {
	if edited == nil {
		return Narrowing{}, ErrNoFile
	}
	var ws []Widening
	forged := func(field, was, now string) {
		ws = append(ws, Widening{Field: field, Forged: true,
			Problem: fmt.Sprintf("the file says %q, but Plexus put this decision up with %q", now, was)})
	}
	if edited.ID != original.ID {
		forged("id", original.ID, edited.ID)
	}
	if edited.Type != original.Kind {
		forged("type", original.Kind, edited.Type)
	}
	if edited.Agent != original.AgentID {
		forged("agent", original.AgentID, edited.Agent)
	}
	if edited.TraceID != "" && edited.TraceID != original.TraceID {
		forged("trace_id", original.TraceID, edited.TraceID)
	}

	n := Narrowing{PendingID: original.ID, Reason: auth.CleanPurpose(edited.Reason)}
	kept := map[string]FileCapability{}
	for _, c := range edited.Capabilities {
		if !slices.ContainsFunc(original.Items, func(it plexus.PendingItem) bool { return it.CapabilityID == c.ID }) {
			ws = append(ws, Widening{Capability: c.ID, Field: "capabilities", Problem: "was not requested"})
			continue
		}
		kept[c.ID] = c
	}
	for _, it := range original.Items {
		c, ok := kept[it.CapabilityID]
		if !ok {
			continue
		}
		item, w := narrowItem(it, c)
		ws = append(ws, w...)
		n.Items = append(n.Items, item)
	}
	if len(n.Items) < len(original.Items) {
		n.Capabilities = make([]string, len(n.Items))
		for i, it := range n.Items {
			n.Capabilities[i] = it.CapabilityID
		}
	}
	if len(original.Items) > 0 && len(edited.Capabilities) == 0 {
		ws = append(ws, Widening{Field: "capabilities",
			Problem: "every capability was removed; to refuse them all, move the file to ../rejected/ instead"})
	}
	if len(ws) > 0 {
		return Narrowing{}, &WideningError{Widenings: ws}
	}
	return n, nil
}

// narrowItem compares one kept capability with what was asked of it.
func narrowItem(asked plexus.PendingItem, c FileCapability) (NarrowedItem, []Widening) {
	var ws []Widening
	askedVerbs := plexus.NormalizeVerbs(asked.Verbs)
	item := NarrowedItem{CapabilityID: c.ID, Verbs: plexus.NormalizeVerbs(c.Verbs),
		TrustWindow: asked.TrustWindow, Constraint: asked.Constraint}

	for _, v := range item.Verbs {
		if !slices.Contains(askedVerbs, v) {
			ws = append(ws, Widening{Capability: c.ID, Field: "verbs", Problem: fmt.Sprintf("%s was not requested (asked: %s)", v, verbList(askedVerbs))})
		}
	}
	item.VerbsNarrowed = len(item.Verbs) < len(askedVerbs)

	if !sameWindow(c.Window, asked.TrustWindow) {
		was, _ := FormatWindow(asked.TrustWindow)
		now, _ := FormatWindow(c.Window)
		if auth.Narrower(c.Window, asked.TrustWindow) {
			item.TrustWindow, item.WindowNarrowed = c.Window, true
		} else {
			ws = append(ws, Widening{Capability: c.ID, Field: "window", Problem: fmt.Sprintf("%s is longer than the %s asked", now, was)})
		}
	}

	if !jsonEqual(c.Constraint, asked.Constraint) {
		if auth.Narrows(c.Constraint, asked.Constraint) {
			item.Constraint, item.ConstraintNarrowed = c.Constraint, true
		} else {
			ws = append(ws, Widening{Capability: c.ID, Field: "constraint",
				Problem: "it admits calls the constraint asked for would not (a constraint may gain rules, or keep fewer paths or values, never lose any)"})
		}
	}

	if !sameMembers(c.Members, asked.Members) {
		ws = append(ws, Widening{Capability: c.ID, Field: "members",
			Problem: "a workflow's members are what it calls and cannot be edited; remove the workflow capability instead"})
	}
	return item, ws
}

func sameMembers(a, b []plexus.TokenScope) bool {
	return slices.EqualFunc(a, b, func(x, y plexus.TokenScope) bool {
		return x.ID == y.ID && slices.Equal(plexus.NormalizeVerbs(x.Verbs), plexus.NormalizeVerbs(y.Verbs)) &&
			jsonEqual(x.Constraint, y.Constraint)
	})
}

// jsonEqual compares constraints as they travel (1 and 1.0 are equal).
func jsonEqual(a, b *plexus.ScopeConstraint) bool {
	if a == nil || b == nil {
		return a == b
	}
	x, err1 := json.Marshal(a)
	y, err2 := json.Marshal(b)
	return err1 == nil && err2 == nil && string(x) == string(y)
}
