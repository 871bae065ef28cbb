package hosts

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/plexus-gw/plexus/platform"
)

// TestAttackNotAFile: a host's file that is a FIFO, a link to /dev/zero
// or a link to a file elsewhere is refused at once, never waited on,
// followed or read (a test that hangs here fails by its timeout).
func TestAttackNotAFile(t *testing.T) {
	outside := filepath.Join(t.TempDir(), "outside.json")
	if err := os.WriteFile(outside, []byte(`{"mcpServers": {}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name  string
		plant func(path string) error
		kind  string
	}{
		{"FIFO", func(p string) error { return syscall.Mkfifo(p, 0o600) }, "fifo"},
		{"DevZero", func(p string) error { return os.Symlink("/dev/zero", p) }, "symlink"},
		{"Outside", func(p string) error { return os.Symlink(outside, p) }, "symlink"},
		{"Folder", func(p string) error { return os.Mkdir(p, 0o700) }, "directory"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "mcp.json")
			if err := tt.plant(path); err != nil {
				t.Fatal(err)
			}
			_, err := Read(mustLookup(t, "cursor"), path)
			var nr *platform.NotRegularError
			if !errors.As(err, &nr) || nr.Kind != tt.kind {
				t.Fatalf("Read = %v, want a NotRegularError of kind %s", err, tt.kind)
			}
			if hint := strings.Contains(err.Error(), "--config "); hint != (tt.name == "Outside") {
				t.Errorf("error %q: a hint to edit the link's target only for a regular file", err)
			}
			if b, err := os.ReadFile(outside); err != nil || string(b) != `{"mcpServers": {}}` {
				t.Error("the file outside changed")
			}
		})
	}
}

// TestAttackHugeFile: a host's file past the bound is refused after
// reading at most the bound, not read whole.
func TestAttackHugeFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "settings.json")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	// Sparse: 1 GiB on paper, nothing on disk.
	if err := f.Truncate(1 << 30); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	_, err = Read(mustLookup(t, "gemini"), path)
	var pe *ParseError
	if !errors.As(err, &pe) || !strings.Contains(err.Error(), "larger than") {
		t.Fatalf("Read = %v, want a ParseError saying it is too large", err)
	}
}

// hostile is what a crafted config may hold to break out of a string.
var hostile = []string{
	`"}, "evil": {"command": "sh"}, "x": {"a": "`,
	"\"\n[mcp_servers.evil]\ncommand = \"sh\"\n",
	"a\x00b\x7f\u2028\\",
	`${secret:x}$(touch /tmp/pwned)` + "`id`",
}

// TestAttackCraftedImport: names and values of a host's servers, however
// crafted, come out of MCPJSON as exactly themselves, inside their
// strings.
func TestAttackCraftedImport(t *testing.T) {
	servers := map[string]any{}
	for _, s := range hostile {
		servers[s] = map[string]any{
			"command": s, "args": []any{s}, "env": map[string]any{s: s},
			"headers": map[string]any{"X": s},
		}
	}
	src, err := json.Marshal(map[string]any{"mcpServers": servers})
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "mcp.json")
	if err := os.WriteFile(path, src, 0o600); err != nil {
		t.Fatal(err)
	}
	got, err := mustRead(t, mustLookup(t, "cursor"), path).Servers()
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(hostile) {
		t.Fatalf("%d servers, want %d", len(got), len(hostile))
	}
	for _, s := range got {
		raw, err := s.MCPJSON()
		if err != nil {
			t.Fatal(err)
		}
		var back map[string]any
		if err := json.Unmarshal(raw, &back); err != nil {
			t.Fatalf("MCPJSON is not JSON: %v", err)
		}
		if len(back) != 4 || back["command"] != s.Name || back["args"].([]any)[0] != s.Name {
			t.Errorf("server %q came out as %s", s.Name, raw)
		}
	}
}

// TestAttackCraftedEntry: an entry Plexus writes, whatever its values
// hold, adds exactly one server to any format and reads back as itself.
func TestAttackCraftedEntry(t *testing.T) {
	e := Entry{Command: hostile[1], Args: hostile, Env: map[string]string{hostile[0]: hostile[2]}}
	for _, hf := range hostFiles()[:7] {
		t.Run(hf.file, func(t *testing.T) {
			h := mustLookup(t, hf.host)
			path, _ := copyTestdata(t, hf.file)
			c := mustRead(t, h, path)
			before, err := c.Servers()
			if err != nil {
				t.Fatal(err)
			}
			ed, err := c.Upsert(e)
			if err != nil {
				t.Fatal(err)
			}
			apply(t, ed)
			c = mustRead(t, h, path)
			after, err := c.Servers()
			if err != nil {
				t.Fatal(err)
			}
			if len(after) != len(before)+1 || !c.Has(e) {
				t.Errorf("the crafted entry broke out:\n%s", ed.New)
			}
		})
	}
}
