// Package mcphost runs the MCP servers the owner wraps (mcp.json): it reads
// and edits the file, starts each server's [mcpclient.Client], registers
// it as the source mcp:<name> behind the pins ([mcpclient.Pinned]), and
// restarts or stops a server whose entry changed or went away.
//
// It must never put a secret value (an env or header value resolved from
// ${secret:NAME}) into a log, an error or the journal, and never start a
// server from an entry that breaks a rule.
package mcphost

// mcp.json: the MCP servers the owner wraps, in the "mcpServers" shape other
// MCP hosts read, so a block pasted from one of them works here as it is.

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/url"
	"regexp"
	"slices"
	"strings"

	"github.com/plexus-gw/plexus/platform"
	"github.com/plexus-gw/plexus/scaffold"
	"github.com/plexus-gw/plexus/transports/mcpclient"
)

// serverKeys are the keys of a server entry Plexus reads. Other keys
// (other hosts' settings: "timeout", "autoApprove", …) are kept in the file
// and reported as ignored, never dropped.
var serverKeys = []string{"command", "args", "env", "url", "headers", "type", "disabled", "oauth"}

// secretRef is how an env or header value names a secret instead of holding
// it: "${secret:github-token}", alone or inside a longer value ("Bearer
// ${secret:api-key}"). The daemon substitutes it when it starts the server.
var secretRef = regexp.MustCompile(`\$\{secret:([^}]*)\}`)

// Server is one server entry as Plexus reads it.
type Server struct {
	Name     string            `json:"name"`
	Command  string            `json:"command,omitempty"`
	Args     []string          `json:"args,omitempty"`
	Env      map[string]string `json:"env,omitempty"`
	URL      string            `json:"url,omitempty"`
	Headers  map[string]string `json:"headers,omitempty"`
	Type     string            `json:"type,omitempty"`
	Disabled bool              `json:"disabled,omitempty"`
	// OAuth is how Plexus signs in to a url server that asks for it
	// (oauth.go); nil when the entry has none.
	OAuth *OAuth `json:"oauth,omitempty"`
	// Ignored are the entry's keys Plexus does not read (an "oauth"
	// object's as "oauth.<key>").
	Ignored []string `json:"ignored,omitempty"`
	// Raw is the entry as written; two servers with equal Raw need no
	// restart when the file changes around them.
	Raw json.RawMessage `json:"-"`
}

// ConfigError is a problem with mcp.json or one server in it. Server is
// "" for the file as a whole.
type ConfigError struct {
	Path    string
	Server  string
	Problem string
}

func (e *ConfigError) Error() string {
	if e.Server == "" {
		return fmt.Sprintf("%s: %s", e.Path, e.Problem)
	}
	return fmt.Sprintf("%s: server %q: %s", e.Path, e.Server, e.Problem)
}

// File is mcp.json as read: its top-level keys and its servers' entries
// kept as written, so that an edit by the CLI changes only the server it
// names ([scaffold.OwnerFile]: Names, Put, Remove, Save).
type File struct {
	*scaffold.OwnerFile
}

