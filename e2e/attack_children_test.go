package e2e

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/plexus-gw/plexus"
	"github.com/plexus-gw/plexus/auth"
	"github.com/plexus-gw/plexus/daemon"
	"github.com/plexus-gw/plexus/platform"
	"github.com/plexus-gw/plexus/scaffold"
)

// Issue 12 §5: child processes. Every child (a cli tool, a stdio tool, an
// ipc provider, an MCP server, the notify command) gets the one base
// environment plus what its declaration names, and none outlives a daemon
// killed with SIGKILL: the direct children die with it, and what they
// started is stopped at the next start.

// childScript is the program every child of these tests runs:
//
//	childScript <dir> <name> [stdio|sleep|grandchild]
//
// It writes its environment to <dir>/<name>.env and its pid to
// <dir>/<name>.pid (each renamed into place, so a reader sees all of it),
// then: stdio answers the stdio transport's requests; sleep waits;
// grandchild starts a background sleep, writes its pid to
// <dir>/<name>.gc.pid and waits for it. Anything else exits at once. It
// gets its paths as arguments: its environment is what is under test.
const childScript = `#!/bin/sh
dir=$1; name=$2
env > "$dir/$name.env.tmp" && mv "$dir/$name.env.tmp" "$dir/$name.env"
echo $$ > "$dir/$name.pid.tmp" && mv "$dir/$name.pid.tmp" "$dir/$name.pid"
case "$3" in
stdio)
	while IFS= read -r line; do
		id=$(printf '%s\n' "$line" | sed -n 's/.*"id":"\([^"]*\)".*/\1/p')
		printf '{"id":"%s","result":{"ok":true}}\n' "$id"
	done ;;
sleep) exec sleep 300 ;;
grandchild)
	sleep 300 &
	echo $! > "$dir/$name.gc.pid.tmp" && mv "$dir/$name.gc.pid.tmp" "$dir/$name.gc.pid"
	wait ;;
esac
`

// Canaries in the daemon's environment: a shell's tokens and the gateway's
// own variables. No child may see any of them.
var childCanaries = []string{
	"GITHUB_TOKEN=ghp_canary-children-1f2e",
	"AWS_SECRET_ACCESS_KEY=aws-canary-children-3d4c",
	"OPENAI_API_KEY=sk-canary-children-5b6a",
	"PLEXUS_AGENT_HOME=/canary/agent-home",
}

// childWorld is a home prepared for the children tests: the script, the
// folder the children write to, an MCP server and an ipc provider that
// run the script, and the notify command.
type childWorld struct {
	home, dir, script string
}

func newChildWorld(t *testing.T, notify bool, mode string) *childWorld {
	t.Helper()
	w := &childWorld{home: filepath.Join(t.TempDir(), "home"), dir: t.TempDir()}
	w.script = filepath.Join(t.TempDir(), "child.sh")
	if err := os.WriteFile(w.script, []byte(childScript), 0o755); err != nil {
		t.Fatal(err)
	}
	if _, err := scaffold.Init(w.home, scaffold.InitOptions{NewConnectionKey: auth.NewConnectionKey}); err != nil {
		t.Fatal(err)
	}
	mcp := map[string]any{"mcpServers": map[string]any{"dump": map[string]any{
		"command": w.script, "args": []string{w.dir, "mcp", mode}, "env": map[string]string{"DECLARED_MCP": "mcp-declared"}}}}
	ownerWrite(t, filepath.Join(w.home, "mcp.json"), mustJSON(t, mcp))
	providers := map[string]any{"providers": map[string]any{"dump": map[string]any{
		"command": w.script, "args": []string{w.dir, "ipc", mode}, "env": map[string]string{"DECLARED_IPC": "ipc-declared"}}}}
	ownerWrite(t, filepath.Join(w.home, "providers.json"), mustJSON(t, providers))
	if notify {
		cfgPath := filepath.Join(w.home, scaffold.FileAuthConfig)
		b, err := os.ReadFile(cfgPath)
		if err != nil {
			t.Fatal(err)
		}
		var cfg map[string]any
		if err := json.Unmarshal(b, &cfg); err != nil {
			t.Fatal(err)
		}
		cfg["notify"] = []string{w.script, w.dir, "notify"}
		ownerWrite(t, cfgPath, mustJSON(t, cfg))
	}
	return w
}

