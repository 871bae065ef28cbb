package platform_test

import (
	"bytes"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/plexus-gw/plexus"
	"github.com/plexus-gw/plexus/platform"
)

func TestValidSecretName(t *testing.T) {
	tests := []struct {
		name string
		want bool
	}{
		{"obsidian-rest-api-key", true},
		{"a", true},
		{"0", true},
		{"gh.token_2", true},
		{"a..b", true}, // no separator, so no traversal
		{strings.Repeat("a", 64), true},
		{strings.Repeat("a", 65), false},
		{"", false},
		{".", false},
		{"..", false},
		{".hidden", false},
		{"-flag", false},
		{"_x", false},
		{"Upper", false},
		{"a/b", false},
		{"../x", false},
		{"a\\b", false},
		{"a b", false},
		{"a\x00", false},
		{"é", false},
	}
	for _, tt := range tests {
		if got := platform.ValidSecretName(tt.name); got != tt.want {
			t.Errorf("ValidSecretName(%q) = %v; want %v", tt.name, got, tt.want)
		}
	}
}

// newStore returns services over a fresh home without a secrets folder.
func newStore(t *testing.T) (*platform.Services, string) {
	t.Helper()
	home := t.TempDir()
	return platform.New(platform.Options{Home: home}), filepath.Join(home, "secrets")
}

// mode returns the permission bits of p (not following a link).
func mode(t *testing.T, p string) fs.FileMode {
	t.Helper()
	fi, err := os.Lstat(p)
	if err != nil {
		t.Fatal(err)
	}
	return fi.Mode().Perm()
}

func chmod(t *testing.T, p string, m fs.FileMode) {
	t.Helper()
	if err := os.Chmod(p, m); err != nil {
		t.Fatal(err)
	}
}

func TestSecretStore(t *testing.T) {
	s, dir := newStore(t)

	if names, err := s.Secrets(); err != nil || len(names) != 0 || names == nil {
		t.Fatalf("Secrets() with no folder = %#v, %v; want an empty list", names, err)
	}
	if err := s.SetSecret("b-key", []byte("value-b")); err != nil {
		t.Fatal(err)
	}
	if err := s.SetSecret("a-key", []byte("value-a\n")); err != nil { // a newline of its own is kept
		t.Fatal(err)
	}
	if got := mode(t, dir); got != 0o700 {
		t.Errorf("secrets/ is mode %04o; want 0700", got)
	}
	for _, n := range []string{"a-key", "b-key"} {
		if got := mode(t, filepath.Join(dir, n)); got != 0o600 {
			t.Errorf("secrets/%s is mode %04o; want 0600", n, got)
		}
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "b-key")); string(b) != "value-b\n" {
		t.Errorf("secrets/b-key holds %q; want the value and one newline", b)
	}
	for n, want := range map[string]string{"a-key": "value-a\n", "b-key": "value-b"} {
		if got, err := s.Secret(n); err != nil || got != want {
			t.Errorf("Secret(%q) = %q, %v; want %q", n, got, err, want)
		}
	}

	// Replacing a value leaves no temporary file behind.
	if err := s.SetSecret("b-key", []byte("value-b2")); err != nil {
		t.Fatal(err)
	}
	if got, _ := s.Secret("b-key"); got != "value-b2" {
		t.Errorf("Secret(b-key) after a second set = %q; want value-b2", got)
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 2 {
		t.Errorf("secrets/ holds %d entries; want 2 (no temporary files)", len(entries))
	}

	// Names only, sorted; what cannot be a secret's name is not listed.
	if err := os.WriteFile(filepath.Join(dir, ".b-key.tmp-123"), []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(dir, "adir"), 0o700); err != nil {
		t.Fatal(err)
	}
	names, err := s.Secrets()
	if diff := cmp.Diff([]string{"a-key", "b-key"}, names); err != nil || diff != "" {
		t.Errorf("Secrets() (-want +got): %v\n%s", err, diff)
	}

	if err := s.RemoveSecret("a-key"); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Lstat(filepath.Join(dir, "a-key")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("secrets/a-key after RemoveSecret: %v", err)
	}
	for _, n := range []string{"a-key", "never-set"} {
		if err := s.RemoveSecret(n); !errors.Is(err, plexus.ErrNotFound) {
			t.Errorf("RemoveSecret(%q) = %v; want ErrNotFound", n, err)
		}
	}
	if err := s.RemoveSecret("adir"); err == nil || !strings.Contains(err.Error(), "is a directory") {
		t.Errorf("RemoveSecret(adir) = %v; want refused", err)
	}
	if names, _ := s.Secrets(); !cmp.Equal(names, []string{"b-key"}) {
		t.Errorf("Secrets() after rm = %v; want [b-key]", names)
	}
}

