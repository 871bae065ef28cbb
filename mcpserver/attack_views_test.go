package mcpserver_test

import (
	"context"
	"errors"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/plexus-gw/plexus"
	"github.com/plexus-gw/plexus/mcpserver"
)

// The attacks on the owner's views: a view only ever hides, never lets an
// agent reach more, and original names never let one server stand in for
// another.

// mark is the number of journal rows so far.
func (f *fixture) mark() int { return len(f.rowsAll()) }

// ranNothing fails the test when the journal holds a call or a grant
// after the mark, or the upstream library served anything.
func (f *fixture) ranNothing(mark int, lib *library) {
	f.t.Helper()
	for _, a := range f.actions()[mark:] {
		if strings.HasPrefix(a, "invoke.") || strings.HasPrefix(a, "grant.") || strings.HasPrefix(a, "token.") {
			f.t.Errorf("journaled %s: something outside the view ran or was asked for", a)
		}
	}
	if lib != nil && lib.total() != 0 {
		f.t.Errorf("upstream hits = %v, want none", lib.hits)
	}
}

// TestAttackViewHidesEverywhere: what --only hides cannot be called by its
// tool name, read as a resource (by URI or through a template), or got as
// a prompt, even when the agent holds standing grants for it.
func TestAttackViewHidesEverywhere(t *testing.T) {
	vf := viewFile(t)
	f := newFixture(t, mcpserver.Options{Views: vf})
	lib, s := newLibrary("lib")
	f.addMCP("lib", s)
	f.setView(vf, "claude", mcpserver.View{Only: []string{"mcp.up.count"}})
	cs := f.connect(f.agent("claude", standing("portal.docs.read", plexus.VerbRead), standing(libResource, plexus.VerbRead),
		standing(libTemplate, plexus.VerbRead), standing(libPrompt, plexus.VerbRead), standing(libTool, plexus.VerbRead)), "claude-code", nil)
	ctx, mark := context.Background(), f.mark()
	for _, name := range []string{"portal__docs__read", "mcp__lib__lookup", mcpserver.ToolName(libResource), mcpserver.SearchToolName, mcpserver.CallToolName} {
		if _, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: map[string]any{"path": "hello.txt", "id": "portal.docs.read"}}); err == nil ||
			!strings.Contains(err.Error(), "unknown tool") {
			t.Errorf("call %s: %v, want unknown tool", name, err)
		}
	}
	for _, uri := range []string{"file:///lib/readme.md", "notes://x"} {
		if _, err := cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: uri}); err == nil {
			t.Errorf("read %s outside the view succeeded", uri)
		}
	}
	if _, err := cs.GetPrompt(ctx, &mcp.GetPromptParams{Name: mcpserver.ToolName(libPrompt), Arguments: map[string]string{"name": "x"}}); err == nil ||
		!strings.Contains(err.Error(), "unknown prompt") {
		t.Errorf("get the hidden prompt: %v, want unknown prompt", err)
	}
	for _, list := range []func() (int, error){
		func() (int, error) { r, err := cs.ListResources(ctx, nil); return len(r.Resources), err },
		func() (int, error) {
			r, err := cs.ListResourceTemplates(ctx, nil)
			return len(r.ResourceTemplates), err
		},
		func() (int, error) { r, err := cs.ListPrompts(ctx, nil); return len(r.Prompts), err },
	} {
		if n, err := list(); err != nil || n != 0 {
			t.Errorf("a hidden list shows %d items (%v)", n, err)
		}
	}
	f.ranNothing(mark, lib)
}

// TestAttackSearchModeStaysInView: in search mode the call tool refuses
// every id the view hides (tools, resources, prompts), a search never
// answers one, even asked for by its exact id, and a capability's own tool
// name is not callable beside the search tools.
func TestAttackSearchModeStaysInView(t *testing.T) {
	vf := viewFile(t)
	f := newFixture(t, mcpserver.Options{Views: vf})
	lib, s := newLibrary("lib")
	f.addMCP("lib", s)
	f.setView(vf, "claude", mcpserver.View{Only: []string{"mcp.up.count"}, Mode: mcpserver.ModeSearch})
	cs := f.connect(f.agent("claude", standing("portal.docs.read", plexus.VerbRead), standing(libResource, plexus.VerbRead),
		standing(libPrompt, plexus.VerbRead), standing(libTool, plexus.VerbRead)), "claude-code", nil)
	ctx, mark := context.Background(), f.mark()
	hidden := []string{"portal.docs.read", libTool, libResource, libTemplate, libPrompt, "mcp.up.wipe"}
	for _, id := range hidden {
		if _, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: mcpserver.CallToolName, Arguments: map[string]any{"id": id, "arguments": map[string]any{"path": "hello.txt"}}}); err == nil ||
			!strings.Contains(err.Error(), "unknown capability") {
			t.Errorf("%s %s: %v, want unknown capability", mcpserver.CallToolName, id, err)
		}
		res := call(t, cs, mcpserver.SearchToolName, map[string]any{"query": id, "limit": 50})
		var out struct{ Results []mcpserver.Hit }
		if err := jsonInto(res.StructuredContent, &out); err != nil {
			t.Fatal(err)
		}
		for _, h := range out.Results {
			if h.ID != "mcp.up.count" {
				t.Errorf("search %q answers %s, outside the view", id, h.ID)
			}
		}
	}
	for _, q := range []string{"readme note greet lookup hello docs", "*", "mcp"} {
		res := call(t, cs, mcpserver.SearchToolName, map[string]any{"query": q, "limit": 50})
		if strings.Contains(text(res), `"id":"`) && !strings.Contains(text(res), `"id":"mcp.up.count"`) ||
			strings.Count(text(res), `"id":"`) > 1 {
			t.Errorf("search %q = %s, want nothing outside the view", q, text(res))
		}
	}
	if _, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "mcp__up__count", Arguments: map[string]any{"n": 1}}); err == nil {
		t.Errorf("a capability's own tool name was callable in search mode")
	}
	f.ranNothing(mark, lib)
}

