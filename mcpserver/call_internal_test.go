package mcpserver

import "testing"

// TestWhatString: the purpose text a grant request carries for each kind
// of call, as it read before it was built lazily.
func TestWhatString(t *testing.T) {
	for _, c := range []struct {
		w    what
		want string
	}{
		{what{kind: "the MCP tool", name: "portal__docs__write"}, "the MCP tool portal__docs__write"},
		{what{kind: "the MCP prompt", name: "review"}, "the MCP prompt review"},
		{what{kind: "the MCP resource", name: "file:///a.txt"}, "the MCP resource file:///a.txt"},
		{what{kind: "the capability", name: "mcp.up.count", by: CallToolName}, "the capability mcp.up.count (by " + CallToolName + ")"},
	} {
		if got := c.w.String(); got != c.want {
			t.Errorf("%+v = %q, want %q", c.w, got, c.want)
		}
	}
}
