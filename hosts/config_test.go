package hosts

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// stdio and remote are the entries `plexus clients connect` writes.
var (
	stdio  = Entry{Command: "/usr/local/bin/plexus", Args: []string{"--home", "/home/owner/.plexus", "mcp", "serve", "--agent", "cursor"}}
	remote = Entry{URL: "http://127.0.0.1:7077/mcp", Headers: map[string]string{"Authorization": "Bearer plx_agent_example"}}
)

// hostFile is one host's realistic file in testdata.
type hostFile struct {
	host string
	file string
	// removed is the file after an upsert and a remove when it is not the
	// file as it was: a servers key the upsert added stays, empty.
	removed string
}

func hostFiles() []hostFile {
	return []hostFile{
		{"claude-code", "claude-code.json", ""},
		{"claude-desktop", "claude-desktop.json", ""},
		{"cursor", "cursor.json", ""},
		{"vscode", "vscode.jsonc", ""},
		{"codex", "codex.toml", ""},
		{"gemini", "gemini.json", ""},
		{"windsurf", "windsurf.json", ""},
		{"gemini", "no-servers.json", "{\n  \"theme\": \"GitHub\",\n  \"vimMode\": true,\n  \"mcpServers\": {}\n}\n"},
		{"cursor", "compact.json", ""},
		{"cursor", "empty-servers.json", ""},
		{"codex", "codex-no-servers.toml", ""},
	}
}

// copyTestdata copies testdata/name into a temporary folder and returns
// its path and content.
func copyTestdata(t *testing.T, name string) (string, []byte) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, b, 0o644); err != nil {
		t.Fatal(err)
	}
	return p, b
}

func mustLookup(t *testing.T, name string) Host {
	t.Helper()
	h, err := Lookup(name)
	if err != nil {
		t.Fatal(err)
	}
	return h
}

