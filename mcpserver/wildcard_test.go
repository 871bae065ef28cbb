package mcpserver_test

import (
	"context"
	"slices"
	"testing"

	"github.com/plexus-gw/plexus"
	"github.com/plexus-gw/plexus/gateway"
	"github.com/plexus-gw/plexus/mcpserver"
)

// TestWildcardStartingGrant: a starting grant "portal.docs.*=read,write"
// pre-authorizes every capability the source serves now, each with its
// own verbs, so a host's write runs without asking the owner; under
// "mcp.up.*" the execute tool is declined by name, not granted.
func TestWildcardStartingGrant(t *testing.T) {
	f := newFixture(t, mcpserver.Options{})
	pat := f.agent("claude", standing("portal.docs.*", plexus.VerbRead, plexus.VerbWrite))
	cs := f.connect(pat, "claude-code", nil)
	if res := call(t, cs, "portal__docs__write", map[string]any{"path": "w.txt", "content": "wild"}); res.IsError {
		t.Fatalf("write = %q, want success under the wildcard grant", text(res))
	}
	f.wantFile("w.txt", "wild")
	if ids := f.pendingIDs(); len(ids) != 0 {
		t.Errorf("pending = %v, want none", ids)
	}
	resp, err := f.gw.ConnectAgent(context.Background(), gateway.Credentials{ConnectionKey: f.home.ConnectionKey},
		plexus.ConnectRequest{AgentID: "codex", Grants: []plexus.ConnectGrant{{CapabilityID: "mcp.up.*", Verbs: []plexus.Verb{plexus.VerbRead, plexus.VerbWrite}}}})
	if err != nil {
		t.Fatal(err)
	}
	var granted, declined []string
	for _, g := range resp.Grants {
		granted = append(granted, g.CapabilityID)
	}
	for _, d := range resp.Declined {
		declined = append(declined, d.ID)
	}
	slices.Sort(granted)
	if !slices.Equal(granted, []string{"mcp.up.block", "mcp.up.count"}) || !slices.Equal(declined, []string{"mcp.up.wipe"}) {
		t.Errorf("granted %v, declined %v; want block and count granted, wipe (execute) declined", granted, declined)
	}
}
