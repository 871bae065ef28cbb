package e2e

import (
	"errors"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"testing"
)

// A `plexus portal add` the daemon does not accept (the alias is taken, the
// daemon is down) leaves no folder and no hello.md behind, and never
// removes what was there before.
func TestCLIPortalAddRefusedLeavesNothing(t *testing.T) {
	e, _ := newCLIEnv(t)
	e.notesDir() // the portal "notes" exists
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	down := &cliEnv{t: t, home: e.home, addr: ln.Addr().String(), agentHome: e.agentHome}
	if err := ln.Close(); err != nil {
		t.Fatal(err)
	}
	for name, env := range map[string]*cliEnv{"AliasTaken": e, "DaemonDown": down} {
		t.Run(name, func(t *testing.T) {
			env := env.with(t)
			base := t.TempDir()
			mine := filepath.Join(base, "mine.md")
			if err := os.WriteFile(mine, []byte("mine"), 0o600); err != nil {
				t.Fatal(err)
			}
			dir := filepath.Join(base, "new", "notes")
			if r := env.run("portal", "add", dir, "notes"); r.code != exitError {
				t.Fatalf("want a refusal: %s", r)
			}
			if _, err := os.Lstat(filepath.Join(base, "new")); !errors.Is(err, fs.ErrNotExist) {
				t.Errorf("the refused portal's folder is left: %v", err)
			}
			if b, err := os.ReadFile(mine); err != nil || string(b) != "mine" {
				t.Errorf("what was there before changed: %q, %v", b, err)
			}
		})
	}
}
