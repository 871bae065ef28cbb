package main

// mcp.json: the MCP servers the owner wraps, in the "mcpServers" shape other
// MCP hosts read, so a block pasted from one of them works here as it is.

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"regexp"
	"slices"
	"strings"

	"github.com/plexus-gw/plexus/platform"
	"github.com/plexus-gw/plexus/transports/mcpclient"
)

// mcpServerKeys are the keys of a server entry Plexus reads. Other keys
// (other hosts' settings: "timeout", "autoApprove", …) are kept in the file
// and reported as ignored, never dropped.
var mcpServerKeys = []string{"command", "args", "env", "url", "headers", "type", "disabled"}

// secretRef is how an env or header value names a secret instead of holding
// it: "${secret:github-token}", alone or inside a longer value ("Bearer
// ${secret:api-key}"). The daemon substitutes it when it starts the server.
var secretRef = regexp.MustCompile(`\$\{secret:([^}]*)\}`)

// mcpServer is one server entry as Plexus reads it.
type mcpServer struct {
	Name     string            `json:"name"`
	Command  string            `json:"command,omitempty"`
	Args     []string          `json:"args,omitempty"`
	Env      map[string]string `json:"env,omitempty"`
	URL      string            `json:"url,omitempty"`
	Headers  map[string]string `json:"headers,omitempty"`
	Type     string            `json:"type,omitempty"`
	Disabled bool              `json:"disabled,omitempty"`
	// Ignored are the entry's keys Plexus does not read.
	Ignored []string `json:"ignored,omitempty"`
	// Raw is the entry as written; two servers with equal Raw need no
	// restart when the file changes around them.
	Raw json.RawMessage `json:"-"`
}

// MCPConfigError is a problem with mcp.json or one server in it. Server is
// "" for the file as a whole.
type MCPConfigError struct {
	Path    string
	Server  string
	Problem string
}

func (e *MCPConfigError) Error() string {
	if e.Server == "" {
		return fmt.Sprintf("%s: %s", e.Path, e.Problem)
	}
	return fmt.Sprintf("%s: server %q: %s", e.Path, e.Server, e.Problem)
}

// mcpDoc is mcp.json as read: its top-level keys and its servers' entries
// kept as written, so that an edit by the CLI changes only the server it
// names.
type mcpDoc struct {
	path    string
	top     map[string]json.RawMessage
	servers map[string]json.RawMessage
}

// readMCPDoc reads path; a missing file is an empty document.
func readMCPDoc(path string) (*mcpDoc, error) {
	d := &mcpDoc{path: path, top: map[string]json.RawMessage{}, servers: map[string]json.RawMessage{}}
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return d, nil
	} else if err != nil {
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	if len(bytes.TrimSpace(b)) == 0 {
		return d, nil
	}
	if err := json.Unmarshal(b, &d.top); err != nil || d.top == nil {
		return nil, &MCPConfigError{Path: path, Problem: "not a JSON object: " + jsonProblem(err) +
			` (expected {"mcpServers": {"<name>": {"command": …} | {"url": …}}})`}
	}
	if raw, ok := d.top["mcpServers"]; ok && string(bytes.TrimSpace(raw)) != "null" {
		if err := json.Unmarshal(raw, &d.servers); err != nil || d.servers == nil {
			return nil, &MCPConfigError{Path: path, Problem: `"mcpServers" must be an object of server entries`}
		}
	}
	return d, nil
}

func jsonProblem(err error) string {
	if err == nil {
		return "null"
	}
	return err.Error()
}

// names lists the servers, sorted.
func (d *mcpDoc) names() []string {
	out := make([]string, 0, len(d.servers))
	for n := range d.servers {
		out = append(out, n)
	}
	slices.Sort(out)
	return out
}

// server decodes and checks one entry.
func (d *mcpDoc) server(name string) (mcpServer, error) {
	raw, ok := d.servers[name]
	if !ok {
		return mcpServer{}, &MCPConfigError{Path: d.path, Server: name, Problem: "no such server"}
	}
	return parseMCPServer(d.path, name, raw)
}

