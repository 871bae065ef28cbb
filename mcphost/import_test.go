package mcphost

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestImport(t *testing.T) {
	const secretNote = "env and header values were copied as written (mcp.json is 0600). To keep one as a secret: " +
		"plexus secrets set NAME, then write ${secret:NAME} in its place."
	tests := []struct {
		name  string
		cands []Candidate
		want  Imported
		saved []string // the servers mcp.json holds after Save
	}{
		{"New", []Candidate{{Name: "fetch", Entry: json.RawMessage(`{"command":"uvx","args":["mcp-server-fetch"]}`)}},
			Imported{Lines: []string{`"fetch": imported`}, Added: 1}, []string{"fetch", "notes"}},
		{"IgnoredKeysAndPlainEnv", []Candidate{{Name: "gh", Entry: json.RawMessage(`{"command":"gh-mcp","env":{"GH_TOKEN":"t"}}`), Ignored: []string{"timeout"}}},
			Imported{Lines: []string{`"gh": imported (not carried over: timeout)`, secretNote}, Added: 1}, []string{"gh", "notes"}},
		{"PlainHeader", []Candidate{{Name: "remote", Entry: json.RawMessage(`{"url":"http://127.0.0.1:9/mcp","headers":{"X-Key":"k"}}`)}},
			Imported{Lines: []string{`"remote": imported`, secretNote}, Added: 1}, []string{"notes", "remote"}},
		{"SameEntryAnyFormatting", []Candidate{{Name: "notes", Entry: json.RawMessage(`{ "args": ["--dir", "/n"], "command": "notes-mcp" }`)}},
			Imported{Lines: []string{`"notes": already in mcp.json`}}, []string{"notes"}},
		{"OtherEntrySameName", []Candidate{{Name: "notes", Entry: json.RawMessage(`{"command":"other"}`)}},
			Imported{Lines: []string{`"notes": not imported: mcp.json already has a server of that name (left as it is)`}, Left: []string{`"notes"`}}, []string{"notes"}},
		{"HostProblem", []Candidate{{Name: "x", Problem: `"args" must be strings`}},
			Imported{Lines: []string{`"x": not imported: "args" must be strings`}, Left: []string{`"x"`}}, []string{"notes"}},
		{"BreaksARule", []Candidate{{Name: "Bad Name", Entry: json.RawMessage(`{"command":"x"}`)}},
			Imported{Left: []string{`"Bad Name"`}}, []string{"notes"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "mcp.json")
			if err := os.WriteFile(path, []byte(`{"mcpServers": {"notes": {"command": "notes-mcp", "args": ["--dir", "/n"]}}}`), 0o600); err != nil {
				t.Fatal(err)
			}
			f, err := ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			got := f.Import(tt.cands)
			if tt.want.Lines == nil { // the rule's own words: only that there is a line
				if len(got.Lines) != 1 {
					t.Errorf("lines = %q, want one", got.Lines)
				}
				got.Lines = nil
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("import (-want +got):\n%s", diff)
			}
			if err := f.Save(); err != nil {
				t.Fatal(err)
			}
			back, err := ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.saved, back.Names()); diff != "" {
				t.Errorf("servers saved (-want +got):\n%s", diff)
			}
		})
	}
}