func mustRead(t *testing.T, h Host, path string) *Config {
	t.Helper()
	c, err := Read(h, path)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// apply writes ed and returns the file's new content.
func apply(t *testing.T, ed *Edit) []byte {
	t.Helper()
	if _, err := ed.Apply(); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(ed.Path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestRoundTrip: the entry added and then removed gives back the file
// byte for byte; adding it twice changes nothing the second time; and the
// entry reads back as what was written.
func TestRoundTrip(t *testing.T) {
	for _, hf := range hostFiles() {
		for _, tc := range []struct {
			name  string
			entry Entry
		}{{"stdio", stdio}, {"http", remote}} {
			t.Run(hf.file+"/"+tc.name, func(t *testing.T) {
				h := mustLookup(t, hf.host)
				if tc.entry.HTTP() && h.URLKey == "" {
					t.Skip("the host holds no HTTP entry (TestNoHTTP)")
				}
				path, orig := copyTestdata(t, hf.file)
				c := mustRead(t, h, path)
				before, err := c.Servers()
				if err != nil {
					t.Fatal(err)
				}
				ed, err := c.Upsert(tc.entry)
				if err != nil {
					t.Fatal(err)
				}
				if !ed.Changed() {
					t.Fatal("the first upsert changed nothing")
				}
				added := apply(t, ed)

				c = mustRead(t, h, path)
				if !c.Has(tc.entry) {
					t.Fatalf("the entry does not read back:\n%s", added)
				}
				p, ok := c.Plexus()
				if !ok || !cmp.Equal(p.Entry, tc.entry) {
					t.Errorf("Plexus() = %+v, %v; want %+v", p.Entry, ok, tc.entry)
				}
				after, err := c.Servers()
				if err != nil {
					t.Fatal(err)
				}
				if diff := cmp.Diff(append(before, p), after); diff != "" {
					t.Errorf("the other servers changed (-want +got):\n%s", diff)
				}
				again, err := c.Upsert(tc.entry)
				if err != nil {
					t.Fatal(err)
				}
				if !bytes.Equal(again.New, added) {
					t.Errorf("a second upsert is not a no-op:\n%s", again.Diff())
				}

				ed, err = c.Remove()
				if err != nil {
					t.Fatal(err)
				}
				want := orig
				if hf.removed != "" {
					want = []byte(hf.removed)
				}
				if got := apply(t, ed); !bytes.Equal(got, want) {
					t.Errorf("upsert then remove did not give back the file:\n%s", (&Edit{Path: path, Old: want, New: got, existed: true}).Diff())
				}
			})
		}
	}
}

// TestUpsertReplaces: an entry that says something else is replaced where
// it is, and only its value changes.
func TestUpsertReplaces(t *testing.T) {
	for _, hf := range hostFiles()[:7] {
		t.Run(hf.file, func(t *testing.T) {
			h := mustLookup(t, hf.host)
			path, _ := copyTestdata(t, hf.file)
			ed, err := mustRead(t, h, path).Upsert(stdio)
			if err != nil {
				t.Fatal(err)
			}
			withOld := apply(t, ed)
			changed := stdio
			changed.Args = append([]string{"--addr", "127.0.0.1:9000"}, stdio.Args...)
			ed, err = mustRead(t, h, path).Upsert(changed)
			if err != nil {
				t.Fatal(err)
			}
			got := apply(t, ed)
			if !mustRead(t, h, path).Has(changed) {
				t.Fatalf("the replaced entry does not read back:\n%s", got)
			}
			if n := strings.Count(string(got), `"plexus":`); h.Format != FormatCodexTOML && n != 1 {
				t.Errorf("%d plexus entries after a replace:\n%s", n, got)
			}
			if len(got)-len(withOld) != len(`"--addr", "127.0.0.1:9000", `) {
				t.Errorf("the replace changed more than the args:\n%s", ed.Diff())
			}
		})
	}
}

// TestServers: import reads each host's servers whatever the host calls
// its keys.
func TestServers(t *testing.T) {
	tests := []struct {
		hostFile
		want []Server
	}{
		{hostFile{host: "claude-code", file: "claude-code.json"}, []Server{
			{Name: "github", Type: "http", Entry: Entry{URL: "https://api.githubcopilot.com/mcp/", Headers: map[string]string{"Authorization": "Bearer ${GITHUB_PAT}"}}},
			{Name: "filesystem", Type: "stdio", Entry: Entry{Command: "npx", Args: []string{"-y", "@modelcontextprotocol/server-filesystem", "/home/owner/docs"}, Env: map[string]string{}}},
		}},
		{hostFile{host: "claude-desktop", file: "claude-desktop.json"}, []Server{
			{Name: "filesystem", Entry: Entry{Command: "npx", Args: []string{"-y", "@modelcontextprotocol/server-filesystem", "/Users/owner/Desktop"}}},
			{Name: "sqlite", Entry: Entry{Command: "uvx", Args: []string{"mcp-server-sqlite", "--db-path", "/Users/owner/test.db"}}},
		}},
		{hostFile{host: "vscode", file: "vscode.jsonc"}, []Server{
			{Name: "github", Type: "http", Entry: Entry{URL: "https://api.githubcopilot.com/mcp/"}},
			{Name: "memory", Type: "stdio", Entry: Entry{Command: "npx", Args: []string{"-y", "@modelcontextprotocol/server-memory"}}, Ignored: []string{"envFile"}},
			{Name: "fetch", Type: "stdio", Entry: Entry{Command: "uvx", Args: []string{"mcp-server-fetch"}}},
		}},
		{hostFile{host: "codex", file: "codex.toml"}, []Server{
			{Name: "docs", Entry: Entry{Command: "npx", Args: []string{"-y", "@example/docs-mcp"}, Env: map[string]string{"DOCS_TOKEN": "t0k"}}, Ignored: []string{"startup_timeout_sec"}},
			{Name: "figma", Entry: Entry{URL: "http://127.0.0.1:3845/mcp", Headers: map[string]string{"X-Figma-Region": "eu"}}},
		}},
		{hostFile{host: "gemini", file: "gemini.json"}, []Server{
			{Name: "git", Entry: Entry{Command: "uvx", Args: []string{"mcp-server-git"}}, Ignored: []string{"cwd", "timeout", "trust"}},
			{Name: "github", Entry: Entry{URL: "https://api.githubcopilot.com/mcp/", Headers: map[string]string{"Authorization": "Bearer example"}}, Ignored: []string{"timeout"}},
			{Name: "events", Type: "sse", Entry: Entry{URL: "http://localhost:8080/sse"}},
		}},
		{hostFile{host: "windsurf", file: "windsurf.json"}, []Server{
			{Name: "figma", Entry: Entry{URL: "https://mcp.figma.com/mcp", Headers: map[string]string{"X-Team": "design"}}},
			{Name: "git", Entry: Entry{Command: "uvx", Args: []string{"mcp-server-git"}}, Disabled: true},
		}},
		{hostFile{host: "gemini", file: "no-servers.json"}, []Server{}},
	}
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			path, _ := copyTestdata(t, tt.file)
			got, err := mustRead(t, mustLookup(t, tt.host), path).Servers()
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("Servers (-want +got):\n%s", diff)
			}
		})
	}
}

