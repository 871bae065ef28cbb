package portal_test

import (
	"os"
	"path/filepath"
	"testing"
)

func TestResolvePath(t *testing.T) {
	fx := newFixture(t)
	mustWrite(t, filepath.Join(fx.root, "private", "secret.txt"), "private")
	mustWrite(t, filepath.Join(fx.root, "public", "readme.txt"), "public")
	for name, target := range map[string]string{
		"public/link":     "../private/secret.txt",
		"public/linkdir":  "../private",
		"public/same":     "readme.txt",
		"public/chain":    "same",
		"public/loop":     "loop",
		"public/via-file": "readme.txt/../../private/secret.txt",
		"public/abs":      filepath.Join(fx.root, "private", "secret.txt"),
	} {
		if err := os.Symlink(target, filepath.Join(fx.root, filepath.FromSlash(name))); err != nil {
			t.Fatal(err)
		}
	}
	tests := []struct {
		name, path, want string
		err              bool
	}{
		{"Root", ".", ".", false},
		{"PlainFile", "public/readme.txt", "public/readme.txt", false},
		{"Missing", "public/new/file.txt", "public/new/file.txt", false},
		{"LinkElsewhereInside", "public/link", "private/secret.txt", false},
		{"ThroughLinkedFolder", "public/linkdir/secret.txt", "private/secret.txt", false},
		{"NewFileInLinkedFolder", "public/linkdir/new.txt", "private/new.txt", false},
		{"LinkInsidePrefix", "public/same", "public/readme.txt", false},
		{"LinkChain", "public/chain", "public/readme.txt", false},
		{"ThroughAFileIsLexical", "public/via-file", "private/secret.txt", false},
		{"LinkOut", "rel-escape", "", true},
		{"AbsoluteLinkOut", "escape-file", "", true},
		{"AbsoluteLinkInside", "public/abs", "", true},
		{"Loop", "public/loop", "", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := fx.tr.ResolvePath(fx.entries["read"], tt.path)
			if tt.err {
				if err == nil {
					t.Errorf("ResolvePath(%q) = %q, want an error", tt.path, got)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Errorf("ResolvePath(%q) = %q, %v; want %q", tt.path, got, err, tt.want)
			}
		})
	}
}
