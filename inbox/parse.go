package inbox

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/adrg/frontmatter"
	"gopkg.in/yaml.v3"

	"github.com/plexus-gw/plexus"
	"github.com/plexus-gw/plexus/auth"
)

// ParseError says what is wrong with a decision file and where, in words
// meant for the owner, who will find it written back into the file.
type ParseError struct {
	// Field is the frontmatter key at fault, as a path
	// ("capabilities[1].window"); "frontmatter" for the block as a whole
	// and "" for the file.
	Field string
	// Line is the line of the file at fault, 0 when unknown.
	Line    int
	Problem string
}

func (e *ParseError) Error() string {
	var b strings.Builder
	b.WriteString("decision file")
	if e.Field != "" {
		b.WriteString(": " + e.Field)
	}
	if e.Line > 0 {
		fmt.Fprintf(&b, " (line %d)", e.Line)
	}
	b.WriteString(": " + e.Problem)
	return b.String()
}

// yamlFormat is the only frontmatter Parse looks for: YAML between two
// "---" lines. TOML and JSON frontmatter are not decision files.
var yamlFormat = frontmatter.NewFormat("---", "---", func(data []byte, v any) error {
	return yaml.Unmarshal(data, v)
})

var yamlLine = regexp.MustCompile(`^yaml: line (\d+): `)

// Parse reads a decision file's frontmatter into a [File]. The body is the
// owner's to read and is not parsed. Keys Parse does not know are ignored,
// so the owner may keep notes in the frontmatter; a missing `plexus:` marker
// or `id`, a malformed field, a repeated key, a file over [MaxFileSize] or
// a YAML anchor or alias is a [*ParseError] naming the field and the line.
func Parse(b []byte) (*File, error) {
	if len(b) > MaxFileSize {
		return nil, &ParseError{Problem: fmt.Sprintf("the file is %d bytes; a decision file is at most %d", len(b), MaxFileSize)}
	}
	b = bytes.TrimPrefix(b, []byte("\ufeff")) // a byte-order mark some editors add
	b = blankLeadingNote(b)
	if !utf8.Valid(b) {
		return nil, &ParseError{Problem: "the file is not UTF-8 text"}
	}
	off := openingLine(b)
	var root yaml.Node
	if _, err := frontmatter.MustParse(bytes.NewReader(b), &root, yamlFormat); err != nil {
		if errors.Is(err, frontmatter.ErrNotFound) {
			if off == 0 {
				return nil, &ParseError{Field: "frontmatter", Line: 1,
					Problem: "missing: a decision file starts with a line ---, then its fields, then another line ---"}
			}
			return nil, &ParseError{Field: "frontmatter", Line: off, Problem: "no closing --- line"}
		}
		pe := &ParseError{Field: "frontmatter", Problem: strings.TrimPrefix(err.Error(), "yaml: ")}
		if m := yamlLine.FindStringSubmatch(err.Error()); m != nil {
			n, _ := strconv.Atoi(m[1])
			pe.Line, pe.Problem = n+off, err.Error()[len(m[0]):]
		}
		return nil, pe
	}
	p := parser{off: off}
	if err := p.noAliases(&root); err != nil {
		return nil, err
	}
	return p.file(&root)
}

// openingLine is the 1-based line of the opening "---" (frontmatter skips
// blank lines before it), or 0 when the first non-blank line is not one.
func openingLine(b []byte) int {
	for i, l := range strings.Split(string(b), "\n") {
		switch strings.TrimSpace(l) {
		case "":
			continue
		case "---":
			return i + 1
		}
		return 0
	}
	return 0
}

type parser struct {
	off int // file line of the opening ---; YAML line n is file line off+n
}

func (p parser) errorf(field string, n *yaml.Node, format string, args ...any) *ParseError {
	e := &ParseError{Field: field, Problem: fmt.Sprintf(format, args...)}
	if n != nil && n.Line > 0 {
		e.Line = n.Line + p.off
	}
	return e
}

// noAliases refuses anchors and aliases anywhere: Plexus never writes them,
// and refusing them bounds the work a file can ask for.
func (p parser) noAliases(n *yaml.Node) error {
	if n.Kind == yaml.AliasNode || n.Anchor != "" {
		return p.errorf("frontmatter", n, "YAML anchors and aliases (& and *) are not allowed in a decision file")
	}
	for _, c := range n.Content {
		if err := p.noAliases(c); err != nil {
			return err
		}
	}
	return nil
}

