package scaffold_test

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/plexus-gw/plexus/platform"
	"github.com/plexus-gw/plexus/scaffold"
)

func TestOwnerFileSave(t *testing.T) {
	const orig = `{"$schema":"x","servers":{"a":{"command":"a","timeout":3},"b":{"command":"b"}}}`
	const want = "{\n  \"$schema\": \"x\",\n  \"servers\": {\n    \"a\": {\n      \"command\": \"a\",\n      \"timeout\": 3\n    },\n    \"c\": {\n      \"command\": \"c\"\n    }\n  }\n}\n"
	edit := func(f *scaffold.OwnerFile) {
		f.Put("c", json.RawMessage(`{"command":"c"}`))
		f.Remove("b")
	}
	tests := []struct {
		name  string
		start *string // nil: no file
		hand  *string // written between read and save; nil: no hand edit
		want  string  // the file afterwards
		err   bool    // an EditConflictError
	}{
		{name: "OK", start: ptr(orig), want: want},
		{name: "OKNoFile", want: "{\n  \"servers\": {\n    \"c\": {\n      \"command\": \"c\"\n    }\n  }\n}\n"},
		{name: "ErrHandEdit", start: ptr(orig), hand: ptr(`{"servers":{"mine":{}}}`), want: `{"servers":{"mine":{}}}`, err: true},
		{name: "ErrCreatedMeanwhile", hand: ptr(`{"servers":{"mine":{}}}`), want: `{"servers":{"mine":{}}}`, err: true},
		{name: "ErrRemovedMeanwhile", start: ptr(orig), err: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "x.json")
			if tc.start != nil {
				mustWrite(t, path, *tc.start)
			}
			f, err := scaffold.ReadOwnerFile(path, "servers", 0)
			if err != nil {
				t.Fatal(err)
			}
			edit(f)
			switch {
			case tc.hand != nil:
				mustWrite(t, path, *tc.hand)
			case tc.err:
				if err := os.Remove(path); err != nil {
					t.Fatal(err)
				}
			}
			err = f.Save()
			var ce *scaffold.EditConflictError
			if got := errors.As(err, &ce); got != tc.err || (!tc.err && err != nil) {
				t.Fatalf("Save: err = %v, want conflict %v", err, tc.err)
			}
			b, err := os.ReadFile(path)
			if tc.start != nil && tc.hand == nil && tc.err {
				if !errors.Is(err, os.ErrNotExist) {
					t.Fatalf("the removed file was written again: %s (%v)", b, err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if string(b) != tc.want {
				t.Errorf("file:\n%s\nwant:\n%s", b, tc.want)
			}
			if entries, _ := filepath.Glob(filepath.Join(filepath.Dir(path), ".*tmp*")); len(entries) > 0 {
				t.Errorf("temporary files left: %v", entries)
			}
		})
	}
}

// TestOwnerFileSaveTwice checks that a second Save after a first one is not
// taken for a hand edit: what the first wrote is what was read.
func TestOwnerFileSaveTwice(t *testing.T) {
	path := filepath.Join(t.TempDir(), "x.json")
	f, err := scaffold.ReadOwnerFile(path, "servers", 0)
	if err != nil {
		t.Fatal(err)
	}
	f.Put("a", json.RawMessage(`{}`))
	if err := f.Save(); err != nil {
		t.Fatal(err)
	}
	f.Put("b", json.RawMessage(`{}`))
	if err := f.Save(); err != nil {
		t.Fatalf("second Save: %v", err)
	}
}

func TestReadOwnerFileErrors(t *testing.T) {
	tests := []struct {
		name, text string
		max        int64
		want       scaffold.OwnerFileProblem
	}{
		{"NotObject", `[]`, 0, scaffold.ProblemNotObject},
		{"Truncated", `{"servers":`, 0, scaffold.ProblemNotObject},
		{"EntriesNotObject", `{"servers":[]}`, 0, scaffold.ProblemEntriesNotObject},
		{"TooLarge", `{"servers":{}}`, 4, scaffold.ProblemTooLarge},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "x.json")
			mustWrite(t, path, tc.text)
			_, err := scaffold.ReadOwnerFile(path, "servers", tc.max)
			var oe *scaffold.OwnerFileError
			if !errors.As(err, &oe) || oe.Problem != tc.want {
				t.Fatalf("err = %v, want problem %d", err, tc.want)
			}
		})
	}
}

func mustWrite(t *testing.T, path, text string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
}

func ptr(s string) *string { return &s }

// TestReadOwnerFileNotRegular: a link, a FIFO or a folder under an owner
// file's name (mcp.json read by the daemon's watcher) is never followed or
// waited on: the read fails at once, naming what was found, and a link's
// target (here a huge device) is never read.
func TestReadOwnerFileNotRegular(t *testing.T) {
	plants := map[string]func(path string) error{
		"symlink":   func(p string) error { return os.Symlink("/dev/zero", p) },
		"fifo":      func(p string) error { return syscall.Mkfifo(p, 0o600) },
		"directory": func(p string) error { return os.Mkdir(p, 0o700) },
	}
	for kind, plant := range plants {
		t.Run(kind, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "mcp.json")
			if err := plant(path); err != nil {
				t.Fatal(err)
			}
			_, err := scaffold.ReadOwnerFile(path, "mcpServers", 0)
			var nr *platform.NotRegularError
			if !errors.As(err, &nr) || nr.Kind != kind {
				t.Fatalf("ReadOwnerFile = %v, want a NotRegularError naming a %s", err, kind)
			}
		})
	}
}
