package e2e

import (
	"context"
	"net/http"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/plexus-gw/plexus/daemon"
)

// TestMCPSubscriptionAcrossServerRestart: a host connected to /mcp (the Go
// SDK client) subscribes to a stdio MCP server's resource. Its updates
// reach the host; the server's process is killed and the daemon starts it
// again; the subscription is made again on the new process, the host is
// told the resource may have changed meanwhile, and the new process's
// updates reach it as before.
func TestMCPSubscriptionAcrossServerRestart(t *testing.T) {
	td := startTestDaemon(t, daemon.Options{})
	e := &cliEnv{t: t, home: td.Home().Dir, addr: td.Addr(), agentHome: t.TempDir()}
	noteFile := filepath.Join(t.TempDir(), "note")
	writeNote := func(s string) {
		t.Helper()
		if err := os.WriteFile(noteFile, []byte(s), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	writeNote("v1")
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	e.ok("mcp", "add", "drift", "--env", driftServerEnv+"=1", "--env", "DRIFT_NOTE_FILE="+noteFile, "--", self)
	pat, _ := enrolledAgent(t, td, "claude")
	updates := make(chan string, 16)
	c := mcp.NewClient(&mcp.Implementation{Name: "claude-code", Version: "2.0"}, &mcp.ClientOptions{
		ResourceUpdatedHandler: func(_ context.Context, r *mcp.ResourceUpdatedNotificationRequest) { updates <- r.Params.URI }})
	cs, err := c.Connect(context.Background(), &mcp.StreamableClientTransport{Endpoint: td.BaseURL() + "/mcp",
		HTTPClient: &http.Client{Transport: patTransport{pat}}}, &mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	if err := cs.Subscribe(context.Background(), &mcp.SubscribeParams{URI: driftNoteURI}); err != nil {
		t.Fatalf("subscribe: %v", err)
	}
	awaitUpdate := func(what string) {
		t.Helper()
		select {
		case uri := <-updates:
			if uri != driftNoteURI {
				t.Fatalf("%s: an update of %s, want %s", what, uri, driftNoteURI)
			}
		case <-time.After(30 * time.Second):
			t.Fatalf("no %s", what)
		}
	}
	writeNote("v2")
	awaitUpdate("update before the restart")

	pid := childRunning(t, self)
	if pid <= 0 {
		t.Fatalf("server pid %d", pid)
	}
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	awaitUpdate("update saying the note may have changed while the server was away")
	if now := childRunning(t, self); now == pid || now <= 0 {
		t.Fatalf("server pid after the restart = %d (was %d)", now, pid)
	}
	writeNote("v3")
	awaitUpdate("update from the restarted server")
}
