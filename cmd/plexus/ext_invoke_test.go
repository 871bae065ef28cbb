package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io/fs"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/plexus-gw/plexus"
)

// buildExample builds the example program in examples/<name> into a temp
// folder and returns its path.
func buildExample(t *testing.T, name string) string {
	t.Helper()
	out := filepath.Join(t.TempDir(), name)
	cmd := exec.Command("go", "build", "-o", out, "./examples/"+name)
	cmd.Dir = filepath.Join("..", "..")
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("build examples/%s: %v\n%s", name, err, b)
	}
	return out
}

// TestExtensionLocalREST: the notes-rest example end to end — the real
// example service runs as a process, its manifest is added by the owner, the
// API key is set with plexus secrets, and an agent's call reaches the
// service through the local-rest transport with the key attached. The key
// is in no response, no journal row and no file under PLEXUS_HOME but its
// own; with the service stopped the call is source_unavailable.
func TestExtensionLocalREST(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the example service")
	}
	const canary = "plx-secret-canary-7d1f0c9a"
	bin := buildExample(t, "notes-rest")
	notes := t.TempDir()
	if err := os.WriteFile(filepath.Join(notes, "groceries.md"), []byte("buy bread and milk\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	tokenFile := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(tokenFile, []byte(canary+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	port := freePort(t)
	ctx, stop := context.WithCancel(context.Background())
	svc := exec.CommandContext(ctx, bin)
	svc.Env = append(os.Environ(), "NOTES_DIR="+notes, "NOTES_TOKEN_FILE="+tokenFile, "NOTES_PORT="+strconv.Itoa(port))
	if err := svc.Start(); err != nil {
		t.Fatal(err)
	}
	stopped := false
	stopService := func() {
		if !stopped {
			stopped = true
			stop()
			_ = svc.Wait()
		}
	}
	t.Cleanup(stopService)
	waitFor(t, 10*time.Second, "notes-rest to listen", holds(func() bool {
		c, err := net.Dial("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
		if err == nil {
			c.Close()
		}
		return err == nil
	}))

	td := startTestDaemon(t, daemonOptions{})
	e := &cliEnv{t: t, home: td.home.Dir, addr: td.ln.Addr().String(), agentHome: t.TempDir()}
	var m map[string]any
	b, err := os.ReadFile(filepath.Join("..", "..", "examples", "extensions", "notes-rest.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	m["serviceHint"].(map[string]any)["defaultPort"] = port
	e.ok("ext", "add", writeManifest(t, m))
	if r := e.runStdin(context.Background(), strings.NewReader(canary+"\n"), "secrets", "set", "notes-api-key"); r.code != exitOK ||
		strings.Contains(r.stdout+r.stderr, canary) {
		t.Fatalf("secrets set: %s", r)
	}

	_, sid := enrolledAgent(t, td, "claude")
	var tok plexus.ScopedToken
	if st := td.call(t, "PUT", "/grants", session(sid), map[string]any{"grants": map[string]any{"notes-rest.vault.search": "allow"}}, &tok); st != http.StatusOK {
		t.Fatalf("grant: status %d, %+v", st, tok)
	}
	st, resp, raw := td.invoke(t, tok.Token, plexus.InvokeRequest{ID: "notes-rest.vault.search", Input: map[string]any{"query": "bread"}})
	if st != http.StatusOK || !resp.OK || !strings.Contains(string(raw), "buy bread and milk") {
		t.Fatalf("invoke: status %d, %s", st, raw)
	}
	// A schema violation is refused before the service is asked.
	if st, resp, _ := td.invoke(t, tok.Token, plexus.InvokeRequest{ID: "notes-rest.vault.search", Input: map[string]any{"q": "bread"}}); st == http.StatusOK ||
		resp.Error == nil || resp.Error.Code != plexus.CodeSchemaValidationFailed {
		t.Errorf("invalid input: status %d, %+v", st, resp.Error)
	}
	// The manifest and .well-known show the skill, never the route or key.
	var man plexus.ManifestResponse
	td.call(t, "GET", "/manifest", session(sid), nil, &man)
	mb, _ := json.Marshal(man)
	if !strings.Contains(string(mb), "notes-rest.vault.how-to-cite") || strings.Contains(string(mb), "pathTemplate") {
		t.Errorf("manifest: %s", mb)
	}

	// The service stops: the call says so.
	stopService()
	if st, resp, _ := td.invoke(t, tok.Token, plexus.InvokeRequest{ID: "notes-rest.vault.search", Input: map[string]any{"query": "bread"}}); st == http.StatusOK ||
		resp.Error == nil || resp.Error.Code != plexus.CodeSourceUnavailable {
		t.Errorf("service down: status %d, %+v", st, resp.Error)
	}

	// The key is nowhere but its own file.
	td.stop()
	secretFile := filepath.Join(td.home.Dir, "secrets", "notes-api-key")
	err = filepath.WalkDir(td.home.Dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || p == secretFile {
			return err
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		if strings.Contains(string(b), canary) {
			return fmt.Errorf("the secret is in %s", p)
		}
		return nil
	})
	if err != nil {
		t.Error(err)
	}
	if strings.Contains(string(raw)+string(mb), canary) {
		t.Error("the secret is in a response")
	}
}

func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}
