package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/plexus-gw/plexus/client"
	"github.com/plexus-gw/plexus/daemon"
	"github.com/plexus-gw/plexus/journal"
)

// TestMCPServeCallerGone: a host calls a write through `plexus mcp serve`
// (the built binary); the call waits for the owner (its progress arrives,
// its decision file sits in inbox/); then the host goes, in each way a
// host goes: its stdin closes, or the bridge is sent SIGTERM, SIGINT or
// SIGHUP (each must end the bridge well before the wait would), or SIGKILL
// (no chance to clean up: the daemon sees its connections drop). The owner
// then approves by moving the file: the grant stands (a later call of the
// agent runs without asking), but nothing runs for the call that went: its
// one row, invoke.failed, says it did not run, and no file is written.
func TestMCPServeCallerGone(t *testing.T) {
	for _, c := range []struct {
		name string
		// leave makes the host go; graceful says the bridge may clean up.
		leave    func(t *testing.T, cmd *exec.Cmd, stdin io.Closer)
		graceful bool
	}{
		{"stdin closed", func(t *testing.T, _ *exec.Cmd, stdin io.Closer) { mustClose(t, stdin) }, true},
		{"SIGTERM", signalled(syscall.SIGTERM), true},
		{"SIGINT", signalled(syscall.SIGINT), true},
		{"SIGHUP", signalled(syscall.SIGHUP), true},
		{"SIGKILL", signalled(syscall.SIGKILL), false},
	} {
		t.Run(c.name, func(t *testing.T) {
			td := startTestDaemon(t, daemon.Options{})
			dir := addPortal(t, td, "notes")
			pat, _ := enrolledAgent(t, td, "claude-code")
			store := client.NewCredStore(filepath.Join(td.Home().Dir, "clients", "claude-code"))
			if err := store.SaveCredentials(client.Credentials{BaseURL: td.BaseURL(), AgentID: "claude-code", PAT: pat}, false); err != nil {
				t.Fatal(err)
			}
			cmd, stdin, out := startServe(t, td.Home().Dir, "claude-code")
			host := json.NewEncoder(stdin)
			send(t, host, map[string]any{"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": map[string]any{
				"protocolVersion": "2025-11-25", "capabilities": map[string]any{}, "clientInfo": map[string]any{"name": "claude-code", "version": "2"}}})
			awaitLine(t, out, `"id":1`)
			send(t, host, map[string]any{"jsonrpc": "2.0", "method": "notifications/initialized"})
			send(t, host, map[string]any{"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": map[string]any{
				"name": "portal__notes__write", "arguments": map[string]any{"path": "todo.md", "content": "bread"},
				"_meta": map[string]any{"progressToken": "p1"}}})
			awaitLine(t, out, `"notifications/progress"`)
			file := inboxFile(t, td)

			exited := make(chan error, 1)
			go func() { exited <- cmd.Wait() }()
			c.leave(t, cmd, stdin)
			select {
			case err := <-exited:
				if c.graceful && err != nil {
					t.Errorf("mcp serve ended with %v, want a clean exit", err)
				}
			case <-time.After(time.Minute):
				t.Fatal("mcp serve did not end while its call waited for the owner")
			}

			// The daemon saw the call go: its row says it never ran.
			waitFor(t, 30*time.Second, "the call that went journaled", holds(func() bool {
				return len(td.activity(t, journal.Filter{Type: "invoke.failed"})) == 1
			}))
			gone := td.activity(t, journal.Filter{Type: "invoke.failed"})[0]
			if gone.Target != "portal.notes.write" || gone.AgentID != "claude-code" ||
				gone.Payload["errorCode"] != "transport_error" ||
				gone.Payload["pendingId"] != strings.TrimSuffix(filepath.Base(file), ".md") ||
				!strings.Contains(fmt.Sprint(gone.Payload["reason"]), "did not run") {
				t.Errorf("the row of the call that went = %+v", gone)
			}
			if err := os.Rename(file, filepath.Join(td.Home().Active, filepath.Base(file))); err != nil {
				t.Fatal(err)
			}
			waitFor(t, 30*time.Second, "the approval journaled", holds(func() bool {
				return len(td.activity(t, journal.Filter{Type: "grant.approved"})) == 1
			}))
			laterCall(t, td, pat)
			if _, err := os.Stat(filepath.Join(dir, "todo.md")); !os.IsNotExist(err) {
				t.Errorf("todo.md: %v, want it never written (its caller had gone)", err)
			}
			if rows := td.activity(t, journal.Filter{Type: "invoke."}); len(rows) != 3 {
				t.Errorf("invoke rows = %+v, want the call that went's failed, then the later call's started and ok", rows)
			}
		})
	}
}

