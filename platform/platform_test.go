package platform_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/plexus-gw/plexus"
	"github.com/plexus-gw/plexus/platform"
)

// TestMain lets the test binary play the child processes of the Command
// tests (see child in process_test.go).
func TestMain(m *testing.M) {
	if mode := os.Getenv(childModeVar); mode != "" {
		child(mode)
		os.Exit(0)
	}
	os.Exit(m.Run())
}

func TestPath(t *testing.T) {
	linuxExtra := []string{
		"/home/u/.local/bin", "/home/u/bin", "/usr/local/bin", "/usr/bin", "/bin", "/snap/bin",
		"/home/u/go/bin", "/home/u/.cargo/bin", "/home/u/.npm-global/bin", "/home/u/.bun/bin",
		"/home/linuxbrew/.linuxbrew/bin",
	}
	darwinExtra := []string{
		"/opt/homebrew/bin", "/usr/local/bin", "/opt/local/bin", "/usr/bin", "/bin", "/usr/sbin", "/sbin",
		"/home/u/.local/bin", "/home/u/bin", "/home/u/go/bin", "/home/u/.cargo/bin", "/home/u/.npm-global/bin", "/home/u/.bun/bin",
	}
	tests := []struct {
		name     string
		path     string
		userHome string
		goos     string
		want     []string
	}{
		{name: "LinuxNoPath", userHome: "/home/u", goos: "linux", want: linuxExtra},
		{name: "DarwinNoPath", userHome: "/home/u", goos: "darwin", want: darwinExtra},
		{name: "OtherIsLinux", userHome: "/home/u", goos: "freebsd", want: linuxExtra},
		{
			name: "PathFirstThenExtrasOnce", path: "/opt/tool/bin:/usr/bin/:/home/u/.cargo/bin", userHome: "/home/u", goos: "linux",
			want: append([]string{"/opt/tool/bin", "/usr/bin", "/home/u/.cargo/bin"},
				slices.DeleteFunc(slices.Clone(linuxExtra), func(d string) bool { return d == "/usr/bin" || d == "/home/u/.cargo/bin" })...),
		},
		{
			name: "RelativeAndEmptyDropped", path: ":.:bin:/opt/a::./x:/opt/a", userHome: "/home/u", goos: "linux",
			want: append([]string{"/opt/a"}, linuxExtra...),
		},
		{
			name: "NoUserHome", path: "/opt/a", goos: "linux",
			want: []string{"/opt/a", "/usr/local/bin", "/usr/bin", "/bin", "/snap/bin", "/home/linuxbrew/.linuxbrew/bin"},
		},
		{
			name: "RelativeUserHome", userHome: "home/u", goos: "darwin",
			want: []string{"/opt/homebrew/bin", "/usr/local/bin", "/opt/local/bin", "/usr/bin", "/bin", "/usr/sbin", "/sbin"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := platform.New(platform.Options{Home: t.TempDir(), UserHome: tt.userHome, GOOS: tt.goos,
				Env: []string{"PATH=/ignored", "PATH=" + tt.path}}) // the last PATH wins, as in os/exec
			if diff := cmp.Diff(tt.want, strings.Split(s.Path(), ":")); diff != "" {
				t.Errorf("Path() (-want +got):\n%s", diff)
			}
		})
	}
}

// writeFile writes a file with mode, making its folder.
func writeFile(t *testing.T, p string, mode os.FileMode) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte("#!/bin/sh\n"), mode); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(p, mode); err != nil { // past the umask
		t.Fatal(err)
	}
}

