package inbox

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"gopkg.in/yaml.v3"

	"github.com/plexus-gw/plexus"
	"github.com/plexus-gw/plexus/auth"
)

// RenderOptions are what a file says beyond the decision itself. The zero
// value renders the plain decision.
type RenderOptions struct {
	// SameUser is true when the requesting agent runs as the owner's own OS
	// user: the file then says so and warns that the agent could approve
	// its own request by moving the file.
	SameUser bool
	// Note is a problem to tell the owner about, such as an edit that was
	// refused: it is written near the top of the body and into the
	// frontmatter's `problem:` field. One statement per line.
	Note string
	// Ended says why an approved decision no longer grants anything (its
	// once grant was used, its window ended, it was revoked): written into
	// the frontmatter's `ended:` field and the body of an archived file.
	Ended string
	// Notes are the owner's own keys from the file being rewritten, written
	// after Plexus's fields.
	Notes Notes
}

// maxBundleName caps the agent-authored task name, as auth caps a purpose.
const maxBundleName = 120

// header is the YAML frontmatter a decision file starts with; field order is the
// file's key order. Keep docs/files-as-api.md in step.
type header struct {
	Plexus       string         `yaml:"plexus"`
	Problem      string         `yaml:"problem,omitempty"`
	ID           string         `yaml:"id"`
	Type         string         `yaml:"type"`
	State        string         `yaml:"state"`
	Agent        string         `yaml:"agent"`
	TraceID      string         `yaml:"trace_id,omitempty"`
	Created      stamp          `yaml:"created,omitempty"`
	Expires      stamp          `yaml:"expires,omitempty"`
	SameUser     bool           `yaml:"same_user,omitempty"`
	Bundle       string         `yaml:"bundle,omitempty"`
	Purpose      string         `yaml:"purpose,omitempty"`
	Capabilities []fmCapability `yaml:"capabilities"`
	Reason       string         `yaml:"reason"`
	Decided      stamp          `yaml:"decided,omitempty"`
	DecidedBy    string         `yaml:"decided_by,omitempty"`
	Via          string         `yaml:"via,omitempty"`
	Ended        string         `yaml:"ended,omitempty"`
	Extension    *fmExtension   `yaml:"extension,omitempty"`
	Definition   *fmDefinition  `yaml:"definition,omitempty"`
	SignIn       *fmSignIn      `yaml:"signin,omitempty"`
}

// fmDefinition is a changed definition's identity, as the owner reads it.
// Plexus's own: the journal's copy is what approving pins.
type fmDefinition struct {
	Source    string `yaml:"source"`
	Entry     string `yaml:"entry"`
	Primitive string `yaml:"primitive"`
	Name      string `yaml:"name"`
	OldHash   string `yaml:"old_sha256"`
	NewHash   string `yaml:"new_sha256"`
}

// fmExtension is an extension registration's manifest, as the owner reads
// it: the source and each entry with what it requires and what it reaches.
// It is Plexus's own: edits to it change nothing (the journal's copy is
// approved). The label is the agent's words, and named so.
type fmExtension struct {
	Source     string    `yaml:"source"`
	AgentLabel string    `yaml:"agent_label"`
	Transport  string    `yaml:"transport"`
	Entries    []fmEntry `yaml:"entries"`
	Secrets    []string  `yaml:"secrets,omitempty,flow"`
}

// fmEntry is one entry a registration adds: the verbs the gateway requires
// of it (declared: what its author wrote, when that is less; why: the
// reason) and what it reaches.
type fmEntry struct {
	ID        string   `yaml:"id"`
	Kind      string   `yaml:"kind"`
	Verbs     []string `yaml:"verbs,flow"`
	Declared  []string `yaml:"declared,omitempty,flow"`
	Why       string   `yaml:"why,omitempty"`
	Transport string   `yaml:"transport"`
	Reaches   *fmReach `yaml:"reaches,omitempty"`
}

// fmReach is a [plexus.Reach] in the file: every field one line.
type fmReach struct {
	Bin      string   `yaml:"bin,omitempty"`
	Path     string   `yaml:"path,omitempty"`
	Args     []string `yaml:"args,omitempty,flow"`
	Method   string   `yaml:"method,omitempty"`
	URL      string   `yaml:"url,omitempty"`
	Provider string   `yaml:"provider,omitempty"`
	Tool     string   `yaml:"tool,omitempty"`
	Members  []string `yaml:"members,omitempty,flow"`
	Secrets  []string `yaml:"secrets,omitempty,flow"`
	Unknown  string   `yaml:"unknown,omitempty"`
}

