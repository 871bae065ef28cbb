package inbox

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/plexus-gw/plexus"
)

// edited renders p, lets edit change the text as an owner would in an
// editor, and parses the result.
func edited(tb testing.TB, p plexus.Pending, edit func(string) string) *File {
	tb.Helper()
	f, err := Parse([]byte(edit(mustRender(tb, p, RenderOptions{}))))
	if err != nil {
		tb.Fatal(err)
	}
	return f
}

func replace(old, new string) func(string) string {
	return func(s string) string {
		if !strings.Contains(s, old) {
			panic("edit: " + old + " not in the file")
		}
		return strings.Replace(s, old, new, 1)
	}
}

func same(s string) string { return s }

var (
	read  = []plexus.Verb{plexus.VerbRead}
	rw    = []plexus.Verb{plexus.VerbRead, plexus.VerbWrite}
	w7d   = plexus.TrustWindow{Kind: plexus.Window7d}
	w1d   = plexus.TrustWindow{Kind: plexus.Window1d}
	w1h   = plexus.TrustWindow{Kind: plexus.Window1h}
	w36h  = plexus.TrustWindow{Kind: plexus.WindowCustom, Ms: (36 * time.Hour).Milliseconds()}
	once  = plexus.TrustWindow{Kind: plexus.WindowOnce}
	notes = &plexus.ScopeConstraint{
		PathPrefix: &plexus.PathPrefixConstraint{Field: "path", Allow: []string{"Inbox", "Journal/2026"}},
		Match:      []plexus.ScopeMatch{{Field: "mode", Op: "in", Values: []any{"append", "create"}}},
	}
)

func items(b plexus.Pending) []NarrowedItem {
	out := make([]NarrowedItem, len(b.Items))
	for i, it := range b.Items {
		out[i] = NarrowedItem{CapabilityID: it.CapabilityID, Verbs: plexus.NormalizeVerbs(it.Verbs), TrustWindow: it.TrustWindow, Constraint: it.Constraint}
	}
	return out
}

func TestChanges(t *testing.T) {
	b := bundleFixture()
	all := items(b)
	for _, tt := range []struct {
		name string
		p    plexus.Pending
		edit func(string) string
		want Narrowing
	}{
		{"Identity", b, same, Narrowing{PendingID: pendID, Items: all}},
		{"ShorterWindow", b, replace("window: 7d", "window: 1h"), Narrowing{PendingID: pendID, Items: []NarrowedItem{
			{CapabilityID: "portal.notes.read", Verbs: read, TrustWindow: w1h, WindowNarrowed: true}, all[1], all[2]}}},
		{"WindowToOnce", b, replace("window: 1d12h", "window: once"), Narrowing{PendingID: pendID, Items: []NarrowedItem{
			all[0], {CapabilityID: "portal.notes.write", Verbs: rw, TrustWindow: once, Constraint: notes, WindowNarrowed: true}, all[2]}}},
		{"SameWindowOtherSpelling", b, replace("window: 1d12h", "window: 36h"), Narrowing{PendingID: pendID, Items: all}},
		{"VerbRemoved", b, replace("verbs: [read, write]", "verbs: [write]"), Narrowing{PendingID: pendID, Items: []NarrowedItem{
			all[0], {CapabilityID: "portal.notes.write", Verbs: []plexus.Verb{plexus.VerbWrite}, TrustWindow: w36h, Constraint: notes, VerbsNarrowed: true}, all[2]}}},
		{"CapabilityRemoved", b, replace("  - id: portal.notes.read\n    verbs: [read]\n    window: 7d\n    provenance: first-party\n    sensitivity: low\n", ""),
			Narrowing{PendingID: pendID, Capabilities: []string{"portal.notes.write", "tidy.weekly"}, Items: all[1:]}},
		{"ConstraintNarrowed", b, replace("          - Journal/2026\n", ""), Narrowing{PendingID: pendID, Items: []NarrowedItem{all[0], {
			CapabilityID: "portal.notes.write", Verbs: rw, TrustWindow: w36h, ConstraintNarrowed: true,
			Constraint: &plexus.ScopeConstraint{PathPrefix: &plexus.PathPrefixConstraint{Field: "path", Allow: []string{"Inbox"}}, Match: notes.Match},
		}, all[2]}}},
		{"ConstraintAdded", b, replace("    window: 7d\n", "    window: 7d\n    constraint: {allow: {field: name, values: [a.md]}}\n"), Narrowing{PendingID: pendID, Items: []NarrowedItem{{
			CapabilityID: "portal.notes.read", Verbs: read, TrustWindow: w7d, ConstraintNarrowed: true,
			Constraint: &plexus.ScopeConstraint{Allow: &plexus.AllowConstraint{Field: "name", Values: []string{"a.md"}}},
		}, all[1], all[2]}}},
		{"Reason", b, replace(`reason: ""`, "reason: \"not\\x1b now\""), Narrowing{PendingID: pendID, Items: all, Reason: "not now"}},
		{"GatewayFieldsIgnored", b, func(s string) string {
			for _, r := range [][2]string{{"state: pending", "state: approved"}, {"sensitivity: low", "sensitivity: high"},
				{"provenance: extension", "provenance: first-party"}, {"expires: 2026-03-14T10:26:53Z", "expires: 2099-01-01T00:00:00Z"}} {
				s = replace(r[0], r[1])(s)
			}
			return s
		}, Narrowing{PendingID: pendID, Items: all}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Changes(tt.p, edited(t, tt.p, tt.edit))
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("Changes (-want +got):\n%s", diff)
			}
			if want := tt.name != "Identity" && tt.name != "SameWindowOtherSpelling" && tt.name != "Reason" && tt.name != "GatewayFieldsIgnored"; got.Narrowed() != want {
				t.Errorf("Narrowed() = %v, want %v", got.Narrowed(), want)
			}
		})
	}
}

