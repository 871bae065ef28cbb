package inbox

import (
	"bytes"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"

	"gopkg.in/yaml.v3"

	"github.com/plexus-gw/plexus"
	"github.com/plexus-gw/plexus/auth"
)

// StampOptions say what [Stamp] writes into a decision file.
type StampOptions struct {
	// DecidedBy names the person deciding (cmd passes `git config
	// user.email`, else $USER). Required.
	DecidedBy string
	// Reason, when not empty, replaces the file's `reason:`: why the owner
	// denies, or a note an approval keeps in the journal.
	Reason string
	// Window, when set, narrows an approval: every capability whose window
	// is at least as long gets this one; shorter ones (a `once`, such as
	// execute's) keep theirs. Nil leaves the windows as the file has them.
	Window *plexus.TrustWindow
	// Via is the channel written as `via:`: [plexus.ViaCLI] when empty, or
	// [plexus.ViaConsole].
	Via string
	// Keep, when not nil, narrows an approval to these capabilities of the
	// file (at least one); the others are removed from it.
	Keep []string
	// Verbs narrows the verbs of each capability it names to a non-empty
	// subset of the file's.
	Verbs map[string][]plexus.Verb
}

func (s StampOptions) via() string {
	if s.Via == "" {
		return plexus.ViaCLI
	}
	return s.Via
}

// NarrowError is [Stamp]'s refusal of a narrowing that names what the file
// does not ask for, or leaves nothing: a decision may only narrow.
type NarrowError struct{ Msg string }

func (e *NarrowError) Error() string { return e.Msg }

// WindowError is [Stamp]'s refusal of a window longer than every
// capability's window in the file: approving with it would ask for more
// than the request did, and a decision may only narrow.
type WindowError struct {
	// Window is the window refused, as the file would spell it.
	Window string
	// Asked lists each capability with the window it has ("portal.notes.write 1d").
	Asked []string
}

func (e *WindowError) Error() string {
	asked := "no capability"
	if len(e.Asked) > 0 {
		asked = strings.Join(e.Asked, ", ")
	}
	return fmt.Sprintf("window %s is longer than the request asks (%s): a decision may only narrow it", e.Window, asked)
}

// Stamp returns decision file b with what `plexus approve` and `plexus
// reject` write before their move: `decided_by:` s.DecidedBy and `via: cli`
// (which is how the daemon tells their move from one made by hand), and
// s.Reason and s.Window when given. The command then moves the file like a
// person would, so there is one path from a decision file to the gateway.
//
// Only the frontmatter changes, and only those fields: the YAML is edited as
// a tree, so every other key (the owner's own notes too), its order and its
// comments stay, and everything before the opening and from the closing
// `---` line on is kept byte for byte. Stamp narrows and never widens:
// a window is written only where it is no longer than the one the file
// has. It does not check the file against the gateway's record; the daemon
// does that when it sees the move, and refuses an edit that widens.
//
// A file [Parse] refuses is refused with its [*ParseError]; a window longer
// than every capability's is a [*WindowError].
func Stamp(b []byte, s StampOptions) ([]byte, error) {
	// As the reconciler reads decided_by: one line, capped.
	by := capRunes(oneLine(s.DecidedBy), 120)
	if by == "" {
		return nil, errors.New("stamp: no decider named")
	}
	f, err := Parse(b)
	if err != nil {
		return nil, err
	}
	want := *f // what the stamped file must parse to
	want.Capabilities = slices.Clone(f.Capabilities)
	via := s.via()
	if via != plexus.ViaCLI && via != plexus.ViaConsole {
		return nil, fmt.Errorf("stamp: via %q is not a channel that stamps", via)
	}
	want.DecidedBy, want.Via = by, via
	if s.Reason != "" {
		want.Reason = s.Reason
	}
	if want.Capabilities, err = narrowCapabilities(want.Capabilities, s.Keep, s.Verbs); err != nil {
		return nil, err
	}
	var narrow map[string]string
	if s.Window != nil {
		if narrow, err = narrowWindows(want.Capabilities, *s.Window); err != nil {
			return nil, err
		}
	}
	out, err := stampFrontmatter(b, stampEdit{by: by, via: via, reason: s.Reason, windows: narrow, keep: s.Keep, verbs: s.Verbs})
	if err != nil {
		return nil, err
	}
	if err := readsBackAs(out, want); err != nil {
		return nil, err
	}
	return out, nil
}

// narrowWindows sets window on each of caps that asked for a longer one
// (as the file will read it back) and returns, by capability id, the
// window to write for each; a [*WindowError] when it narrows none.
func narrowWindows(caps []FileCapability, window plexus.TrustWindow) (map[string]string, error) {
	w, err := FormatWindow(window)
	if err != nil {
		return nil, fmt.Errorf("stamp: %w", err)
	}
	canon, err := ParseWindow(w) // how the file will read it back
	if err != nil {
		return nil, fmt.Errorf("stamp: %w", err)
	}
	narrow := map[string]string{} // capability id → the window written for it
	var asked []string
	for i, c := range caps {
		has, _ := FormatWindow(c.Window)
		asked = append(asked, c.ID+" "+has)
		if auth.Narrower(window, c.Window) {
			narrow[c.ID] = w
			caps[i].Window = canon
		}
	}
	if len(narrow) == 0 {
		return nil, &WindowError{Window: w, Asked: asked}
	}
	return narrow, nil
}