type fmCapability struct {
	ID          string     `yaml:"id"`
	Verbs       []string   `yaml:"verbs,flow"`
	Window      string     `yaml:"window"`
	Provenance  string     `yaml:"provenance,omitempty"`
	Sensitivity string     `yaml:"sensitivity,omitempty"`
	Constraint  any        `yaml:"constraint,omitempty"`
	Members     []fmMember `yaml:"members,omitempty"`
}

type fmMember struct {
	ID         string   `yaml:"id"`
	Verbs      []string `yaml:"verbs,flow"`
	Constraint any      `yaml:"constraint,omitempty"`
}

// stamp is a time written as a plain YAML timestamp (unquoted).
type stamp string

func (s stamp) MarshalYAML() (any, error) {
	return &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!timestamp", Value: string(s)}, nil
}

func stampOf(t time.Time) stamp {
	if t.IsZero() {
		return ""
	}
	return stamp(t.UTC().Truncate(time.Second).Format(timeLayout))
}

// Render writes p as a decision file: YAML frontmatter for the machine
// fields and a body for a person. The same p and opts give the same bytes:
// nothing depends on the time of rendering or on map order.
//
// Agent-authored text (the purpose, a bundle's task name) is stripped of
// control and bidi characters in both parts, and in the body only ever
// appears quoted under "The agent says". Render refuses a decision whose id
// is not a decision id, or whose verbs, windows or constraints are not
// valid, rather than write a file that [Parse] would refuse.
func Render(p plexus.Pending, opts RenderOptions) ([]byte, error) {
	fm, err := headerOf(p, opts)
	if err != nil {
		return nil, fmt.Errorf("render %s: %w", p.ID, err)
	}
	var doc yaml.Node
	if err := doc.Encode(fm); err != nil {
		return nil, fmt.Errorf("render %s: %w", p.ID, err)
	}
	if doc.Kind == yaml.MappingNode { // always: a header encodes to a mapping
		doc.Content = append(doc.Content, opts.Notes.nodes...)
	}
	oneLineScalars(&doc)
	var b bytes.Buffer
	b.WriteString("---\n")
	enc := yaml.NewEncoder(&b)
	enc.SetIndent(2)
	if err := enc.Encode(&doc); err != nil {
		return nil, fmt.Errorf("render %s: %w", p.ID, err)
	}
	if err := enc.Close(); err != nil {
		return nil, fmt.Errorf("render %s: %w", p.ID, err)
	}
	b.WriteString("---\n")
	writeBody(&b, p, fm, opts)
	return b.Bytes(), nil
}

// oneLineScalars makes every text value that holds a line break
// double-quoted ("a\nb"), so that each value sits on its key's line: a
// block scalar's line could otherwise read "---" and end the frontmatter.
func oneLineScalars(n *yaml.Node) {
	if n.Kind == yaml.ScalarNode && strings.Contains(n.Value, "\n") {
		n.Style = yaml.DoubleQuotedStyle
	}
	for _, c := range n.Content {
		oneLineScalars(c)
	}
}

func headerOf(p plexus.Pending, opts RenderOptions) (*header, error) {
	if !ValidID(p.ID) {
		return nil, fmt.Errorf("id %q is not a decision id (%s followed by a ULID)", p.ID, IDPrefix)
	}
	for _, f := range [][2]string{{"type", p.Kind}, {"state", p.State}, {"agent", p.AgentID},
		{"trace_id", p.TraceID}, {"decided_by", p.DecidedBy}, {"via", p.Via}} {
		if !utf8.ValidString(f[1]) {
			return nil, fmt.Errorf("%s is not valid UTF-8", f[0])
		}
	}
	fm := &header{
		Plexus: Format, Problem: cleanNote(opts.Note),
		ID: p.ID, Type: p.Kind, State: p.State, Agent: p.AgentID, TraceID: p.TraceID,
		Created: stampOf(p.CreatedAt), Expires: stampOf(p.ExpiresAt), SameUser: opts.SameUser,
		Purpose: auth.CleanPurpose(p.Purpose), Reason: auth.CleanPurpose(p.Reason),
		DecidedBy: p.DecidedBy, Via: p.Via, Ended: oneLine(opts.Ended),
		Capabilities: []fmCapability{},
	}
	if p.Bundle != nil {
		fm.Bundle = capRunes(oneLine(p.Bundle.Name), maxBundleName)
	}
	if m := p.Extension; m != nil {
		fm.Extension = extensionOf(*m, p.Narration)
	}
	if c := p.Definition; c != nil {
		fm.Definition = &fmDefinition{Source: oneLine(c.Source), Entry: oneLine(c.EntryID), Primitive: oneLine(c.Primitive),
			Name: capRunes(oneLine(c.Name), 200), OldHash: oneLine(c.OldHash), NewHash: oneLine(c.NewHash)}
	}
	if s := p.SignIn; s != nil {
		fm.SignIn = signInOf(*s)
	}
	if p.DecidedAt != nil {
		fm.Decided = stampOf(*p.DecidedAt)
	}
	for i, it := range p.Items {
		if slices.ContainsFunc(p.Items[:i], func(o plexus.PendingItem) bool { return o.CapabilityID == it.CapabilityID }) {
			return nil, fmt.Errorf("capabilities[%d]: %s is listed twice", i, it.CapabilityID)
		}
		c, err := capabilityOf(it)
		if err != nil {
			return nil, fmt.Errorf("capabilities[%d] (%s): %w", i, it.CapabilityID, err)
		}
		fm.Capabilities = append(fm.Capabilities, c)
	}
	return fm, nil
}