func TestSetSecretRefused(t *testing.T) {
	s, dir := newStore(t)
	tests := []struct {
		name, secret string
		value        []byte
		says         string
	}{
		{"Empty", "k", nil, "the value is empty"},
		{"TooLarge", "k", bytes.Repeat([]byte("x"), platform.MaxSecretSize+1), "the value is 65537 bytes; at most 65536"},
		{"BadName", "../k", []byte("v"), "invalid secret name"},
		{"BadNameUpper", "K", []byte("v"), "invalid secret name"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := s.SetSecret(tt.secret, tt.value)
			if err == nil || !strings.Contains(err.Error(), tt.says) {
				t.Errorf("SetSecret = %v; want an error saying %q", err, tt.says)
			}
		})
	}
	if _, err := os.Lstat(dir); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("a refused set created secrets/: %v", err)
	}
	if err := s.SetSecret("k", bytes.Repeat([]byte("x"), platform.MaxSecretSize)); err != nil {
		t.Errorf("SetSecret of exactly MaxSecretSize bytes: %v", err)
	}
	if v, err := s.Secret("k"); err != nil || len(v) != platform.MaxSecretSize {
		t.Errorf("Secret(k) = %d bytes, %v; want %d", len(v), err, platform.MaxSecretSize)
	}

	t.Run("NoHome", func(t *testing.T) {
		home := filepath.Join(t.TempDir(), "typo")
		err := platform.New(platform.Options{Home: home}).SetSecret("k", []byte("v"))
		if err == nil || !strings.Contains(err.Error(), "no Plexus home at "+home) {
			t.Errorf("SetSecret with no home = %v; want refused", err)
		}
		if _, err := os.Lstat(home); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("SetSecret created the home: %v", err)
		}
	})
	t.Run("OpenFolder", func(t *testing.T) {
		chmod(t, dir, 0o755)
		defer chmod(t, dir, 0o700)
		var pe *platform.PermissionError
		if err := s.SetSecret("k2", []byte("v")); !errors.As(err, &pe) {
			t.Errorf("SetSecret into a 0755 folder = %v; want a PermissionError", err)
		}
		if _, err := os.Lstat(filepath.Join(dir, "k2")); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("SetSecret wrote into a 0755 folder: %v", err)
		}
	})
}

func TestSecret(t *testing.T) {
	s, dir := newStore(t)
	if err := s.SetSecret("key", []byte("v")); err != nil {
		t.Fatal(err)
	}
	put := func(t *testing.T, name, content string, m fs.FileMode) string {
		t.Helper()
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), m); err != nil {
			t.Fatal(err)
		}
		chmod(t, p, m)
		return p
	}

	t.Run("OK", func(t *testing.T) {
		for content, want := range map[string]string{
			"by-hand\n":  "by-hand",    // echo by-hand > secrets/x
			"no-newline": "no-newline", // printf
			"two\n\n":    "two\n",      // only one newline is trimmed
			"crlf\r\n":   "crlf\r",
			" spaces \n": " spaces ",
		} {
			put(t, "x", content, 0o600)
			if got, err := s.Secret("x"); err != nil || got != want {
				t.Errorf("Secret of a file holding %q = %q, %v; want %q", content, got, err, want)
			}
		}
		put(t, "ro", "v\n", 0o400) // read-only for the owner is fine
		if got, err := s.Secret("ro"); err != nil || got != "v" {
			t.Errorf("Secret of a 0400 file = %q, %v", got, err)
		}
	})

	t.Run("ErrNotSet", func(t *testing.T) {
		_, err := s.Secret("nope")
		if !errors.Is(err, plexus.ErrNotFound) || !strings.Contains(err.Error(), "run: plexus secrets set nope") {
			t.Errorf("Secret(nope) = %v; want ErrNotFound saying how to set it", err)
		}
		s2, _ := newStore(t)
		if _, err := s2.Secret("nope"); !errors.Is(err, plexus.ErrNotFound) {
			t.Errorf("Secret with no secrets folder = %v; want ErrNotFound", err)
		}
	})

	refused := []struct {
		name  string
		setup func(t *testing.T) (cleanup func())
		says  string
	}{
		{"FileReadableByOthers", func(t *testing.T) func() {
			p := filepath.Join(dir, "key")
			chmod(t, p, 0o644)
			return func() { chmod(t, p, 0o600) }
		}, "is mode 0644 (group or others can read it); run: chmod 600 " + filepath.Join(dir, "key")},
		{"FileReadableByGroup", func(t *testing.T) func() {
			p := filepath.Join(dir, "key")
			chmod(t, p, 0o640)
			return func() { chmod(t, p, 0o600) }
		}, "is mode 0640"},
		{"FolderOpen", func(t *testing.T) func() {
			chmod(t, dir, 0o755)
			return func() { chmod(t, dir, 0o700) }
		}, "is mode 0755 (group or others can enter it); run: chmod 700 " + dir},
		{"Symlink", func(t *testing.T) func() {
			target := filepath.Join(t.TempDir(), "elsewhere")
			if err := os.WriteFile(target, []byte("v\n"), 0o600); err != nil {
				t.Fatal(err)
			}
			p := filepath.Join(dir, "key")
			os.Rename(p, p+".bak")
			if err := os.Symlink(target, p); err != nil {
				t.Fatal(err)
			}
			return func() { os.Remove(p); os.Rename(p+".bak", p) }
		}, "is a symbolic link (never followed)"},
		{"SymlinkedFolder", func(t *testing.T) func() {
			real := filepath.Join(t.TempDir(), "real")
			if err := os.Rename(dir, real); err != nil {
				t.Fatal(err)
			}
			if err := os.Symlink(real, dir); err != nil {
				t.Fatal(err)
			}
			return func() { os.Remove(dir); os.Rename(real, dir) }
		}, "is a symbolic link (never followed)"},
		{"FIFO", func(t *testing.T) func() {
			p := filepath.Join(dir, "key")
			os.Rename(p, p+".bak")
			if err := syscall.Mkfifo(p, 0o600); err != nil {
				t.Fatal(err)
			}
			return func() { os.Remove(p); os.Rename(p+".bak", p) }
		}, "is not a regular file"},
		{"Directory", func(t *testing.T) func() {
			p := filepath.Join(dir, "key")
			os.Rename(p, p+".bak")
			if err := os.Mkdir(p, 0o700); err != nil {
				t.Fatal(err)
			}
			return func() { os.Remove(p); os.Rename(p+".bak", p) }
		}, "is not a regular file"},
	}
	for _, tt := range refused {
		t.Run("Err"+tt.name, func(t *testing.T) {
			defer tt.setup(t)()
			got, err := s.Secret("key")
			var pe *platform.PermissionError
			if !errors.As(err, &pe) || !errors.Is(err, fs.ErrPermission) || !strings.Contains(err.Error(), tt.says) {
				t.Errorf("Secret = %q, %v; want a PermissionError saying %q", got, err, tt.says)
			}
		})
	}
	if got, err := s.Secret("key"); err != nil || got != "v" {
		t.Fatalf("after the refusals, Secret(key) = %q, %v; the cleanups did not restore it", got, err)
	}

	t.Run("ErrEmpty", func(t *testing.T) {
		put(t, "empty", "\n", 0o600)
		if _, err := s.Secret("empty"); err == nil || !strings.Contains(err.Error(), "is empty; run: plexus secrets set empty") {
			t.Errorf("Secret of a file holding a newline = %v; want refused", err)
		}
	})
	t.Run("ErrTooLarge", func(t *testing.T) {
		put(t, "big", strings.Repeat("x", platform.MaxSecretSize+1)+"\n", 0o600)
		if _, err := s.Secret("big"); err == nil || !strings.Contains(err.Error(), "more than 65536 bytes") {
			t.Errorf("Secret of a too large file = %v; want refused", err)
		}
	})
	t.Run("ErrName", func(t *testing.T) {
		for _, n := range []string{"../secrets/key", "key/", "", ".key"} {
			if _, err := s.Secret(n); !errors.Is(err, platform.ErrSecretName) {
				t.Errorf("Secret(%q) = %v; want ErrSecretName", n, err)
			}
		}
	})
}