// narrowCapabilities returns caps less those keep leaves out (keep nil
// keeps all), with the verbs verbs names for each: a *[NarrowError] when
// keep or verbs name a capability or verb caps lack, or leave none.
func narrowCapabilities(caps []FileCapability, keep []string, verbs map[string][]plexus.Verb) ([]FileCapability, error) {
	if keep == nil && len(verbs) == 0 {
		return caps, nil // as the file has them: [] stays [] (a definition's, an extension's)
	}
	has := func(id string) bool {
		return slices.ContainsFunc(caps, func(c FileCapability) bool { return c.ID == id })
	}
	for _, id := range keep {
		if !has(id) {
			return nil, &NarrowError{Msg: fmt.Sprintf("%s is not asked for in this decision: a decision may only narrow", id)}
		}
	}
	if keep != nil && len(keep) == 0 {
		return nil, &NarrowError{Msg: "keep at least one capability, or deny the request"}
	}
	var out []FileCapability
	for _, c := range caps {
		if keep != nil && !slices.Contains(keep, c.ID) {
			continue
		}
		if vs, ok := verbs[c.ID]; ok {
			if len(vs) == 0 {
				return nil, &NarrowError{Msg: fmt.Sprintf("keep at least one verb of %s, or leave the capability out", c.ID)}
			}
			for _, v := range vs {
				if !slices.Contains(c.Verbs, v) {
					return nil, &NarrowError{Msg: fmt.Sprintf("%s does not ask to %s: a decision may only narrow", c.ID, v)}
				}
			}
			c.Verbs = slices.DeleteFunc(slices.Clone(c.Verbs), func(v plexus.Verb) bool { return !slices.Contains(vs, v) })
		}
		out = append(out, c)
	}
	for id := range verbs {
		if !has(id) {
			return nil, &NarrowError{Msg: fmt.Sprintf("%s is not asked for in this decision: a decision may only narrow", id)}
		}
	}
	return out, nil
}

// stampEdit is what [stampFrontmatter] writes: who and via which channel,
// the reason when given, the narrowed windows by capability id, the
// capabilities kept (nil: all) and the narrowed verbs by capability id.
type stampEdit struct {
	by, via, reason string
	windows         map[string]string
	keep            []string
	verbs           map[string][]plexus.Verb
}

// stampFrontmatter writes e into b's frontmatter, edited as a YAML tree,
// and keeps every other byte of b.
func stampFrontmatter(b []byte, e stampEdit) ([]byte, error) {
	lo, hi, ok := frontmatterSpan(b)
	if !ok {
		return nil, errors.New("stamp: no frontmatter found in a file Parse read") // Parse and frontmatterSpan disagree
	}
	var doc yaml.Node
	if err := yaml.Unmarshal(b[lo:hi], &doc); err != nil {
		return nil, fmt.Errorf("stamp: %w", err)
	}
	if doc.Kind != yaml.DocumentNode || len(doc.Content) != 1 || doc.Content[0].Kind != yaml.MappingNode {
		return nil, errors.New("stamp: the frontmatter is not a mapping")
	}
	m := doc.Content[0]
	setField(m, "decided_by", e.by)
	setField(m, "via", e.via)
	if e.reason != "" {
		setField(m, "reason", e.reason)
	}
	if len(e.windows) > 0 {
		setWindows(m, e.windows)
	}
	if e.keep != nil || len(e.verbs) > 0 {
		narrowNodes(m, e.keep, e.verbs)
	}
	oneLineScalars(&doc)

	var fm bytes.Buffer
	enc := yaml.NewEncoder(&fm)
	enc.SetIndent(2)
	if err := enc.Encode(&doc); err != nil {
		return nil, fmt.Errorf("stamp: %w", err)
	}
	if err := enc.Close(); err != nil {
		return nil, fmt.Errorf("stamp: %w", err)
	}
	out := make([]byte, 0, len(b)+fm.Len()-(hi-lo))
	return append(append(append(out, b[:lo]...), fm.Bytes()...), b[hi:]...), nil
}

// readsBackAs checks that the stamped file says what the file said, plus
// the stamp (want): a rewrite that changed anything else (a value re-read
// differently, a line that ends the frontmatter early) is not the owner's
// file.
func readsBackAs(out []byte, want File) error {
	got, err := Parse(out)
	if err != nil {
		return fmt.Errorf("stamp: the stamped file does not read back: %w", err)
	}
	// The owner's notes are compared as YAML (their nodes also hold
	// positions, which a rewrite moves).
	notesSame := got.Notes.Equal(want.Notes)
	got.Notes, want.Notes = Notes{}, Notes{}
	if !notesSame || !reflect.DeepEqual(*got, want) {
		return errors.New("stamp: the stamped file does not read back as the file with only the stamp changed")
	}
	return nil
}