// TestMalformed: a file that does not parse is a ParseError naming the
// file and the position, and nothing is written.
func TestMalformed(t *testing.T) {
	tests := []struct {
		host, content string
		line          int
	}{
		{"cursor", "{\n  \"mcpServers\": {\n    \"a\": {\"command\": \"x\"}\n    \"b\": {}\n  }\n}\n", 4},
		{"vscode", "{\n\t\"servers\": {\n\t\t\"a\": {,\n\t}\n}\n", 3},
		{"claude-code", "[1, 2]\n", 1},
		{"gemini", "{\n  \"mcpServers\": [\"a\"]\n}\n", 2},
		{"codex", "model = \"o3\"\n[mcp_servers.a\ncommand = \"x\"\n", 2},
		{"codex", "mcp_servers = 3\n", 0},
	}
	for _, tt := range tests {
		t.Run(tt.host, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "config")
			if err := os.WriteFile(path, []byte(tt.content), 0o644); err != nil {
				t.Fatal(err)
			}
			_, err := Read(mustLookup(t, tt.host), path)
			var pe *ParseError
			if !errors.As(err, &pe) {
				t.Fatalf("Read = %v, want a *ParseError", err)
			}
			if pe.Path != path || pe.Line != tt.line {
				t.Errorf("ParseError at %s:%d, want %s:%d (%v)", pe.Path, pe.Line, path, tt.line, err)
			}
			if !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), "nothing was written") {
				t.Errorf("error %q does not name the file or say nothing was written", err)
			}
			if b, _ := os.ReadFile(path); string(b) != tt.content {
				t.Error("the file changed")
			}
		})
	}
}

// TestTOMLUnsupportedShape: an entry Plexus cannot cut out exactly is left
// for the owner, not rewritten.
func TestTOMLUnsupportedShape(t *testing.T) {
	for _, content := range []string{
		"[mcp_servers]\nplexus = { command = \"x\" }\n",
		"mcp_servers.plexus.command = \"x\"\n",
	} {
		path := filepath.Join(t.TempDir(), "config.toml")
		if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
		c := mustRead(t, mustLookup(t, "codex"), path)
		var pe *ParseError
		if _, err := c.Upsert(stdio); !errors.As(err, &pe) {
			t.Errorf("Upsert on %q = %v, want a *ParseError", content, err)
		}
		if _, err := c.Remove(); !errors.As(err, &pe) {
			t.Errorf("Remove on %q = %v, want a *ParseError", content, err)
		}
	}
}

// TestConflict: a hand edit saved between the read and the write is
// refused, not clobbered, and no backup is left.
func TestConflict(t *testing.T) {
	for _, hf := range []hostFile{{host: "vscode", file: "vscode.jsonc"}, {host: "codex", file: "codex.toml"}} {
		t.Run(hf.host, func(t *testing.T) {
			path, orig := copyTestdata(t, hf.file)
			ed, err := mustRead(t, mustLookup(t, hf.host), path).Upsert(stdio)
			if err != nil {
				t.Fatal(err)
			}
			hand := append(bytes.Clone(orig), "\n"...)
			if err := os.WriteFile(path, hand, 0o644); err != nil {
				t.Fatal(err)
			}
			_, err = ed.Apply()
			var ce *ConflictError
			if !errors.As(err, &ce) {
				t.Fatalf("Apply = %v, want a *ConflictError", err)
			}
			if b, _ := os.ReadFile(path); !bytes.Equal(b, hand) {
				t.Error("the hand edit was overwritten")
			}
			if m, _ := filepath.Glob(path + ".plexus-backup*"); len(m) != 0 {
				t.Errorf("backups left: %v", m)
			}
		})
	}
}

