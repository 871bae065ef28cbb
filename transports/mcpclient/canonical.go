package mcpclient

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"unicode/utf8"
)

// canonicalHash is [Definition.Hash] of raw. The canonical form is the one
// encoding/json gives raw decoded into a map (UseNumber) and marshalled
// again without HTML escaping, which pins stored before this writer were
// made with; it is written here in one pass over raw, without building
// the map: decoding 10k tools into maps cost ~120 MB of garbage a listing.
func canonicalHash(raw json.RawMessage) (string, error) {
	c := canon{in: raw, out: make([]byte, 0, len(raw))}
	c.space()
	if c.pos < len(c.in) && c.in[c.pos] != '{' {
		if bytes.HasPrefix(c.in[c.pos:], []byte("null")) {
			return "", errors.New("null is not an object")
		}
		return "", fmt.Errorf("a definition must be a JSON object, not %q", c.in[c.pos])
	}
	if err := c.object(0, true); err != nil {
		return "", err
	}
	sum := sha256.Sum256(c.out)
	return hex.EncodeToString(sum[:]), nil
}

// maxDepth is encoding/json's nesting limit.
const maxDepth = 10000

// canon reads one JSON value of in from pos and appends its canonical form
// to out: objects with sorted keys (the last of duplicates kept), no
// insignificant whitespace, numbers as written, strings as encoding/json
// writes them.
type canon struct {
	in  []byte
	pos int
	out []byte
	// members stacks the members of the objects being read (each object's
	// are contiguous: an inner object's are gone before the outer's next);
	// scratch is close's copy of an object's values. Both are reused.
	members []member
	scratch []byte
}

var errEnd = errors.New("unexpected end of JSON input")

func (c *canon) space() {
	for c.pos < len(c.in) && (c.in[c.pos] == ' ' || c.in[c.pos] == '\t' || c.in[c.pos] == '\n' || c.in[c.pos] == '\r') {
		c.pos++
	}
}

// value appends the value at pos, after any whitespace.
func (c *canon) value(depth int) error {
	c.space()
	if c.pos >= len(c.in) {
		return errEnd
	}
	switch b := c.in[c.pos]; {
	case b == '{':
		return c.object(depth+1, false)
	case b == '[':
		return c.array(depth + 1)
	case b == '"':
		_, err := c.str(true)
		return err
	case b == '-' || '0' <= b && b <= '9':
		return c.number()
	}
	for _, lit := range []string{"true", "false", "null"} {
		if bytes.HasPrefix(c.in[c.pos:], []byte(lit)) {
			c.pos += len(lit)
			c.out = append(c.out, lit...)
			return nil
		}
	}
	return fmt.Errorf("invalid character %q at offset %d", c.in[c.pos], c.pos)
}

// member is one key of an object and where its canonical value is in the
// object's scratch copy.
type member struct {
	key        []byte // decoded: a subslice of in for a plain key
	start, end int
}

// object appends the object at pos; top drops its "_meta".
func (c *canon) object(depth int, top bool) error {
	if depth > maxDepth {
		return errors.New("exceeded max depth")
	}
	c.pos++ // '{'
	base, mark := len(c.out), len(c.members)
	for first := true; ; first = false {
		c.space()
		if first && c.pos < len(c.in) && c.in[c.pos] == '}' {
			break
		}
		key, err := c.str(false)
		if err != nil {
			return err
		}
		if err := c.expect(':'); err != nil {
			return err
		}
		start := len(c.out)
		if err := c.value(depth); err != nil {
			return err
		}
		c.members = append(c.members, member{key, start - base, len(c.out) - base})
		if done, err := c.next('}'); done || err != nil {
			return c.close(err, base, mark, top)
		}
	}
	c.pos++
	return c.close(nil, base, mark, top)
}

// close rewrites the object's members, appended from base on, in key
// order, keeping the last of duplicate keys.
func (c *canon) close(err error, base, mark int, top bool) error {
	if err != nil {
		return err
	}
	members := c.members[mark:]
	defer func() { c.members = c.members[:mark] }()
	c.scratch = append(c.scratch[:0], c.out[base:]...)
	scratch := c.scratch
	slices.SortStableFunc(members, func(a, b member) int { return bytes.Compare(a.key, b.key) })
	c.out = append(c.out[:base], '{')
	wrote := false
	for i, m := range members {
		if i+1 < len(members) && bytes.Equal(members[i+1].key, m.key) || top && string(m.key) == "_meta" {
			continue
		}
		if wrote {
			c.out = append(c.out, ',')
		}
		c.out = appendString(c.out, m.key)
		c.out = append(c.out, ':')
		c.out = append(c.out, scratch[m.start:m.end]...)
		wrote = true
	}
	c.out = append(c.out, '}')
	return nil
}