// frontmatterSpan returns the byte range of the YAML between b's opening
// and closing `---` lines, found as [Parse] finds them (after a byte-order
// mark, blank lines and a leading problem note; a delimiter line may carry
// surrounding spaces).
func frontmatterSpan(b []byte) (lo, hi int, ok bool) {
	view := blankLeadingNote(bytes.TrimPrefix(b, []byte("\ufeff"))) // same length as what it replaces
	shift := len(b) - len(view)
	open := false
	for off := 0; off < len(view); {
		next := len(view)
		if i := bytes.IndexByte(view[off:], '\n'); i >= 0 {
			next = off + i + 1
		}
		line := string(bytes.TrimSpace(view[off:next]))
		switch {
		case !open && line == "":
		case !open && line == "---":
			open, lo = true, next
		case !open:
			return 0, 0, false
		case line == "---":
			return lo + shift, off + shift, true
		}
		off = next
	}
	return 0, 0, false
}

// fieldOrder is the order [Render] writes the top-level keys in (the
// fields of header); a key Stamp adds goes where Render would put it.
var fieldOrder = []string{"plexus", "problem", "id", "type", "state", "agent", "trace_id", "created", "expires",
	"same_user", "bundle", "purpose", "capabilities", "reason", "decided", "decided_by", "via", "ended"}

// setField gives key the text value in mapping m, adding it after the last
// key Render writes before it when m lacks it.
func setField(m *yaml.Node, key, value string) {
	at := 0
	rank := slices.Index(fieldOrder, key)
	for i := 0; i+1 < len(m.Content); i += 2 {
		k := m.Content[i]
		if k.Kind != yaml.ScalarNode {
			continue
		}
		if k.Value == key {
			setText(m.Content[i+1], value)
			return
		}
		if r := slices.Index(fieldOrder, k.Value); r >= 0 && r < rank {
			at = i + 2
		}
	}
	v := &yaml.Node{}
	setText(v, value)
	m.Content = slices.Insert(m.Content, at, &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: key}, v)
}

// setText makes n the text value, keeping the comments around it. The
// encoder quotes it where plain text would read as something else
// ("true", "", "1h: x").
func setText(n *yaml.Node, value string) {
	*n = yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: value,
		HeadComment: n.HeadComment, LineComment: n.LineComment, FootComment: n.FootComment}
}

// setWindows writes window[id] as the window of each capability id listed.
// Parse has checked the shape: a list of mappings, each with one id and one
// window.
func setWindows(m *yaml.Node, window map[string]string) {
	var caps *yaml.Node
	for i := 0; i+1 < len(m.Content); i += 2 {
		if m.Content[i].Kind == yaml.ScalarNode && m.Content[i].Value == "capabilities" {
			caps = m.Content[i+1]
		}
	}
	if caps == nil {
		return
	}
	for _, c := range caps.Content {
		var id string
		var win *yaml.Node
		for i := 0; i+1 < len(c.Content); i += 2 {
			switch c.Content[i].Value {
			case "id":
				id = c.Content[i+1].Value
			case "window":
				win = c.Content[i+1]
			}
		}
		if w, ok := window[id]; ok && win != nil {
			setText(win, w)
		}
	}
}

// narrowNodes removes from mapping m's capabilities those keep leaves out
// (keep nil keeps all) and writes verbs[id] as the verbs of each it names.
// Parse has checked the shape, as for [setWindows].
func narrowNodes(m *yaml.Node, keep []string, verbs map[string][]plexus.Verb) {
	caps := fieldNode(m, "capabilities")
	if caps == nil {
		return
	}
	caps.Content = slices.DeleteFunc(caps.Content, func(c *yaml.Node) bool {
		id := fieldNode(c, "id")
		return keep != nil && (id == nil || !slices.Contains(keep, id.Value))
	})
	for _, c := range caps.Content {
		id, v := fieldNode(c, "id"), fieldNode(c, "verbs")
		if id == nil || v == nil {
			continue
		}
		vs, ok := verbs[id.Value]
		if !ok {
			continue
		}
		seq := &yaml.Node{Kind: yaml.SequenceNode, Tag: "!!seq", Style: v.Style, LineComment: v.LineComment}
		for _, verb := range v.Content {
			if slices.Contains(vs, plexus.Verb(verb.Value)) {
				seq.Content = append(seq.Content, verb)
			}
		}
		*v = *seq
	}
}

// fieldNode is the value of key in mapping m, nil when m has none.
func fieldNode(m *yaml.Node, key string) *yaml.Node {
	for i := 0; i+1 < len(m.Content); i += 2 {
		if m.Content[i].Kind == yaml.ScalarNode && m.Content[i].Value == key {
			return m.Content[i+1]
		}
	}
	return nil
}
