package mcpserver_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/plexus-gw/plexus"
	"github.com/plexus-gw/plexus/journal"
	"github.com/plexus-gw/plexus/mcpserver"
)

var toolNameRE = regexp.MustCompile(`^[a-zA-Z0-9_-]{1,64}$`)

// TestListTools: tools/list shows the agent's manifest as tools, named by
// the rule, with the capability id in _meta, schemas verbatim and hints
// from the verbs; the MCP client's name and version are recorded at the
// session's opening.
func TestListTools(t *testing.T) {
	f := newFixture(t, mcpserver.Options{})
	cs := f.connect(f.agent("claude"), "claude-code", nil)
	res, err := cs.ListTools(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	tools := map[string]*mcp.Tool{}
	for _, tool := range res.Tools {
		if !toolNameRE.MatchString(tool.Name) {
			t.Errorf("tool name %q does not match %s", tool.Name, toolNameRE)
		}
		id, _ := tool.Meta[mcpserver.MetaCapability].(string)
		if got := mcpserver.ToolName(id); got != tool.Name {
			t.Errorf("tool %q: _meta capability %q names %q", tool.Name, id, got)
		}
		tools[tool.Name] = tool
	}
	for name, wantRO := range map[string]bool{"portal__docs__read": true, "portal__docs__write": false,
		"mcp__up__count": true, "mcp__up__wipe": false} {
		tool, ok := tools[name]
		if !ok {
			t.Fatalf("tools/list lacks %s; it has %v", name, keys(tools))
		}
		if tool.Annotations == nil || tool.Annotations.ReadOnlyHint != wantRO ||
			tool.Annotations.DestructiveHint == nil || *tool.Annotations.DestructiveHint == wantRO {
			t.Errorf("%s annotations = %+v, want readOnlyHint %v and destructiveHint %v", name, tool.Annotations, wantRO, !wantRO)
		}
	}
	// The ingested tool's schema, verbatim as the upstream server listed it.
	in, err := json.Marshal(tools["mcp__up__count"].InputSchema)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(in), `"n"`) || !strings.Contains(string(in), `"integer"`) {
		t.Errorf("mcp__up__count input schema = %s, want the upstream's {n: integer}", in)
	}
	if tools["mcp__up__count"].OutputSchema == nil {
		t.Errorf("mcp__up__count has no output schema; the upstream declared one")
	}
	opened := f.rows("session.opened")
	if len(opened) != 1 || opened[0].Payload["client"] != "claude-code" || opened[0].Payload["clientVersion"] != "1.2.3" {
		t.Errorf("session.opened rows = %+v, want one recording client claude-code 1.2.3", opened)
	}
}

// TestCallAutoApproved: a read of a first-party capability is approved by
// policy; the call runs and answers the output.
func TestCallAutoApproved(t *testing.T) {
	f := newFixture(t, mcpserver.Options{})
	cs := f.connect(f.agent("claude"), "claude-code", nil)
	res := call(t, cs, "portal__docs__read", map[string]any{"path": "hello.txt"})
	if res.IsError || !strings.Contains(text(res), "hello from the portal") {
		t.Fatalf("read = %+v %q, want the file's content", res, text(res))
	}
	if n := len(f.rows("invoke.ok")); n != 1 {
		t.Errorf("invoke.ok rows = %d, want 1", n)
	}
}

func call(t *testing.T, cs *mcp.ClientSession, name string, args map[string]any) *mcp.CallToolResult {
	t.Helper()
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		t.Fatalf("call %s: %v", name, err)
	}
	return res
}

// text is the text of a result's content.
func text(res *mcp.CallToolResult) string {
	var b strings.Builder
	for _, c := range res.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			b.WriteString(tc.Text)
		}
	}
	return b.String()
}

func keys[V any](m map[string]V) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// rows are the journal's rows of one action type.
func (f *fixture) rows(action string) []plexus.Activity {
	f.t.Helper()
	all, err := f.db.Activity(context.Background(), journal.Filter{})
	if err != nil {
		f.t.Fatal(err)
	}
	var out []plexus.Activity
	for _, r := range all {
		if r.ActionType == action {
			out = append(out, r)
		}
	}
	return out
}

var (
	_ = os.ReadFile
	_ = filepath.Join
	_ sync.Mutex
)
