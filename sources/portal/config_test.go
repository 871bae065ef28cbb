package portal

import (
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/plexus-gw/plexus"
)

// TestOwnerSource checks the source the owner adds: an absolute path to a
// folder, nothing else.
func TestOwnerSource(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "f.txt")
	if err := os.WriteFile(file, []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Chdir(dir)
	for _, tt := range []struct {
		name, path string
		wantPath   string // "" when refused
	}{
		{"Absolute", dir, dir},
		{"Relative", ".", dir},
		{"File", file, ""},
		{"Missing", filepath.Join(dir, "none"), ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			sc, pc, err := OwnerSource(tt.path, "notes")
			if tt.wantPath == "" {
				if err == nil {
					t.Fatalf("OwnerSource(%q) = %+v, want an error", tt.path, sc)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var stored Config
			if err := json.Unmarshal(sc.Config, &stored); err != nil {
				t.Fatal(err)
			}
			want := Config{Path: tt.wantPath, Alias: "notes"}
			if sc.ID != "portal:notes" || sc.Kind != Kind || stored != want || pc != want {
				t.Errorf("OwnerSource = %+v (config %+v), %+v; want %+v", sc, stored, pc, want)
			}
		})
	}
}

// TestViews checks that only portals list, one with an unreadable config
// by its id.
func TestViews(t *testing.T) {
	got := Views([]plexus.SourceConfig{
		{ID: "portal:notes", Kind: Kind, Config: json.RawMessage(`{"path":"/n","alias":"notes"}`)},
		{ID: "mcp:docs", Kind: "mcp", Config: json.RawMessage(`{}`)},
		{ID: "portal:bad", Kind: Kind, Config: json.RawMessage(`[1]`)},
	})
	want := []View{{ID: "portal:notes", Alias: "notes", Path: "/n"}, {ID: "portal:bad"}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("Views = %+v, want %+v", got, want)
	}
	if got := Views(nil); got == nil || len(got) != 0 {
		t.Errorf("Views(nil) = %#v, want an empty list (it prints as [])", got)
	}
}
