package cliexec

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
)

// template is one parsed element of route.args: literal text and
// placeholders, in order. It always expands to exactly one argument.
type template []segment

// segment is literal text, or a placeholder when path is set.
type segment struct {
	text string   // the literal text, or the placeholder's name as written
	path []string // the field path of a placeholder: "a.b" → ["a", "b"]
}

// parseTemplate parses one argv element. "{name}" is a placeholder, "{{"
// and "}}" are literal braces; any other brace is an error.
func parseTemplate(s string) (template, error) {
	var t template
	var lit strings.Builder
	flush := func() {
		if lit.Len() > 0 {
			t = append(t, segment{text: lit.String()})
			lit.Reset()
		}
	}
	for i := 0; i < len(s); {
		switch c := s[i]; {
		case c == '{' && strings.HasPrefix(s[i:], "{{"):
			lit.WriteByte('{')
			i += 2
		case c == '}' && strings.HasPrefix(s[i:], "}}"):
			lit.WriteByte('}')
			i += 2
		case c == '}':
			return nil, fmt.Errorf(`lone "}" at byte %d (write "}}" for a literal brace)`, i)
		case c == '{':
			j := strings.IndexAny(s[i+1:], "{}")
			if j < 0 || s[i+1+j] == '{' {
				return nil, fmt.Errorf(`unclosed "{" at byte %d (write "{{" for a literal brace)`, i)
			}
			name := s[i+1 : i+1+j]
			path := strings.Split(name, ".")
			if name == "" || containsEmpty(path) {
				return nil, fmt.Errorf("placeholder %q at byte %d names no field", "{"+name+"}", i)
			}
			flush()
			t = append(t, segment{text: name, path: path})
			i += j + 2
		default:
			j := strings.IndexAny(s[i:], "{}")
			if j < 0 {
				j = len(s) - i
			}
			lit.WriteString(s[i : i+j])
			i += j
		}
	}
	flush()
	return t, nil
}

func containsEmpty(ss []string) bool {
	for _, s := range ss {
		if s == "" {
			return true
		}
	}
	return false
}

// errMissing reports a placeholder whose field is not in the input.
type errMissing struct{ field string }

func (e *errMissing) Error() string { return fmt.Sprintf("input field %q is missing", e.field) }

// expand builds the argument t stands for. The result is one string
// whatever the values hold: no splitting, no quoting, no interpretation.
func (t template) expand(input map[string]any) (string, error) {
	if len(t) == 1 && t[0].path == nil {
		return t[0].text, nil
	}
	var sb strings.Builder
	for _, seg := range t {
		if seg.path == nil {
			sb.WriteString(seg.text)
			continue
		}
		v, ok := lookup(input, seg.path)
		if !ok {
			return "", &errMissing{field: seg.text}
		}
		s, err := argText(v)
		if err != nil {
			return "", fmt.Errorf("input field %q: %w", seg.text, err)
		}
		sb.WriteString(s)
	}
	return sb.String(), nil
}

// lookup follows path through nested objects.
func lookup(input map[string]any, path []string) (any, bool) {
	var cur any = input
	for _, key := range path {
		m, ok := cur.(map[string]any)
		if !ok {
			return nil, false
		}
		if cur, ok = m[key]; !ok {
			return nil, false
		}
	}
	return cur, true
}

// argText is the text of a value as an argument: a string as is, anything
// else as its JSON encoding (numbers and booleans are their JSON text).
func argText(v any) (string, error) {
	switch v := v.(type) {
	case string:
		return v, nil
	case json.Number:
		return v.String(), nil
	case bool:
		if v {
			return "true", nil
		}
		return "false", nil
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false) // "<" is no more dangerous in argv than "a"
	if err := enc.Encode(v); err != nil {
		return "", errors.New("the value cannot be encoded as JSON")
	}
	return strings.TrimSuffix(buf.String(), "\n"), nil
}

// errOption reports an input value that would become an argument starting
// with "-": the program could read it as an option (--output=…, -e …).
type errOption struct {
	arg   int    // index in route.args
	field string // the placeholder that leads the argument
}

func (e *errOption) Error() string {
	return fmt.Sprintf("route.args[%d]: the value of input field %q starts with \"-\", and the program would read it as an option "+
		"(a value from input may start with \"-\" only after a literal \"--\" argument)", e.arg, e.field)
}

// expandArgv builds the argv the templates stand for, one argument each.
// An argument that starts with "-" because of call input (its template
// starts with a placeholder) is refused with [*errOption] unless a literal
// "--" argument comes before it: input must never choose an option.
func expandArgv(tmpls []template, input map[string]any) ([]string, error) {
	args := make([]string, len(tmpls))
	endOfOptions := false
	for i, t := range tmpls {
		a, err := t.expand(input)
		if err != nil {
			return nil, fmt.Errorf("route.args[%d]: %w", i, err)
		}
		if !endOfOptions && len(t) > 0 && t[0].path != nil && strings.HasPrefix(a, "-") {
			return nil, &errOption{arg: i, field: t[0].text}
		}
		if len(t) == 1 && t[0].path == nil && t[0].text == "--" {
			endOfOptions = true
		}
		args[i] = a
	}
	return args, nil
}