// TestSecretNeverInErrors sets a canary value, provokes every error the
// store and the resolver can give, and checks that none of them holds it.
func TestSecretNeverInErrors(t *testing.T) {
	const canary = "CANARY-9f3b2e-never-print-me"
	s, dir := newStore(t)
	if err := s.SetSecret("key", []byte(canary)); err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(dir, "key")
	var errs []error
	collect := func(err error) {
		if err == nil {
			t.Helper()
			t.Error("an error path returned no error")
			return
		}
		errs = append(errs, err)
	}
	resolveAll := func() {
		_, err := s.Secret("key")
		collect(err)
		_, err = s.Secrets()
		collect(err)
		collect(s.SetSecret("key", []byte(canary+"-2")))
		collect(s.RemoveSecret("key"))
	}

	chmod(t, p, 0o644)
	_, err := s.Secret("key")
	collect(err)
	chmod(t, p, 0o600)

	chmod(t, dir, 0o755)
	resolveAll()
	chmod(t, dir, 0o700)

	os.Rename(p, p+".bak")
	if err := os.Symlink(p+".bak", p); err != nil {
		t.Fatal(err)
	}
	_, err = s.Secret("key")
	collect(err)
	os.Remove(p)
	os.Rename(p+".bak", p)

	collect(s.SetSecret("key", bytes.Repeat([]byte(canary), platform.MaxSecretSize/len(canary)+1)))
	collect(s.SetSecret("Key", []byte(canary))) // upper case: not a name
	collect(s.SetSecret("key", nil))
	if err := os.WriteFile(filepath.Join(dir, "big"), []byte(strings.Repeat(canary, platform.MaxSecretSize/len(canary)+1)), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err = s.Secret("big")
	collect(err)

	for _, err := range errs {
		if strings.Contains(err.Error(), canary) || strings.Contains(err.Error(), "CANARY") {
			t.Errorf("an error holds the secret value: %v", err)
		}
	}
	if len(errs) < 9 {
		t.Errorf("provoked %d errors; want at least 9", len(errs))
	}
	if got, err := s.Secret("key"); err != nil || got != canary {
		t.Errorf("Secret(key) at the end = %v; want the canary back", err)
	}
}
