package mcphost

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/plexus-gw/plexus"
)

// TestAddRemove checks the owner's edits of mcp.json from the command
// line: what is refused leaves the file as it was, the rest is written.
func TestAddRemove(t *testing.T) {
	const before = `{"mcpServers": {"docs": {"url": "https://docs.example/mcp"}}, "keep": 1}`
	raw := json.RawMessage(`{"command": "/bin/echo"}`)
	for _, tt := range []struct {
		name    string
		edit    func(path string) error
		wantErr string // "" when the edit is written
		want    []string
		gone    string // a server the edit takes out
	}{
		{"Add", func(p string) error { return Add(p, "echo", raw, false, nil) }, "", []string{`"echo"`, `"docs"`, `"keep"`}, ""},
		{"AddTaken", func(p string) error { return Add(p, "docs", raw, false, nil) }, `already has a server "docs"`, nil, ""},
		{"Replace", func(p string) error { return Add(p, "docs", raw, true, nil) }, "", []string{`"/bin/echo"`, `"keep"`}, ""},
		{"SecretMissing", func(p string) error { return Add(p, "echo", raw, false, []string{"gh"}) }, "plexus secrets set gh", nil, ""},
		{"Remove", func(p string) error { return Remove(p, "docs") }, "", []string{`"keep"`}, `"docs"`},
		{"RemoveUnknown", func(p string) error { return Remove(p, "nope") }, `has no server "nope"`, nil, ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "mcp.json")
			if err := os.WriteFile(path, []byte(before), 0o600); err != nil {
				t.Fatal(err)
			}
			err := tt.edit(path)
			b, rerr := os.ReadFile(path)
			if rerr != nil {
				t.Fatal(rerr)
			}
			var ee *EditError
			switch {
			case tt.wantErr != "":
				if !errors.As(err, &ee) || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want an *EditError saying %q", err, tt.wantErr)
				}
				if string(b) != before {
					t.Errorf("a refused edit wrote %s", b)
				}
			case err != nil:
				t.Fatal(err)
			}
			if tt.gone != "" && strings.Contains(string(b), tt.gone) {
				t.Errorf("mcp.json = %s, still with %s", b, tt.gone)
			}
			for _, w := range tt.want {
				if !strings.Contains(string(b), w) {
					t.Errorf("mcp.json = %s, want %s in it", b, w)
				}
			}
		})
	}
}

// TestWriteWait checks the report after a server was added: its entries
// once up, never listed, or its health while it does not come up.
func TestWriteWait(t *testing.T) {
	for _, tt := range []struct {
		name string
		last plexus.SourceStatus
		up   bool
		want string
	}{
		{"Up", plexus.SourceStatus{ID: "mcp:docs", Entries: 3}, true, "Plexus serves 3 entries of mcp:docs (mcp.docs.…)"},
		{"NeverListed", plexus.SourceStatus{}, false, "Plexus has not listed mcp:docs yet"},
		{"Down", plexus.SourceStatus{ID: "mcp:docs", Health: plexus.Health{Status: "down", Detail: "exit 1"}}, false, "mcp:docs: 0 entries, health down exit 1"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var w strings.Builder
			WriteWait(&w, "docs", tt.last, tt.up)
			if !strings.Contains(w.String(), tt.want) {
				t.Errorf("WriteWait wrote %q, want %q", w.String(), tt.want)
			}
		})
	}
}
