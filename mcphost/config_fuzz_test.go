package mcphost

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/plexus-gw/plexus/internal/plexustest"
	"github.com/plexus-gw/plexus/platform"
	"github.com/plexus-gw/plexus/transports/mcpclient"
)

// FuzzMCPConfig reads a fuzzed mcp.json as the daemon and the CLI do.
// Properties: refusals are *ConfigError naming the file (and the server
// when one is at fault); an accepted server satisfies the MCP client's own
// rules and names only valid secrets; writing the document back and reading
// it again gives the same servers and keeps every other top-level key; and
// no error quotes an env or header value (a planted canary never appears).
func FuzzMCPConfig(f *testing.F) {
	// mcp.json documents in the shapes other hosts write, and broken ones.
	for _, s := range []string{
		``, `{}`, `null`, `[]`, `{"mcpServers":null}`, `{"mcpServers":[]}`, `{"mcpServers":{"a":null}}`,
		`{"mcpServers":{"everything":{"command":"npx","args":["-y","@modelcontextprotocol/server-everything"],"env":{"A":"1"}}},"other":{"k":true}}`,
		`{"mcpServers":{"remote":{"url":"http://127.0.0.1:9/mcp","headers":{"Authorization":"Bearer ${secret:api-key}","X-Key":"sk-live-1234"}}}}`,
		`{"mcpServers":{"gh":{"command":"gh-mcp","timeout":30,"autoApprove":["x"],"type":"stdio","env":{"GITHUB_TOKEN":"ghp_private"}}}}`,
		`{"mcpServers":{"off":{"command":"x","disabled":true},"GitHub":{"command":"x"}}}`,
		`{"mcpServers":{"a":{"command":"x","env":{"PLEXUS_HOME":"/","T":"${secret:../../etc/passwd}"}}}}`,
		`{"mcpServers":{"a":{"url":"https://user:pw@example.com/mcp","headers":{"Mcp-Session-Id":"s"}}}}`,
		`{"mcpServers":{"a":{"url":"http://example.com/sse","type":"sse"}}}`,
	} {
		f.Add([]byte(s))
	}
	dir := f.TempDir()
	f.Fuzz(func(t *testing.T, b []byte) {
		path := plexustest.WriteFile(t, dir, "mcp.json", b)
		d, err := ReadFile(path)
		if err != nil {
			var ce *ConfigError
			if !errors.As(err, &ce) || ce.Path != path || ce.Server != "" {
				t.Fatalf("ReadFile = %v (%T), want a ConfigError for the file", err, err)
			}
		} else {
			servers := checkMCPServers(t, d)
			if err := d.Save(); err != nil {
				t.Fatalf("write: %v", err)
			}
			again, err := ReadFile(path)
			if err != nil {
				t.Fatalf("mcp.json as written does not read back: %v", err)
			}
			if diff := cmp.Diff(servers, checkMCPServers(t, again), cmpopts.IgnoreFields(Server{}, "Raw")); diff != "" {
				t.Fatalf("servers changed through a write (-before +after):\n%s", diff)
			}
			if before, after := plexustest.TopKeys(t, b), plexustest.TopKeys(t, plexustest.ReadBack(t, path)); !slices.Equal(after, plexustest.WithKey(before, "mcpServers")) {
				t.Fatalf("top-level keys changed through a write: %v, then %v", before, after)
			}
		}
		if planted, ok := plexustest.WithCanaries(b, "mcpServers", "env", "headers"); ok {
			d, err := ReadFile(plexustest.WriteFile(t, dir, "mcp.json", planted))
			if err == nil {
				for _, name := range d.Names() {
					_, err = d.Server(name)
					if err != nil {
						break
					}
				}
			}
			if err != nil && strings.Contains(err.Error(), plexustest.Canary) {
				t.Fatalf("an error quotes a private value: %v", err)
			}
		}
	})
}

// checkMCPServers checks every server of d and returns the valid ones by
// name, with the errors of the others.
func checkMCPServers(t *testing.T, d *File) map[string]any {
	t.Helper()
	out := map[string]any{}
	for _, name := range d.Names() {
		s, err := d.Server(name)
		if err != nil {
			var ce *ConfigError
			if !errors.As(err, &ce) || ce.Server != name {
				t.Fatalf("server %q: %v (%T), want a ConfigError naming it", name, err, err)
			}
			out[name] = ce.Problem
			continue
		}
		cfg := mcpclient.ServerConfig{Command: s.Command, Args: s.Args, Env: s.Env, URL: s.URL, Headers: s.Headers}
		if s.Name != name || !mcpclient.ValidName(name) || cfg.Validate() != nil {
			t.Fatalf("accepted server %q breaks the client's rules: %+v", name, s)
		}
		for _, ref := range s.SecretNames() {
			if !platform.ValidSecretName(ref) {
				t.Fatalf("accepted server %q names the invalid secret %q", name, ref)
			}
		}
		out[name] = s
	}
	return out
}
