package hosts

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/tailscale/hujson"
)

// jsonDoc is a JSON or JSONC file, parsed by hujson for the offsets of
// every member, and edited by splicing bytes at those offsets: hujson's
// own Patch would re-flow what it touches (it drops a trailing comma and
// writes a new member on the previous one's line), and the owner's file
// must keep its look.
type jsonDoc struct {
	path      string
	src       []byte
	root      hujson.Value
	blank     bool     // an empty or whitespace-only file
	container []string // the keys leading to the servers: "mcpServers", "servers", or "projects", <dir>, "mcpServers"
}

func parseJSON(path string, src []byte, container []string) (*jsonDoc, error) {
	d := &jsonDoc{path: path, src: src, container: container}
	if len(bytes.TrimSpace(src)) == 0 {
		d.blank = true
		return d, nil
	}
	v, err := hujson.Parse(src)
	if err != nil {
		pe := &ParseError{Path: path, Problem: err.Error()}
		// hujson says "hujson: line L, column C: problem".
		if n, _ := fmt.Sscanf(err.Error(), "hujson: line %d, column %d:", &pe.Line, &pe.Column); n == 2 {
			if parts := strings.SplitN(err.Error(), ": ", 3); len(parts) == 3 {
				pe.Problem = parts[2]
			}
		}
		return nil, pe
	}
	if _, ok := v.Value.(*hujson.Object); !ok {
		return nil, &ParseError{Path: path, Line: 1, Column: 1, Problem: "not a JSON object"}
	}
	d.root = v
	if _, _, err := d.walk(); err != nil {
		return nil, err
	}
	return d, nil
}

// walk follows the container's keys from the root: the deepest object
// found and how many keys led to it (len(d.container) when it is the
// servers' object). A key on the way whose value is not an object is a
// ParseError: nothing is written into, or over, what the file says.
func (d *jsonDoc) walk() (*hujson.Value, int, error) {
	obj := &d.root
	for i, key := range d.container {
		v, _ := member(obj.Value.(*hujson.Object), key)
		if v == nil {
			return obj, i, nil
		}
		if _, ok := v.Value.(*hujson.Object); !ok {
			what := fmt.Sprintf("%q is not an object", key)
			if i == len(d.container)-1 {
				what = fmt.Sprintf("%q is not an object of servers", key)
			}
			return nil, 0, d.errorAt(v.StartOffset, what)
		}
		obj = v
	}
	return obj, len(d.container), nil
}

// nest is {keys[0]: {keys[1]: … {name: entry}}}'s innermost part
// wrapped by keys, for a container the file does not have yet.
func nest(keys []string, name string, entry object) object {
	o := object{{name, entry}}
	for i := len(keys) - 1; i >= 0; i-- {
		o = object{{keys[i], o}}
	}
	return o
}

func (d *jsonDoc) errorAt(off int, problem string) *ParseError {
	line := 1 + bytes.Count(d.src[:off], []byte("\n"))
	col := 1 + off - (bytes.LastIndexByte(d.src[:off], '\n') + 1)
	return &ParseError{Path: d.path, Line: line, Column: col, Problem: problem}
}

// member returns the value of member name of obj, nil when there is none.
func member(obj *hujson.Object, name string) (*hujson.Value, int) {
	for i := range obj.Members {
		if lit, ok := obj.Members[i].Name.Value.(hujson.Literal); ok && lit.String() == name {
			return &obj.Members[i].Value, i
		}
	}
	return nil, -1
}

// servers is the container's value, nil when the file has none.
func (d *jsonDoc) servers() *hujson.Value {
	if d.blank {
		return nil
	}
	v, depth, err := d.walk()
	if err != nil || depth < len(d.container) {
		return nil // parseJSON refused a file where walk fails
	}
	return v
}

// decode reads a value's bytes as standard JSON.
func (d *jsonDoc) decode(v *hujson.Value) (any, error) {
	b, err := hujson.Standardize(bytes.Clone(d.src[v.StartOffset:v.EndOffset]))
	if err != nil {
		return nil, err
	}
	var out any
	if err := json.Unmarshal(b, &out); err != nil {
		return nil, err
	}
	return out, nil
}

