package e2e

import (
	"bytes"
	"context"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/plexus-gw/plexus/daemon"
)

// offlineEnv is a command-line environment over home with no daemon.
func offlineEnv(t *testing.T, home string) *cliEnv {
	return &cliEnv{t: t, home: home, addr: "127.0.0.1:1", agentHome: filepath.Join(t.TempDir(), "agent")}
}

// secrets runs `plexus secrets args…` with stdin.
func (e *cliEnv) secrets(stdin string, args ...string) cliRun {
	e.t.Helper()
	return e.runStdin(context.Background(), strings.NewReader(stdin), append([]string{"secrets"}, args...)...)
}

func fileMode(t *testing.T, p string) fs.FileMode {
	t.Helper()
	fi, err := os.Lstat(p)
	if err != nil {
		t.Fatal(err)
	}
	return fi.Mode().Perm()
}

func TestSecretsCommands(t *testing.T) {
	home := filepath.Join(t.TempDir(), "home")
	e := offlineEnv(t, home)
	e.ok("init")
	dir := filepath.Join(home, "secrets")

	if r := e.secrets("", "list"); r.code != exitOK || r.stdout != "" {
		t.Errorf("list with no secrets: %s", r)
	}
	if r := e.secrets("", "list", "--json"); r.code != exitOK || r.stdout != "[]\n" {
		t.Errorf("list --json with no secrets: %s", r)
	}

	r := e.secrets("tok-123\n", "set", "obsidian-key")
	if r.code != exitOK || r.stdout != "Secret obsidian-key stored (7 bytes) in secrets/obsidian-key.\n" || r.stderr != "" {
		t.Errorf("set: %s", r)
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "obsidian-key")); string(b) != "tok-123\n" {
		t.Errorf("secrets/obsidian-key holds %q; want the value without stdin's newline, then one newline", b)
	}
	if m := fileMode(t, filepath.Join(dir, "obsidian-key")); m != 0o600 {
		t.Errorf("secrets/obsidian-key is mode %04o; want 0600", m)
	}
	if m := fileMode(t, dir); m != 0o700 {
		t.Errorf("secrets/ is mode %04o; want 0700", m)
	}
	if r := e.secrets("two lines\n\n", "set", "b"); r.code != exitOK || !strings.Contains(r.stdout, "(10 bytes)") {
		t.Errorf("set of a value ending in a newline: %s", r)
	}
	if r := e.secrets("", "list"); r.code != exitOK || r.stdout != "b\nobsidian-key\n" {
		t.Errorf("list: %s", r)
	}
	var names []string
	e.jsonOut(&names, "secrets", "list", "--json")
	if strings.Join(names, ",") != "b,obsidian-key" {
		t.Errorf("list --json = %q", names)
	}

	if r := e.secrets("", "rm", "b"); r.code != exitOK || r.stdout != "Secret b removed.\n" {
		t.Errorf("rm: %s", r)
	}
	if r := e.secrets("", "rm", "b"); r.code != exitError || !strings.Contains(r.stderr, "no secret b in "+dir) {
		t.Errorf("rm of a secret not set: %s", r)
	}

	t.Run("Usage", func(t *testing.T) {
		e := e.with(t)
		for _, args := range [][]string{
			{"set"}, {"set", "a", "b"}, {"set", "Bad"}, {"set", "../x"}, {"rm"}, {"rm", "a/b"}, {"list", "x"},
		} {
			if r := e.secrets("v", args...); r.code != exitUsage {
				t.Errorf("%s\nwant exit %d", r, exitUsage)
			}
		}
	})

	t.Run("ErrValue", func(t *testing.T) {
		e := e.with(t)
		for _, tt := range []struct{ stdin, says string }{
			{"", "stdin was empty: nothing stored"},
			{"\n", "stdin was empty: nothing stored"},
			{strings.Repeat("x", 64<<10+1), "over 65536 bytes"},
			{strings.Repeat("x", 64<<10+2) + "\n", "over 65536 bytes"},
		} {
			if r := e.secrets(tt.stdin, "set", "v"); r.code != exitError || !strings.Contains(r.stderr, tt.says) {
				t.Errorf("%s\nwant exit 1 saying %q", r, tt.says)
			}
		}
		if r := e.secrets(strings.Repeat("x", 64<<10)+"\n", "set", "v"); r.code != exitOK {
			t.Errorf("a value of exactly 64 KiB: %s", r)
		}
	})

	t.Run("ErrDevice", func(t *testing.T) {
		e := e.with(t)
		null, err := os.Open(os.DevNull)
		if err != nil {
			t.Fatal(err)
		}
		defer null.Close()
		r := e.runStdin(context.Background(), null, "secrets", "set", "k")
		if r.code != exitUsage || !strings.Contains(r.stderr, "stdin is a terminal (or another device)") {
			t.Errorf("set with stdin a device: %s", r)
		}
	})

	t.Run("ErrOpenFolder", func(t *testing.T) {
		e := e.with(t)
		if err := os.Chmod(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		defer os.Chmod(dir, 0o700)
		for _, args := range [][]string{{"set", "k"}, {"list"}, {"rm", "obsidian-key"}} {
			if r := e.secrets("v", args...); r.code != exitError || !strings.Contains(r.stderr, "run: chmod 700 "+dir) {
				t.Errorf("%s\nwant exit 1 saying how to fix the folder", r)
			}
		}
	})

	t.Run("NoInit", func(t *testing.T) {
		home := t.TempDir()
		e := offlineEnv(t, home)
		if r := e.secrets("v", "set", "k"); r.code != exitOK {
			t.Errorf("set in a home without secrets/: %s", r)
		}
		if m := fileMode(t, filepath.Join(home, "secrets")); m != 0o700 {
			t.Errorf("secrets/ created mode %04o; want 0700", m)
		}
		missing := filepath.Join(home, "typo")
		e = offlineEnv(t, missing)
		if r := e.secrets("v", "set", "k"); r.code != exitError || !strings.Contains(r.stderr, "no Plexus home at "+missing) {
			t.Errorf("set with no home: %s", r)
		}
	})
}

