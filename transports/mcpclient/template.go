package mcpclient

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
)

// uriTemplate is a resource template of RFC 6570 level 1: literal text and
// {name} expressions, each naming one variable, with no operator ({+x},
// {?x}, …) and no modifier ({x*}, {x:3}). That level is what resource
// templates use in practice, and it can be expanded exactly without a
// dependency; a template beyond it is not projected (see the package doc).
type uriTemplate struct {
	literals []string // len(vars)+1 literal runs around the variables
	vars     []string // in order of appearance, possibly repeated
}

func parseTemplate(s string) (*uriTemplate, error) {
	t := &uriTemplate{}
	rest := s
	for {
		open := strings.IndexByte(rest, '{')
		if open < 0 {
			if strings.IndexByte(rest, '}') >= 0 {
				return nil, errors.New("an unmatched '}'")
			}
			t.literals = append(t.literals, rest)
			break
		}
		lit := rest[:open]
		if strings.IndexByte(lit, '}') >= 0 {
			return nil, errors.New("an unmatched '}'")
		}
		end := strings.IndexByte(rest[open:], '}')
		if end < 0 {
			return nil, errors.New("an unclosed '{'")
		}
		name := rest[open+1 : open+end]
		if !validVarName(name) {
			return nil, fmt.Errorf("the expression {%s} is beyond RFC 6570 level 1 (one plain variable per expression)", name)
		}
		t.literals = append(t.literals, lit)
		t.vars = append(t.vars, name)
		rest = rest[open+end+1:]
	}
	if len(t.vars) == 0 {
		return nil, errors.New("it has no variable")
	}
	return t, nil
}

// validVarName accepts the varchars of RFC 6570 other than pct-encoded
// ones.
func validVarName(s string) bool {
	if s == "" || s[0] == '.' || s[len(s)-1] == '.' {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '_' || c == '.') {
			return false
		}
	}
	return true
}

// names returns the distinct variables in order.
func (t *uriTemplate) names() []string {
	var out []string
	seen := map[string]bool{}
	for _, v := range t.vars {
		if !seen[v] {
			seen[v] = true
			out = append(out, v)
		}
	}
	return out
}

// schema is the entry's io.input: an object of the variables, each a
// required string.
func (t *uriTemplate) schema() json.RawMessage {
	props := map[string]any{}
	for _, v := range t.vars {
		props[v] = map[string]any{"type": "string"}
	}
	b, _ := marshalNoEscape(map[string]any{"type": "object", "properties": props, "required": t.names(), "additionalProperties": false})
	return b
}

// expand fills the template from input: every variable a string,
// percent-encoded but for the unreserved characters (level 1 simple
// string expansion).
func (t *uriTemplate) expand(input map[string]any) (string, error) {
	var b strings.Builder
	for i, lit := range t.literals {
		b.WriteString(lit)
		if i == len(t.vars) {
			break
		}
		v, ok := input[t.vars[i]].(string)
		if !ok {
			return "", fmt.Errorf("input.%s must be a string", t.vars[i])
		}
		for j := 0; j < len(v); j++ {
			c := v[j]
			if 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '-' || c == '.' || c == '_' || c == '~' {
				b.WriteByte(c)
			} else {
				fmt.Fprintf(&b, "%%%02X", c)
			}
		}
	}
	return b.String(), nil
}