func (d *jsonDoc) entries() ([]string, map[string]any, error) {
	c := d.servers()
	if c == nil {
		return nil, nil, nil
	}
	var names []string
	out := map[string]any{}
	for i := range c.Value.(*hujson.Object).Members {
		m := &c.Value.(*hujson.Object).Members[i]
		name := m.Name.Value.(hujson.Literal).String()
		v, err := d.decode(&m.Value)
		if err != nil {
			return nil, nil, d.errorAt(m.Value.StartOffset, err.Error())
		}
		if _, dup := out[name]; !dup {
			names = append(names, name)
		}
		out[name] = v
	}
	return names, out, nil
}

func (d *jsonDoc) upsert(name string, entry object) ([]byte, error) {
	unit := indentUnit(d.src)
	if d.blank {
		return []byte(renderJSON(nest(d.container, name, entry), "", unit) + "\n"), nil
	}
	c, depth, err := d.walk()
	if err != nil {
		return nil, err
	}
	if depth < len(d.container) {
		missing := nest(d.container[depth+1:], name, entry)
		return insertMember(d.src, c, d.container[depth], missing, unit), nil
	}
	v, i := member(c.Value.(*hujson.Object), name)
	if v == nil {
		return insertMember(d.src, c, name, entry, unit), nil
	}
	have, err := d.decode(v)
	if err == nil && sameEntry(have, entry) {
		return d.src, nil // as written, whatever its layout
	}
	ind := lineIndent(d.src, c.Value.(*hujson.Object).Members[i].Name.StartOffset)
	if _, multiline := memberIndent(d.src, c, unit); !multiline {
		unit = ""
	}
	return splice(d.src, v.StartOffset, v.EndOffset, renderJSON(entry, ind, unit)), nil
}

func (d *jsonDoc) remove(name string) ([]byte, bool, error) {
	c := d.servers()
	if c == nil {
		return d.src, false, nil
	}
	_, i := member(c.Value.(*hujson.Object), name)
	if i < 0 {
		return d.src, false, nil
	}
	return removeMember(d.src, c, i), true, nil
}

func splice(src []byte, from, to int, s string) []byte {
	out := make([]byte, 0, len(src)-(to-from)+len(s))
	out = append(out, src[:from]...)
	out = append(out, s...)
	return append(out, src[to:]...)
}

// lineIndent is the leading blanks of the line holding offset off.
func lineIndent(src []byte, off int) string {
	start := bytes.LastIndexByte(src[:off], '\n') + 1
	end := start
	for end < len(src) && (src[end] == ' ' || src[end] == '\t') {
		end++
	}
	return string(src[start:end])
}

// indentUnit is one level of the file's indentation: the leading blanks
// of its first indented line, two spaces when none is.
func indentUnit(src []byte) string {
	for line := range bytes.SplitSeq(src, []byte("\n")) {
		trimmed := bytes.TrimLeft(line, " \t")
		if n := len(line) - len(trimmed); n > 0 && len(bytes.TrimSpace(trimmed)) > 0 {
			return string(line[:n])
		}
	}
	return "  "
}

// lineEnd skips, from p, the blanks and a comment that end p's line (a
// member's trailing comment belongs to it), stopping before the newline.
func lineEnd(src []byte, p int) int {
	skip := func() {
		for p < len(src) && (src[p] == ' ' || src[p] == '\t' || src[p] == '\r') {
			p++
		}
	}
	skip()
	switch {
	case bytes.HasPrefix(src[p:], []byte("//")):
		if i := bytes.IndexByte(src[p:], '\n'); i >= 0 {
			return p + i
		}
		return len(src)
	case bytes.HasPrefix(src[p:], []byte("/*")):
		end := bytes.Index(src[p:], []byte("*/"))
		if end >= 0 && bytes.IndexByte(src[p:p+end], '\n') < 0 {
			p += end + 2
			skip()
		}
	}
	return p
}

