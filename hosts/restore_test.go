package hosts

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/plexus-gw/plexus/platform"
)

// TestBackups: the backups of a file are the copies Backup names beside
// it, regular files only, newest first (by time, then by number); the
// backups of another file, other suffixes, links and folders are not.
func TestBackups(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "mcp.json")
	base := time.Date(2026, 11, 1, 12, 0, 0, 0, time.UTC)
	write := func(name string, age time.Duration) {
		t.Helper()
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte("{}"), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Chtimes(p, base.Add(-age), base.Add(-age)); err != nil {
			t.Fatal(err)
		}
	}
	write("mcp.json.plexus-backup", 3*time.Hour)
	write("mcp.json.plexus-backup.1", 2*time.Hour)
	write("mcp.json.plexus-backup.2", 0)
	write("mcp.json.plexus-backup.3", 0) // same time as .2: the higher number is newer
	write("mcp.json.plexus-backup.4", time.Hour)
	for _, other := range []string{"mcp.json.plexus-backup.0", "mcp.json.plexus-backup.01", "mcp.json.plexus-backup.1000",
		"mcp.json.plexus-backup.x", "mcp.json.plexus-backup~", "other.json.plexus-backup", "xmcp.json.plexus-backup", "mcp.json"} {
		write(other, -time.Hour)
	}
	if err := os.Symlink(filepath.Join(dir, "mcp.json.plexus-backup"), filepath.Join(dir, "mcp.json.plexus-backup.7")); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(dir, "mcp.json.plexus-backup.8"), 0o700); err != nil {
		t.Fatal(err)
	}
	list, err := Backups(path)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, b := range list {
		got = append(got, filepath.Base(b.Path))
	}
	want := []string{"mcp.json.plexus-backup.3", "mcp.json.plexus-backup.2", "mcp.json.plexus-backup.4", "mcp.json.plexus-backup.1", "mcp.json.plexus-backup"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("backups (-want +got):\n%s", diff)
	}
	if none, err := Backups(filepath.Join(dir, "missing", "mcp.json")); err != nil || len(none) != 0 {
		t.Errorf("Backups of a file in no folder = %v, %v", none, err)
	}
}

// TestRestore: connecting and then restoring the newest backup gives the
// file back byte for byte, with the file as it was connected kept as a new
// backup; restoring again (the newest is now that one) undoes the
// restore. A dry run prints the diff, PAT redacted, and writes nothing.
func TestRestore(t *testing.T) {
	for _, hf := range []hostFile{{host: "claude-code", file: "claude-code.json"}, {host: "vscode", file: "vscode.jsonc"}, {host: "codex", file: "codex.toml"}} {
		t.Run(hf.host, func(t *testing.T) {
			h := mustLookup(t, hf.host)
			path, orig := copyTestdata(t, hf.file)
			connected := apply(t, must(mustRead(t, h, path).Upsert(remote)))

			var out bytes.Buffer
			if err := RestoreFile(&out, mustRead(t, h, path), "", true); err != nil {
				t.Fatal(err)
			}
			if b, _ := os.ReadFile(path); !bytes.Equal(b, connected) {
				t.Fatal("a dry run wrote the file")
			}
			if !strings.Contains(out.String(), "-") || strings.Contains(out.String(), "plx_agent_example") || !strings.Contains(out.String(), "Dry run") {
				t.Errorf("dry run said:\n%s", out.String())
			}
			if list, _ := Backups(path); len(list) != 1 {
				t.Fatalf("a dry run made a backup: %v", list)
			}

			out.Reset()
			if err := RestoreFile(&out, mustRead(t, h, path), "", false); err != nil {
				t.Fatal(err)
			}
			if b, _ := os.ReadFile(path); !bytes.Equal(b, orig) {
				t.Errorf("restore did not give back the file (-want +got):\n%s", cmp.Diff(string(orig), string(b)))
			}
			list, err := Backups(path)
			if err != nil || len(list) != 2 {
				t.Fatalf("backups after a restore = %v, %v; want 2", list, err)
			}
			if b, _ := os.ReadFile(list[0].Path); !bytes.Equal(b, connected) {
				t.Error("the newest backup is not the file as it was before the restore")
			}

			if err := RestoreFile(&out, mustRead(t, h, path), "", false); err != nil {
				t.Fatal(err)
			}
			if b, _ := os.ReadFile(path); !bytes.Equal(b, connected) {
				t.Error("restoring the newest backup again did not undo the restore")
			}

			// A named backup, the oldest: the file as it first was.
			if err := RestoreFile(&out, mustRead(t, h, path), path+".plexus-backup", false); err != nil {
				t.Fatal(err)
			}
			if b, _ := os.ReadFile(path); !bytes.Equal(b, orig) {
				t.Error("--backup did not restore the named backup")
			}
		})
	}
}

// TestRestoreNothing: no backup is an error saying so; a backup that says
// what the file says writes nothing.
func TestRestoreNothing(t *testing.T) {
	h := mustLookup(t, "cursor")
	path, orig := copyTestdata(t, "cursor.json")
	err := RestoreFile(&bytes.Buffer{}, mustRead(t, h, path), "", false)
	if !errors.Is(err, ErrNoBackup) {
		t.Fatalf("RestoreFile with no backup = %v, want ErrNoBackup", err)
	}
	if _, err := Backup(path, orig); err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	if err := RestoreFile(&out, mustRead(t, h, path), "", false); err != nil || !strings.Contains(out.String(), "nothing to restore") {
		t.Errorf("RestoreFile of an identical backup = %v, %q", err, out.String())
	}
	if list, _ := Backups(path); len(list) != 1 {
		t.Errorf("an identical restore made a backup: %v", list)
	}
}

