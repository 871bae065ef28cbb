package hosts

import (
	"bytes"
	"errors"
	"fmt"
	"maps"
	"slices"

	"github.com/pelletier/go-toml/v2"
	"github.com/pelletier/go-toml/v2/unstable"
)

// tomlTable is the key under which Codex keeps its servers.
const tomlTable = "mcp_servers"

// tomlDoc is a Codex config.toml: decoded by go-toml for what it says, and
// scanned by go-toml's parser for where each [mcp_servers.<name>] table
// starts and ends, so that an edit replaces or removes only that table's
// lines.
type tomlDoc struct {
	path    string
	src     []byte
	decoded map[string]any
}

func parseTOML(path string, src []byte) (*tomlDoc, error) {
	d := &tomlDoc{path: path, src: src, decoded: map[string]any{}}
	if err := toml.Unmarshal(src, &d.decoded); err != nil {
		pe := &ParseError{Path: path, Problem: err.Error()}
		var de *toml.DecodeError
		if errors.As(err, &de) {
			pe.Line, pe.Column = de.Position()
		}
		return nil, pe
	}
	if v, ok := d.decoded[tomlTable]; ok {
		if _, ok := v.(map[string]any); !ok {
			return nil, &ParseError{Path: path, Problem: fmt.Sprintf("%q is not a table of servers", tomlTable)}
		}
	}
	return d, nil
}

func (d *tomlDoc) entries() ([]string, map[string]any, error) {
	servers, _ := d.decoded[tomlTable].(map[string]any)
	return slices.Sorted(maps.Keys(servers)), servers, nil
}

// span is one table of the entry: from its header's line to the end of its
// last key's line.
type span struct{ start, end int }

// spans finds the tables [mcp_servers.<name>] and [mcp_servers.<name>.…].
// An entry written some other way (an inline table, dotted keys under
// [mcp_servers], an array of tables) is an error: Plexus edits only what it
// can cut out exactly.
func (d *tomlDoc) spans(name string) ([]span, error) {
	var p unstable.Parser
	p.Reset(d.src)
	var out []span
	var table []string
	in := false
	for p.NextExpression() {
		e := p.Expression()
		switch e.Kind {
		case unstable.Table, unstable.ArrayTable:
			key, off := nodeKey(e)
			table = key
			in = under(key, name)
			if in && e.Kind == unstable.ArrayTable {
				return nil, d.unsupported(name)
			}
			if in {
				start := bytes.LastIndexByte(d.src[:off], '\n') + 1
				out = append(out, span{start: start, end: endOfLine(d.src, off)})
			}
		case unstable.KeyValue:
			key, _ := nodeKey(e)
			full := append(slices.Clone(table), key...)
			if !in && under(full, name) {
				return nil, d.unsupported(name)
			}
			if in {
				out[len(out)-1].end = endOfLine(d.src, int(e.Raw.Offset+e.Raw.Length))
			}
		}
	}
	if err := p.Error(); err != nil {
		return nil, &ParseError{Path: d.path, Problem: err.Error()}
	}
	return out, nil
}

func (d *tomlDoc) unsupported(name string) error {
	return &ParseError{Path: d.path, Problem: fmt.Sprintf("the server %q is not written as a [%s.%s] table; edit it by hand", name, tomlTable, name)}
}

// under reports whether key is [mcp_servers, name, …].
func under(key []string, name string) bool {
	return len(key) >= 2 && key[0] == tomlTable && key[1] == name
}

// nodeKey is the key of a table header or key-value, and the offset of its
// first part.
func nodeKey(e *unstable.Node) ([]string, int) {
	var parts []string
	off := -1
	it := e.Key()
	for it.Next() {
		n := it.Node()
		if off < 0 {
			off = int(n.Raw.Offset)
		}
		parts = append(parts, string(n.Data))
	}
	return parts, off
}

// endOfLine is the offset just past the newline ending off's line.
func endOfLine(src []byte, off int) int {
	if i := bytes.IndexByte(src[off:], '\n'); i >= 0 {
		return off + i + 1
	}
	return len(src)
}

func (d *tomlDoc) upsert(name string, entry object) ([]byte, error) {
	if have, ok := d.decodedEntry(name); ok && sameEntry(have, entry) {
		return d.src, nil
	}
	spans, err := d.spans(name)
	if err != nil {
		return nil, err
	}
	text := renderTOMLTable([]string{tomlTable, name}, entry)
	if len(spans) == 0 {
		out := bytes.Clone(d.src)
		if len(out) > 0 {
			if out[len(out)-1] != '\n' {
				out = append(out, '\n')
			}
			out = append(out, '\n') // a blank line before the new table
		}
		return append(out, text...), nil
	}
	out := d.src
	for i := len(spans) - 1; i > 0; i-- {
		out = cutSpan(out, spans[i])
	}
	return splice(out, spans[0].start, spans[0].end, text), nil
}

func (d *tomlDoc) decodedEntry(name string) (any, bool) {
	servers, _ := d.decoded[tomlTable].(map[string]any)
	v, ok := servers[name]
	return v, ok
}

func (d *tomlDoc) remove(name string) ([]byte, bool, error) {
	spans, err := d.spans(name)
	if err != nil || len(spans) == 0 {
		return d.src, false, err
	}
	out := d.src
	for i := len(spans) - 1; i >= 0; i-- {
		out = cutSpan(out, spans[i])
	}
	return out, true, nil
}

// cutSpan removes s's lines and the blank lines after them; a table that
// ended the file takes the blank line before it instead, the one an
// append put there.
func cutSpan(src []byte, s span) []byte {
	out := splice(src, s.start, s.end, "")
	end := s.start
	for end < len(out) {
		next := endOfLine(out, end)
		if len(bytes.TrimSpace(out[end:next])) != 0 {
			break
		}
		end = next
	}
	if end > s.start {
		return splice(out, s.start, end, "")
	}
	if s.start == len(out) && bytes.HasSuffix(out, []byte("\n\n")) {
		return out[:len(out)-1]
	}
	return out
}
