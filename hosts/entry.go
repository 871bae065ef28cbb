package hosts

import (
	"encoding/json"
	"fmt"
	"maps"
	"reflect"
	"slices"
)

// Entry is a server entry as Plexus means it: a command to launch (stdio)
// or a URL to reach (HTTP), whatever the host calls the keys.
type Entry struct {
	Command string            `json:"command,omitempty"`
	Args    []string          `json:"args,omitempty"`
	Env     map[string]string `json:"env,omitempty"`
	URL     string            `json:"url,omitempty"`
	Headers map[string]string `json:"headers,omitempty"`
}

// HTTP reports whether e is an HTTP entry.
func (e Entry) HTTP() bool { return e.URL != "" }

// NoHTTPError is an HTTP entry asked of a host whose file cannot hold one.
type NoHTTPError struct{ Host string }

func (e *NoHTTPError) Error() string {
	return e.Host + " reads only servers it launches from its file (add remote servers in its settings); connect it without --http"
}

// pair is one member of an object rendered in order.
type pair struct {
	key string
	val any
}

// object is a JSON object (or TOML table) whose keys keep their order.
type object []pair

// shape renders e the way h writes a server entry, keys in a fixed order.
func (h Host) shape(e Entry) (object, error) {
	var o object
	if e.HTTP() {
		if h.URLKey == "" {
			return nil, &NoHTTPError{Host: h.Label}
		}
		if h.HTTPType != "" {
			o = append(o, pair{"type", h.HTTPType})
		}
		o = append(o, pair{h.URLKey, e.URL})
		if len(e.Headers) > 0 {
			o = append(o, pair{h.HeadersKey, e.Headers})
		}
		return o, nil
	}
	if h.StdioType != "" {
		o = append(o, pair{"type", h.StdioType})
	}
	o = append(o, pair{"command", e.Command})
	if e.Args != nil {
		o = append(o, pair{"args", e.Args})
	}
	if len(e.Env) > 0 {
		o = append(o, pair{"env", e.Env})
	}
	return o, nil
}

// Server is one server a host's file configures, read for import.
type Server struct {
	Name  string `json:"name"`
	Entry Entry  `json:"entry"`
	// Type is the entry's "type" as written ("stdio", "http", "sse"; ""
	// when none).
	Type string `json:"type,omitempty"`
	// Disabled is the entry's "disabled": carried over, so that a server
	// the owner switched off stays off behind Plexus.
	Disabled bool `json:"disabled,omitempty"`
	// Ignored lists the entry's keys Plexus does not carry over (a host's
	// own settings: "cwd", "timeout", "envFile", …).
	Ignored []string `json:"ignored,omitempty"`
	// Problem says why the entry cannot be read as a server ("" when it
	// can): it is listed, never guessed at.
	Problem string `json:"problem,omitempty"`
}

// readServer reads one server entry of h's file, decoded from JSON or TOML
// as map[string]any.
func (h Host) readServer(name string, raw any) Server {
	s := Server{Name: name}
	m, ok := raw.(map[string]any)
	if !ok {
		s.Problem = "not an object"
		return s
	}
	str := func(k string) string {
		v, _ := m[k].(string)
		return v
	}
	s.Type = str("type")
	s.Entry.Command = str("command")
	for _, k := range []string{"url", "httpUrl", "serverUrl"} {
		if u := str(k); u != "" && s.Entry.URL == "" {
			s.Entry.URL = u
		}
	}
	if h.URLKey == "httpUrl" && str("url") != "" && str("httpUrl") == "" {
		s.Type = "sse" // Gemini CLI's "url" is a legacy SSE endpoint
	}
	s.Disabled, _ = m["disabled"].(bool)
	var bad []string
	s.Entry.Args, bad = stringList(m["args"], "args", bad)
	s.Entry.Env, bad = stringMap(m["env"], "env", bad)
	s.Entry.Headers, bad = stringMap(m["headers"], "headers", bad)
	if h, b := stringMap(m["http_headers"], "http_headers", bad); h != nil {
		s.Entry.Headers, bad = h, b
	} else {
		bad = b
	}
	for _, k := range slices.Sorted(maps.Keys(m)) {
		switch k {
		case "type", "command", "args", "env", "url", "httpUrl", "serverUrl", "headers", "http_headers", "disabled":
		default:
			s.Ignored = append(s.Ignored, k)
		}
	}
	switch {
	case len(bad) > 0:
		s.Problem = fmt.Sprintf("%s must hold strings", bad[0])
	case s.Entry.Command == "" && s.Entry.URL == "":
		s.Problem = "neither a command nor a URL"
	case s.Entry.Command != "" && s.Entry.URL != "":
		s.Problem = "both a command and a URL"
	}
	return s
}

func stringList(v any, key string, bad []string) ([]string, []string) {
	if v == nil {
		return nil, bad
	}
	list, ok := v.([]any)
	if !ok {
		return nil, append(bad, key)
	}
	out := make([]string, 0, len(list))
	for _, x := range list {
		s, ok := x.(string)
		if !ok {
			return nil, append(bad, key)
		}
		out = append(out, s)
	}
	return out, bad
}

func stringMap(v any, key string, bad []string) (map[string]string, []string) {
	if v == nil {
		return nil, bad
	}
	m, ok := v.(map[string]any)
	if !ok {
		return nil, append(bad, key)
	}
	out := make(map[string]string, len(m))
	for k, x := range m {
		s, ok := x.(string)
		if !ok {
			return nil, append(bad, key)
		}
		out[k] = s
	}
	return out, bad
}

// MCPJSON is s as an entry of Plexus's own mcp.json ("command", "args",
// "env" or "url", "headers"), encoded by encoding/json so that nothing in a
// name or value can break out of its string.
func (s Server) MCPJSON() (json.RawMessage, error) {
	e := s.Entry
	out := map[string]any{}
	if e.URL != "" {
		out["url"] = e.URL
		if s.Type == "sse" {
			out["type"] = "sse" // refused by mcp.json's rules, with its reason
		}
	} else {
		out["command"] = e.Command
	}
	if e.Args != nil {
		out["args"] = e.Args
	}
	if e.Env != nil {
		out["env"] = e.Env
	}
	if e.Headers != nil {
		out["headers"] = e.Headers
	}
	if s.Disabled {
		out["disabled"] = true
	}
	return json.Marshal(out)
}

// sameEntry reports whether raw (a decoded entry) says what want says,
// whatever the order or formatting of its keys.
func sameEntry(raw any, want object) bool {
	b, err := json.Marshal(toMap(want))
	if err != nil {
		return false
	}
	var w any
	if err := json.Unmarshal(b, &w); err != nil {
		return false
	}
	b, err = json.Marshal(raw)
	if err != nil {
		return false
	}
	var got any
	if err := json.Unmarshal(b, &got); err != nil {
		return false
	}
	return reflect.DeepEqual(got, w)
}

func toMap(o object) map[string]any {
	m := make(map[string]any, len(o))
	for _, p := range o {
		if sub, ok := p.val.(object); ok {
			m[p.key] = toMap(sub)
			continue
		}
		m[p.key] = p.val
	}
	return m
}