// memberIndent is how obj's members are indented, and false when they sit
// on one line with the braces.
func memberIndent(src []byte, objV *hujson.Value, unit string) (string, bool) {
	obj := objV.Value.(*hujson.Object)
	if len(obj.Members) == 0 {
		return lineIndent(src, objV.StartOffset) + unit, true
	}
	before := obj.Members[0].Name.BeforeExtra
	i := bytes.LastIndexByte(before, '\n')
	if i < 0 {
		return "", false
	}
	return string(before[i+1:]), true
}

// commaAfter is the offset of the comma after member m's value, -1 when
// there is none (the last member, without a trailing comma).
func commaAfter(m *hujson.ObjectMember, last bool) int {
	if last && m.Value.AfterExtra == nil {
		return -1
	}
	return m.Value.EndOffset + len(m.Value.AfterExtra)
}

// insertMember adds name: val as the last member of the object objV, on a
// line of its own as its siblings are (after the last one's trailing
// comment), with a trailing comma when the file writes them.
func insertMember(src []byte, objV *hujson.Value, name string, val any, unit string) []byte {
	obj := objV.Value.(*hujson.Object)
	ind, multiline := memberIndent(src, objV, unit)
	if !multiline {
		unit = ""
	}
	text := quote(name) + ": " + renderJSON(val, ind, unit)
	n := len(obj.Members)
	if n == 0 {
		open, closing := objV.StartOffset+1, objV.EndOffset-1
		base := lineIndent(src, objV.StartOffset)
		interior := bytes.TrimRight(src[open:closing], " \t\r\n")
		return splice(src, open, closing, string(interior)+"\n"+ind+text+"\n"+base)
	}
	last := &obj.Members[n-1]
	end := last.Value.EndOffset
	comma := commaAfter(last, true)
	if !multiline {
		if comma >= 0 {
			return splice(src, comma+1, comma+1, " "+text+",")
		}
		return splice(src, end, end, ", "+text)
	}
	if comma >= 0 {
		p := lineEnd(src, comma+1)
		return splice(src, p, p, "\n"+ind+text+",")
	}
	p := lineEnd(src, end)
	out := splice(src, p, p, "\n"+ind+text)
	return splice(out, end, end, ",") // end <= p: the first splice left it in place
}

// removeMember removes member i of the object objV: the lines from its
// name to its comma and trailing comment, leaving the comments above it
// and its siblings' lines as they are; the comma it leaves dangling on
// the member before it goes too, when the file writes no trailing commas.
func removeMember(src []byte, objV *hujson.Value, i int) []byte {
	obj := objV.Value.(*hujson.Object)
	n := len(obj.Members)
	m := &obj.Members[i]
	start := objV.StartOffset + 1
	if i > 0 {
		start = lineEnd(src, commaAfter(&obj.Members[i-1], false)+1)
	}
	comma := commaAfter(m, i == n-1)
	end := m.Value.EndOffset
	if comma >= 0 {
		end = comma + 1
	}
	var out []byte
	if nl := bytes.LastIndexByte(src[start:m.Name.StartOffset], '\n'); nl >= 0 {
		out = splice(src, start+nl, lineEnd(src, end), "")
	} else if i > 0 && comma < 0 {
		// One line, the last member: from the end of the one before.
		prev := obj.Members[i-1].Value.EndOffset
		return splice(src, prev, end, "")
	} else {
		stop := end
		for stop < len(src) && (src[stop] == ' ' || src[stop] == '\t') {
			stop++
		}
		out = splice(src, m.Name.StartOffset, stop, "")
	}
	if i > 0 && i == n-1 && comma < 0 {
		prevComma := commaAfter(&obj.Members[i-1], false)
		out = splice(out, prevComma, prevComma+1, "")
	}
	if n == 1 {
		// The object is now empty: "{}", unless comments stay inside.
		closing := bytes.IndexByte(out[objV.StartOffset:], '}') + objV.StartOffset
		if len(bytes.TrimSpace(out[objV.StartOffset+1:closing])) == 0 {
			out = splice(out, objV.StartOffset+1, closing, "")
		}
	}
	return out
}