func parseMCPServer(path, name string, raw json.RawMessage) (mcpServer, error) {
	bad := func(format string, a ...any) (mcpServer, error) {
		return mcpServer{}, &MCPConfigError{Path: path, Server: name, Problem: fmt.Sprintf(format, a...)}
	}
	if !mcpclient.ValidName(name) {
		return bad("a server name is 1 to 60 of a-z, 0-9, '_' and '-', starting with a letter or digit")
	}
	var keys map[string]json.RawMessage
	if err := json.Unmarshal(raw, &keys); err != nil || keys == nil {
		return bad("not a JSON object")
	}
	s := mcpServer{Name: name, Raw: raw}
	for k := range keys {
		if !slices.Contains(mcpServerKeys, k) {
			s.Ignored = append(s.Ignored, k)
		}
	}
	slices.Sort(s.Ignored)
	var typed struct {
		Command  *string           `json:"command"`
		Args     []string          `json:"args"`
		Env      map[string]string `json:"env"`
		URL      *string           `json:"url"`
		Headers  map[string]string `json:"headers"`
		Type     string            `json:"type"`
		Disabled bool              `json:"disabled"`
	}
	if err := json.Unmarshal(raw, &typed); err != nil {
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) {
			return bad("%q must be %s", te.Field, te.Type.String())
		}
		return bad("%v", err)
	}
	s.Args, s.Env, s.Headers, s.Type, s.Disabled = typed.Args, typed.Env, typed.Headers, typed.Type, typed.Disabled
	if typed.Command != nil {
		s.Command = *typed.Command
	}
	if typed.URL != nil {
		s.URL = *typed.URL
	}
	// The client's own rules (one of command and url, loopback-only plain
	// http, no PLEXUS_* env, no SDK-managed headers, …), with secret
	// references still unresolved: they are checked by name below.
	cfg := mcpclient.ServerConfig{Command: s.Command, Args: s.Args, Env: s.Env, URL: s.URL, Headers: s.Headers}
	if err := cfg.Validate(); err != nil {
		var ce *mcpclient.ConfigError
		if errors.As(err, &ce) {
			return bad("%s: %s", ce.Field, ce.Problem)
		}
		return bad("%v", err)
	}
	switch s.Type {
	case "", "stdio", "http", "streamable-http", "streamableHttp":
	case "sse":
		return bad(`the legacy SSE transport is not supported; use the server's Streamable HTTP endpoint ("url", type "http")`)
	default:
		return bad(`"type" %q is not one of stdio, http`, s.Type)
	}
	if s.Type == "stdio" && s.Command == "" || s.Type != "" && s.Type != "stdio" && s.URL == "" {
		return bad(`"type" %q does not match the entry (a "command" is stdio, a "url" is http)`, s.Type)
	}
	// In a fixed order, so that the same file always names the same fault.
	for _, section := range []struct {
		field string
		m     map[string]string
	}{{"env", s.Env}, {"headers", s.Headers}} {
		field, m := section.field, section.m
		for _, k := range slices.Sorted(maps.Keys(m)) {
			for _, ref := range secretRef.FindAllStringSubmatch(m[k], -1) {
				if !platform.ValidSecretName(ref[1]) {
					return bad("%s.%s names the secret %q, which is not a secret name", field, k, ref[1])
				}
			}
		}
	}
	return s, nil
}

// secretNames lists the secrets s refers to, sorted and without duplicates.
func (s mcpServer) secretNames() []string {
	var out []string
	for _, m := range []map[string]string{s.Env, s.Headers} {
		for _, v := range m {
			for _, ref := range secretRef.FindAllStringSubmatch(v, -1) {
				out = append(out, ref[1])
			}
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// resolve substitutes every ${secret:NAME} of m through lookup. The values
// it returns go to the server only: never to a log, an error or the journal.
func resolveSecrets(m map[string]string, lookup func(name string) (string, error)) (map[string]string, error) {
	if m == nil {
		return nil, nil
	}
	out := make(map[string]string, len(m))
	for k, v := range m {
		var failed error
		out[k] = secretRef.ReplaceAllStringFunc(v, func(ref string) string {
			name := secretRef.FindStringSubmatch(ref)[1]
			val, err := lookup(name)
			if err != nil && failed == nil {
				failed = fmt.Errorf("%s: %w", k, err)
			}
			return val
		})
		if failed != nil {
			return nil, failed
		}
	}
	return out, nil
}

// put sets server name's entry to raw (a new server, or --replace).
func (d *mcpDoc) put(name string, raw json.RawMessage) {
	d.servers[name] = raw
}

// remove drops server name; false when there was none.
func (d *mcpDoc) remove(name string) bool {
	if _, ok := d.servers[name]; !ok {
		return false
	}
	delete(d.servers, name)
	return true
}

// write saves the document atomically (0600: env values may be secrets an
// owner chose to write in plain), keeping every other top-level key.
func (d *mcpDoc) write() error {
	servers, err := json.Marshal(d.servers)
	if err != nil {
		return err
	}
	d.top["mcpServers"] = servers
	b, err := json.MarshalIndent(d.top, "", "  ")
	if err != nil {
		return err
	}
	return platform.WriteFileAtomic(d.path, append(b, '\n'), platform.WriteOptions{Mode: 0o600})
}

// describe says where a server runs, for list: the command line or the URL,
// with secret references as written (never their values).
func (s mcpServer) describe() string {
	if s.URL != "" {
		return s.URL
	}
	return strings.Join(append([]string{s.Command}, s.Args...), " ")
}
