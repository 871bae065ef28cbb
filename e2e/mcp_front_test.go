package e2e

import (
	"context"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/plexus-gw/plexus/client"
	"github.com/plexus-gw/plexus/daemon"
)

// patTransport adds an agent's PAT to every request, as a host's config
// does.
type patTransport struct{ pat string }

func (p patTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+p.pat)
	return http.DefaultTransport.RoundTrip(r)
}

// TestMCPFrontDoor: the daemon serves /mcp: a Go SDK MCP client bearing an
// agent's PAT lists the portal's tools, and a write it has no grant for
// waits until the owner approves by moving the decision file into active/.
func TestMCPFrontDoor(t *testing.T) {
	td := startTestDaemon(t, daemon.Options{})
	dir := addPortal(t, td, "notes")
	pat, _ := enrolledAgent(t, td, "claude")
	c := mcp.NewClient(&mcp.Implementation{Name: "claude-code", Version: "2.0"}, nil)
	cs, err := c.Connect(context.Background(), &mcp.StreamableClientTransport{Endpoint: td.BaseURL() + "/mcp",
		HTTPClient: &http.Client{Transport: patTransport{pat}}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	tools, err := cs.ListTools(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tool := range tools.Tools {
		names = append(names, tool.Name)
	}
	if !strings.Contains(strings.Join(names, " "), "portal__notes__write") {
		t.Fatalf("tools = %v, want portal__notes__write", names)
	}
	done := make(chan *mcp.CallToolResult, 1)
	go func() {
		res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "portal__notes__write",
			Arguments: map[string]any{"path": "mcp.md", "content": "via MCP"}})
		if err != nil {
			t.Errorf("call: %v", err)
			res = &mcp.CallToolResult{IsError: true}
		}
		done <- res
	}()
	var file string
	waitFor(t, 10*time.Second, "the decision file", func() string {
		m, _ := filepath.Glob(filepath.Join(td.Home().Inbox, "pend_*.md"))
		if len(m) == 0 {
			return "no decision file in inbox/"
		}
		file = m[0]
		return ""
	})
	if err := os.Rename(file, filepath.Join(td.Home().Active, filepath.Base(file))); err != nil {
		t.Fatal(err)
	}
	if res := <-done; res.IsError {
		t.Fatalf("the call after the approval failed: %+v", res.Content)
	}
	if b, err := os.ReadFile(filepath.Join(dir, "mcp.md")); err != nil || string(b) != "via MCP" {
		t.Fatalf("written file = %q, %v", b, err)
	}
}

// TestMCPServeStdio: `plexus mcp serve --agent <id>`, launched by the host
// as its config says, serves the host over its stdin and stdout with the
// credential under --home's clients/<id>/, forwarding to the running
// daemon: the host lists and calls.
func TestMCPServeStdio(t *testing.T) {
	td := startTestDaemon(t, daemon.Options{})
	addPortal(t, td, "notes")
	pat, _ := enrolledAgent(t, td, "desk")
	store := client.NewCredStore(filepath.Join(td.Home().Dir, "clients", "desk"))
	if err := store.SaveCredentials(client.Credentials{BaseURL: td.BaseURL(), AgentID: "desk", PAT: pat}, false); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(plexusBin(t), "--home", td.Home().Dir, "mcp", "serve", "--agent", "desk")
	var errOut syncBuffer
	cmd.Stderr = &errOut
	c := mcp.NewClient(&mcp.Implementation{Name: "claude-desktop", Version: "1"}, nil)
	cs, err := c.Connect(context.Background(), &mcp.CommandTransport{Command: cmd}, nil)
	if err != nil {
		t.Fatalf("connect: %v: %s", err, errOut.String())
	}
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "portal__notes__read", Arguments: map[string]any{"path": "hello.md"}})
	if err != nil || res.IsError {
		t.Fatalf("read through mcp serve: %v %+v", err, res)
	}
	if err := cs.Close(); err != nil {
		t.Fatalf("mcp serve: %v: %s", err, errOut.String())
	}
	if c := cmd.ProcessState.ExitCode(); c != 0 {
		t.Fatalf("mcp serve exited %d: %s", c, errOut.String())
	}
}
