package hosts_test

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/plexus-gw/plexus/client"
	"github.com/plexus-gw/plexus/hosts"
)

// writeFile writes content at path, creating its folder.
func writeFile(t *testing.T, path, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
}

// enroll stores a credential for the host agent id under home.
func enroll(t *testing.T, home, id, pat string) {
	t.Helper()
	store, err := client.HostStore(home, id)
	if err != nil {
		t.Fatal(err)
	}
	if err := store.SaveCredentials(client.Credentials{BaseURL: "http://127.0.0.1:7077", AgentID: id, PAT: pat}, false); err != nil {
		t.Fatal(err)
	}
}

func TestStatuses(t *testing.T) {
	userHome, project, plexusHome := t.TempDir(), t.TempDir(), t.TempDir()
	env := hosts.Env{GOOS: "linux", Home: userHome, ProjectDir: project}
	// Claude Code launches Plexus as the agent "cc"; Cursor reaches /mcp
	// with the PAT of "cur"; Gemini's file does not parse; a project file
	// of Claude Code has no plexus entry; the others have no file.
	// Claude Code's local scope has an entry for this project (agent
	// "ccl"), none for another one.
	writeFile(t, filepath.Join(userHome, ".claude.json"),
		`{"mcpServers": {"plexus": {"type": "stdio", "command": "/bin/plexus", "args": ["--home", "/h", "mcp", "serve", "--agent", "cc"]}},
		  "projects": {`+quoteJSON(project)+`: {"mcpServers": {"plexus": {"type": "stdio", "command": "/bin/plexus", "args": ["--home", "/h", "mcp", "serve", "--agent", "ccl"]}}},
		               "/elsewhere": {"mcpServers": {"plexus": {"command": "/bin/plexus", "args": ["--agent", "other"]}}}}}`)
	writeFile(t, filepath.Join(userHome, ".cursor", "mcp.json"),
		`{"mcpServers": {"plexus": {"url": "http://127.0.0.1:7077/mcp", "headers": {"Authorization": "Bearer plx_agent_cur"}}}}`)
	writeFile(t, filepath.Join(userHome, ".gemini", "settings.json"), `{"mcpServers": [`)
	writeFile(t, filepath.Join(project, ".mcp.json"), `{"mcpServers": {"notes": {"command": "notes-mcp"}}}`)
	enroll(t, plexusHome, "cc", "plx_agent_cc")
	enroll(t, plexusHome, "cur", "plx_agent_cur")

	got := map[string]hosts.Status{}
	for _, s := range hosts.Statuses(env, client.HostAgents(plexusHome)) {
		if s.Problem != "" {
			s.Problem = "set"
		}
		got[s.Host+"/"+s.Scope] = s
	}
	want := map[string]hosts.Status{
		"claude-code/user": {Host: "claude-code", Scope: "user", Config: filepath.Join(userHome, ".claude.json"),
			Installed: true, Connected: true, Transport: "stdio", Agent: "cc", Enrolled: true},
		"claude-code/local": {Host: "claude-code", Scope: "local", Config: filepath.Join(userHome, ".claude.json"), Project: project,
			Installed: true, Connected: true, Transport: "stdio", Agent: "ccl"},
		"claude-code/project": {Host: "claude-code", Scope: "project", Config: filepath.Join(project, ".mcp.json"), Installed: true},
		"cursor/user": {Host: "cursor", Scope: "user", Config: filepath.Join(userHome, ".cursor", "mcp.json"),
			Installed: true, Connected: true, Transport: "http", Agent: "cur", Enrolled: true},
		"gemini/user": {Host: "gemini", Scope: "user", Config: filepath.Join(userHome, ".gemini", "settings.json"),
			Installed: true, Problem: "set"},
		"windsurf/user":        {Host: "windsurf", Scope: "user", Config: filepath.Join(userHome, ".codeium", "windsurf", "mcp_config.json")},
		"claude-desktop/user":  {Host: "claude-desktop", Scope: "user", Config: filepath.Join(userHome, ".config", "Claude", "claude_desktop_config.json")},
		"vscode/user":          {Host: "vscode", Scope: "user", Config: filepath.Join(userHome, ".config", "Code", "User", "mcp.json")},
		"vscode-insiders/user": {Host: "vscode-insiders", Scope: "user", Config: filepath.Join(userHome, ".config", "Code - Insiders", "User", "mcp.json")},
		"codex/user":           {Host: "codex", Scope: "user", Config: filepath.Join(userHome, ".codex", "config.toml")},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("statuses (-want +got):\n%s", diff)
	}
}

func TestStatusesAgentNotEnrolled(t *testing.T) {
	userHome := t.TempDir()
	env := hosts.Env{GOOS: "linux", Home: userHome, ProjectDir: t.TempDir()}
	// An HTTP entry whose PAT no stored credential holds is the host's
	// own agent, not enrolled.
	writeFile(t, filepath.Join(userHome, ".cursor", "mcp.json"),
		`{"mcpServers": {"plexus": {"url": "http://127.0.0.1:7077/mcp", "headers": {"Authorization": "Bearer plx_agent_gone"}}}}`)
	for _, s := range hosts.Statuses(env, client.HostAgents(t.TempDir())) {
		if s.Host == "cursor" && (s.Agent != "cursor" || s.Enrolled || !s.Connected) {
			t.Errorf("cursor = %+v, want connected as agent cursor, not enrolled", s)
		}
	}
}

func TestWriteStatuses(t *testing.T) {
	last := time.Date(2026, 6, 23, 10, 15, 0, 0, time.UTC)
	rows := []hosts.Status{
		{Host: "claude-code", Scope: "user", Config: "/h/.claude.json", Installed: true, Connected: true, Transport: "stdio", Agent: "cc", LastCall: &last},
		{Host: "claude-code", Scope: "local", Config: "/h/.claude.json", Project: "/src/app", Installed: true, Connected: true, Transport: "stdio", Agent: "cc2"},
		{Host: "cursor", Scope: "user", Config: "/h/.cursor/mcp.json"},
		{Host: "gemini", Scope: "user", Config: "/h/.gemini/settings.json", Installed: true, Problem: "bad JSON"},
	}
	var b bytes.Buffer
	if err := hosts.WriteStatuses(&b, rows); err != nil {
		t.Fatal(err)
	}
	want := "HOST         SCOPE  INSTALLED  CONNECTED    AGENT  LAST CALL         CONFIG\n" +
		"claude-code  user   yes        yes (stdio)  cc     " + last.Local().Format("2006-01-02 15:04") + "  /h/.claude.json\n" +
		"claude-code  local  yes        yes (stdio)  cc2    -                 /h/.claude.json (projects[\"/src/app\"])\n" +
		"cursor       user   no         no           -      -                 /h/.cursor/mcp.json\n" +
		"gemini       user   yes        ? bad JSON   -      -                 /h/.gemini/settings.json\n"
	if diff := cmp.Diff(want, b.String()); diff != "" {
		t.Errorf("table (-want +got):\n%s", diff)
	}
}

func quoteJSON(s string) string {
	b, err := json.Marshal(s)
	if err != nil {
		panic(err)
	}
	return string(b)
}
