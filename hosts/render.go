package hosts

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strings"
)

// quote is s as a JSON string. HTML characters stay as they are (a config
// file is not a web page); everything that could end the string or the
// line is escaped. The result is a valid TOML basic string too, once DEL,
// which JSON leaves alone and TOML forbids, is escaped.
func quote(s string) string {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(s); err != nil {
		panic(err) // a string always encodes
	}
	return strings.ReplaceAll(strings.TrimSuffix(b.String(), "\n"), "\x7f", `\u007f`)
}

// sortedObject is m as an object, keys sorted.
func sortedObject(m map[string]string) object {
	o := make(object, 0, len(m))
	for _, k := range slices.Sorted(maps.Keys(m)) {
		o = append(o, pair{k, m[k]})
	}
	return o
}

// renderJSON writes v as JSON the way people indent it: one member a line,
// ind the indentation of the line v starts on, unit one level more (""
// writes it all on one line); string lists stay on one line, as hosts' own
// examples write "args".
func renderJSON(v any, ind, unit string) string {
	switch x := v.(type) {
	case object:
		if len(x) == 0 {
			return "{}"
		}
		if unit == "" {
			// A file written on one line gets its entry on one line.
			parts := make([]string, len(x))
			for i, p := range x {
				parts[i] = quote(p.key) + ": " + renderJSON(p.val, "", "")
			}
			return "{" + strings.Join(parts, ", ") + "}"
		}
		var b strings.Builder
		b.WriteString("{\n")
		for i, p := range x {
			b.WriteString(ind + unit + quote(p.key) + ": " + renderJSON(p.val, ind+unit, unit))
			if i < len(x)-1 {
				b.WriteByte(',')
			}
			b.WriteByte('\n')
		}
		b.WriteString(ind + "}")
		return b.String()
	case map[string]string:
		return renderJSON(sortedObject(x), ind, unit)
	case []string:
		return "[" + strings.Join(quoteAll(x), ", ") + "]"
	case string:
		return quote(x)
	}
	panic(fmt.Sprintf("hosts: cannot render a %T", v)) // shape builds only the kinds above
}

func quoteAll(list []string) []string {
	out := make([]string, len(list))
	for i, s := range list {
		out[i] = quote(s)
	}
	return out
}

var bareKey = regexp.MustCompile(`^[A-Za-z0-9_-]+$`)

// tomlKey is k as a TOML key: bare when it may be, quoted otherwise.
func tomlKey(k string) string {
	if bareKey.MatchString(k) {
		return k
	}
	return quote(k)
}

// renderTOMLTable writes o as the TOML table [header], one key a line;
// maps become inline tables, as Codex's own examples write env and
// http_headers.
func renderTOMLTable(header []string, o object) string {
	keys := make([]string, len(header))
	for i, k := range header {
		keys[i] = tomlKey(k)
	}
	var b strings.Builder
	b.WriteString("[" + strings.Join(keys, ".") + "]\n")
	for _, p := range o {
		b.WriteString(tomlKey(p.key) + " = " + renderTOMLValue(p.val) + "\n")
	}
	return b.String()
}

func renderTOMLValue(v any) string {
	switch x := v.(type) {
	case string:
		return quote(x)
	case []string:
		return "[" + strings.Join(quoteAll(x), ", ") + "]"
	case map[string]string:
		var parts []string
		for _, k := range slices.Sorted(maps.Keys(x)) {
			parts = append(parts, tomlKey(k)+" = "+quote(x[k]))
		}
		if len(parts) == 0 {
			return "{}"
		}
		return "{ " + strings.Join(parts, ", ") + " }"
	}
	panic(fmt.Sprintf("hosts: cannot render a %T", v)) // shape builds only the kinds above
}
