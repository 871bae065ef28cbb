package main

import (
	"bytes"
	"context"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/plexus-gw/plexus/client"
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

// TestMCPServeStdio: `plexus mcp serve --agent <id>` serves a host over
// its stdin and stdout with the credential under --home's clients/<id>/,
// forwarding to the running daemon: the host lists and calls.
func TestMCPServeStdio(t *testing.T) {
	td := startTestDaemon(t, daemonOptions{})
	addPortal(t, td, "notes")
	pat, _ := enrolledAgent(t, td, "desk")
	store := client.NewCredStore(filepath.Join(td.home.Dir, clientsDir, "desk"))
	if err := store.SaveCredentials(client.Credentials{BaseURL: td.baseURL(), AgentID: "desk", PAT: pat}, false); err != nil {
		t.Fatal(err)
	}
	hostR, cmdW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	cmdR, hostW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	var errOut bytes.Buffer
	code := make(chan int, 1)
	go func() {
		code <- runIn(context.Background(), process{decider: deciderIdentity, stdin: cmdR},
			[]string{"plexus", "--home", td.home.Dir, "mcp", "serve", "--agent", "desk"}, cmdW, &errOut)
	}()
	c := mcp.NewClient(&mcp.Implementation{Name: "claude-desktop", Version: "1"}, nil)
	cs, err := c.Connect(context.Background(), &mcp.IOTransport{Reader: hostR, Writer: hostW}, nil)
	if err != nil {
		t.Fatal(err)
	}
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "portal__notes__read", Arguments: map[string]any{"path": "hello.md"}})
	if err != nil || res.IsError {
		t.Fatalf("read through mcp serve: %v %+v", err, res)
	}
	if err := cs.Close(); err != nil {
		t.Fatal(err)
	}
	if c := <-code; c != 0 {
		t.Fatalf("mcp serve exited %d: %s", c, errOut.String())
	}
}

// TestMCPServeCredentialRefused: mcp serve reads only a credential that is
// the owner's alone, from a single path element under clients/.
func TestMCPServeCredentialRefused(t *testing.T) {
	home := t.TempDir()
	dir := filepath.Join(home, clientsDir, "loose")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, client.CredentialsFile), []byte(`{"agentId":"loose","pat":"plx_agent_x"}`), 0o644); err != nil {
		t.Fatal(err)
	}
	for name, tc := range map[string]struct {
		args []string
		want string
	}{
		"Traversal":    {[]string{"--agent", "../../etc"}, "is not an agent id"},
		"LooseFile":    {[]string{"--agent", "loose"}, "it must be 0600"},
		"NoCredential": {[]string{"--agent", "nobody"}, "no agent credential"},
		"NoAgent":      {nil, "usage: plexus mcp serve --agent"},
	} {
		t.Run(name, func(t *testing.T) {
			var out, errOut bytes.Buffer
			argv := append([]string{"plexus", "--home", home, "mcp", "serve"}, tc.args...)
			if code := runIn(context.Background(), process{decider: deciderIdentity, stdin: strings.NewReader("")}, argv, &out, &errOut); code == 0 ||
				!strings.Contains(errOut.String(), tc.want) {
				t.Fatalf("exit %d, stderr %q; want a failure saying %q", code, errOut.String(), tc.want)
			}
			if out.Len() != 0 {
				t.Errorf("stdout = %q: nothing may reach the host's channel", out.String())
			}
		})
	}
}
