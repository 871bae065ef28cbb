package ipchost_test

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/plexus-gw/plexus"
	"github.com/plexus-gw/plexus/ipchost"
)

func TestReadFile(t *testing.T) {
	tests := []struct {
		name     string
		text     string
		provider string // of the FileError
		problem  string // substring of the FileError's problem; "" means valid
	}{
		{name: "OK", text: `{"providers":{"a":{"command":"/bin/a"}}}`},
		{name: "OKBlank", text: " \n"},
		{name: "OKNull", text: `{"providers":null,"other":1}`},
		{name: "ErrNotObject", text: `[]`, problem: "not a JSON object"},
		{name: "ErrProvidersNotObject", text: `{"providers":[]}`, problem: `"providers" is not an object of provider ids`},
		{name: "ErrTooLarge", text: `{"x":"` + strings.Repeat("a", 1<<20) + `"}`, problem: "over 1 MiB"},
		{name: "ErrUnknownKey", text: `{"providers":{"a":{"command":"/bin/a","comand":"x"}}}`, provider: "a", problem: `unknown field "comand"`},
		{name: "ErrWrongType", text: `{"providers":{"a":{"command":"/bin/a","args":"x"}}}`, provider: "a", problem: "args: wrong type"},
		{name: "ErrRule", text: `{"providers":{"a":{"command":"./a"}}}`, provider: "a", problem: "command: a path must be absolute"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "providers.json")
			if err := os.WriteFile(path, []byte(tc.text), 0o600); err != nil {
				t.Fatal(err)
			}
			_, err := ipchost.ReadFile(path)
			if tc.problem == "" {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			var fe *ipchost.FileError
			if !errors.As(err, &fe) || fe.Provider != tc.provider || !strings.Contains(fe.Problem, tc.problem) {
				t.Fatalf("err = %v, want a FileError for %q containing %q", err, tc.provider, tc.problem)
			}
		})
	}
}

// TestFileEditKeepsTheRest sets and removes providers and checks that the
// other keys and entries are written back as they were.
func TestFileEditKeepsTheRest(t *testing.T) {
	path := filepath.Join(t.TempDir(), "providers.json")
	orig := `{"$comment":"mine","providers":{"a":{"command":"/bin/a"},"b":{"command":"/bin/b","args":["x"]}}}`
	if err := os.WriteFile(path, []byte(orig), 0o600); err != nil {
		t.Fatal(err)
	}
	f, err := ipchost.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Set("c", plexus.ProviderConfig{Command: "/bin/c"}); err != nil {
		t.Fatal(err)
	}
	if !f.Remove("a") || f.Remove("nope") {
		t.Fatal("Remove reported wrongly")
	}
	if err := f.Save(); err != nil {
		t.Fatal(err)
	}
	got, err := ipchost.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if ids := strings.Join(got.IDs(), ","); ids != "b,c" {
		t.Errorf("ids %s, want b,c", ids)
	}
	b, _ := os.ReadFile(path)
	for _, want := range []string{`"$comment": "mine"`, `"args": [`, `"restart": "on-failure"`} {
		if !strings.Contains(string(b), want) {
			t.Errorf("providers.json lacks %s:\n%s", want, b)
		}
	}
}
