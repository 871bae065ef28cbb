package inbox_test

import (
	"errors"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/plexus-gw/plexus/inbox"
	"github.com/plexus-gw/plexus/platform"
)

// TestWriteAtomicLeavesWhatIsNotAFile: a write never replaces a symlink,
// FIFO or folder planted under the name; it leaves it, and the link's
// target, as they were.
func TestWriteAtomicLeavesWhatIsNotAFile(t *testing.T) {
	dir := t.TempDir()
	target := filepath.Join(t.TempDir(), "target")
	if err := os.WriteFile(target, []byte("not yours"), 0o600); err != nil {
		t.Fatal(err)
	}
	plants := []struct {
		name, kind string
		plant      func(path string) error
	}{
		{"Symlink", "symlink", func(p string) error { return os.Symlink(target, p) }},
		{"FIFO", "fifo", func(p string) error { return syscall.Mkfifo(p, 0o600) }},
		{"Directory", "directory", func(p string) error { return os.Mkdir(p, 0o700) }},
	}
	for _, tt := range plants {
		t.Run(tt.name, func(t *testing.T) {
			name := "pend_" + tt.name + ".md"
			path := filepath.Join(dir, name)
			if err := tt.plant(path); err != nil {
				t.Fatal(err)
			}
			err := inbox.WriteAtomic(dir, name, []byte("decision"))
			var nr *platform.NotRegularError
			if !errors.As(err, &nr) || nr.Kind != tt.kind {
				t.Fatalf("WriteAtomic = %v, want a NotRegularError of kind %s", err, tt.kind)
			}
			fi, err := os.Lstat(path)
			if err != nil || platform.KindOf(fi.Mode()) != tt.kind {
				t.Errorf("after WriteAtomic %s holds %v (%v), want the %s left", path, fi, err, tt.kind)
			}
			if b, err := os.ReadFile(target); err != nil || string(b) != "not yours" {
				t.Errorf("the link's target: %q, %v", b, err)
			}
		})
	}
	t.Run("OK", func(t *testing.T) {
		if err := os.WriteFile(filepath.Join(dir, "a.md"), []byte("old"), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := inbox.WriteAtomic(dir, "a.md", []byte("new")); err != nil {
			t.Fatal(err)
		}
		if b, err := inbox.ReadFile(filepath.Join(dir, "a.md")); err != nil || string(b) != "new" {
			t.Errorf("ReadFile = %q, %v; want new", b, err)
		}
	})
}

// TestReadFileLimit: ReadFile reads one byte past MaxFileSize, enough for
// Parse to refuse a file that long, and no more.
func TestReadFileLimit(t *testing.T) {
	p := filepath.Join(t.TempDir(), "big.md")
	if err := os.WriteFile(p, make([]byte, inbox.MaxFileSize+100), 0o600); err != nil {
		t.Fatal(err)
	}
	b, err := inbox.ReadFile(p)
	if err != nil || len(b) != inbox.MaxFileSize+1 {
		t.Errorf("ReadFile: %d bytes, %v; want %d", len(b), err, inbox.MaxFileSize+1)
	}
}
