package service

import (
	"encoding/xml"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/plexus-gw/plexus/platform"
)

// spec is a unit's spec with the awkward characters a path may hold: a
// space, a systemd specifier, a variable, a quote and XML markup.
func spec(t *testing.T) (Spec, string) {
	t.Helper()
	user := t.TempDir()
	home := filepath.Join(user, `my "plexus" 100% $HOME <&>`)
	bin, err := os.Executable() // a real, executable file, as systemd-analyze checks
	if err != nil {
		t.Fatal(err)
	}
	return Spec{Binary: bin, Home: home, Addr: "127.0.0.1:7177"}, user
}

func TestRenderSystemd(t *testing.T) {
	s, user := spec(t)
	u, err := Render(Systemd, user, s)
	if err != nil {
		t.Fatal(err)
	}
	if want := filepath.Join(user, ".config", "systemd", "user", "plexus.service"); u.Path != want {
		t.Errorf("path %s, want %s", u.Path, want)
	}
	text := string(u.Content)
	wantExec := `ExecStart="` + s.Binary + `" "--home" "` + strings.ReplaceAll(strings.ReplaceAll(strings.ReplaceAll(s.Home, `"`, `\"`), "%", "%%"), "$", "$$") +
		`" "--addr" "127.0.0.1:7177" "serve"`
	for _, want := range []string{wantExec, "\nRestart=on-failure\n", "\nWantedBy=default.target\n", "\nType=simple\n"} {
		if !strings.Contains(text, want) {
			t.Errorf("the unit lacks %q:\n%s", want, text)
		}
	}
	if !strings.Contains(u.Start, "systemctl --user enable --now plexus.service") {
		t.Errorf("start command %q", u.Start)
	}

	t.Run("SystemdAnalyzeVerify", func(t *testing.T) {
		analyze, err := exec.LookPath("systemd-analyze")
		if err != nil {
			t.Skip("systemd-analyze is not installed here (Debian's systemd package provides it)")
		}
		if err := os.MkdirAll(filepath.Dir(u.Path), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(u.Path, u.Content, 0o644); err != nil {
			t.Fatal(err)
		}
		out, err := exec.Command(analyze, "verify", u.Path).CombinedOutput()
		if err != nil || len(out) > 0 {
			t.Errorf("systemd-analyze verify: %v\n%s", err, out)
		}
	})
	t.Run("WithoutAddr", func(t *testing.T) {
		s.Addr = ""
		u, err := Render(Systemd, user, s)
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(string(u.Content), "--addr") {
			t.Errorf("a unit without an address passes --addr:\n%s", u.Content)
		}
	})
}

func TestRenderLaunchd(t *testing.T) {
	s, user := spec(t)
	u, err := Render(Launchd, user, s)
	if err != nil {
		t.Fatal(err)
	}
	if want := filepath.Join(user, "Library", "LaunchAgents", LaunchdLabel+".plist"); u.Path != want {
		t.Errorf("path %s, want %s", u.Path, want)
	}
	// A well-formed plist whose ProgramArguments are exactly the command,
	// whatever the paths hold.
	var plist struct {
		Dict struct {
			Keys    []string `xml:"key"`
			Strings []string `xml:"string"`
			Array   struct {
				Strings []string `xml:"string"`
			} `xml:"array"`
		} `xml:"dict"`
	}
	if err := xml.Unmarshal(u.Content, &plist); err != nil {
		t.Fatalf("the plist is not XML: %v\n%s", err, u.Content)
	}
	want := []string{s.Binary, "--home", s.Home, "--addr", s.Addr, "serve"}
	if got := plist.Dict.Array.Strings; strings.Join(got, "\x00") != strings.Join(want, "\x00") {
		t.Errorf("ProgramArguments = %q, want %q", got, want)
	}
	if !strings.Contains(string(u.Content), "<key>SuccessfulExit</key>\n\t\t<false/>") {
		t.Errorf("the agent is not restarted on failure:\n%s", u.Content)
	}
	if plutil, err := exec.LookPath("plutil"); err == nil {
		lint := exec.Command(plutil, "-lint", "-")
		lint.Stdin = strings.NewReader(string(u.Content))
		if out, err := lint.CombinedOutput(); err != nil {
			t.Errorf("plutil -lint: %v\n%s", err, out)
		}
	}
}

// A control character (a \r or \n would start a line of the unit's own,
// such as another ExecStart=), text that is not UTF-8 or a character XML
// forbids is refused in every field and for both managers, naming the field.
func TestRenderRefusesControlCharacters(t *testing.T) {
	tests := []struct {
		name, field string
		spec        Spec
	}{
		{"CRInHome", "home", Spec{Binary: "/bin/plexus", Home: "/tmp/x\rExecStart=/usr/bin/touch /tmp/pwned\r#"}},
		{"LFInHome", "home", Spec{Binary: "/bin/plexus", Home: "/tmp/x\nExecStart=/usr/bin/touch /tmp/pwned"}},
		{"NULInBinary", "binary", Spec{Binary: "/bin/ple\x00xus", Home: "/h"}},
		{"EscInBinary", "binary", Spec{Binary: "/bin/\x1bplexus", Home: "/h"}},
		{"TabInAddr", "address", Spec{Binary: "/bin/plexus", Home: "/h", Addr: "127.0.0.1:7077\t"}},
		{"DELInHome", "home", Spec{Binary: "/bin/plexus", Home: "/h\x7f"}},
		{"C1InHome", "home", Spec{Binary: "/bin/plexus", Home: "/h\u0085"}},
		{"NotUTF8", "home", Spec{Binary: "/bin/plexus", Home: "/h\xff"}},
		{"XMLNonCharacter", "binary", Spec{Binary: "/bin/plexus\uFFFE", Home: "/h"}},
	}
	for _, tt := range tests {
		for _, kind := range []Kind{Systemd, Launchd} {
			t.Run(tt.name+"/"+string(kind), func(t *testing.T) {
				u, err := Render(kind, "/u", tt.spec)
				if err == nil {
					t.Fatalf("Render accepted it:\n%s", u.Content)
				}
				if !strings.Contains(err.Error(), "the "+tt.field+" ") || strings.ContainsAny(err.Error(), "\r\n\x00\x1b") {
					t.Errorf("error %q does not name the %s, or carries the raw character", err, tt.field)
				}
			})
		}
	}
	// Spaces, quotes, '%', '$' and non-ASCII letters stay allowed: quoted.
	if _, err := Render(Systemd, "/u", Spec{Binary: "/opt/my tools/plexus", Home: "/home/zoë/50% \"$x\""}); err != nil {
		t.Errorf("a path with spaces and quotes refused: %v", err)
	}
}

func TestRenderRefusesRelativePaths(t *testing.T) {
	for _, s := range []Spec{{Binary: "plexus", Home: "/h"}, {Binary: "/bin/plexus", Home: "home"}} {
		if _, err := Render(Systemd, "/u", s); err == nil {
			t.Errorf("Render(%+v) accepted a relative path", s)
		}
	}
	if _, err := ForOS("windows"); err == nil {
		t.Error("ForOS(windows) has a manager")
	}
}

func TestInstallUninstall(t *testing.T) {
	s, user := spec(t)
	u, err := Render(Systemd, user, s)
	if err != nil {
		t.Fatal(err)
	}
	t.Run("OK", func(t *testing.T) {
		if changed, err := Install(u, false); err != nil || !changed {
			t.Fatalf("first install: %v, %v", changed, err)
		}
		if changed, err := Install(u, false); err != nil || changed {
			t.Fatalf("install again: %v, %v; want unchanged", changed, err)
		}
		if st, _, err := Inspect(u); err != nil || st != Same {
			t.Fatalf("Inspect = %v, %v", st, err)
		}
	})
	edited := append([]byte("# the owner's line\n"), u.Content...)
	if err := os.WriteFile(u.Path, edited, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Run("ErrEdited", func(t *testing.T) {
		for name, op := range map[string]func(Unit, bool) (bool, error){"install": Install, "uninstall": Uninstall} {
			_, err := op(u, false)
			var de *DiffersError
			if !errors.As(err, &de) || !strings.Contains(de.Diff, "-# the owner's line") {
				t.Errorf("%s over an edited unit: %v", name, err)
			}
			if got, _ := os.ReadFile(u.Path); string(got) != string(edited) {
				t.Errorf("%s changed the owner's edited unit", name)
			}
		}
	})
	t.Run("Force", func(t *testing.T) {
		if changed, err := Install(u, true); err != nil || !changed {
			t.Fatalf("forced install: %v, %v", changed, err)
		}
		if removed, err := Uninstall(u, false); err != nil || !removed {
			t.Fatalf("uninstall: %v, %v", removed, err)
		}
		if st, _, err := Inspect(u); err != nil || st != Absent {
			t.Errorf("after uninstall: %v, %v", st, err)
		}
		if removed, err := Uninstall(u, false); err != nil || removed {
			t.Errorf("uninstall of nothing: %v, %v", removed, err)
		}
	})
}

// A link or a FIFO planted under the unit's name is neither followed,
// replaced nor waited on: each operation fails saying what is there.
func TestInstallRefusesPlanted(t *testing.T) {
	s, user := spec(t)
	u, err := Render(Systemd, user, s)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Dir(u.Path), 0o700); err != nil {
		t.Fatal(err)
	}
	target := filepath.Join(t.TempDir(), "elsewhere")
	if err := os.WriteFile(target, []byte("theirs"), 0o600); err != nil {
		t.Fatal(err)
	}
	for name, plant := range map[string]func() error{
		"Symlink": func() error { return os.Symlink(target, u.Path) },
		"FIFO":    func() error { return syscall.Mkfifo(u.Path, 0o600) },
	} {
		t.Run(name, func(t *testing.T) {
			if err := plant(); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { os.Remove(u.Path) })
			for op, f := range map[string]func(Unit, bool) (bool, error){"install": Install, "uninstall": Uninstall} {
				var nr *platform.NotRegularError
				if _, err := f(u, true); !errors.As(err, &nr) {
					t.Errorf("%s --force over a %s: %v, want a NotRegularError", op, name, err)
				}
			}
			if b, err := os.ReadFile(target); err != nil || string(b) != "theirs" {
				t.Errorf("the link's target is now %q, %v", b, err)
			}
			if fi, err := os.Lstat(u.Path); err != nil || fi.Mode().IsRegular() {
				t.Errorf("what was planted was replaced: %v, %v", fi, err)
			}
		})
	}
}
