package mcphost

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/plexus-gw/plexus/platform"
	"github.com/plexus-gw/plexus/transports/mcpclient"
)

// canary marks the private values withCanaries plants; no error may quote it.
const canary = "zqcanary"

// withCanaries re-encodes a config document with every value of the
// entries' private maps (env, headers) that is not a secret reference
// replaced by a distinct canary, or returns false when doc has no such
// value or already holds the canary.
func withCanaries(doc []byte, section string, private ...string) ([]byte, bool) {
	if strings.Contains(string(doc), canary) {
		return nil, false
	}
	var top map[string]any
	if json.Unmarshal(doc, &top) != nil {
		return nil, false
	}
	entries, _ := top[section].(map[string]any)
	n := 0
	for _, e := range entries {
		entry, _ := e.(map[string]any)
		for _, field := range private {
			m, _ := entry[field].(map[string]any)
			for k, v := range m {
				if s, ok := v.(string); ok && !strings.Contains(s, "${secret:") {
					m[k] = fmt.Sprintf("%s%03dvalue", canary, n)
					n++
				}
			}
		}
	}
	if n == 0 {
		return nil, false
	}
	b, err := json.Marshal(top)
	return b, err == nil
}

// writeFuzzFile writes b as name in dir, replacing what an earlier input
// left there (a worker runs its inputs one at a time; a folder per input
// would cost more than the read under test).
func writeFuzzFile(t *testing.T, dir, name string, b []byte) string {
	t.Helper()
	path := filepath.Join(dir, name)
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// topKeys lists the top-level keys of a JSON object document (none for a
// blank one), sorted: what a write must keep.
func topKeys(t *testing.T, b []byte) []string {
	t.Helper()
	var top map[string]json.RawMessage
	if len(strings.TrimSpace(string(b))) > 0 {
		if err := json.Unmarshal(b, &top); err != nil {
			t.Fatalf("not a JSON object: %v", err)
		}
	}
	return slices.Sorted(maps.Keys(top))
}

// withKey is keys with k added, sorted.
func withKey(keys []string, k string) []string {
	if !slices.Contains(keys, k) {
		keys = append(slices.Clone(keys), k)
	}
	slices.Sort(keys)
	return keys
}

// readBack reads the file at path.
func readBack(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

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
		path := writeFuzzFile(t, dir, "mcp.json", b)
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
			if before, after := topKeys(t, b), topKeys(t, readBack(t, path)); !slices.Equal(after, withKey(before, "mcpServers")) {
				t.Fatalf("top-level keys changed through a write: %v, then %v", before, after)
			}
		}
		if planted, ok := withCanaries(b, "mcpServers", "env", "headers"); ok {
			d, err := ReadFile(writeFuzzFile(t, dir, "mcp.json", planted))
			if err == nil {
				for _, name := range d.Names() {
					_, err = d.Server(name)
					if err != nil {
						break
					}
				}
			}
			if err != nil && strings.Contains(err.Error(), canary) {
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