// manifest is the extension of a cli tool and a stdio tool that run the
// script, each given a secret, and a cli tool that needs write (so that
// granting it asks the owner, which notifies). cliMode is what the cli
// tool does after writing its files.
func (w *childWorld) manifest(cliMode string) plexus.ExtensionManifest {
	route := func(name, mode string) json.RawMessage {
		r, _ := json.Marshal(map[string]any{"bin": w.script, "args": []string{w.dir, name, mode}, "timeoutMs": 120000,
			"secret": map[string]string{"name": "child-key", "attach": "env", "as": "DECLARED_SECRET"}})
		return r
	}
	capability := func(name string, tr plexus.TransportKind, verb plexus.Verb, r json.RawMessage) plexus.ExtensionCapabilityDecl {
		return plexus.ExtensionCapabilityDecl{Name: name, Kind: plexus.KindCapability, Label: name, Transport: tr,
			Describe: "Print the environment. For the children tests.", Grants: []plexus.Verb{verb}, Route: r,
			IO: &plexus.IOSchema{Input: json.RawMessage(`{"type":"object"}`)}}
	}
	return plexus.ExtensionManifest{Manifest: plexus.ManifestVersion, Source: "dump", Label: "Children", Transport: plexus.TransportCLI,
		Secrets: []plexus.ExtensionSecretRef{{Name: "child-key", Attach: plexus.AttachEnv, As: "DECLARED_SECRET"}},
		Capabilities: []plexus.ExtensionCapabilityDecl{
			capability("env.cli", plexus.TransportCLI, plexus.VerbRead, route("cli", cliMode)),
			capability("env.stdio", plexus.TransportStdio, plexus.VerbRead, route("stdio", "stdio")),
			capability("env.write", plexus.TransportCLI, plexus.VerbWrite, route("write", "")),
		}}
}

// readChildFile returns <dir>/<name>, waiting for the child to write it.
func (w *childWorld) readChildFile(t *testing.T, name string) string {
	t.Helper()
	var b []byte
	waitFor(t, 30*time.Second, name, holds(func() bool {
		var err error
		b, err = os.ReadFile(filepath.Join(w.dir, name))
		return err == nil
	}))
	return string(b)
}

func (w *childWorld) pid(t *testing.T, name string) int {
	t.Helper()
	pid, err := strconv.Atoi(strings.TrimSpace(w.readChildFile(t, name)))
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return pid
}

// TestAttackChildEnvironment: the daemon's environment holds a shell's
// tokens; a cli tool, a stdio tool, an ipc provider, an MCP server and the
// notify command each print what they got. None holds a canary; each holds
// the base environment and exactly its own declared variables.
func TestAttackChildEnvironment(t *testing.T) {
	if testing.Short() {
		t.Skip("runs every kind of child")
	}
	w := newChildWorld(t, true, "sleep")
	const secret = "child-secret-7a8b"
	if err := platform.New(platform.Options{Home: w.home}).SetSecret("child-key", []byte(secret)); err != nil {
		t.Fatal(err)
	}
	env := append(os.Environ(), "LANG=C.UTF-8", "TZ=Europe/Paris")
	env = append(env, childCanaries...)
	td := startTestDaemon(t, daemon.Options{Home: w.home, Env: env})
	if st := td.call(t, "POST", "/admin/api/extensions", td.admin(), plexus.ExtensionRegisterRequest{Manifest: w.manifest("")}, nil); st != http.StatusCreated {
		t.Fatalf("register the extension: status %d", st)
	}
	_, sid := enrolledAgent(t, td, "claude")
	tok := grantAllowed(t, td, sid, map[string]any{"dump.env.cli": "allow", "dump.env.stdio": "allow"})
	// A write asks the owner, which runs the notify command.
	grantPending(t, td, sid, map[string]any{"dump.env.write": map[string]any{"decision": "allow", "verbs": []string{"write"}}})
	for _, id := range []string{"dump.env.cli", "dump.env.stdio"} {
		if st, resp, raw := td.invoke(t, tok, plexus.InvokeRequest{ID: id, Input: map[string]any{}}); st != http.StatusOK || !resp.OK {
			t.Fatalf("invoke %s: status %d, %s", id, st, raw)
		}
	}

	for _, tt := range []struct {
		child    string
		declared []string // variables its declaration names
	}{
		{"cli", []string{"DECLARED_SECRET=" + secret}},
		{"stdio", []string{"DECLARED_SECRET=" + secret}},
		{"ipc", []string{"DECLARED_IPC=ipc-declared", "PLEXUS_SOCKET=", "PLEXUS_SESSION_TOKEN=", "PLEXUS_PROVIDER_ID=dump"}},
		{"mcp", []string{"DECLARED_MCP=mcp-declared"}},
		{"notify", nil},
	} {
		t.Run(tt.child, func(t *testing.T) {
			got := "\n" + w.readChildFile(t, tt.child+".env")
			for _, c := range childCanaries {
				if _, v, _ := strings.Cut(c, "="); strings.Contains(got, v) {
					t.Errorf("the %s child got the daemon's %s", tt.child, c)
				}
			}
			for _, want := range append([]string{"PATH=", "HOME=", "LANG=C.UTF-8", "TZ=Europe/Paris"}, tt.declared...) {
				if !strings.Contains(got, "\n"+want) {
					t.Errorf("the %s child lacks %s", tt.child, want)
				}
			}
			if tt.child != "cli" && tt.child != "stdio" && strings.Contains(got, secret) {
				t.Errorf("the %s child got another child's secret", tt.child)
			}
		})
	}
}

