package mcpserver_test

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

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/plexus-gw/plexus/mcpserver"
)

// tsHostRun is what testdata/conformance/ts-host.mjs printed.
type tsHostRun struct {
	Tools   []string             `json:"tools"`
	Results []mcp.CallToolResult `json:"results"`
	Sampled []string             `json:"sampled"`
}

// tsCall is one call ts-host.mjs makes.
type tsCall struct {
	Name      string         `json:"name"`
	Arguments map[string]any `json:"arguments"`
}

// runTSHost runs ts-host.mjs with the pinned Node, making calls, with the
// transport args ("http", url, pat, or "stdio", command…).
func runTSHost(t *testing.T, calls []tsCall, env []string, mode string, args ...string) tsHostRun {
	t.Helper()
	node := conformanceNode(t)
	file := filepath.Join(t.TempDir(), "calls.json")
	b, err := json.Marshal(calls)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(file, b, 0o600); err != nil {
		t.Fatal(err)
	}
	argv := []string{"ts-host.mjs", mode}
	if mode == "stdio" {
		argv = append(append(argv, file), args...)
	} else {
		argv = append(append(argv, args...), file)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, filepath.Join(node, "node"), argv...)
	cmd.Dir = conformanceDir
	cmd.Env = append(os.Environ(), env...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("ts-host.mjs: %v\n%s%s", err, stdout.String(), stderr.String())
	}
	var run tsHostRun
	if err := json.Unmarshal(bytes.TrimSpace(stdout.Bytes()), &run); err != nil {
		t.Fatalf("ts-host.mjs printed %q: %v (stderr %s)", stdout.String(), err, stderr.String())
	}
	return run
}

func contentText(res mcp.CallToolResult) string { return text(&res) }

// TestTypeScriptHostHTTP: the official TypeScript SDK client, over
// Streamable HTTP with the agent's PAT, lists the tools, calls one, and
// answers the sampling request an ingested server makes during its call,
// whose answer returns to that server's tool.
func TestTypeScriptHostHTTP(t *testing.T) {
	f := newFixture(t, mcpserver.Options{})
	f.ingest("asker", newAsker(t, nil, nil).url)
	run := runTSHost(t, []tsCall{
		{Name: "portal__docs__read", Arguments: map[string]any{"path": "hello.txt"}},
		{Name: "mcp__asker__ask", Arguments: map[string]any{"q": "the answer?"}},
	}, nil, "http", f.url, f.agent("ts"))
	checkTSHost(t, run)
}

// TestTypeScriptHostStdio: the same host launching a command that speaks
// MCP on its stdin and stdout: the bridge of `plexus mcp serve` (this test
// binary, see TestMain), forwarding to the front door.
func TestTypeScriptHostStdio(t *testing.T) {
	f := newFixture(t, mcpserver.Options{})
	f.ingest("asker", newAsker(t, nil, nil).url)
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	run := runTSHost(t, []tsCall{
		{Name: "portal__docs__read", Arguments: map[string]any{"path": "hello.txt"}},
		{Name: "mcp__asker__ask", Arguments: map[string]any{"q": "the answer?"}},
	}, []string{bridgeEnv + "=1", "BRIDGE_ENDPOINT=" + f.url, "BRIDGE_PAT=" + f.agent("ts")}, "stdio", self)
	checkTSHost(t, run)
}

// checkTSHost checks the TypeScript host listed the tools, read the file
// and answered the server's sampling request, whose answer came back.
func checkTSHost(t *testing.T, run tsHostRun) {
	t.Helper()
	for _, want := range []string{"portal__docs__read", "mcp__asker__ask", "mcp__up__count"} {
		if !slices.Contains(run.Tools, want) {
			t.Errorf("tools %v lack %s", run.Tools, want)
		}
	}
	if len(run.Results) != 2 {
		t.Fatalf("results = %+v, want two", run.Results)
	}
	if got := contentText(run.Results[0]); run.Results[0].IsError || !strings.Contains(got, "hello from the portal") {
		t.Errorf("read = %q, want the file's content", got)
	}
	if got := contentText(run.Results[1]); got != "sampled: 42 for the answer? by ts-model" {
		t.Errorf("ask = %q, want the host's sampled answer", got)
	}
	if !slices.Equal(run.Sampled, []string{"the answer?"}) {
		t.Errorf("the host was asked %v, want the server's one question", run.Sampled)
	}
}