func TestResolve(t *testing.T) {
	userHome := t.TempDir()
	pathDir := t.TempDir()
	local := filepath.Join(userHome, ".local", "bin")
	writeFile(t, filepath.Join(local, "tool"), 0o755)
	writeFile(t, filepath.Join(local, "both"), 0o755)
	writeFile(t, filepath.Join(pathDir, "both"), 0o700)
	writeFile(t, filepath.Join(local, "plain"), 0o644)
	writeFile(t, filepath.Join(pathDir, "shadowed"), 0o644) // not executable: the search goes on
	writeFile(t, filepath.Join(local, "shadowed"), 0o755)
	if err := os.MkdirAll(filepath.Join(pathDir, "adir"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(local, "tool"), filepath.Join(pathDir, "linked")); err != nil {
		t.Fatal(err)
	}
	s := platform.New(platform.Options{Home: t.TempDir(), UserHome: userHome, GOOS: "linux", Env: []string{"PATH=" + pathDir}})

	found := []struct{ name, want string }{
		{"tool", filepath.Join(local, "tool")},                       // only in ~/.local/bin
		{"both", filepath.Join(pathDir, "both")},                     // the given PATH first
		{"shadowed", filepath.Join(local, "shadowed")},               // past a non-executable
		{"linked", filepath.Join(pathDir, "linked")},                 // a link to an executable
		{filepath.Join(local, "tool"), filepath.Join(local, "tool")}, // absolute
	}
	for _, tt := range found {
		t.Run("OK/"+tt.name, func(t *testing.T) {
			got, err := s.Resolve(tt.name)
			if err != nil || got != tt.want {
				t.Errorf("Resolve(%q) = %q, %v; want %q", tt.name, got, err, tt.want)
			}
		})
	}

	refused := []struct {
		name     string
		notFound bool   // wraps plexus.ErrNotFound
		says     string // in the message
	}{
		{name: "plain", notFound: true, says: "is not executable (mode 0644)"},
		{name: "adir", notFound: true, says: "on the PATH " + pathDir + ":"},
		{name: "nosuch", notFound: true, says: "on the PATH " + pathDir + ":"},
		{name: "", says: "not a binary name"},
		{name: "..", says: "not a binary name"},
		{name: "./tool", says: "must be absolute"},
		{name: ".local/bin/tool", says: "must be absolute"},
		{name: "../bin/tool", says: "must be absolute"},
		{name: filepath.Join(local, "plain"), says: "is not executable"},
		{name: local, says: "is not a regular file"},
	}
	for _, tt := range refused {
		t.Run("Refused/"+tt.name, func(t *testing.T) {
			got, err := s.Resolve(tt.name)
			if err == nil {
				t.Fatalf("Resolve(%q) = %q; want an error", tt.name, got)
			}
			if errors.Is(err, plexus.ErrNotFound) != tt.notFound || !strings.Contains(err.Error(), tt.says) {
				t.Errorf("Resolve(%q): %v; want ErrNotFound %v, saying %q", tt.name, err, tt.notFound, tt.says)
			}
		})
	}
}

func TestEnv(t *testing.T) {
	s := platform.New(platform.Options{Home: t.TempDir(), UserHome: "/home/u", GOOS: "linux", Env: []string{
		"HOME=/home/u", "PLEXUS_HOME=/home/u/.plexus", "PATH=/opt/a", "PLEXUS_AGENT_HOME=/x", "LANG=C.UTF-8",
		"PLEXUS_ADDR=127.0.0.1:7077", "MY_PLEXUS_THING=dropped", "PATH=/opt/b",
		"GITHUB_TOKEN=canary", "AWS_SECRET_ACCESS_KEY=canary", "AWS_REGION=eu-west-1", "SSH_AUTH_SOCK=/tmp/agent",
		"LC_TIME=de_DE.UTF-8", "TZ=Europe/Berlin", "TZ=UTC", "USER=u", "LOGNAME=u", "TMPDIR=/tmp/u", "SHELL=/bin/zsh",
		"https_proxy=http://proxy:3128", "SSL_CERT_FILE=/etc/ca.pem", "XDG_RUNTIME_DIR=/run/user/1000", "NOEQUALS",
	}})
	got := s.Env()
	want := []string{"HOME=/home/u", "LANG=C.UTF-8", "LC_TIME=de_DE.UTF-8", "TZ=UTC", "USER=u", "LOGNAME=u", "TMPDIR=/tmp/u",
		"https_proxy=http://proxy:3128", "SSL_CERT_FILE=/etc/ca.pem", "XDG_RUNTIME_DIR=/run/user/1000", "PATH=" + s.Path()}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Env() (-want +got):\n%s", diff)
	}
	if !strings.HasPrefix(s.Path(), "/opt/b:/home/u/.local/bin:") {
		t.Errorf("Path() = %q; want the last PATH given, then the extras", s.Path())
	}
	got[0] = "HOME=/elsewhere"
	if s.Env()[0] != "HOME=/home/u" {
		t.Error("changing what Env returned changed the next Env()")
	}
}

func TestLocate(t *testing.T) {
	s := platform.New(platform.Options{Home: t.TempDir()})
	t.Run("OK", func(t *testing.T) {
		got, err := s.Locate(context.Background(), plexus.LocalServiceHint{App: "obsidian", DefaultPort: 27123})
		if err != nil || got != "http://127.0.0.1:27123" {
			t.Errorf("Locate = %q, %v; want http://127.0.0.1:27123", got, err)
		}
	})
	for _, tt := range []struct {
		name string
		hint plexus.LocalServiceHint
		says string
	}{
		{"NoPort", plexus.LocalServiceHint{App: "a"}, `local service "a": no defaultPort`},
		{"SocketOnly", plexus.LocalServiceHint{App: "a", SocketName: "a.sock"}, "socketName is for the ipc transport"},
		{"PortOutOfRange", plexus.LocalServiceHint{App: "a", DefaultPort: 70000}, "defaultPort 70000 out of range"},
		{"NegativePort", plexus.LocalServiceHint{App: "a", DefaultPort: -1}, "defaultPort -1 out of range"},
	} {
		t.Run("Err"+tt.name, func(t *testing.T) {
			got, err := s.Locate(context.Background(), tt.hint)
			if err == nil || !strings.Contains(err.Error(), tt.says) || plexus.CodeOf(err) != plexus.CodeSourceUnavailable {
				t.Errorf("Locate(%+v) = %q, %v; want source_unavailable saying %q", tt.hint, got, err, tt.says)
			}
		})
	}
}

func TestNewPanicsWithoutHome(t *testing.T) {
	defer func() {
		if recover() == nil {
			t.Error("New with no Home did not panic")
		}
	}()
	platform.New(platform.Options{})
}