// TestBackupAndMode: each write keeps the file as it was in a new backup,
// never over an earlier one; the file keeps its permissions; a new file
// is 0600 in a new 0700 folder.
func TestBackupAndMode(t *testing.T) {
	h := mustLookup(t, "cursor")
	path, orig := copyTestdata(t, "cursor.json")
	ed, err := mustRead(t, h, path).Upsert(stdio)
	if err != nil {
		t.Fatal(err)
	}
	b1, err := ed.Apply()
	if err != nil {
		t.Fatal(err)
	}
	added, _ := os.ReadFile(path)
	ed, err = mustRead(t, h, path).Remove()
	if err != nil {
		t.Fatal(err)
	}
	b2, err := ed.Apply()
	if err != nil {
		t.Fatal(err)
	}
	if b1 != path+".plexus-backup" || b2 != path+".plexus-backup.1" {
		t.Errorf("backups %q, %q", b1, b2)
	}
	for name, want := range map[string][]byte{b1: orig, b2: added} {
		got, err := os.ReadFile(name)
		if err != nil || !bytes.Equal(got, want) {
			t.Errorf("%s does not hold the file as it was (%v)", name, err)
		}
		if fi, _ := os.Stat(name); fi.Mode().Perm() != 0o600 {
			t.Errorf("%s is %v, want 0600", name, fi.Mode().Perm())
		}
	}
	if fi, _ := os.Stat(path); fi.Mode().Perm() != 0o644 {
		t.Errorf("the file is %v, want its 0644 kept", fi.Mode().Perm())
	}

	fresh := filepath.Join(t.TempDir(), "new", "dir", "mcp.json")
	ed, err = mustRead(t, h, fresh).Upsert(remote)
	if err != nil {
		t.Fatal(err)
	}
	if backup := mustApply(t, ed); backup != "" {
		t.Errorf("a backup %q of a file that did not exist", backup)
	}
	if fi, _ := os.Stat(fresh); fi.Mode().Perm() != 0o600 {
		t.Errorf("a new file is %v, want 0600", fi.Mode().Perm())
	}
	if fi, _ := os.Stat(filepath.Dir(fresh)); fi.Mode().Perm() != 0o700 {
		t.Errorf("a new folder is %v, want 0700", fi.Mode().Perm())
	}
	if !mustRead(t, h, fresh).Has(remote) {
		t.Error("the new file does not hold the entry")
	}
}

func mustApply(t *testing.T, ed *Edit) string {
	t.Helper()
	b, err := ed.Apply()
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestReplaceAll: the host's servers all go, the plexus entry stays alone,
// and the rest of the file is as it was.
func TestReplaceAll(t *testing.T) {
	for _, hf := range hostFiles()[:7] {
		t.Run(hf.file, func(t *testing.T) {
			h := mustLookup(t, hf.host)
			path, _ := copyTestdata(t, hf.file)
			ed, err := mustRead(t, h, path).ReplaceAll(stdio)
			if err != nil {
				t.Fatal(err)
			}
			apply(t, ed)
			c := mustRead(t, h, path)
			got, err := c.Servers()
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != 1 || got[0].Name != EntryName || !c.Has(stdio) {
				t.Errorf("servers after ReplaceAll: %+v", got)
			}
		})
	}
}

// TestNoHTTP: Claude Desktop's file holds launched servers only.
func TestNoHTTP(t *testing.T) {
	path, _ := copyTestdata(t, "claude-desktop.json")
	_, err := mustRead(t, mustLookup(t, "claude-desktop"), path).Upsert(remote)
	var nh *NoHTTPError
	if !errors.As(err, &nh) {
		t.Fatalf("Upsert(http) = %v, want a *NoHTTPError", err)
	}
}

// TestDiffRedacts: the diff never shows a PAT.
func TestDiffRedacts(t *testing.T) {
	path, _ := copyTestdata(t, "cursor.json")
	ed, err := mustRead(t, mustLookup(t, "cursor"), path).Upsert(remote)
	if err != nil {
		t.Fatal(err)
	}
	d := ed.Diff()
	if strings.Contains(d, "plx_agent_example") || !strings.Contains(d, "Bearer <redacted>") {
		t.Errorf("diff:\n%s", d)
	}
	if !strings.Contains(string(ed.New), "plx_agent_example") {
		t.Error("the file to write lost the PAT")
	}
}
