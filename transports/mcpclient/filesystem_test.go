package mcpclient_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/plexus-gw/plexus"
	"github.com/plexus-gw/plexus/transports/mcpclient"
)

// TestFilesystem runs the reference server-filesystem on a temporary
// folder: its annotations become verbs, and files are written and read
// through Dispatch.
func TestFilesystem(t *testing.T) {
	failOnLeakedGoroutines(t)
	dir, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	h := startClient(t, "fs", mcpclient.ServerConfig{Command: npmServer(t, "mcp-server-filesystem"), Args: []string{dir}}, mcpclient.Options{})
	h.waitReady(t)

	t.Run("Verbs", func(t *testing.T) {
		m := h.entries(t)
		for name, want := range map[string]plexus.Verb{
			"read_text_file":           plexus.VerbRead,    // readOnlyHint
			"list_directory":           plexus.VerbRead,    // readOnlyHint
			"list_allowed_directories": plexus.VerbRead,    // readOnlyHint
			"write_file":               plexus.VerbExecute, // destructiveHint
			"edit_file":                plexus.VerbExecute, // destructiveHint
			"move_file":                plexus.VerbExecute, // destructiveHint
			"create_directory":         plexus.VerbWrite,   // neither
		} {
			e, ok := m["mcp.fs."+name]
			if !ok {
				t.Errorf("no tool %s; have %v", name, ids(m))
				continue
			}
			if len(e.Grants) != 1 || e.Grants[0] != want {
				t.Errorf("%s grants %v, want [%s]", name, e.Grants, want)
			}
			if e.MCP.Primitive != "tool" || e.MCP.OriginName != name || len(e.IO.Input) == 0 {
				t.Errorf("%s: mcp %+v input %s", name, e.MCP, e.IO.Input)
			}
		}
	})

	t.Run("WriteAndRead", func(t *testing.T) {
		p := filepath.Join(dir, "note.md")
		h.ok(t, "mcp.fs.write_file", map[string]any{"path": p, "content": "# hello\nfrom plexus\n"})
		b, err := os.ReadFile(p)
		if err != nil || string(b) != "# hello\nfrom plexus\n" {
			t.Fatalf("the file holds %q (%v)", b, err)
		}
		if text := firstText(t, h.ok(t, "mcp.fs.read_text_file", map[string]any{"path": p})); text != "# hello\nfrom plexus\n" {
			t.Errorf("read_text_file said %q", text)
		}
		if text := firstText(t, h.ok(t, "mcp.fs.list_directory", map[string]any{"path": dir})); !strings.Contains(text, "note.md") {
			t.Errorf("list_directory said %q", text)
		}
	})

	t.Run("OutsideTheFolder", func(t *testing.T) {
		r := h.call(t, context.Background(), "mcp.fs.read_text_file", map[string]any{"path": "/etc/hostname"}, nil)
		wantErr(t, r, plexus.CodeMCPToolError)
		if !strings.Contains(string(r.MCPResult), `"isError":true`) {
			t.Errorf("mcpResult %s", r.MCPResult)
		}
	})
}
