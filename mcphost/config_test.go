package mcphost

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestParseMCPServer(t *testing.T) {
	tests := []struct {
		name    string
		server  string
		raw     string
		want    Server // Raw is not compared
		problem string // substring of the error; "" means valid
	}{
		{name: "stdio", server: "everything", raw: `{"command":"npx","args":["-y","@modelcontextprotocol/server-everything"],"env":{"A":"1"}}`,
			want: Server{Name: "everything", Command: "npx", Args: []string{"-y", "@modelcontextprotocol/server-everything"}, Env: map[string]string{"A": "1"}}},
		{name: "http with secret header", server: "remote", raw: `{"url":"http://127.0.0.1:9/mcp","headers":{"Authorization":"Bearer ${secret:api-key}"}}`,
			want: Server{Name: "remote", URL: "http://127.0.0.1:9/mcp", Headers: map[string]string{"Authorization": "Bearer ${secret:api-key}"}}},
		{name: "other hosts' keys kept and reported", server: "gh", raw: `{"command":"gh-mcp","timeout":30,"autoApprove":["x"],"type":"stdio"}`,
			want: Server{Name: "gh", Command: "gh-mcp", Type: "stdio", Ignored: []string{"autoApprove", "timeout"}}},
		{name: "disabled", server: "off", raw: `{"command":"x","disabled":true}`, want: Server{Name: "off", Command: "x", Disabled: true}},
		{name: "both command and url", server: "a", raw: `{"command":"x","url":"http://127.0.0.1/"}`, problem: "not both"},
		{name: "plain http off loopback", server: "a", raw: `{"url":"http://example.com/mcp"}`, problem: "loopback"},
		{name: "PLEXUS env", server: "a", raw: `{"command":"x","env":{"PLEXUS_HOME":"/"}}`, problem: "PLEXUS_"},
		{name: "relative command path", server: "a", raw: `{"command":"./srv"}`, problem: "absolute"},
		{name: "upper-case name", server: "GitHub", raw: `{"command":"x"}`, problem: "server name"},
		{name: "neither", server: "a", raw: `{"args":["x"]}`, problem: "set either command"},
		{name: "url not http", server: "a", raw: `{"url":"file:///etc/passwd"}`, problem: "http or https"},
		{name: "args with url", server: "a", raw: `{"url":"http://127.0.0.1/","args":["x"]}`, problem: "takes no args or env"},
		{name: "sse", server: "a", raw: `{"url":"http://127.0.0.1/sse","type":"sse"}`, problem: "legacy SSE"},
		{name: "type mismatch", server: "a", raw: `{"command":"x","type":"http"}`, problem: "does not match"},
		{name: "args not strings", server: "a", raw: `{"command":"x","args":[1]}`, problem: `"args" must be string`},
		{name: "env not object", server: "a", raw: `{"command":"x","env":["A=1"]}`, problem: `"env" must be`},
		{name: "bad secret name", server: "a", raw: `{"command":"x","env":{"T":"${secret:../../etc/passwd}"}}`, problem: "not a secret name"},
		{name: "bad server name", server: "my server", raw: `{"command":"x"}`, problem: "server name"},
		{name: "not an object", server: "a", raw: `["x"]`, problem: "not a JSON object"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ParseServer("mcp.json", tc.server, json.RawMessage(tc.raw))
			if tc.problem != "" {
				var ce *ConfigError
				if !errors.As(err, &ce) || ce.Server != tc.server || !strings.Contains(ce.Problem, tc.problem) {
					t.Fatalf("err = %v, want an ConfigError for %q containing %q", err, tc.server, tc.problem)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if string(got.Raw) != tc.raw {
				t.Errorf("Raw = %s, want the entry as written", got.Raw)
			}
			got.Raw = nil
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("parse (-want +got):\n%s", diff)
			}
		})
	}
}

func TestResolveSecrets(t *testing.T) {
	store := map[string]string{"gh": "ghp_s3cret", "k": "v2"}
	lookup := func(name string) (string, error) {
		if v, ok := store[name]; ok {
			return v, nil
		}
		return "", errors.New("secret " + name + " is not set")
	}
	got, err := ResolveSecrets(map[string]string{"TOKEN": "${secret:gh}", "AUTH": "Bearer ${secret:k}-${secret:k}", "PLAIN": "$HOME ${secret:"}, lookup)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"TOKEN": "ghp_s3cret", "AUTH": "Bearer v2-v2", "PLAIN": "$HOME ${secret:"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("resolved (-want +got):\n%s", diff)
	}
	_, err = ResolveSecrets(map[string]string{"X": "${secret:missing}"}, lookup)
	if err == nil || !strings.Contains(err.Error(), "X: secret missing is not set") {
		t.Errorf("missing secret: err = %v", err)
	}
}

