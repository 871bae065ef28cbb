package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net"
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
		want    mcpServer // Raw is not compared
		problem string    // substring of the error; "" means valid
	}{
		{name: "stdio", server: "everything", raw: `{"command":"npx","args":["-y","@modelcontextprotocol/server-everything"],"env":{"A":"1"}}`,
			want: mcpServer{Name: "everything", Command: "npx", Args: []string{"-y", "@modelcontextprotocol/server-everything"}, Env: map[string]string{"A": "1"}}},
		{name: "http with secret header", server: "remote", raw: `{"url":"http://127.0.0.1:9/mcp","headers":{"Authorization":"Bearer ${secret:api-key}"}}`,
			want: mcpServer{Name: "remote", URL: "http://127.0.0.1:9/mcp", Headers: map[string]string{"Authorization": "Bearer ${secret:api-key}"}}},
		{name: "other hosts' keys kept and reported", server: "gh", raw: `{"command":"gh-mcp","timeout":30,"autoApprove":["x"],"type":"stdio"}`,
			want: mcpServer{Name: "gh", Command: "gh-mcp", Type: "stdio", Ignored: []string{"autoApprove", "timeout"}}},
		{name: "disabled", server: "off", raw: `{"command":"x","disabled":true}`, want: mcpServer{Name: "off", Command: "x", Disabled: true}},
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
			got, err := parseMCPServer("mcp.json", tc.server, json.RawMessage(tc.raw))
			if tc.problem != "" {
				var ce *MCPConfigError
				if !errors.As(err, &ce) || ce.Server != tc.server || !strings.Contains(ce.Problem, tc.problem) {
					t.Fatalf("err = %v, want an MCPConfigError for %q containing %q", err, tc.server, tc.problem)
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
	got, err := resolveSecrets(map[string]string{"TOKEN": "${secret:gh}", "AUTH": "Bearer ${secret:k}-${secret:k}", "PLAIN": "$HOME ${secret:"}, lookup)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"TOKEN": "ghp_s3cret", "AUTH": "Bearer v2-v2", "PLAIN": "$HOME ${secret:"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("resolved (-want +got):\n%s", diff)
	}
	_, err = resolveSecrets(map[string]string{"X": "${secret:missing}"}, lookup)
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
	doc, err := readMCPDoc(path)
	if err != nil {
		t.Fatal(err)
	}
	doc.put("c", json.RawMessage(`{"command":"c"}`))
	if !doc.remove("b") || doc.remove("nope") {
		t.Fatal("remove reported wrongly")
	}
	if err := doc.write(); err != nil {
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
		var ce *MCPConfigError
		if _, err := readMCPDoc(path); !errors.As(err, &ce) {
			t.Errorf("readMCPDoc(%s): err = %v, want an MCPConfigError", bad, err)
		}
	}
}

// closedAddr is a loopback address nothing listens on.
func closedAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return addr
}

func TestMCPCommandsEditTheFile(t *testing.T) {
	home := t.TempDir()
	addr := closedAddr(t)
	cli := func(args ...string) result {
		t.Helper()
		argv := append([]string{"plexus", "--home", home, "--addr", addr}, args...)
		var out, errOut bytes.Buffer
		code := run(context.Background(), argv, &out, &errOut)
		return result{code, out.String(), errOut.String()}
	}
	path := filepath.Join(home, "mcp.json")
	cwd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	steps := []struct {
		args     []string
		code     int
		out      string // substring of stdout (or stderr when code != 0)
		servers  []string
		fileText string // substring of mcp.json afterwards
	}{
		{[]string{"mcp", "list"}, 0, "No MCP servers", nil, ""},
		{[]string{"mcp", "add", "fs", "--", "npx", "-y", "@modelcontextprotocol/server-filesystem", "/tmp"}, 0, "Plexus is not running", []string{"fs"},
			`"args": [`},
		{[]string{"mcp", "add", "fs", "--", "other"}, exitError, "--replace", []string{"fs"}, "server-filesystem"},
		{[]string{"mcp", "add", "fs", "--replace", "--", "other"}, 0, "Added", []string{"fs"}, `"command": "other"`},
		{[]string{"mcp", "add", "web", "--url", "ftp://x"}, exitUsage, "http or https", []string{"fs"}, ""},
		{[]string{"mcp", "add", "web", "--url", "http://127.0.0.1:1/mcp", "--", "x"}, exitUsage, "not both", []string{"fs"}, ""},
		{[]string{"mcp", "add", "gh", "--env", "TOKEN=${secret:gh}", "--", "gh-mcp"}, exitError, "plexus secrets set gh", []string{"fs"}, ""},
		{[]string{"mcp", "add", "web", "--url", "http://127.0.0.1:1/mcp", "--header", "X-A=1"}, 0, "Added", []string{"fs", "web"}, `"X-A": "1"`},
		{[]string{"mcp", "list"}, 0, "not running", []string{"fs", "web"}, ""},
		{[]string{"mcp", "remove", "nope"}, exitError, "no server", []string{"fs", "web"}, ""},
		{[]string{"mcp", "remove", "fs"}, 0, "Removed", []string{"web"}, ""},
		{[]string{"mcp", "add", "rel", "--", "./bin/srv"}, 0, "Added", []string{"rel", "web"}, `"command": "` + cwd + `/bin/srv"`},
	}
	for _, s := range steps {
		r := cli(s.args...)
		text := r.stdout
		if s.code != 0 {
			text = r.stderr
		}
		if r.code != s.code || !strings.Contains(text, s.out) {
			t.Fatalf("%v: exit %d, stdout %q, stderr %q; want exit %d and %q", s.args, r.code, r.stdout, r.stderr, s.code, s.out)
		}
		doc, err := readMCPDoc(path)
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(s.servers, doc.names(), cmpEmpty); diff != "" {
			t.Fatalf("%v: servers (-want +got):\n%s", s.args, diff)
		}
		if s.fileText != "" {
			b, _ := os.ReadFile(path)
			if !strings.Contains(string(b), s.fileText) {
				t.Fatalf("%v: mcp.json lacks %q:\n%s", s.args, s.fileText, b)
			}
		}
	}
}

// cmpEmpty makes a nil and an empty slice equal.
var cmpEmpty = cmp.Comparer(func(a, b []string) bool {
	return len(a) == 0 && len(b) == 0 || cmp.Equal([]string(a), []string(b))
})
