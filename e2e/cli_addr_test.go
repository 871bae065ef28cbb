package e2e

import (
	"bytes"
	"context"
	"errors"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/plexus-gw/plexus/daemon"
)

// runHomeOnly runs the binary with --home and args, in an environment
// without PLEXUS_ADDR or PLEXUS_HOME: the daemon is to be found by its
// address file alone.
func runHomeOnly(t *testing.T, home string, args ...string) cliRun {
	t.Helper()
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "PLEXUS_") {
			env = append(env, kv)
		}
	}
	cmd := exec.CommandContext(context.Background(), plexusBin(t), append([]string{"--home", home}, args...)...)
	cmd.Env = env
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	if err := cmd.Run(); cmd.ProcessState == nil {
		t.Fatalf("plexus %s: %v", strings.Join(args, " "), err)
	}
	return cliRun{args: args, code: cmd.ProcessState.ExitCode(), stdout: out.String(), stderr: errOut.String()}
}

// TestCLIFoundWithoutFlags: `plexus serve --home X --addr …` writes its
// address into X (0600); `plexus --home X status` reaches it with no --addr;
// a clean stop removes the file; a file a crash left neither breaks the
// next start nor makes a command hang.
func TestCLIFoundWithoutFlags(t *testing.T) {
	home := filepath.Join(t.TempDir(), "home")
	addrFile := filepath.Join(home, daemon.AddressFile)
	p := startPlexus(t, home)

	banner := p.out.String()
	if !strings.Contains(banner, "Plexus is listening on http://"+p.addr+" (home "+home+")") {
		t.Errorf("the banner does not name the real address and home:\n%s", banner)
	}
	if !strings.Contains(banner, "plexus console (opens http://"+p.addr+"/console/") {
		t.Errorf("the banner does not say where the console is:\n%s", banner)
	}
	fi, err := os.Stat(addrFile)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o600 {
		t.Errorf("%s has mode %04o, want 0600", addrFile, fi.Mode().Perm())
	}
	r := runHomeOnly(t, home, "status")
	if r.code != exitOK || !strings.Contains(r.stdout, "running at http://"+p.addr) {
		t.Fatalf("status with --home alone: %s", r)
	}

	p.stop(t)
	if _, err := os.Stat(addrFile); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("the address file outlived a clean stop: %v", err)
	}

	// A crash leaves the file behind.
	p = startPlexus(t, home)
	crashed := p.addr
	p.kill(t)
	if b, err := os.ReadFile(addrFile); err != nil || strings.TrimSpace(string(b)) != crashed {
		t.Fatalf("after a crash the file holds %q (%v), want %s", b, err, crashed)
	}
	r = runHomeOnly(t, home, "status")
	if r.code != exitError || !strings.Contains(r.stderr, "Plexus is not running at "+crashed) {
		t.Errorf("status with a stale address file: %s", r)
	}
	// The restart must listen elsewhere, or the test could not tell the
	// two apart: a free port is picked at random, so this rarely repeats.
	p = startPlexus(t, home)
	for i := 0; p.addr == crashed && i < 3; i++ {
		p.stop(t)
		p = startPlexus(t, home)
	}
	if p.addr == crashed {
		t.Fatalf("the restarted daemon got the crashed one's port %s four times", crashed)
	}
	r = runHomeOnly(t, home, "status")
	if r.code != exitOK || !strings.Contains(r.stdout, "running at http://"+p.addr) {
		t.Errorf("status after a restart over a stale file: %s", r)
	}
}