// TestMCPDocKeepsWhatTheOwnerWrote edits one server and checks that every
// other key, the other servers' entries and unknown fields survive.
func TestMCPDocKeepsWhatTheOwnerWrote(t *testing.T) {
	path := filepath.Join(t.TempDir(), "mcp.json")
	orig := `{"$schema":"x","inputs":[{"id":"t"}],"mcpServers":{"a":{"command":"a-mcp","autoApprove":["read"],"env":{"K":"${secret:k}"}},"b":{"url":"http://127.0.0.1:1/mcp"}}}`
	if err := os.WriteFile(path, []byte(orig), 0o644); err != nil {
		t.Fatal(err)
	}
	doc, err := ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	doc.Put("c", json.RawMessage(`{"command":"c"}`))
	if !doc.Remove("b") || doc.Remove("nope") {
		t.Fatal("remove reported wrongly")
	}
	if err := doc.Save(); err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(path)
	var got, want any
	if err := json.Unmarshal(b, &got); err != nil {
		t.Fatalf("written file is not JSON: %v\n%s", err, b)
	}
	_ = json.Unmarshal([]byte(`{"$schema":"x","inputs":[{"id":"t"}],"mcpServers":{"a":{"command":"a-mcp","autoApprove":["read"],"env":{"K":"${secret:k}"}},"c":{"command":"c"}}}`), &want)
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("written mcp.json (-want +got):\n%s", diff)
	}
	if fi, _ := os.Stat(path); fi.Mode().Perm() != 0o600 {
		t.Errorf("mode %v, want 0600 (env values may be secrets)", fi.Mode().Perm())
	}
	for _, bad := range []string{`[]`, `{"mcpServers":[]}`, `{"mcpServers":`} {
		if err := os.WriteFile(path, []byte(bad), 0o600); err != nil {
			t.Fatal(err)
		}
		var ce *ConfigError
		if _, err := ReadFile(path); !errors.As(err, &ce) {
			t.Errorf("ReadFile(%s): err = %v, want an ConfigError", bad, err)
		}
	}
}

func TestServerWhere(t *testing.T) {
	tests := []struct {
		name string
		s    Server
		want string
	}{
		{"Command", Server{Command: "/usr/bin/npx", Args: []string{"-y", "server", "--token=ghp_secret"}}, "/usr/bin/npx"},
		{"URL", Server{URL: "https://user:pw@mcp.example.com/mcp?api_key=sk-secret#frag"}, "https://mcp.example.com/mcp"},
		{"PlainURL", Server{URL: "http://127.0.0.1:9/mcp"}, "http://127.0.0.1:9/mcp"},
		{"Unparsable", Server{URL: "http://[::1/%zz?key=sk-secret"}, "(an unparsable URL)"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.s.Where(); got != tc.want {
				t.Errorf("Where() = %q, want %q", got, tc.want)
			}
		})
	}
}

func TestEntryOf(t *testing.T) {
	for _, tt := range []struct {
		name         string
		command, url string
		args         []string
		env, headers map[string]string
		want         string
	}{
		{"Command", "/bin/srv", "", nil, nil, nil, `{"command":"/bin/srv"}`},
		{"CommandArgsEnv", "npx", "", []string{"-y", "pkg"}, map[string]string{"K": "${secret:k}"}, nil,
			`{"args":["-y","pkg"],"command":"npx","env":{"K":"${secret:k}"}}`},
		{"URLHeaders", "", "https://x.example/mcp", nil, nil, map[string]string{"Authorization": "Bearer ${secret:t}"},
			`{"headers":{"Authorization":"Bearer ${secret:t}"},"url":"https://x.example/mcp"}`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			raw, err := EntryOf(tt.command, tt.args, tt.url, tt.env, tt.headers, nil)
			if err != nil || string(raw) != tt.want {
				t.Errorf("EntryOf = %s, %v; want %s", raw, err, tt.want)
			}
			if _, err := ParseServer("mcp.json", "s", raw); err != nil {
				t.Errorf("ParseServer refuses what EntryOf wrote: %v", err)
			}
		})
	}
}