// extensionOf is a registration's frontmatter: each entry with the verbs
// and reach the gateway recorded in its narration.
func extensionOf(m plexus.ExtensionManifest, narration []plexus.PendingNarration) *fmExtension {
	x := &fmExtension{Source: oneLine(m.Source), AgentLabel: capRunes(oneLine(m.Label), 120), Transport: oneLine(string(m.Transport)),
		Entries: []fmEntry{}}
	for _, d := range m.Capabilities {
		t := d.Transport
		if t == "" {
			t = m.Transport
		}
		id := extEntryID(m.Source, d.Name)
		e := fmEntry{ID: oneLine(id), Kind: oneLine(string(d.Kind)), Verbs: words(d.Grants), Transport: oneLine(string(t))}
		if r := plexus.ReachOf(narration, id); r != nil {
			if !slices.Equal(plexus.NormalizeVerbs(r.Verbs), plexus.NormalizeVerbs(d.Grants)) && len(r.Verbs) > 0 {
				e.Verbs, e.Declared = words(r.Verbs), words(d.Grants)
			}
			e.Why = oneLine(r.Why)
			e.Reaches = fmReachOf(*r)
		}
		x.Entries = append(x.Entries, e)
	}
	for _, sr := range m.Secrets {
		x.Secrets = append(x.Secrets, oneLine(sr.Name))
	}
	return x
}

func fmReachOf(r plexus.Reach) *fmReach {
	f := &fmReach{Bin: exact(r.Bin), Path: exact(r.Path), Args: exacts(r.Args), Method: exact(r.Method), URL: exact(r.URL),
		Provider: exact(r.Provider), Tool: exact(r.Tool), Secrets: exacts(r.Secrets), Unknown: oneLine(r.Unknown)}
	for _, m := range r.Members {
		f.Members = append(f.Members, oneLine(m.ID)+" ("+verbList(m.Verbs)+")")
	}
	return f
}

// words is vs in canonical order, as strings.
func words(vs []plexus.Verb) []string {
	out := make([]string, 0, len(vs))
	for _, v := range plexus.NormalizeVerbs(vs) {
		out = append(out, string(v))
	}
	return out
}

// exacts is each of ss through [exact].
func exacts(ss []string) []string {
	if len(ss) == 0 {
		return nil
	}
	out := make([]string, len(ss))
	for i, s := range ss {
		out[i] = exact(s)
	}
	return out
}

// exact keeps s byte for byte where it can be read as it is (what runs must
// be shown as it runs: two spaces stay two) and writes every character that
// would hide, break or reorder the text (controls, line breaks, bidi and
// other format characters) as a visible \u{…} escape. Invalid UTF-8
// becomes U+FFFD.
func exact(s string) string {
	s = strings.ToValidUTF8(s, "\uFFFD")
	var b strings.Builder
	for _, r := range s {
		if unicode.IsControl(r) || unicode.Is(unicode.Cf, r) || r == '\u2028' || r == '\u2029' {
			fmt.Fprintf(&b, "\\u{%04x}", r)
			continue
		}
		b.WriteRune(r)
	}
	return b.String()
}

func capabilityOf(it plexus.PendingItem) (fmCapability, error) {
	if it.CapabilityID == "" || !utf8.ValidString(it.CapabilityID) {
		return fmCapability{}, fmt.Errorf("capability id %q is empty or not UTF-8", it.CapabilityID)
	}
	verbs, err := verbStrings(it.Verbs)
	if err != nil {
		return fmCapability{}, err
	}
	w, err := FormatWindow(it.TrustWindow)
	if err != nil {
		return fmCapability{}, err
	}
	constraint, err := constraintValue(it.Constraint)
	if err != nil {
		return fmCapability{}, err
	}
	c := fmCapability{ID: it.CapabilityID, Verbs: verbs, Window: w,
		Provenance: string(it.Provenance), Sensitivity: string(it.Sensitivity), Constraint: constraint}
	for j, m := range it.Members {
		mv, err := verbStrings(m.Verbs)
		if err != nil {
			return fmCapability{}, fmt.Errorf("members[%d]: %w", j, err)
		}
		mc, err := constraintValue(m.Constraint)
		if err != nil {
			return fmCapability{}, fmt.Errorf("members[%d]: %w", j, err)
		}
		if m.ID == "" || !utf8.ValidString(m.ID) {
			return fmCapability{}, fmt.Errorf("members[%d]: id %q is empty or not UTF-8", j, m.ID)
		}
		c.Members = append(c.Members, fmMember{ID: m.ID, Verbs: mv, Constraint: mc})
	}
	return c, nil
}

