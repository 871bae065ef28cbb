package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestCreatePortalFolder(t *testing.T) {
	t.Run("Missing", func(t *testing.T) {
		dir := filepath.Join(t.TempDir(), "a", "notes")
		created, err := createPortalFolder(dir, "notes")
		if err != nil || !created {
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
			if created, err := createPortalFolder(p, "notes"); created || err != nil {
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