func TestChangesRefused(t *testing.T) {
	b := bundleFixture()
	for _, tt := range []struct {
		name   string
		p      plexus.Pending
		edit   func(string) string
		want   []Widening
		forged bool
	}{
		{"LongerWindow", b, replace("window: 1d\n", "window: 7d\n"),
			[]Widening{{Capability: "tidy.weekly", Field: "window", Problem: "7d is longer than the 1d asked"}}, false},
		{"UntilRevoked", b, replace("window: 7d", "window: until-revoked"),
			[]Widening{{Capability: "portal.notes.read", Field: "window", Problem: "until-revoked is longer than the 7d asked"}}, false},
		{"ExecuteStaysOnce", executeFixture(), replace("window: once", "window: 1h"),
			[]Widening{{Capability: "shell.run", Field: "window", Problem: "1h is longer than the once asked"}}, false},
		{"VerbAdded", b, replace("verbs: [read]\n    window: 7d", "verbs: [read, execute]\n    window: 7d"),
			[]Widening{{Capability: "portal.notes.read", Field: "verbs", Problem: "execute was not requested (asked: read)"}}, false},
		{"CapabilityAdded", b, replace("reason:", "  - {id: shell.run, verbs: [execute], window: once}\nreason:"),
			[]Widening{{Capability: "shell.run", Field: "capabilities", Problem: "was not requested"}}, false},
		{"AllRemoved", b, func(s string) string {
			start, end := strings.Index(s, "capabilities:\n"), strings.Index(s, "reason:")
			return s[:start] + "capabilities: []\n" + s[end:]
		}, []Widening{{Field: "capabilities", Problem: "every capability was removed; to refuse them all, move the file to ../rejected/ instead"}}, false},
		{"ConstraintWidened", b, replace("          - Inbox\n", "          - .\n"),
			[]Widening{{Capability: "portal.notes.write", Field: "constraint", Problem: constraintProblem}}, false},
		{"ConstraintRemoved", b, func(s string) string {
			start, end := strings.Index(s, "    constraint:\n"), strings.Index(s, "  - id: tidy.weekly")
			return s[:start] + s[end:]
		}, []Widening{{Capability: "portal.notes.write", Field: "constraint", Problem: constraintProblem}}, false},
		{"MemberRemoved", b, replace("      - id: portal.notes.write\n        verbs: [write]\n", ""),
			[]Widening{{Capability: "tidy.weekly", Field: "members", Problem: membersProblem}}, false},
		{"IDChanged", b, replace("id: "+pendID, "id: pend_01JDX3K9Q8M2V7T4R6W5Y0Z1AZ"),
			[]Widening{{Field: "id", Forged: true, Problem: `the file says "pend_01JDX3K9Q8M2V7T4R6W5Y0Z1AZ", but Plexus put this decision up with "` + pendID + `"`}}, true},
		{"AgentChanged", b, replace("agent: claude", "agent: owner"),
			[]Widening{{Field: "agent", Forged: true, Problem: `the file says "owner", but Plexus put this decision up with "claude"`}}, true},
		{"TypeChanged", b, replace("type: grant", "type: install"),
			[]Widening{{Field: "type", Forged: true, Problem: `the file says "install", but Plexus put this decision up with "grant"`}}, true},
		{"SeveralAtOnce", b, func(s string) string {
			return replace("window: 1d\n", "window: 30d\n")(replace("verbs: [write]", "verbs: [write, execute]")(s))
		}, []Widening{
			{Capability: "tidy.weekly", Field: "window", Problem: "30d is longer than the 1d asked"},
			{Capability: "tidy.weekly", Field: "members", Problem: membersProblem},
		}, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			n, err := Changes(tt.p, edited(t, tt.p, tt.edit))
			var we *WideningError
			if !errors.As(err, &we) {
				t.Fatalf("Changes = %+v, %v; want a *WideningError", n, err)
			}
			if diff := cmp.Diff(tt.want, we.Widenings); diff != "" {
				t.Errorf("Widenings (-want +got):\n%s", diff)
			}
			if we.Forged() != tt.forged {
				t.Errorf("Forged() = %v, want %v", we.Forged(), tt.forged)
			}
			if cmp.Diff(Narrowing{}, n) != "" {
				t.Errorf("a refused edit returned a narrowing: %+v", n)
			}
			if _, err := Parse([]byte(mustRender(t, tt.p, RenderOptions{Note: we.Note()}))); err != nil {
				t.Errorf("the refusal does not render into a file: %v", err)
			}
		})
	}
}

const (
	constraintProblem = "it admits calls the constraint asked for would not (a constraint may gain rules, or keep fewer paths or values, never lose any)"
	membersProblem    = "a workflow's members are what it calls and cannot be edited; remove the workflow capability instead"
)

func TestChangesNoFile(t *testing.T) {
	if _, err := Changes(grantFixture(), nil); !errors.Is(err, ErrNoFile) {
		t.Errorf("Changes(p, nil) = %v, want ErrNoFile", err)
	}
}
