package main

import (
	"context"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
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
	td := startTestDaemon(t, daemonOptions{})
	dir := addPortal(t, td, "notes")
	pat, _ := enrolledAgent(t, td, "claude")
	c := mcp.NewClient(&mcp.Implementation{Name: "claude-code", Version: "2.0"}, nil)
	cs, err := c.Connect(context.Background(), &mcp.StreamableClientTransport{Endpoint: td.baseURL() + "/mcp",
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
		m, _ := filepath.Glob(filepath.Join(td.home.Inbox, "pend_*.md"))
		if len(m) == 0 {
			return "no decision file in inbox/"
		}
		file = m[0]
		return ""
	})
	if err := os.Rename(file, filepath.Join(td.home.Active, filepath.Base(file))); err != nil {
		t.Fatal(err)
	}
	if res := <-done; res.IsError {
		t.Fatalf("the call after the approval failed: %+v", res.Content)
	}
	if b, err := os.ReadFile(filepath.Join(dir, "mcp.md")); err != nil || string(b) != "via MCP" {
		t.Fatalf("written file = %q, %v", b, err)
	}
}
