package e2e

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

// TestCLIService: `plexus service install` writes the user unit that runs
// this binary's serve with the --home and --addr in use and prints the one
// command that starts it; it never replaces an edited unit without --force.
func TestCLIService(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("the systemd unit is written on Linux; the launchd agent is checked in platform/service")
	}
	user := t.TempDir()
	home := filepath.Join(t.TempDir(), "plexus home")
	run := func(args ...string) cliRun {
		t.Helper()
		cmd := exec.Command(plexusBin(t), append([]string{"--home", home, "--addr", "127.0.0.1:7178"}, args...)...)
		cmd.Env = append(os.Environ(), "HOME="+user)
		var out, errOut bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &errOut
		if err := cmd.Run(); cmd.ProcessState == nil {
			t.Fatal(err)
		}
		return cliRun{args: args, code: cmd.ProcessState.ExitCode(), stdout: out.String(), stderr: errOut.String()}
	}
	unit := filepath.Join(user, ".config", "systemd", "user", "plexus.service")

	r := run("service", "install")
	if r.code != exitOK || !strings.Contains(r.stdout, "systemctl --user daemon-reload && systemctl --user enable --now plexus.service") {
		t.Fatalf("%s", r)
	}
	b, err := os.ReadFile(unit)
	if err != nil {
		t.Fatal(err)
	}
	want := `ExecStart="` + plexusBin(t) + `" "--home" "` + home + `" "--addr" "127.0.0.1:7178" "serve"`
	if !strings.Contains(string(b), want) || !strings.Contains(string(b), "Restart=on-failure") {
		t.Errorf("the unit does not run %s:\n%s", want, b)
	}
	if r := run("service", "status"); r.code != exitOK || !strings.Contains(r.stdout, "Installed: "+unit) {
		t.Errorf("%s", r)
	}

	edited := string(b) + "Environment=MINE=1\n"
	if err := os.WriteFile(unit, []byte(edited), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{{"service", "install"}, {"service", "uninstall"}} {
		r := run(args...)
		if r.code != exitError || !strings.Contains(r.stdout, "-Environment=MINE=1") || !strings.Contains(r.stderr, "--force") {
			t.Errorf("over an edited unit: %s", r)
		}
		if got, _ := os.ReadFile(unit); string(got) != edited {
			t.Fatalf("%s changed the owner's edited unit", strings.Join(args, " "))
		}
	}
	if r := run("service", "uninstall", "--force"); r.code != exitOK || !strings.Contains(r.stdout, "systemctl --user disable --now plexus.service") {
		t.Errorf("%s", r)
	}
	if _, err := os.Stat(unit); !os.IsNotExist(err) {
		t.Errorf("the unit is still there after uninstall --force: %v", err)
	}
}