// fields calls fn for each key of mapping n, refusing a repeated known key.
func (p parser) fields(path string, n *yaml.Node, known func(string) bool, fn func(key string, v *yaml.Node) error) error {
	if n.Kind != yaml.MappingNode {
		if path == "" {
			path = "frontmatter"
		}
		return p.errorf(path, n, "want fields (key: value), not %s", kindName(n))
	}
	seen := map[string]bool{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		key := k.Value
		if k.Kind != yaml.ScalarNode || !known(key) {
			continue // the owner's notes
		}
		if seen[key] {
			return p.errorf(join(path, key), k, "appears twice")
		}
		seen[key] = true
		if err := fn(key, v); err != nil {
			return err
		}
	}
	return nil
}

func join(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

func kindName(n *yaml.Node) string {
	switch n.Kind {
	case yaml.SequenceNode:
		return "a list"
	case yaml.MappingNode:
		return "fields"
	case yaml.ScalarNode:
		return fmt.Sprintf("%q", n.Value)
	}
	return "nothing"
}

var topKeys = map[string]bool{"plexus": true, "problem": true, "id": true, "type": true, "state": true,
	"agent": true, "trace_id": true, "created": true, "expires": true, "same_user": true, "bundle": true,
	"purpose": true, "capabilities": true, "reason": true, "decided": true, "decided_by": true, "via": true, "ended": true, "extension": true,
	"definition": true, "signin": true}

func (p parser) file(root *yaml.Node) (*File, error) {
	n := root
	if n.Kind == yaml.DocumentNode && len(n.Content) == 1 {
		n = n.Content[0]
	}
	f := &File{}
	if n.Kind == 0 { // an empty frontmatter
		n = &yaml.Node{Kind: yaml.MappingNode}
	}
	strs := map[string]*string{"plexus": &f.Format, "problem": &f.Problem, "id": &f.ID, "type": &f.Type,
		"state": &f.State, "agent": &f.Agent, "trace_id": &f.TraceID, "bundle": &f.Bundle, "purpose": &f.Purpose,
		"reason": &f.Reason, "decided_by": &f.DecidedBy, "via": &f.Via, "ended": &f.Ended}
	times := map[string]*time.Time{"created": &f.Created, "expires": &f.Expires, "decided": &f.Decided}
	err := p.fields("", n, func(k string) bool { return topKeys[k] }, func(key string, v *yaml.Node) error {
		var err error
		switch {
		case strs[key] != nil:
			*strs[key], err = p.str(key, v)
		case times[key] != nil:
			*times[key], err = p.time(key, v)
		case key == "same_user":
			f.SameUser, err = p.bool(key, v)
		case key == "capabilities":
			f.Capabilities, err = p.capabilities(v)
		}
		return err
	})
	if err != nil {
		return nil, err
	}
	f.Notes = ownerNotes(n)
	switch {
	case f.Format == "":
		return nil, p.errorf("plexus", nil, "missing: a decision file says `plexus: %s`", Format)
	case f.Format != Format:
		return nil, p.errorf("plexus", nil, "%q is not a format this Plexus reads (%s)", f.Format, Format)
	case f.ID == "":
		return nil, p.errorf("id", nil, "missing")
	case !ValidID(f.ID):
		return nil, p.errorf("id", nil, "%q is not a decision id (%s followed by a ULID)", f.ID, IDPrefix)
	}
	return f, nil
}

// ownerNotes keeps the top-level keys Plexus does not know, in order: the
// owner's notes, carried over when Plexus rewrites the file.
func ownerNotes(n *yaml.Node) Notes {
	var out Notes
	for i := 0; i+1 < len(n.Content); i += 2 {
		k := n.Content[i]
		if k.Kind == yaml.ScalarNode && topKeys[k.Value] {
			continue
		}
		out.nodes = append(out.nodes, k, n.Content[i+1])
	}
	return out
}

func (p parser) str(field string, n *yaml.Node) (string, error) {
	if n.Kind != yaml.ScalarNode {
		return "", p.errorf(field, n, "want text, not %s", kindName(n))
	}
	if n.ShortTag() == "!!null" {
		return "", nil
	}
	if !utf8.ValidString(n.Value) {
		return "", p.errorf(field, n, "not UTF-8 text")
	}
	return n.Value, nil
}

func (p parser) time(field string, n *yaml.Node) (time.Time, error) {
	s, err := p.str(field, n)
	if err != nil || s == "" {
		return time.Time{}, err
	}
	t, err := time.Parse(time.RFC3339, s)
	if y := t.UTC().Year(); err != nil || y < 1 || y > 9999 {
		return time.Time{}, p.errorf(field, n, "%q is not a time such as 2026-01-02T15:04:05Z", s)
	}
	return t.UTC(), nil
}

func (p parser) bool(field string, n *yaml.Node) (bool, error) {
	if n.Kind == yaml.ScalarNode && n.ShortTag() == "!!null" {
		return false, nil
	}
	var v bool
	if n.Kind != yaml.ScalarNode || n.ShortTag() != "!!bool" || n.Decode(&v) != nil {
		return false, p.errorf(field, n, "want true or false, not %s", kindName(n))
	}
	return v, nil
}

var capKeys = map[string]bool{"id": true, "verbs": true, "window": true, "provenance": true,
	"sensitivity": true, "constraint": true, "members": true}

func (p parser) capabilities(n *yaml.Node) ([]FileCapability, error) {
	if n.Kind == yaml.ScalarNode && n.ShortTag() == "!!null" {
		return nil, nil
	}
	if n.Kind != yaml.SequenceNode {
		return nil, p.errorf("capabilities", n, "want a list, not %s", kindName(n))
	}
	out := make([]FileCapability, 0, len(n.Content))
	seen := map[string]bool{}
	for i, item := range n.Content {
		path := fmt.Sprintf("capabilities[%d]", i)
		var c FileCapability
		var hasVerbs, hasWindow bool
		err := p.fields(path, item, func(k string) bool { return capKeys[k] }, func(key string, v *yaml.Node) error {
			var err error
			field := path + "." + key
			switch key {
			case "id":
				c.ID, err = p.str(field, v)
			case "verbs":
				hasVerbs = true
				c.Verbs, err = p.verbs(field, v)
			case "window":
				hasWindow = true
				var s string
				if s, err = p.str(field, v); err == nil {
					var werr error
					if c.Window, werr = ParseWindow(s); werr != nil {
						err = p.errorf(field, v, "%v", werr)
					}
				}
			case "provenance":
				var s string
				s, err = p.str(field, v)
				c.Provenance = plexus.Provenance(s)
			case "sensitivity":
				var s string
				s, err = p.str(field, v)
				c.Sensitivity = plexus.Sensitivity(s)
			case "constraint":
				c.Constraint, err = p.constraint(field, v)
			case "members":
				c.Members, err = p.members(field, v)
			}
			return err
		})
		switch {
		case err != nil:
			return nil, err
		case c.ID == "":
			return nil, p.errorf(path+".id", item, "missing")
		case seen[c.ID]:
			return nil, p.errorf(path+".id", item, "%s is listed twice", c.ID)
		case !hasVerbs:
			return nil, p.errorf(path+".verbs", item, "missing")
		case !hasWindow:
			return nil, p.errorf(path+".window", item, "missing")
		}
		seen[c.ID] = true
		for j := range c.Members {
			c.Members[j].SynthesizedFor = c.ID
		}
		out = append(out, c)
	}
	return out, nil
}

// verbs reads a list of verbs, or a single verb written without brackets.
func (p parser) verbs(field string, n *yaml.Node) ([]plexus.Verb, error) {
	items := n.Content
	switch {
	case n.Kind == yaml.ScalarNode && n.ShortTag() != "!!null":
		items = []*yaml.Node{n}
	case n.Kind == yaml.ScalarNode:
		items = nil
	case n.Kind != yaml.SequenceNode:
		return nil, p.errorf(field, n, "want a list of verbs such as [read, write], not %s", kindName(n))
	}
	var vs []plexus.Verb
	for _, it := range items {
		s, err := p.str(field, it)
		if err != nil {
			return nil, err
		}
		v := plexus.Verb(strings.ToLower(strings.TrimSpace(s)))
		if !v.Valid() {
			return nil, p.errorf(field, it, "%q is not a verb: want read, write or execute", s)
		}
		vs = append(vs, v)
	}
	if len(vs) == 0 {
		return nil, p.errorf(field, n, "no verbs left; to grant nothing of this capability, remove it")
	}
	return plexus.NormalizeVerbs(vs), nil
}

// constraint reads a constraint in its wire shape (pathPrefix, allow,
// match), refusing unknown keys: a misspelt predicate would otherwise be
// dropped, and a dropped predicate widens.
func (p parser) constraint(field string, n *yaml.Node) (*plexus.ScopeConstraint, error) {
	if n.Kind == yaml.ScalarNode && n.ShortTag() == "!!null" {
		return nil, nil
	}
	var v any
	if err := n.Decode(&v); err != nil {
		return nil, p.errorf(field, n, "%s", strings.TrimPrefix(err.Error(), "yaml: "))
	}
	if err := constraintKeys(v); err != nil {
		return nil, p.errorf(field, n, "%v", err)
	}
	b, err := json.Marshal(v)
	if err != nil {
		return nil, p.errorf(field, n, "not a constraint: %v", err)
	}
	var c plexus.ScopeConstraint
	if err := json.Unmarshal(b, &c); err != nil {
		return nil, p.errorf(field, n, "not a constraint (pathPrefix, allow, match): %v", strings.TrimPrefix(err.Error(), "json: "))
	}
	if err := auth.ValidateConstraint(&c); err != nil {
		return nil, p.errorf(field, n, "%v", err)
	}
	return &c, nil
}

// constraintKeys refuses any key a constraint does not have, spelt exactly
// (encoding/json alone would match "pathprefix" to pathPrefix).
func constraintKeys(v any) error {
	check := func(where string, v any, keys ...string) error {
		m, ok := v.(map[string]any)
		if !ok {
			return fmt.Errorf("%s: want fields", where)
		}
		for k := range m {
			if !slices.Contains(keys, k) {
				return fmt.Errorf("%s: unknown key %q (want %s)", where, k, strings.Join(keys, ", "))
			}
		}
		return nil
	}
	if err := check("constraint", v, "pathPrefix", "allow", "match"); err != nil {
		return err
	}
	m := v.(map[string]any)
	if pp, ok := m["pathPrefix"]; ok {
		if err := check("pathPrefix", pp, "field", "allow"); err != nil {
			return err
		}
	}
	if al, ok := m["allow"]; ok {
		if err := check("allow", al, "field", "values"); err != nil {
			return err
		}
	}
	if ms, ok := m["match"].([]any); ok {
		for i, x := range ms {
			if err := check(fmt.Sprintf("match[%d]", i), x, "field", "op", "value", "values", "pattern"); err != nil {
				return err
			}
		}
	}
	return nil
}

var memberKeys = map[string]bool{"id": true, "verbs": true, "constraint": true}

func (p parser) members(field string, n *yaml.Node) ([]plexus.TokenScope, error) {
	if n.Kind == yaml.ScalarNode && n.ShortTag() == "!!null" {
		return nil, nil
	}
	if n.Kind != yaml.SequenceNode {
		return nil, p.errorf(field, n, "want a list, not %s", kindName(n))
	}
	var out []plexus.TokenScope
	for i, item := range n.Content {
		path := fmt.Sprintf("%s[%d]", field, i)
		var m plexus.TokenScope
		err := p.fields(path, item, func(k string) bool { return memberKeys[k] }, func(key string, v *yaml.Node) error {
			var err error
			switch key {
			case "id":
				m.ID, err = p.str(path+".id", v)
			case "verbs":
				m.Verbs, err = p.verbs(path+".verbs", v)
			case "constraint":
				m.Constraint, err = p.constraint(path+".constraint", v)
			}
			return err
		})
		switch {
		case err != nil:
			return nil, err
		case m.ID == "":
			return nil, p.errorf(path+".id", item, "missing")
		case len(m.Verbs) == 0:
			return nil, p.errorf(path+".verbs", item, "missing")
		}
		out = append(out, m)
	}
	return out, nil
}
