package mcpclient

import (
	"fmt"
	"maps"
	"net"
	"net/http"
	"net/url"
	"path/filepath"
	"regexp"
	"slices"
	"strings"

	"github.com/plexus-gw/plexus"
)

// ServerConfig is one entry of mcp.json's "mcpServers": the shape other MCP
// hosts use. Exactly one of Command (a stdio server) and URL (a Streamable
// HTTP server) is set.
//
// Env values and Header values are secrets the caller has already resolved:
// they go to the server and nowhere else (never into a log, an error, a
// health detail or an entry).
type ServerConfig struct {
	Command string            `json:"command,omitempty"`
	Args    []string          `json:"args,omitempty"`
	Env     map[string]string `json:"env,omitempty"`
	URL     string            `json:"url,omitempty"`
	Headers map[string]string `json:"headers,omitempty"`
}

// ConfigError says what is wrong with a server's configuration. Field is
// the JSON name of the offending field ("command", "url", "env.TOKEN",
// "headers.Authorization", or "name" for the server's name); Problem never
// holds a value of Env or Headers.
type ConfigError struct {
	Server  string // the server's name, when known
	Field   string
	Problem string
}

func (e *ConfigError) Error() string {
	if e.Server != "" {
		return fmt.Sprintf("mcp server %q: %s: %s", e.Server, e.Field, e.Problem)
	}
	return fmt.Sprintf("mcp server: %s: %s", e.Field, e.Problem)
}

// namePattern is the rule for a server's name: a lower-case slug of at most
// 60 characters, starting with a letter or digit, of letters, digits, '-'
// and '_'. No '.', which separates the parts of an entry id
// (mcp.<server>.<tool>), and short enough that the source id "mcp:<name>"
// stays within the gateway's 64 characters.
var namePattern = regexp.MustCompile(`^[a-z0-9][a-z0-9_-]{0,59}$`)

// ValidName reports whether name may name an MCP server: a slug matching
// ^[a-z0-9][a-z0-9_-]{0,59}$.
func ValidName(name string) bool { return namePattern.MatchString(name) }

// sdkHeaders are set by the MCP SDK itself; a configured header may not
// replace them.
var sdkHeaders = []string{"Accept", "Content-Type", "Content-Length", "Host", "Last-Event-Id", "Mcp-Session-Id", "Mcp-Protocol-Version"}

// Validate checks c alone (not the server's name): exactly one of command
// and url; a url that is absolute http or https, plain http only to a
// loopback host (a configured header is often a credential, and must not
// cross a network in clear); environment names that are portable and not
// the gateway's own PLEXUS_*; header names that are valid and not managed
// by the SDK; no NUL, CR or LF in values. The error is a *[ConfigError].
func (c ServerConfig) Validate() error {
	bad := func(field, format string, args ...any) error {
		return &ConfigError{Field: field, Problem: fmt.Sprintf(format, args...)}
	}
	switch {
	case c.Command == "" && c.URL == "":
		return bad("command", "set either command (a stdio server) or url (a Streamable HTTP server)")
	case c.Command != "" && c.URL != "":
		return bad("url", "set either command or url, not both")
	}
	if c.Command != "" {
		if strings.TrimSpace(c.Command) != c.Command || strings.ContainsRune(c.Command, 0) {
			return bad("command", "must be a program name or path without surrounding spaces")
		}
		if strings.ContainsRune(c.Command, '/') && !filepath.IsAbs(c.Command) {
			return bad("command", "a path must be absolute (a bare name is looked up on the PATH)")
		}
		for i, a := range c.Args {
			if strings.ContainsRune(a, 0) {
				return bad(fmt.Sprintf("args[%d]", i), "holds a NUL byte")
			}
		}
		if len(c.Headers) > 0 {
			return bad("headers", "only a url server takes headers; a command server gets env")
		}
		// Sorted, so that the same config always names the same fault.
		for _, k := range slices.Sorted(maps.Keys(c.Env)) {
			v, field := c.Env[k], "env."+k
			switch {
			case !plexus.ValidEnvName(k):
				return bad(field, "not a portable environment variable name ([A-Za-z_][A-Za-z0-9_]*)")
			case strings.HasPrefix(strings.ToUpper(k), "PLEXUS_"):
				return bad(field, "PLEXUS_* variables are the gateway's own and never reach a server")
			case strings.ContainsRune(v, 0):
				return bad(field, "the value holds a NUL byte, which an environment variable cannot carry")
			}
		}
		return nil
	}
	if len(c.Args) > 0 || len(c.Env) > 0 {
		return bad("url", "a url server takes no args or env (they start a command)")
	}
	u, err := url.Parse(c.URL)
	switch {
	case err != nil:
		return bad("url", "not a valid URL")
	case u.Scheme != "http" && u.Scheme != "https":
		return bad("url", "must be an http or https URL, not %q", u.Scheme)
	case u.Host == "" || u.Hostname() == "":
		return bad("url", "names no host")
	case u.User != nil:
		return bad("url", "must not carry credentials; put them in headers")
	case u.Scheme == "http" && !loopbackHost(u.Hostname()):
		return bad("url", "plain http is allowed only to a loopback host (localhost, 127.0.0.1, [::1]); use https")
	}
	for _, k := range slices.Sorted(maps.Keys(c.Headers)) {
		v, field := c.Headers[k], "headers."+k
		switch {
		case !validHeaderName(k):
			return bad(field, "not a valid HTTP header name")
		case isSDKHeader(k):
			return bad(field, "set by the MCP client itself and cannot be configured")
		case strings.ContainsAny(v, "\x00\r\n"):
			return bad(field, "the value holds a NUL, CR or LF")
		}
	}
	return nil
}

func isSDKHeader(k string) bool {
	for _, h := range sdkHeaders {
		if http.CanonicalHeaderKey(k) == http.CanonicalHeaderKey(h) {
			return true
		}
	}
	return false
}

// loopbackHost reports whether host is "localhost" or a loopback IP.
func loopbackHost(host string) bool {
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// validHeaderName reports whether s is an RFC 9110 token.
func validHeaderName(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0) {
			return false
		}
	}
	return true
}