// verbStrings checks and orders verbs canonically (read, write, execute).
func verbStrings(vs []plexus.Verb) ([]string, error) {
	for _, v := range vs {
		if !v.Valid() {
			return nil, fmt.Errorf("verb %q is not read, write or execute", v)
		}
	}
	n := plexus.NormalizeVerbs(vs)
	if len(n) == 0 {
		return nil, fmt.Errorf("no verbs")
	}
	out := make([]string, len(n))
	for i, v := range n {
		out[i] = string(v)
	}
	return out, nil
}

// constraintValue turns c into plain maps in its wire (JSON) shape, which
// YAML writes with sorted keys: the file shows constraints as the protocol
// spells them (pathPrefix, allow, match).
func constraintValue(c *plexus.ScopeConstraint) (any, error) {
	if c == nil {
		return nil, nil
	}
	if err := auth.ValidateConstraint(c); err != nil {
		return nil, fmt.Errorf("constraint: %w", err)
	}
	b, err := json.Marshal(c)
	if err != nil {
		return nil, fmt.Errorf("constraint: %w", err)
	}
	var v any
	if err := json.Unmarshal(b, &v); err != nil {
		return nil, fmt.Errorf("constraint: %w", err)
	}
	return v, nil
}

// oneLine drops invalid UTF-8 and the characters that hide or reorder text
// (controls, bidi overrides), and collapses whitespace, as auth does for a
// purpose.
func oneLine(s string) string {
	s = strings.ToValidUTF8(s, "")
	s = strings.Map(func(r rune) rune {
		switch {
		case unicode.IsSpace(r):
			return ' '
		case unicode.IsControl(r), r == '\u061c', r == '\u200e', r == '\u200f',
			'\u202a' <= r && r <= '\u202e', '\u2066' <= r && r <= '\u2069':
			return -1
		}
		return r
	}, s)
	return strings.Join(strings.Fields(s), " ")
}

// cleanNote keeps a note's lines, each cleaned, without empty ones.
func cleanNote(s string) string {
	var lines []string
	for l := range strings.SplitSeq(s, "\n") {
		if l = oneLine(l); l != "" {
			lines = append(lines, l)
		}
	}
	return strings.Join(lines, "\n")
}

func capRunes(s string, n int) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	r := []rune(s)
	return strings.TrimRight(string(r[:n-1]), " ") + "…"
}

// md escapes text for a markdown body so that it stays text: no HTML, no
// links or images (which a viewer might fetch), no entities, no emphasis.
// A leading character that would start a block (heading, quote, list) is
// escaped too. Backticks are left alone: a code span only ever makes text
// more literal, and the gateway's narration quotes commands in them.
func md(s string) string {
	var b strings.Builder
	for i, r := range s {
		switch r {
		case '\\', '<', '[', ']', '&', '*':
			b.WriteByte('\\')
		case '#', '>', '-', '+', '=', '|':
			if i == 0 {
				b.WriteByte('\\')
			}
		}
		b.WriteRune(r)
	}
	return b.String()
}

// codeExact writes s through [exact] as an inline code span; an empty
// argument shows as `""`.
func codeExact(s string) string {
	s = exact(s)
	if s == "" {
		return "`\"\"`"
	}
	// A space at either end is padded too: markdown would strip one.
	return codeSpan(s, strings.HasPrefix(s, " ") || strings.HasSuffix(s, " "))
}

// code writes s as an inline code span, whose content markdown never
// interprets; the fence is longer than any run of backticks inside.
func code(s string) string {
	s = oneLine(s)
	if s == "" {
		return "(empty)"
	}
	return codeSpan(s, false)
}

// codeSpan writes s in a code span whose fence is longer than any run of
// backticks inside. A backtick at either end, or pad, puts a space inside
// each fence, which markdown strips again.
func codeSpan(s string, pad bool) string {
	fence := "`"
	for strings.Contains(s, fence) {
		fence += "`"
	}
	if pad || strings.HasPrefix(s, "`") || strings.HasSuffix(s, "`") {
		return fence + " " + s + " " + fence
	}
	return fence + s + fence
}