// ReadFile reads mcp.json at path; a missing file is an empty document.
func ReadFile(path string) (*File, error) {
	f, err := scaffold.ReadOwnerFile(path, "mcpServers", 0)
	var oe *scaffold.OwnerFileError
	switch {
	case errors.As(err, &oe) && oe.Problem == scaffold.ProblemNotObject:
		return nil, &ConfigError{Path: path, Problem: "not a JSON object: " + jsonProblem(oe.Err) +
			` (expected {"mcpServers": {"<name>": {"command": …} | {"url": …}}})`}
	case errors.As(err, &oe):
		return nil, &ConfigError{Path: path, Problem: `"mcpServers" must be an object of server entries`}
	case err != nil:
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	return &File{f}, nil
}

func jsonProblem(err error) string {
	if err == nil {
		return "null"
	}
	return err.Error()
}

// Server decodes and checks server name's entry.
func (f *File) Server(name string) (Server, error) {
	raw, ok := f.Entry(name)
	if !ok {
		return Server{}, &ConfigError{Path: f.Path(), Server: name, Problem: "no such server"}
	}
	return ParseServer(f.Path(), name, raw)
}

// ParseServer decodes and checks server name's entry raw of the file at
// path: the client's own rules, the "type" and the secret references'
// names. Secret values are not looked up here ([ResolveSecrets] does).
func ParseServer(path, name string, raw json.RawMessage) (Server, error) {
	if !mcpclient.ValidName(name) {
		return Server{}, &ConfigError{Path: path, Server: name,
			Problem: "a server name is 1 to 60 of a-z, 0-9, '_' and '-', starting with a letter or digit"}
	}
	s, problem := decodeServer(name, raw)
	if problem == "" {
		problem = checkServer(s)
	}
	if problem != "" {
		return Server{}, &ConfigError{Path: path, Server: name, Problem: problem}
	}
	return s, nil
}

// decodeServer reads raw as server name's entry, noting the keys Plexus
// does not read; it returns the problem with a value of the wrong type.
func decodeServer(name string, raw json.RawMessage) (Server, string) {
	var keys map[string]json.RawMessage
	if err := json.Unmarshal(raw, &keys); err != nil || keys == nil {
		return Server{}, "not a JSON object"
	}
	s := Server{Name: name, Raw: raw}
	for k := range keys {
		if !slices.Contains(serverKeys, k) {
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
		OAuth    json.RawMessage   `json:"oauth"`
	}
	if err := json.Unmarshal(raw, &typed); err != nil {
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) {
			return Server{}, fmt.Sprintf("%q must be %s", te.Field, te.Type.String())
		}
		return Server{}, err.Error()
	}
	s.Args, s.Env, s.Headers, s.Type, s.Disabled = typed.Args, typed.Env, typed.Headers, typed.Type, typed.Disabled
	if typed.Command != nil {
		s.Command = *typed.Command
	}
	if typed.URL != nil {
		s.URL = *typed.URL
	}
	if len(typed.OAuth) > 0 && string(typed.OAuth) != "null" {
		o, ignored, problem := decodeOAuth(typed.OAuth)
		if problem != "" {
			return Server{}, problem
		}
		s.OAuth = o
		s.Ignored = append(s.Ignored, ignored...)
		slices.Sort(s.Ignored)
	}
	return s, ""
}

// checkServer returns what is wrong with s, "" when nothing is: the
// client's own rules, the "type", and each secret reference's name.
func checkServer(s Server) string {
	// The client's own rules (one of command and url, loopback-only plain
	// http, no PLEXUS_* env, no SDK-managed headers, …), with secret
	// references still unresolved: they are checked by name below.
	cfg := mcpclient.ServerConfig{Command: s.Command, Args: s.Args, Env: s.Env, URL: s.URL, Headers: s.Headers}
	if err := cfg.Validate(); err != nil {
		var ce *mcpclient.ConfigError
		if errors.As(err, &ce) {
			return ce.Field + ": " + ce.Problem
		}
		return err.Error()
	}
	switch s.Type {
	case "", "stdio", "http", "streamable-http", "streamableHttp":
	case "sse":
		return `the legacy SSE transport is not supported; use the server's Streamable HTTP endpoint ("url", type "http")`
	default:
		return fmt.Sprintf(`"type" %q is not one of stdio, http`, s.Type)
	}
	if s.Type == "stdio" && s.Command == "" || s.Type != "" && s.Type != "stdio" && s.URL == "" {
		return fmt.Sprintf(`"type" %q does not match the entry (a "command" is stdio, a "url" is http)`, s.Type)
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
					return fmt.Sprintf("%s.%s names the secret %q, which is not a secret name", field, k, ref[1])
				}
			}
		}
	}
	return checkOAuth(s)
}

// SecretNames lists the secrets s refers to, sorted and without duplicates.
func (s Server) SecretNames() []string {
	var out []string
	for _, m := range []map[string]string{s.Env, s.Headers, s.oauthSecrets()} {
		for _, v := range m {
			for _, ref := range secretRef.FindAllStringSubmatch(v, -1) {
				out = append(out, ref[1])
			}
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// ResolveSecrets substitutes every ${secret:NAME} of m through lookup. The values
// it returns go to the server only: never to a log, an error or the journal.
func ResolveSecrets(m map[string]string, lookup func(name string) (string, error)) (map[string]string, error) {
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

// Describe says where a server runs, for list: the command line or the URL,
// with secret references as written (never their values).
func (s Server) Describe() string {
	if s.URL != "" {
		return s.URL
	}
	return strings.Join(append([]string{s.Command}, s.Args...), " ")
}

// Where says where a server runs for the journal: the program without its
// arguments, or the URL without its user info, query and fragment. An owner
// may have written a token into an argument or a query string (mcp.json
// checks secret references only in env and headers), and the journal and
// its mirror must never hold one.
func (s Server) Where() string {
	if s.URL == "" {
		return s.Command
	}
	u, err := url.Parse(s.URL)
	if err != nil {
		return "(an unparsable URL)"
	}
	u.User, u.RawQuery, u.ForceQuery, u.Fragment, u.RawFragment = nil, "", false, "", ""
	return u.String()
}

// EntryOf is a server's mcp.json entry as `plexus mcp add` writes it: a
// command with its args, or a url; env, headers and oauth when given.
func EntryOf(command string, args []string, url string, env, headers map[string]string, oauth *OAuth) (json.RawMessage, error) {
	entry := map[string]any{}
	if url != "" {
		entry["url"] = url
	} else {
		entry["command"] = command
		if len(args) > 0 {
			entry["args"] = args
		}
	}
	if env != nil {
		entry["env"] = env
	}
	if headers != nil {
		entry["headers"] = headers
	}
	if oauth != nil {
		entry["oauth"] = oauth
	}
	return json.Marshal(entry)
}