func (c *canon) array(depth int) error {
	if depth > maxDepth {
		return errors.New("exceeded max depth")
	}
	c.pos++ // '['
	c.out = append(c.out, '[')
	c.space()
	if c.pos < len(c.in) && c.in[c.pos] == ']' {
		c.pos++
		c.out = append(c.out, ']')
		return nil
	}
	for {
		if err := c.value(depth); err != nil {
			return err
		}
		done, err := c.next(']')
		if err != nil {
			return err
		}
		if done {
			c.out = append(c.out, ']')
			return nil
		}
		c.out = append(c.out, ',')
	}
}

// next reads the ',' between two elements (false) or the closing end
// (true).
func (c *canon) next(end byte) (bool, error) {
	c.space()
	if c.pos >= len(c.in) {
		return false, errEnd
	}
	switch c.in[c.pos] {
	case ',':
		c.pos++
		return false, nil
	case end:
		c.pos++
		return true, nil
	}
	return false, fmt.Errorf("invalid character %q after an element at offset %d", c.in[c.pos], c.pos)
}

func (c *canon) expect(b byte) error {
	c.space()
	if c.pos >= len(c.in) {
		return errEnd
	}
	if c.in[c.pos] != b {
		return fmt.Errorf("invalid character %q at offset %d, want %q", c.in[c.pos], c.pos, b)
	}
	c.pos++
	return nil
}

// str reads the string at pos and returns it decoded; emit appends its
// canonical form. Strings that need neither decoding nor escaping (nearly
// all) are copied as they are; others go through encoding/json both ways,
// so that its replacements (invalid UTF-8, lone surrogates) and escapes
// stay exactly its own.
func (c *canon) str(emit bool) ([]byte, error) {
	if c.pos >= len(c.in) {
		return nil, errEnd
	}
	if c.in[c.pos] != '"' {
		return nil, fmt.Errorf("invalid character %q at offset %d, want a string", c.in[c.pos], c.pos)
	}
	start, escaped := c.pos, false
	for c.pos++; ; c.pos++ {
		if c.pos >= len(c.in) {
			return nil, errEnd
		}
		b := c.in[c.pos]
		if b == '"' {
			break
		}
		if b < 0x20 {
			return nil, fmt.Errorf("invalid character %q in a string at offset %d", b, c.pos)
		}
		if b == '\\' {
			escaped = true
			c.pos++ // the escaped byte; encoding/json validates the escape below
		}
	}
	c.pos++
	quoted := c.in[start:c.pos]
	if content := quoted[1 : len(quoted)-1]; !escaped && plain(content) {
		if emit {
			c.out = append(c.out, quoted...)
		}
		return content, nil
	}
	var s string
	if err := json.Unmarshal(quoted, &s); err != nil {
		return nil, err
	}
	if emit {
		c.out = appendString(c.out, []byte(s))
	}
	return []byte(s), nil
}

// plain says whether encoding/json writes b (the content of a string) as
// it is: valid UTF-8 with no byte it escapes.
func plain(b []byte) bool {
	for i := 0; i < len(b); i++ {
		if x := b[i]; x < 0x20 || x == '"' || x == '\\' || x == 0xE2 && i+2 < len(b) && b[i+1] == 0x80 && (b[i+2] == 0xA8 || b[i+2] == 0xA9) {
			return false
		}
	}
	return utf8.Valid(b)
}

// appendString appends s as encoding/json writes it without HTML escaping.
func appendString(out []byte, s []byte) []byte {
	if plain(s) {
		out = append(out, '"')
		out = append(out, s...)
		return append(out, '"')
	}
	b, err := marshalNoEscape(string(s))
	if err != nil { // a string always marshals
		panic(err)
	}
	return append(out, b...)
}

// number appends the number at pos as written, after checking its syntax
// (RFC 8259: -?(0|[1-9][0-9]*)(.[0-9]+)?([eE][+-]?[0-9]+)?).
func (c *canon) number() error {
	start := c.pos
	digits := func() int {
		n := 0
		for c.pos < len(c.in) && '0' <= c.in[c.pos] && c.in[c.pos] <= '9' {
			c.pos++
			n++
		}
		return n
	}
	if c.in[c.pos] == '-' {
		c.pos++
	}
	if c.pos < len(c.in) && c.in[c.pos] == '0' {
		c.pos++
	} else if digits() == 0 {
		return fmt.Errorf("invalid number at offset %d", start)
	}
	if c.pos < len(c.in) && c.in[c.pos] == '.' {
		c.pos++
		if digits() == 0 {
			return fmt.Errorf("invalid number at offset %d", start)
		}
	}
	if c.pos < len(c.in) && (c.in[c.pos] == 'e' || c.in[c.pos] == 'E') {
		c.pos++
		if c.pos < len(c.in) && (c.in[c.pos] == '+' || c.in[c.pos] == '-') {
			c.pos++
		}
		if digits() == 0 {
			return fmt.Errorf("invalid number at offset %d", start)
		}
	}
	c.out = append(c.out, c.in[start:c.pos]...)
	return nil
}