// TestAttackRestore: restore takes only a copy Plexus wrote of this very
// file: a link planted under a backup's name, a backup of another file, a
// path outside the file's folder (also by "..") and a backup that is not
// the host's format are refused, and so is a host's file that became a
// link or a folder. Each time the file, and whatever a link points to,
// stay as they were, and no backup is made.
func TestAttackRestore(t *testing.T) {
	h := mustLookup(t, "cursor")
	secret := []byte(`{"mcpServers": {"stolen": {"command": "evil"}}}`)
	tests := []struct {
		name string
		// plant prepares the attack in dir beside path and returns the
		// backup to name ("" for the newest).
		plant func(t *testing.T, dir, path string) string
		kind  string // the error: "backup" or "notregular"
	}{
		{"LinkAsBackup", func(t *testing.T, dir, path string) string {
			outside := filepath.Join(t.TempDir(), "victim.json")
			writeFileT(t, outside, secret)
			symlinkT(t, outside, path+".plexus-backup.5")
			return path + ".plexus-backup.5"
		}, "backup"},
		{"LinkAsNewestBackupIgnored", func(t *testing.T, dir, path string) string {
			outside := filepath.Join(t.TempDir(), "victim.json")
			writeFileT(t, outside, secret)
			symlinkT(t, outside, path+".plexus-backup")
			return ""
		}, "nobackup"},
		{"FIFOAsBackup", func(t *testing.T, dir, path string) string {
			if err := syscall.Mkfifo(path+".plexus-backup.2", 0o600); err != nil {
				t.Fatal(err)
			}
			return path + ".plexus-backup.2"
		}, "backup"},
		{"AnotherFilesBackup", func(t *testing.T, dir, path string) string {
			other := filepath.Join(dir, "settings.json.plexus-backup")
			writeFileT(t, other, secret)
			return other
		}, "backup"},
		{"OutsideTheFolder", func(t *testing.T, dir, path string) string {
			other := filepath.Join(t.TempDir(), "mcp.json.plexus-backup")
			writeFileT(t, other, secret)
			return other
		}, "backup"},
		{"DotDot", func(t *testing.T, dir, path string) string {
			sub := filepath.Join(dir, "sub")
			if err := os.Mkdir(sub, 0o700); err != nil {
				t.Fatal(err)
			}
			writeFileT(t, filepath.Join(sub, "mcp.json.plexus-backup"), secret)
			return filepath.Join(dir, "..", filepath.Base(dir), "sub", "mcp.json.plexus-backup")
		}, "backup"},
		{"NotTheFormat", func(t *testing.T, dir, path string) string {
			writeFileT(t, path+".plexus-backup", []byte("[mcp_servers.x]\ncommand = \"evil\"\n"))
			return ""
		}, "backup"},
		{"NotABackupName", func(t *testing.T, dir, path string) string {
			writeFileT(t, path+".plexus-backup.0", secret)
			return path + ".plexus-backup.0"
		}, "backup"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path, orig := copyTestdata(t, "cursor.json")
			backup := tt.plant(t, filepath.Dir(path), path)
			before, _ := Backups(path)
			err := RestoreFile(&bytes.Buffer{}, mustRead(t, h, path), backup, false)
			var be *BackupError
			switch tt.kind {
			case "backup":
				if !errors.As(err, &be) {
					t.Fatalf("RestoreFile = %v, want a *BackupError", err)
				}
			case "nobackup":
				if !errors.Is(err, ErrNoBackup) {
					t.Fatalf("RestoreFile = %v, want ErrNoBackup (a link is no backup)", err)
				}
			}
			if b, _ := os.ReadFile(path); !bytes.Equal(b, orig) {
				t.Error("the host's file changed")
			}
			if after, _ := Backups(path); len(after) != len(before) {
				t.Errorf("a backup was made: %v", after)
			}
		})
	}

	// The host's file itself became a link or a folder since the backup:
	// it is not read, so nothing is restored over it or through it.
	for _, kind := range []string{"symlink", "directory"} {
		t.Run("TargetIs"+kind, func(t *testing.T) {
			path, orig := copyTestdata(t, "cursor.json")
			if _, err := Backup(path, orig); err != nil {
				t.Fatal(err)
			}
			outside := filepath.Join(t.TempDir(), "victim.json")
			writeFileT(t, outside, secret)
			if err := os.Remove(path); err != nil {
				t.Fatal(err)
			}
			if kind == "symlink" {
				symlinkT(t, outside, path)
			} else if err := os.Mkdir(path, 0o700); err != nil {
				t.Fatal(err)
			}
			_, err := Read(h, path)
			var nr *platform.NotRegularError
			if !errors.As(err, &nr) || nr.Kind != kind {
				t.Fatalf("Read = %v, want a NotRegularError of kind %s", err, kind)
			}
			if b, _ := os.ReadFile(outside); !bytes.Equal(b, secret) {
				t.Error("the link's target changed")
			}
		})
	}
}

func writeFileT(t *testing.T, path string, b []byte) {
	t.Helper()
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
}

func symlinkT(t *testing.T, target, link string) {
	t.Helper()
	if err := os.Symlink(target, link); err != nil {
		t.Fatal(err)
	}
}
