package main

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
	"github.com/plexus-gw/plexus/transports/ipc"
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

// FuzzMCPConfig reads a fuzzed mcp.json as the daemon and the CLI do.
// Properties: refusals are *MCPConfigError naming the file (and the server
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
		d, err := readMCPDoc(path)
		if err != nil {
			var ce *MCPConfigError
			if !errors.As(err, &ce) || ce.Path != path || ce.Server != "" {
				t.Fatalf("readMCPDoc = %v (%T), want an MCPConfigError for the file", err, err)
			}
		} else {
			servers := checkMCPServers(t, d)
			if err := d.write(); err != nil {
				t.Fatalf("write: %v", err)
			}
			again, err := readMCPDoc(path)
			if err != nil {
				t.Fatalf("mcp.json as written does not read back: %v", err)
			}
			if diff := cmp.Diff(servers, checkMCPServers(t, again), cmpopts.IgnoreFields(mcpServer{}, "Raw")); diff != "" {
				t.Fatalf("servers changed through a write (-before +after):\n%s", diff)
			}
			if !slices.Equal(slices.Sorted(maps.Keys(again.top)), slices.Sorted(maps.Keys(withKey(d.top, "mcpServers")))) {
				t.Fatalf("top-level keys changed through a write: %v, then %v", slices.Sorted(maps.Keys(d.top)), slices.Sorted(maps.Keys(again.top)))
			}
		}
		if planted, ok := withCanaries(b, "mcpServers", "env", "headers"); ok {
			d, err := readMCPDoc(writeFuzzFile(t, dir, "mcp.json", planted))
			if err == nil {
				for _, name := range d.names() {
					_, err = d.server(name)
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

func withKey(m map[string]json.RawMessage, k string) map[string]json.RawMessage {
	out := maps.Clone(m)
	out[k] = nil
	return out
}

// checkMCPServers checks every server of d and returns the valid ones by
// name, with the errors of the others.
func checkMCPServers(t *testing.T, d *mcpDoc) map[string]any {
	t.Helper()
	out := map[string]any{}
	for _, name := range d.names() {
		s, err := d.server(name)
		if err != nil {
			var ce *MCPConfigError
			if !errors.As(err, &ce) || ce.Server != name {
				t.Fatalf("server %q: %v (%T), want an MCPConfigError naming it", name, err, err)
			}
			out[name] = ce.Problem
			continue
		}
		cfg := mcpclient.ServerConfig{Command: s.Command, Args: s.Args, Env: s.Env, URL: s.URL, Headers: s.Headers}
		if s.Name != name || !mcpclient.ValidName(name) || cfg.Validate() != nil {
			t.Fatalf("accepted server %q breaks the client's rules: %+v", name, s)
		}
		for _, ref := range s.secretNames() {
			if !platform.ValidSecretName(ref) {
				t.Fatalf("accepted server %q names the invalid secret %q", name, ref)
			}
		}
		out[name] = s
	}
	return out
}

// FuzzProvidersConfig reads a fuzzed providers.json as the daemon does.
// Properties: refusals are *providersFileError naming the file; every
// accepted provider passes ipc.ValidateProvider unchanged (defaults already
// filled in); saving and reading back gives the same providers and keeps
// every other top-level key; no error quotes an env value.
func FuzzProvidersConfig(f *testing.F) {
	for _, s := range []string{
		``, `{}`, `null`, `[]`, `{"providers":null}`, `{"providers":[]}`, `{"providers":{"a":null}}`,
		`{"providers":{"notes":{"command":"/usr/bin/notes-provider","args":["--serve"],"env":{"NOTES_TOKEN":"private-value"},"restart":"always","max_frame_bytes":4194304}},"comment":"x"}`,
		`{"providers":{"a":{"command":"relative/path"},"B":{"command":"x"}}}`,
		`{"providers":{"a":{"command":"x","env":{"PLEXUS_KEY":"v","A=B":"c"}}}}`,
		`{"providers":{"a":{"command":"x","restart":"sometimes","extra":1}}}`,
		`{"providers":{"a":{"command":"x","max_frame_bytes":-1}}}`,
	} {
		f.Add([]byte(s))
	}
	dir := f.TempDir()
	f.Fuzz(func(t *testing.T, b []byte) {
		path := writeFuzzFile(t, dir, providersFile, b)
		d, err := readProviders(path)
		if err != nil {
			var pe *providersFileError
			if !errors.As(err, &pe) || pe.Path != path {
				t.Fatalf("readProviders = %v (%T), want a providersFileError", err, err)
			}
		} else {
			for id, cfg := range d.configs {
				again, err := ipc.ValidateProvider(id, cfg)
				if err != nil || !cmp.Equal(again, cfg) {
					t.Fatalf("accepted provider %q does not validate as read: %v (%+v, then %+v)", id, err, cfg, again)
				}
			}
			if err := d.save(); err != nil {
				t.Fatalf("save: %v", err)
			}
			back, err := readProviders(path)
			if err != nil {
				t.Fatalf("providers.json as saved does not read back: %v", err)
			}
			if diff := cmp.Diff(d.configs, back.configs); diff != "" {
				t.Fatalf("providers changed through a save (-before +after):\n%s", diff)
			}
			if !slices.Equal(slices.Sorted(maps.Keys(back.top)), slices.Sorted(maps.Keys(withKey(d.top, "providers")))) {
				t.Fatalf("top-level keys changed through a save")
			}
		}
		if planted, ok := withCanaries(b, "providers", "env"); ok {
			if _, err := readProviders(writeFuzzFile(t, dir, providersFile, planted)); err != nil && strings.Contains(err.Error(), canary) {
				t.Fatalf("an error quotes a private value: %v", err)
			}
		}
	})
}
