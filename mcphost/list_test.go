package mcphost

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/plexus-gw/plexus"
)

// TestListItems checks each server's row: a bad entry's problem, a secret
// not stored, and the live source's status only for the server it is.
func TestListItems(t *testing.T) {
	path := filepath.Join(t.TempDir(), "mcp.json")
	body := `{"mcpServers":{"bad":{"nope":1},"fine":{"command":"fine-mcp"},"keyed":{"command":"k","env":{"K":"${secret:k}"}}}}`
	if err := os.WriteFile(path, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	doc, err := ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	live := map[string]plexus.SourceStatus{"mcp:fine": {ID: "mcp:fine", Entries: 3}}
	missing := func(s Server) []string { return s.SecretNames() }
	items := ListItems(doc, live, missing)
	tests := []struct {
		name, problem string
		anyProblem    bool // the entry's problem, worded by Server
		source        bool
	}{
		{name: "bad", anyProblem: true},
		{name: "fine", source: true},
		{name: "keyed", problem: "secret k not set (plexus secrets set <name>)"},
	}
	if len(items) != len(tests) {
		t.Fatalf("got %d items, want %d: %+v", len(items), len(tests), items)
	}
	for i, tt := range tests {
		it := items[i]
		if it.Name != tt.name {
			t.Errorf("item %d is %q, want %q", i, it.Name, tt.name)
		}
		switch {
		case tt.anyProblem && it.Problem == "":
			t.Errorf("%s: no problem reported", tt.name)
		case !tt.anyProblem && it.Problem != tt.problem:
			t.Errorf("%s: problem %q, want %q", tt.name, it.Problem, tt.problem)
		}
		if (it.Source != nil) != tt.source || (tt.source && it.Source.Entries != 3) {
			t.Errorf("%s: source %+v, want present %v", tt.name, it.Source, tt.source)
		}
	}
}
