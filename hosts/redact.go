package hosts

import (
	"encoding/json"
	"regexp"
	"slices"
	"strings"
)

// redacted stands for a secret in a diff.
const redacted = "<redacted>"

// secretKeys are the keys whose values a host's file uses for credentials:
// environment variables (API keys), HTTP headers (Authorization) and
// Codex's header and bearer-token settings. Every value under them is
// hidden from a printed diff, whichever server owns it: ReplaceAll removes
// the owner's other servers, and their lines would show in full.
var secretKeys = map[string]bool{
	"env": true, "headers": true, "http_headers": true,
	"env_http_headers": true, "bearer_token_env_var": true,
}

// urlUserinfo and urlQuery match the userinfo and the query of a URL,
// where servers' tokens also travel (https://user:token@…, …?api_key=…).
var (
	urlUserinfo = regexp.MustCompile(`([A-Za-z][A-Za-z0-9+.-]*://)[^/?#@\s"']*@`)
	urlQuery    = regexp.MustCompile(`(://[^?#\s"']*\?)[^#\s"']*`)
)

// redactText hides every secret value in src, a host's file in format f,
// keeping its keys and lines so that the diff still reads as the file.
func redactText(f Format, src string) string {
	if f == FormatCodexTOML {
		src = redactTOML(src)
	} else {
		src = redactJSON(src)
	}
	src = urlUserinfo.ReplaceAllString(src, "${1}"+redacted+"@")
	return urlQuery.ReplaceAllString(src, "${1}"+redacted)
}

// redactJSON replaces every string value under a secret key of src, JSON
// or JSONC, by "<redacted>". It scans tokens rather than decoding, so that
// comments and layout stay as written.
func redactJSON(src string) string {
	// servers says the object's keys are servers' names (a server named
	// "env" is not a secret).
	type frame struct{ obj, secret, wantKey, servers bool }
	var (
		b     strings.Builder
		stack []frame
		key   string // the last key read in the innermost object
	)
	top := func() *frame {
		if len(stack) == 0 {
			return &frame{}
		}
		return &stack[len(stack)-1]
	}
	// underSecret reports whether a value opened now is a secret's.
	underSecret := func() bool {
		t := top()
		return t.secret || (t.obj && !t.servers && secretKeys[key])
	}
	for i := 0; i < len(src); {
		c := src[i]
		switch {
		case c == '/' && strings.HasPrefix(src[i:], "//"):
			j := strings.IndexByte(src[i:], '\n')
			if j < 0 {
				j = len(src) - i
			}
			b.WriteString(src[i : i+j])
			i += j
			continue
		case c == '/' && strings.HasPrefix(src[i:], "/*"):
			j := strings.Index(src[i+2:], "*/")
			end := len(src)
			if j >= 0 {
				end = i + 2 + j + 2
			}
			b.WriteString(src[i:end])
			i = end
			continue
		case c == '"':
			j := i + 1
			for j < len(src) && src[j] != '"' {
				if src[j] == '\\' {
					j++
				}
				j++
			}
			j = min(j+1, len(src))
			lit := src[i:j]
			switch t := top(); {
			case t.obj && t.wantKey:
				if err := json.Unmarshal([]byte(lit), &key); err != nil {
					key = ""
				}
				b.WriteString(lit)
			case underSecret():
				b.WriteString(quote(redactValue(lit)))
			default:
				b.WriteString(lit)
			}
			i = j
			continue
		case c == '{' || c == '[':
			servers := top().obj && (key == "mcpServers" || key == "servers")
			stack = append(stack, frame{obj: c == '{', secret: underSecret(), wantKey: c == '{', servers: servers})
		case c == '}' || c == ']':
			if len(stack) > 0 {
				stack = stack[:len(stack)-1]
			}
		case c == ',':
			top().wantKey = top().obj
		case c == ':':
			top().wantKey = false
		}
		b.WriteByte(c)
		i++
	}
	return b.String()
}

