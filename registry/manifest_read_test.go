package registry

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestReadManifest checks that a manifest file is decoded strictly and
// that one over MaxManifestSize is refused, not read whole.
func TestReadManifest(t *testing.T) {
	dir := t.TempDir()
	write := func(name, body string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	for _, tt := range []struct {
		name, path string
		ok         bool
		isNotExist bool
	}{
		{name: "Valid", path: write("ok.json", `{"manifest":"plexus-extension/0.1","source":"notes"}`), ok: true},
		{name: "UnknownKey", path: write("typo.json", `{"source":"notes","capabilites":[]}`)},
		{name: "TooLarge", path: write("big.json", `{"source":"`+strings.Repeat("a", MaxManifestSize)+`"}`)},
		{name: "Missing", path: filepath.Join(dir, "none.json"), isNotExist: true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			m, err := ReadManifest(tt.path)
			switch {
			case tt.ok && (err != nil || m.Source != "notes"):
				t.Errorf("ReadManifest = %+v, %v", m, err)
			case !tt.ok && err == nil:
				t.Errorf("ReadManifest read %+v, want an error", m)
			case tt.isNotExist && !errors.Is(err, fs.ErrNotExist):
				t.Errorf("err = %v, want not-exist", err)
			}
		})
	}
}