// alive reports whether pid runs (a zombie does not).
func alive(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	s := string(b)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	return len(f) > 0 && f[0] != "Z"
}

// TestAttackChildrenDieWithTheDaemon: the built daemon runs a cli call
// whose tool waits on a grandchild, a stdio tool, an ipc provider and an
// MCP server. SIGKILL, which no cleanup code sees: every direct child ends
// with it (the kernel's parent-death signal), and the grandchild, which
// the signal does not reach, is stopped by the next start, which journals
// it.
func TestAttackChildrenDieWithTheDaemon(t *testing.T) {
	if testing.Short() {
		t.Skip("builds on the crash tests' daemon binary")
	}
	w := newChildWorld(t, false, "sleep")
	if err := platform.New(platform.Options{Home: w.home}).SetSecret("child-key", []byte("child-secret")); err != nil {
		t.Fatal(err)
	}
	p := startPlexus(t, w.home)
	f := &crashFixture{home: w.home, key: mustConnectionKey(t, w.home)}
	if st := p.call(t, "POST", "/admin/api/extensions", f.admin(), plexus.ExtensionRegisterRequest{Manifest: w.manifest("grandchild")}, nil); st != http.StatusCreated {
		t.Fatalf("register the extension: status %d", st)
	}
	var conn plexus.ConnectResponse
	if st := p.call(t, "POST", "/admin/api/agents/connect", f.admin(), plexus.ConnectRequest{AgentID: "claude"}, &conn); st/100 != 2 {
		t.Fatalf("connect: status %d", st)
	}
	var enr plexus.EnrollResponse
	if st := p.call(t, "POST", "/agents/enroll", nil, plexus.EnrollRequest{Code: conn.Code}, &enr); st != http.StatusOK {
		t.Fatalf("enroll: status %d", st)
	}
	f.pat = enr.PAT
	sid := f.handshake(t, p)
	var tok plexus.ScopedToken
	if st := p.call(t, "PUT", "/grants", session(sid), map[string]any{"grants": map[string]any{"dump.env.cli": "allow", "dump.env.stdio": "allow"}}, &tok); st != http.StatusOK {
		t.Fatalf("grant: status %d", st)
	}
	// The answer does not matter: the cli call never gets one, the daemon
	// dies under it.
	call := func(id string) {
		p.send("POST", "/invoke", bearer(tok.Token), plexus.InvokeRequest{ID: id, Input: map[string]any{}})
	}
	call("dump.env.stdio")
	go call("dump.env.cli") // runs until the daemon dies

	children := map[string]int{}
	for _, name := range []string{"cli", "stdio", "ipc", "mcp"} {
		children[name] = w.pid(t, name+".pid")
	}
	grandchild := w.pid(t, "cli.gc.pid")
	t.Cleanup(func() {
		for _, pid := range append([]int{grandchild}, children["cli"]) {
			syscall.Kill(pid, syscall.SIGKILL)
		}
	})
	for name, pid := range children {
		if !alive(pid) {
			t.Fatalf("the %s child %d is not running before the kill", name, pid)
		}
	}

	p.kill(t)
	for name, pid := range children {
		waitFor(t, 10*time.Second, "the "+name+" child to end with the daemon", holds(func() bool { return !alive(pid) }))
	}
	if !alive(grandchild) {
		t.Fatal("the grandchild ended with the daemon; the next start has nothing to prove")
	}

	p = startPlexus(t, w.home)
	waitFor(t, 10*time.Second, "the grandchild to be stopped by the next start", holds(func() bool { return !alive(grandchild) }))
	// One system row, for the cli tool's group: the other children ended
	// with the daemon, so nothing of theirs was left to stop.
	var reaped []string
	for _, r := range journalRows(t, w.home) {
		if r.ActionType == "child.reaped" && r.Actor == plexus.ActorSystem {
			reaped = append(reaped, r.Target)
		}
	}
	if want := "pgid:" + strconv.Itoa(children["cli"]); len(reaped) != 1 || reaped[0] != want {
		t.Errorf("child.reaped system rows for %v; want one for %s", reaped, want)
	}
	p.stop(t)
}

func mustConnectionKey(t *testing.T, home string) string {
	t.Helper()
	key, err := readConnectionKey(home)
	if err != nil {
		t.Fatal(err)
	}
	return key
}