// TestSecretsCanary stores a canary secret through the command line while
// the daemon runs, then goes through every secrets command and error path
// (the value given as an argument by mistake too), reads the status and
// the journal, and stops the daemon: the value is then in no file under
// PLEXUS_HOME but secrets/<name>, in no output of the command line and in
// no log line.
func TestSecretsCanary(t *testing.T) {
	logs := &lockedBuffer{}
	td := startTestDaemon(t, daemon.Options{
		Logger: slog.New(slog.NewJSONHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))})
	e := &cliEnv{t: t, home: td.Home().Dir, addr: td.Addr(), agentHome: filepath.Join(t.TempDir(), "agent")}
	canary := "CANARY-SECRET-" + randomHex(t, 12)
	secretFile := filepath.Join(e.home, "secrets", "canary-key")

	var runs []cliRun
	do := func(stdin io.Reader, args ...string) cliRun {
		t.Helper()
		r := e.runStdin(context.Background(), stdin, args...)
		runs = append(runs, r)
		return r
	}
	if r := do(strings.NewReader(canary+"\n"), "secrets", "set", "canary-key"); r.code != exitOK {
		t.Fatalf("%s", r)
	}
	do(strings.NewReader(canary), "secrets", "set", "canary-key")                               // again: replaced
	do(strings.NewReader(canary), "secrets", "set", "Canary-Key")                               // bad name
	do(strings.NewReader(canary), "secrets", "set", "k2", canary)                               // the value as an argument
	do(strings.NewReader(strings.Repeat(canary, 64<<10/len(canary)+1)), "secrets", "set", "k3") // too large
	do(nil, "secrets", "list")
	do(nil, "secrets", "list", "--json")
	if err := os.Chmod(secretFile, 0o644); err != nil {
		t.Fatal(err)
	}
	do(strings.NewReader(canary), "secrets", "set", "canary-key")
	do(nil, "secrets", "rm", "nope")
	if err := os.Chmod(secretFile, 0o600); err != nil {
		t.Fatal(err)
	}
	do(nil, "status")
	do(nil, "journal", "--limit", "0")
	td.stop()

	for _, r := range runs {
		if strings.Contains(r.stdout+r.stderr, canary) {
			t.Errorf("the command line printed the secret:\n%s", r)
		}
	}
	if bytes.Contains(logs.Bytes(), []byte(canary)) {
		t.Error("the daemon logged the secret")
	}
	found := 0
	err := filepath.WalkDir(e.home, func(path string, d fs.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() {
			return err
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		if !bytes.Contains(b, []byte(canary)) {
			return nil
		}
		if path != secretFile {
			rel, _ := filepath.Rel(e.home, path)
			t.Errorf("%s holds the secret", rel)
			return nil
		}
		found++
		if string(b) != canary+"\n" {
			t.Errorf("secrets/canary-key holds %d bytes besides the value and its newline", len(b)-len(canary)-1)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if found != 1 {
		t.Errorf("found the secret in %d files; want exactly secrets/canary-key", found)
	}
}
