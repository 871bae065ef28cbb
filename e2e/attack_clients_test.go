package e2e

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/plexus-gw/plexus/hosts"
)

// TestAttackClientsFile: a host's file that is a FIFO, a link to
// /dev/zero, a link to a file elsewhere or a huge file is refused at once
// with a clear error (no hang: the test's timeout would catch one), and no
// agent is enrolled for it; the file a link points to is not touched.
func TestAttackClientsFile(t *testing.T) {
	env := hostHome(t)
	e, _ := newCLIEnv(t)
	outside := filepath.Join(t.TempDir(), "elsewhere.json")
	if err := os.WriteFile(outside, []byte("{}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	h, _ := hosts.Lookup("cursor")
	path, err := h.Path(env, hosts.ScopeUser)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name  string
		plant func() error
		want  string
	}{
		{"FIFO", func() error { return syscall.Mkfifo(path, 0o600) }, "is a fifo"},
		{"DevZero", func() error { return os.Symlink("/dev/zero", path) }, "is a symlink"},
		{"Outside", func() error { return os.Symlink(outside, path) }, "pass --config " + outside},
		{"Huge", func() error {
			f, err := os.Create(path)
			if err != nil {
				return err
			}
			if err := f.Truncate(1 << 30); err != nil {
				return err
			}
			return f.Close()
		}, "larger than 16 MiB"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := e.with(t)
			if err := os.RemoveAll(path); err != nil {
				t.Fatal(err)
			}
			if err := tt.plant(); err != nil {
				t.Fatal(err)
			}
			for _, args := range [][]string{{"clients", "connect", "cursor"}, {"clients", "disconnect", "cursor"}, {"mcp", "import", "cursor"}} {
				r := e.run(args...)
				if r.code != exitError || !strings.Contains(r.stderr, tt.want) {
					t.Errorf("%s", r)
				}
			}
			if ids := e.agentIDs(); len(ids) != 0 {
				t.Errorf("agents enrolled: %v", ids)
			}
			if b := readFile(t, outside); string(b) != "{}\n" {
				t.Errorf("the file the link points to changed: %s", b)
			}
		})
	}
}

// TestAttackClientsAgentID: an agent id that is a path never becomes one.
func TestAttackClientsAgentID(t *testing.T) {
	hostHome(t)
	e := initializedEnv(t)
	for _, id := range []string{"../../escape", "..", "a/b", "-x"} {
		r := e.run("clients", "connect", "cursor", "--agent="+id, "--dry-run")
		if r.code != exitUsage || !strings.Contains(r.stderr, "agent id") {
			t.Errorf("--agent %q: %s", id, r)
		}
	}
	if _, err := os.Stat(filepath.Join(filepath.Dir(e.home), "escape")); !os.IsNotExist(err) {
		t.Errorf("something was created outside the home: %v", err)
	}
}

// TestAttackMCPImportCrafted: crafted names and values in a host's file
// cannot break out of their strings in mcp.json, cannot smuggle a server
// in, cannot put control characters on the owner's terminal, and the
// import runs nothing.
func TestAttackMCPImportCrafted(t *testing.T) {
	env := hostHome(t)
	e := initializedEnv(t)
	marker := filepath.Join(t.TempDir(), "ran")
	servers := map[string]any{
		`x"}, "evil": {"command": "sh"}, "y": {"a": "`: map[string]any{"command": "sh"},
		"red\x1b[31m\nname":                            map[string]any{"command": "sh"},
		"pwn": map[string]any{
			"command": "sh", "args": []any{"-c", "touch " + marker + ` "}, "evil": {"command": "sh`},
			"env": map[string]any{"X": "$(touch " + marker + ")"},
		},
	}
	src, err := json.Marshal(map[string]any{"mcpServers": servers})
	if err != nil {
		t.Fatal(err)
	}
	h, _ := hosts.Lookup("windsurf")
	path, err := h.Path(env, hosts.ScopeUser)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, src, 0o600); err != nil {
		t.Fatal(err)
	}
	r := e.ok("mcp", "import", "windsurf")
	if bytes.ContainsAny([]byte(r.stdout+r.stderr), "\x1b") || strings.Contains(r.stdout, "red\x1b") {
		t.Errorf("a control character reached the terminal: %q", r.stdout)
	}
	got := e.mcpServersOf()
	if len(got) != 1 || got["pwn"] == nil {
		t.Fatalf("mcp.json servers: %v", got)
	}
	args := got["pwn"]["args"].([]any)
	if len(args) != 2 || args[1] != "touch "+marker+` "}, "evil": {"command": "sh` {
		t.Errorf("the args changed on the way: %v", args)
	}
	if _, err := os.Stat(marker); !os.IsNotExist(err) {
		t.Error("the import ran the server's command")
	}
}