func signalled(sig syscall.Signal) func(t *testing.T, cmd *exec.Cmd, _ io.Closer) {
	return func(t *testing.T, cmd *exec.Cmd, _ io.Closer) {
		if err := cmd.Process.Signal(sig); err != nil {
			t.Fatal(err)
		}
	}
}

func mustClose(t *testing.T, c io.Closer) {
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
}

// startServe starts `plexus --home home mcp serve --agent agent` as a
// host launches it, answering its stdin and the lines of its stdout.
func startServe(t *testing.T, home, agent string) (*exec.Cmd, io.WriteCloser, <-chan string) {
	cmd := exec.Command(plexusBin(t), "--home", home, "mcp", "serve", "--agent", agent)
	var errOut syncBuffer
	cmd.Stderr = &errOut
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			if err := cmd.Process.Kill(); err != nil {
				t.Logf("kill mcp serve: %v", err)
			}
		}
		if t.Failed() {
			t.Logf("mcp serve's stderr:\n%s", errOut.String())
		}
	})
	lines := make(chan string, 64)
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(stdout)
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			lines <- sc.Text()
		}
	}()
	return cmd, stdin, lines
}

func send(t *testing.T, enc *json.Encoder, msg any) {
	t.Helper()
	if err := enc.Encode(msg); err != nil {
		t.Fatal(err)
	}
}

// awaitLine reads the host's stdout until a line holding want.
func awaitLine(t *testing.T, out <-chan string, want string) {
	t.Helper()
	limit := time.After(30 * time.Second)
	for {
		select {
		case line, ok := <-out:
			if !ok {
				t.Fatalf("mcp serve's stdout ended before %s", want)
			}
			if strings.Contains(line, want) {
				return
			}
		case <-limit:
			t.Fatalf("no line with %s from mcp serve", want)
		}
	}
}

// inboxFile is the one decision file in inbox/.
func inboxFile(t *testing.T, td *testDaemon) string {
	t.Helper()
	var file string
	waitFor(t, 10*time.Second, "the decision file", func() string {
		m, err := filepath.Glob(filepath.Join(td.Home().Inbox, "pend_*.md"))
		if err != nil || len(m) != 1 {
			return "decision files in inbox/: " + strings.Join(m, " ")
		}
		file = m[0]
		return ""
	})
	return file
}

// laterCall is a later call of the agent's, over /mcp: it runs on the
// grant the owner approved, without asking.
func laterCall(t *testing.T, td *testDaemon, pat string) {
	t.Helper()
	c := mcp.NewClient(&mcp.Implementation{Name: "claude-code", Version: "2"}, nil)
	cs, err := c.Connect(context.Background(), &mcp.StreamableClientTransport{Endpoint: td.BaseURL() + "/mcp",
		HTTPClient: &http.Client{Transport: patTransport{pat}}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := cs.Close(); err != nil {
			t.Errorf("close: %v", err)
		}
	}()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "portal__notes__write", Arguments: map[string]any{"path": "later.md", "content": "later"}})
	if err != nil || res.IsError {
		t.Fatalf("the later call: %v %+v, want it to run on the approved grant", err, res)
	}
}
