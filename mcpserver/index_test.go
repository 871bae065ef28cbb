package mcpserver_test

import (
	"context"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/plexus-gw/plexus"
	"github.com/plexus-gw/plexus/gateway"
	"github.com/plexus-gw/plexus/mcpserver"
)

// TestCallAfterSourceRemoved: a session that has called a tool (so it
// holds its token and knows its name) calls it again after the owner
// removed its source: the name is unknown, nothing is asked or invoked and
// the server sees no call; the tools still there keep working.
func TestCallAfterSourceRemoved(t *testing.T) {
	f := newFixture(t, mcpserver.Options{})
	cs := f.connect(f.agent("claude", standing("mcp.up.count", plexus.VerbRead)), "claude-code", nil)
	for range 2 {
		if res := call(t, cs, "mcp__up__count", map[string]any{"n": 1}); res.IsError {
			t.Fatalf("count = %q, want success", text(res))
		}
	}
	before := len(f.actions())
	if err := f.gw.RemoveSource(context.Background(), gateway.Credentials{ConnectionKey: f.home.ConnectionKey}, "mcp:up", gateway.SourceOptions{}); err != nil {
		t.Fatal(err)
	}
	_, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "mcp__up__count", Arguments: map[string]any{"n": 1}})
	if err == nil || !strings.Contains(err.Error(), "unknown tool") {
		t.Errorf("call after the removal: %v, want unknown tool", err)
	}
	if n := f.upstream.count("count"); n != 2 {
		t.Errorf("the server saw %d calls, want the 2 made before the removal", n)
	}
	for _, a := range f.actions()[before:] {
		if strings.HasPrefix(a, "invoke.") || strings.HasPrefix(a, "grant.") {
			t.Errorf("journaled %s after the removal", a)
		}
	}
	if res := call(t, cs, "portal__docs__read", map[string]any{"path": "hello.txt"}); res.IsError {
		t.Errorf("a remaining tool: %q, want its content", text(res))
	}
}

// TestCallAfterRevocationWithTokenHeld: an agent revoked after its host
// made calls (its token held, the tool's name known) runs nothing more:
// the call is refused as the session's end, and the host's next request
// meets an unknown session.
func TestCallAfterRevocationWithTokenHeld(t *testing.T) {
	f := newFixture(t, mcpserver.Options{})
	cs := f.connect(f.agent("claude", standing("mcp.up.count", plexus.VerbRead)), "claude-code", nil)
	if res := call(t, cs, "mcp__up__count", map[string]any{"n": 1}); res.IsError {
		t.Fatalf("count = %q, want success", text(res))
	}
	if _, err := f.gw.RevokeAgent(context.Background(), gateway.Credentials{ConnectionKey: f.home.ConnectionKey},
		plexus.AgentRevokeRequest{AgentID: "claude"}); err != nil {
		t.Fatal(err)
	}
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "mcp__up__count", Arguments: map[string]any{"n": 1}})
	if err == nil && (!res.IsError || !strings.Contains(text(res), string(plexus.CodeSessionExpired))) {
		t.Errorf("call after the revocation = %q, want it refused as session_expired", text(res))
	}
	if n := f.upstream.count("count"); n != 1 {
		t.Errorf("the server saw %d calls, want 1", n)
	}
	if _, err := cs.ListTools(context.Background(), nil); err == nil {
		t.Error("tools/list after the revocation succeeded, want the session unknown")
	}
}

// TestCallAfterViewNarrowed: a session that has called a tool (its catalog
// cached at this revision) calls it again after the owner narrowed the
// agent's view to hide it: the catalog's revision did not move, yet the
// name is unknown and nothing runs; what the view still shows works.
func TestCallAfterViewNarrowed(t *testing.T) {
	vf := viewFile(t)
	f := newFixture(t, mcpserver.Options{Views: vf})
	cs := f.connect(f.agent("claude", standing("mcp.up.count", plexus.VerbRead), standing("portal.docs.read", plexus.VerbRead)), "claude-code", nil)
	if res := call(t, cs, "mcp__up__count", map[string]any{"n": 1}); res.IsError {
		t.Fatalf("count = %q, want success", text(res))
	}
	f.setView(vf, "claude", mcpserver.View{Only: []string{"portal.docs.*"}})
	_, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "mcp__up__count", Arguments: map[string]any{"n": 1}})
	if err == nil || !strings.Contains(err.Error(), "unknown tool") {
		t.Errorf("call after the view hid it: %v, want unknown tool", err)
	}
	if n := f.upstream.count("count"); n != 1 {
		t.Errorf("the server saw %d calls, want the 1 made before the view changed", n)
	}
	if res := call(t, cs, "portal__docs__read", map[string]any{"path": "hello.txt"}); res.IsError {
		t.Errorf("a tool the view shows: %q, want its content", text(res))
	}
}

// TestListAfterRevocation: a host whose agent the owner revoked after it
// listed (its catalog kept) is not answered from the kept catalog: its
// next tools/list meets the session check and fails.
func TestListAfterRevocation(t *testing.T) {
	f := newFixture(t, mcpserver.Options{})
	cs := f.connect(f.agent("claude", standing("mcp.up.count", plexus.VerbRead)), "claude-code", nil)
	if _, err := cs.ListTools(context.Background(), nil); err != nil {
		t.Fatal(err)
	}
	if _, err := f.gw.RevokeAgent(context.Background(), gateway.Credentials{ConnectionKey: f.home.ConnectionKey},
		plexus.AgentRevokeRequest{AgentID: "claude"}); err != nil {
		t.Fatal(err)
	}
	for i := range 2 {
		if res, err := cs.ListTools(context.Background(), nil); err == nil {
			t.Errorf("tools/list %d after the revocation answered %d tools, want the session's end", i, len(res.Tools))
		}
	}
}
