package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"io/fs"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/plexus-gw/plexus"
	"github.com/plexus-gw/plexus/daemon"
	"github.com/plexus-gw/plexus/inbox"
	"github.com/plexus-gw/plexus/journal"
)

// buildExample builds the example program in examples/<name> into a temp
// folder and returns its path.
func buildExample(t *testing.T, name string) string {
	t.Helper()
	out := filepath.Join(t.TempDir(), name)
	cmd := exec.Command("go", "build", "-o", out, "./examples/"+name)
	cmd.Dir = ".."
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

	logs := &syncBuffer{}
	td := startTestDaemon(t, daemon.Options{Logger: slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))})
	e := &cliEnv{t: t, home: td.Home().Dir, addr: td.Addr(), agentHome: t.TempDir()}
	var m map[string]any
	b, err := os.ReadFile(filepath.Join("..", "examples", "extensions", "notes-rest.json"))
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

	_, wk := td.raw(t, "GET", "/.well-known/plexus", nil, nil)
	if !strings.Contains(string(wk), "notes-rest.vault.search") || strings.Contains(string(wk), canary) {
		t.Errorf(".well-known: %s", wk)
	}
	mb = append(mb, wk...)

	// The service stops: the call says so.
	stopService()
	if st, resp, _ := td.invoke(t, tok.Token, plexus.InvokeRequest{ID: "notes-rest.vault.search", Input: map[string]any{"query": "bread"}}); st == http.StatusOK ||
		resp.Error == nil || resp.Error.Code != plexus.CodeSourceUnavailable {
		t.Errorf("service down: status %d, %+v", st, resp.Error)
	}

	// The key is nowhere but its own file.
	td.stop()
	secretFile := filepath.Join(td.Home().Dir, "secrets", "notes-api-key")
	err = filepath.WalkDir(td.Home().Dir, func(p string, d fs.DirEntry, err error) error {
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
	if strings.Contains(logs.String(), canary) {
		t.Error("the secret is in the daemon's log")
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

// TestExtensionCLIWorkflow: the notes workflow example end to end — the real
// notescli on the daemon's PATH, the owner adds the manifest, the agent asks
// for the workflow, the owner approves by moving its decision file, and the
// workflow runs both members through the cli transport in order. Text that
// would be shell syntax arrives as one literal argument.
func TestExtensionCLIWorkflow(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the example tool")
	}
	bin := buildExample(t, "notescli")
	// notescli's folder is $NOTES_DIR or ~/notes; a tool gets the daemon's
	// HOME but not its NOTES_DIR (only the base environment), so ~/notes.
	userHome := t.TempDir()
	notes := filepath.Join(userHome, "notes")
	if err := os.Mkdir(notes, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(notes, "today.md"), []byte("# Today\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	env := []string{"PATH=" + filepath.Dir(bin), "NOTES_DIR=/not/passed/to/tools", "HOME=" + userHome}
	td := startTestDaemon(t, daemon.Options{Env: env})
	e := &cliEnv{t: t, home: td.Home().Dir, addr: td.Addr(), agentHome: t.TempDir()}
	e.ok("ext", "add", filepath.Join("..", "examples", "extensions", "notes-workflow.json"))

	_, sid := enrolledAgent(t, td, "claude")
	events := td.openEvents(t, sid, "")
	var pend plexus.GrantPendingResponse
	if st := td.call(t, "PUT", "/grants", session(sid), map[string]any{"grants": map[string]any{
		"notes.daily.log": map[string]any{"decision": "allow", "verbs": []string{"read", "write"}}}}, &pend); st != http.StatusAccepted {
		t.Fatalf("grant: status %d, %+v", st, pend)
	}
	in := filepath.Join(td.Home().Inbox, pend.PendingID+".md")
	waitFor(t, 10*time.Second, "the decision file", holds(func() bool { _, err := os.Stat(in); return err == nil }))
	if b, _ := os.ReadFile(in); !strings.Contains(string(b), "notes.vault.append") {
		t.Errorf("the decision file does not show the members the workflow brings:\n%s", b)
	}
	if err := os.Rename(in, filepath.Join(td.Home().Active, pend.PendingID+".md")); err != nil {
		t.Fatal(err)
	}
	res := eventWhere(t, events, plexus.EventGrantResolved, func(r plexus.GrantResolvedEvent) bool { return r.PendingID == pend.PendingID })
	if res.Decision != plexus.StateApproved || res.Token == nil {
		t.Fatalf("grant_resolved = %+v", res)
	}

	const line = "walked; rm -rf ~ $(id) `id`"
	st, resp, raw := td.invoke(t, res.Token.Token, plexus.InvokeRequest{ID: "notes.daily.log", Input: map[string]any{"path": "today.md", "text": line}})
	if st != http.StatusOK || !resp.OK {
		t.Fatalf("invoke workflow: status %d, %s", st, raw)
	}
	if !strings.Contains(string(raw), `"id":"notes.vault.read"`) || !strings.Contains(string(raw), `"text":"# Today\n"`) {
		t.Errorf("workflow output: %s", raw)
	}
	if b, err := os.ReadFile(filepath.Join(notes, "today.md")); err != nil || string(b) != "# Today\n"+line+"\n" {
		t.Errorf("today.md = %q, %v", b, err)
	}
	// Each member call is its own audited invoke on the request's trace.
	rows := td.activity(t, journal.Filter{Type: "invoke.ok"})
	var members []string
	for _, r := range rows {
		if r.Payload["member"] == true || r.Target != "notes.daily.log" {
			members = append(members, r.Target)
		}
	}
	if !slices.Equal(members, []string{"notes.vault.read", "notes.vault.append"}) {
		t.Errorf("member invoke rows = %v (all: %+v)", members, rows)
	}
	// A member alone is not callable with the workflow's token.
	if st, resp, _ := td.invoke(t, res.Token.Token, plexus.InvokeRequest{ID: "notes.vault.append", Input: map[string]any{"path": "today.md", "text": "x"}}); st == http.StatusOK ||
		resp.Error == nil || resp.Error.Code != plexus.CodeGrantRequired {
		t.Errorf("member called directly: status %d, %+v", st, resp.Error)
	}
}

// TestExtensionAgentRegistration: an agent's POST /extensions registers
// nothing by itself: its manifest waits as an inbox file showing the
// entries; moving the file to active/ registers it with extension
// provenance (every grant of it then asks the owner), it comes back after a
// restart, and deleting its file from active/ uninstalls it.
func TestExtensionAgentRegistration(t *testing.T) {
	home := filepath.Join(t.TempDir(), "home")
	td := startTestDaemon(t, daemon.Options{Home: home})
	_, sid := enrolledAgent(t, td, "claude")
	events := td.openEvents(t, sid, "")
	b, err := os.ReadFile(filepath.Join("..", "examples", "extensions", "notes-workflow.json"))
	if err != nil {
		t.Fatal(err)
	}
	var m plexus.ExtensionManifest
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}

	// Invalid: refused at once, with the problems, and nothing pends.
	bad := m
	bad.Transport = plexus.TransportMCP
	var e plexus.ErrorResponse
	if st := td.call(t, "POST", "/extensions", session(sid), plexus.ExtensionRegisterRequest{Manifest: bad}, &e); st != http.StatusBadRequest ||
		e.Error == nil || e.Error.Code != plexus.CodeInvalidRequest || !strings.Contains(e.Error.Message, "transport") {
		t.Fatalf("invalid manifest: status %d, %+v", st, e.Error)
	}

	var resp plexus.ExtensionRegisterResponse
	if st := td.call(t, "POST", "/extensions", session(sid), plexus.ExtensionRegisterRequest{Manifest: m}, &resp); st != http.StatusAccepted ||
		resp.PendingID == "" || resp.OK {
		t.Fatalf("register: status %d, %+v", st, resp)
	}
	if _, ok := td.Registry().Source("notes"); ok {
		t.Fatal("an agent's extension was registered before the owner decided")
	}
	in := filepath.Join(td.Home().Inbox, resp.PendingID+".md")
	waitFor(t, 10*time.Second, "the decision file", holds(func() bool { _, err := os.Stat(in); return err == nil }))
	raw, _ := os.ReadFile(in)
	f, err := inbox.Parse(raw)
	if err != nil || f.Type != plexus.PendingExtension || !strings.Contains(string(raw), "id: notes.vault.append") ||
		!strings.Contains(string(raw), "Plexus registers the source `notes`") {
		t.Fatalf("decision file (%v):\n%s", err, raw)
	}

	if err := os.Rename(in, filepath.Join(td.Home().Active, resp.PendingID+".md")); err != nil {
		t.Fatal(err)
	}
	res := eventWhere(t, events, plexus.EventGrantResolved, func(r plexus.GrantResolvedEvent) bool { return r.PendingID == resp.PendingID })
	if res.Decision != plexus.StateApproved {
		t.Fatalf("grant_resolved = %+v", res)
	}
	waitFor(t, 10*time.Second, "the source", holds(func() bool { _, ok := td.Registry().Source("notes"); return ok }))
	if e, _ := td.Registry().Entry("notes.vault.read"); e.Provenance != plexus.ProvenanceExtension {
		t.Errorf("provenance = %q, want extension", e.Provenance)
	}
	if rows := td.activity(t, journal.Filter{Type: "extension.approved"}); len(rows) != 1 || rows[0].Payload["via"] != plexus.ViaFile {
		t.Errorf("extension.approved rows = %+v", rows)
	}
	// Even a read of an extension asks the owner.
	var pend plexus.GrantPendingResponse
	if st := td.call(t, "PUT", "/grants", session(sid), map[string]any{"grants": map[string]any{"notes.vault.read": "allow"}}, &pend); st != http.StatusAccepted {
		t.Errorf("a read of an agent's extension: status %d, want 202 (pending)", st)
	}

	// Back after a restart, still an extension's.
	td.stop()
	td = startTestDaemon(t, daemon.Options{Home: home})
	if e, ok := td.Registry().Entry("notes.vault.read"); !ok || e.Provenance != plexus.ProvenanceExtension {
		t.Fatalf("after a restart: %+v, %v", e, ok)
	}
	// The file is rewritten as decided by the reconciler, which may not
	// have run between the move and the stop: at the latest its start-up
	// look does it.
	active := filepath.Join(td.Home().Active, resp.PendingID+".md")
	waitFor(t, 10*time.Second, "the active file rewritten as approved", func() string {
		f, err := inbox.Parse(mustRead(t, active))
		if err != nil || f.State != plexus.StateApproved {
			return fmt.Sprintf("active file: %v, %+v", err, f)
		}
		return ""
	})

	// Deleting its file uninstalls it.
	if err := os.Remove(active); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 10*time.Second, "the extension to be removed", holds(func() bool { _, ok := td.Registry().Source("notes"); return !ok }))
	if rows := td.activity(t, journal.Filter{Type: "source.removed"}); len(rows) != 1 || rows[0].Payload["via"] != plexus.ViaFile {
		t.Errorf("source.removed rows = %+v", rows)
	}
}

func mustRead(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestExtensionHealth: an extension's requirements show on its entries —
// its service down, or its binary missing, is unavailable with the reason —
// and a service that comes up is announced with source_status.
func TestExtensionHealth(t *testing.T) {
	port := freePort(t)
	td := startTestDaemon(t, daemon.Options{Env: []string{"PATH=" + t.TempDir()}, HealthTTL: 100 * time.Millisecond})
	e := &cliEnv{t: t, home: td.Home().Dir, addr: td.Addr(), agentHome: t.TempDir()}
	_, sid := enrolledAgent(t, td, "claude")
	events := td.openEvents(t, sid, "")

	var rest map[string]any
	if err := json.Unmarshal(mustRead(t, filepath.Join("..", "examples", "extensions", "notes-rest.json")), &rest); err != nil {
		t.Fatal(err)
	}
	rest["serviceHint"].(map[string]any)["defaultPort"] = port
	e.ok("ext", "add", writeManifest(t, rest))
	e.ok("ext", "add", filepath.Join("..", "examples", "extensions", "mdfmt.json")) // mdfmt is not on this PATH

	health := func(id string) plexus.Health {
		var man plexus.ManifestResponse
		td.call(t, "GET", "/manifest", session(sid), nil, &man)
		for _, en := range man.Manifest.Entries {
			if en.ID == id && en.Health != nil {
				return *en.Health
			}
		}
		return plexus.Health{}
	}
	if h := health("notes-rest.vault.search"); h.Status != plexus.HealthUnavailable || !strings.Contains(h.Detail, "not reachable") {
		t.Errorf("service down: %+v", h)
	}
	if h := health("mdfmt.file.format"); h.Status != plexus.HealthUnavailable || !strings.Contains(h.Detail, "mdfmt is not installed") {
		t.Errorf("binary missing: %+v", h)
	}

	l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	st := eventWhere(t, events, plexus.EventSourceStatus, func(s plexus.SourceStatusEvent) bool { return s.Source == "notes-rest" && s.Available })
	if !st.Available {
		t.Errorf("source_status = %+v", st)
	}
	if h := health("notes-rest.vault.search"); h.Status != plexus.HealthOK {
		t.Errorf("service up: %+v", h)
	}
}

// TestExtensionApproveByCLI: plexus approve on an agent's registration says
// what it registered, and the journal names the CLI.
func TestExtensionApproveByCLI(t *testing.T) {
	td := startTestDaemon(t, daemon.Options{})
	e := &cliEnv{t: t, home: td.Home().Dir, addr: td.Addr(), agentHome: t.TempDir()}
	_, sid := enrolledAgent(t, td, "claude")
	var m plexus.ExtensionManifest
	if err := json.Unmarshal(mustRead(t, filepath.Join("..", "examples", "extensions", "mdfmt.json")), &m); err != nil {
		t.Fatal(err)
	}
	var resp plexus.ExtensionRegisterResponse
	if st := td.call(t, "POST", "/extensions", session(sid), plexus.ExtensionRegisterRequest{Manifest: m}, &resp); st != http.StatusAccepted {
		t.Fatalf("register: status %d", st)
	}
	r := e.ok("approve", resp.PendingID)
	if !strings.Contains(r.stdout, "the extension mdfmt is registered (1 entries, extension provenance)") || strings.Contains(r.stdout, "token") {
		t.Errorf("%s", r)
	}
	if rows := td.activity(t, journal.Filter{Type: "extension.approved"}); len(rows) != 1 || rows[0].Payload["via"] != plexus.ViaCLI ||
		rows[0].Payload["decidedBy"] != testDecider {
		t.Errorf("extension.approved rows = %+v", rows)
	}
	if e, ok := td.Registry().Entry("mdfmt.file.format"); !ok || e.Provenance != plexus.ProvenanceExtension {
		t.Errorf("entry = %+v, %v", e, ok)
	}
}
