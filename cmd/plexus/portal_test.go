package main

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestCreatePortalFolder(t *testing.T) {
	t.Run("Missing", func(t *testing.T) {
		dir := filepath.Join(t.TempDir(), "a", "notes")
		created, err := createPortalFolder(dir, "notes")
		if err != nil || created == nil {
			t.Fatalf("created %v, err %v", created, err)
		}
		b, err := os.ReadFile(filepath.Join(dir, portalFirstFile))
		if err != nil || !strings.Contains(string(b), `portal "notes"`) {
			t.Errorf("%s = %q, %v", portalFirstFile, b, err)
		}
		if fi, err := os.Stat(dir); err != nil || fi.Mode().Perm() != 0o700 {
			t.Errorf("folder mode %v, %v; want 0700", fi.Mode().Perm(), err)
		}
	})
	t.Run("Undo", func(t *testing.T) {
		base := t.TempDir()
		keep := filepath.Join(base, "keep.md")
		if err := os.WriteFile(keep, []byte("mine"), 0o600); err != nil {
			t.Fatal(err)
		}
		created, err := createPortalFolder(filepath.Join(base, "a", "b", "notes"), "notes")
		if err != nil {
			t.Fatal(err)
		}
		cause := errors.New("refused")
		if err := created.undo(cause); err != cause {
			t.Fatalf("undo = %v, want the cause alone", err)
		}
		if _, err := os.Lstat(filepath.Join(base, "a")); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("%s/a is left: %v", base, err)
		}
		if b, err := os.ReadFile(keep); err != nil || string(b) != "mine" {
			t.Errorf("what was there before changed: %q, %v", b, err)
		}
	})
	t.Run("UndoLeavesWhatOthersPut", func(t *testing.T) {
		base := t.TempDir()
		created, err := createPortalFolder(filepath.Join(base, "a", "notes"), "notes")
		if err != nil {
			t.Fatal(err)
		}
		theirs := filepath.Join(base, "a", "theirs.md")
		if err := os.WriteFile(theirs, []byte("x"), 0o600); err != nil {
			t.Fatal(err)
		}
		err = created.undo(errors.New("refused"))
		if err == nil || !strings.Contains(err.Error(), "is left") {
			t.Errorf("undo = %v, want it to say what is left", err)
		}
		if _, err := os.Stat(theirs); err != nil {
			t.Errorf("a file put there meanwhile is gone: %v", err)
		}
	})
	for name, mk := range map[string]func(string) error{
		"ExistingFolder":  func(p string) error { return os.Mkdir(p, 0o755) },
		"File":            func(p string) error { return os.WriteFile(p, []byte("x"), 0o600) },
		"DanglingSymlink": func(p string) error { return os.Symlink(filepath.Join(filepath.Dir(p), "gone"), p) },
	} {
		t.Run(name, func(t *testing.T) {
			p := filepath.Join(t.TempDir(), "notes")
			if err := mk(p); err != nil {
				t.Fatal(err)
			}
			if created, err := createPortalFolder(p, "notes"); created != nil || err != nil {
				t.Errorf("created %v, err %v; want what is there left alone", created, err)
			}
			if _, err := os.Lstat(filepath.Join(filepath.Dir(p), "gone")); err == nil {
				t.Error("the symlink's target was created")
			}
			if _, err := os.Stat(filepath.Join(p, portalFirstFile)); err == nil {
				t.Errorf("%s written into what was there", portalFirstFile)
			}
		})
	}
}