// redactValue is what a diff shows for a secret JSON (or TOML basic) string literal: an
// HTTP authorization keeps its scheme ("Bearer <redacted>"), so that the
// reader still sees what kind of credential is there.
func redactValue(lit string) string {
	var s string
	if err := json.Unmarshal([]byte(lit), &s); err != nil {
		return redacted
	}
	if scheme, _, ok := strings.Cut(s, " "); ok && (strings.EqualFold(scheme, "Bearer") || strings.EqualFold(scheme, "Basic")) {
		return scheme + " " + redacted
	}
	return redacted
}

var (
	tomlHeader  = regexp.MustCompile(`^\s*\[\[?\s*([^\]]*?)\s*\]\]?`)
	tomlKeyLine = regexp.MustCompile(`^\s*((?:"(?:[^"\\]|\\.)*"|'[^']*'|[A-Za-z0-9_-]+)(?:\s*\.\s*(?:"(?:[^"\\]|\\.)*"|'[^']*'|[A-Za-z0-9_-]+))*)\s*=`)
	tomlString  = regexp.MustCompile(`"""|'''|"(?:[^"\\]|\\.)*"|'[^']*'`)
)

// redactTOML replaces every string value under a secret key of src, a
// Codex config.toml, by "<redacted>": in a table [….env], after a key
// env = { … } or env.NAME = …, and in a multi-line string they start.
// It reads line by line, as Codex files are written.
func redactTOML(src string) string {
	lines := strings.SplitAfter(src, "\n")
	var table []string // the current table's path
	closing := ""      // the delimiter ending the secret multi-line string we are in
	for i, l := range lines {
		if closing != "" {
			if j := strings.Index(l, closing); j >= 0 {
				if j > 0 {
					lines[i] = redacted + l[j:]
				}
				closing = ""
			} else {
				lines[i] = redacted + "\n"
			}
			continue
		}
		if m := tomlHeader.FindStringSubmatch(l); m != nil {
			table = tomlPath(m[1])
			continue
		}
		m := tomlKeyLine.FindStringSubmatchIndex(l)
		if m == nil || !secretPath(append(slices.Clone(table), tomlPath(l[m[2]:m[3]])...)) {
			continue
		}
		var val string
		val, closing = redactTOMLValue(l[m[1]:])
		lines[i] = l[:m[1]] + val
	}
	return strings.Join(lines, "")
}

// redactTOMLValue replaces the strings of val, a secret key's value, by
// "<redacted>", but the quoted keys of an inline table ({ "X-Key" = "…" }).
// A multi-line string left open is hidden to the line's end, and its
// delimiter returned.
func redactTOMLValue(val string) (string, string) {
	var b strings.Builder
	last := 0
	for _, m := range tomlString.FindAllStringIndex(val, -1) {
		s := val[m[0]:m[1]]
		b.WriteString(val[last:m[0]])
		last = m[1]
		if s == `"""` || s == `'''` {
			rest := val[m[1]:]
			if j := strings.Index(rest, s); j >= 0 {
				b.WriteString(s + redacted + rest[j:])
				return b.String(), ""
			}
			b.WriteString(s + redacted + "\n")
			return b.String(), s
		}
		if strings.HasPrefix(strings.TrimLeft(val[m[1]:], " \t"), "=") {
			b.WriteString(s) // a key
			continue
		}
		b.WriteString(quote(redactValue(s))) // a literal string ('…') is not JSON: all of it hidden
	}
	b.WriteString(val[last:])
	return b.String(), ""
}

var tomlName = regexp.MustCompile(`"(?:[^"\\]|\\.)*"|'[^']*'|[^.\s]+`)

// tomlPath splits a TOML key path (a.b."c.d") into its names.
func tomlPath(p string) []string {
	var out []string
	for _, m := range tomlName.FindAllString(p, -1) {
		out = append(out, strings.Trim(m, `"'`))
	}
	return out
}

// secretPath reports whether a table or key path names something under a
// secret key. The second name under mcp_servers is a server's, whatever it
// is called (a server named "env" is not a secret).
func secretPath(path []string) bool {
	for i, k := range path {
		if i == 1 && path[0] == tomlTable {
			continue
		}
		if i > 0 && secretKeys[k] {
			return true
		}
	}
	return false
}