// TestAttackURIOutsideTemplates: a resources/read of a URI that is no
// shown resource and matches no shown template (exactly, as the template
// would expand) is refused as not found, and nothing runs.
func TestAttackURIOutsideTemplates(t *testing.T) {
	f := newFixture(t, mcpserver.Options{})
	lib, s := newLibrary("lib")
	f.addMCP("lib", s)
	cs := f.connect(f.agent("claude", standing(libTemplate, plexus.VerbRead), standing(libResource, plexus.VerbRead)), "claude-code", nil)
	mark := f.mark()
	for _, uri := range []string{"file:///etc/passwd", "file:///lib/readme.md/../../etc/passwd", "notes:/x", "notes://a/b", "notes://a%2fb",
		"notes://a?b=c", "xnotes://a", "file:///lib/README.md", "plexus:plexus-list-changed"} {
		_, err := cs.ReadResource(context.Background(), &mcp.ReadResourceParams{URI: uri})
		if err == nil || !strings.Contains(strings.ToLower(err.Error()), "not found") {
			t.Errorf("read %q: %v, want not found", uri, err)
		}
	}
	f.ranNothing(mark, lib)
}

// TestAttackOriginalNamesNoShadow: with original names for one server, a
// second server serving the same tool, resource, template and prompt
// names is never reached under them; and a view whose original names would
// span two servers is refused when written, and the one before it stays.
func TestAttackOriginalNamesNoShadow(t *testing.T) {
	vf := viewFile(t)
	f := newFixture(t, mcpserver.Options{Views: vf})
	_, s := newLibrary("lib")
	f.addMCP("lib", s)
	evil, es := newLibrary("evil")
	f.addMCP("evil", es)
	f.setView(vf, "claude", mcpserver.View{Only: []string{"mcp.lib.*"}, Names: mcpserver.NamesOriginal})
	cs := f.connect(f.agent("claude", standing(libTool, plexus.VerbRead), standing(libResource, plexus.VerbRead),
		standing(libTemplate, plexus.VerbRead), standing(libPrompt, plexus.VerbRead),
		standing("mcp.evil.lookup", plexus.VerbRead), standing("mcp.evil.prompt.greet", plexus.VerbRead)), "claude-code", nil)
	ctx := context.Background()
	if res := call(t, cs, "lookup", nil); text(res) != "lib lookup" {
		t.Errorf("lookup = %q, want lib's", text(res))
	}
	if rr, err := cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: "notes://a"}); err != nil || rr.Contents[0].Text != "lib note about a" {
		t.Errorf("read notes://a = %s, %v, want lib's", jsonOf(t, rr), err)
	}
	if gp, err := cs.GetPrompt(ctx, &mcp.GetPromptParams{Name: "greet", Arguments: map[string]string{"name": "x"}}); err != nil ||
		!strings.HasPrefix(gp.Messages[0].Content.(*mcp.TextContent).Text, "lib ") {
		t.Errorf("get greet: %v, want lib's", err)
	}
	if evil.total() != 0 {
		t.Errorf("the second server was reached: %v", evil.hits)
	}
	for _, only := range [][]string{{"mcp.*"}, {"mcp.lib.*", "mcp.evil.*"}, {"mcp.lib*.*"}, {"*lookup"}, nil} {
		err := mcpserver.SetView(vf.Path(), "claude", mcpserver.View{Only: only, Names: mcpserver.NamesOriginal})
		if !errors.Is(err, mcpserver.ErrView) {
			t.Errorf("original names over %v: %v, want refused", only, err)
		}
	}
	// Written by hand all the same: the file is refused as a whole, and the
	// view read before stays.
	if err := os.WriteFile(vf.Path(), []byte(`{"agents":{"claude":{"only":["mcp.*"],"names":"original"}}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := vf.Reload(); !errors.Is(err, mcpserver.ErrView) {
		t.Fatalf("reload a two-server original view: %v, want refused", err)
	}
	if got := toolNames(t, cs); !slices.Equal(got, []string{"lookup"}) || evil.total() != 0 {
		t.Errorf("tools after the refused edit = %v (evil hits %v), want lib's lookup alone", got, evil.hits)
	}
}
