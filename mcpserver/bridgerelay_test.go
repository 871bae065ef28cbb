//lint:file-ignore SA1019 the hosts and servers here use sampling, elicitation, roots and logging, deprecated from 2026-07-28, which Plexus relays

package mcpserver_test

import (
	"context"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/plexus-gw/plexus/mcpserver"
)

// TestBridgeRelays: over stdio (plexus mcp serve), what an ingested server
// asks during a host's call reaches that host too: sampling, elicitation,
// roots; a host that offers none of them is not asked.
func TestBridgeRelays(t *testing.T) {
	f := newFixture(t, mcpserver.Options{})
	f.ingest("asker", newAsker(t, nil, nil).url)
	smp := &sampler{name: "desk-model"}
	// Hosts over stdio speak 2025-11-25, on which a server may ask them.
	cs := bridgedVersion(t, mcpserver.BridgeOptions{Endpoint: f.url, PAT: f.agent("desk")}, "claude-desktop", "2025-11-25", &mcp.ClientOptions{
		CreateMessageHandler: smp.handle,
		ElicitationHandler: func(context.Context, *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
			return &mcp.ElicitResult{Action: "decline"}, nil
		},
	})
	for _, tc := range []struct {
		tool string
		args map[string]any
		want string
	}{
		{"mcp__asker__ask", map[string]any{"q": "over stdio"}, "sampled: 42 for over stdio by desk-model"},
		{"mcp__asker__elicit", map[string]any{"q": "over stdio"}, "elicited: decline <nil>"},
		{"mcp__asker__roots", map[string]any{}, "roots: "},
	} {
		if res := call(t, cs, tc.tool, tc.args); text(res) != tc.want {
			t.Errorf("%s = %q, want %q", tc.tool, text(res), tc.want)
		}
	}

	bare := bridgedVersion(t, mcpserver.BridgeOptions{Endpoint: f.url, PAT: f.agent("plain")}, "plain-host", "2025-11-25", &mcp.ClientOptions{Capabilities: &mcp.ClientCapabilities{}})
	if got := text(call(t, bare, "mcp__asker__ask", map[string]any{"q": "x"})); got == "" || got[:7] != "error: " {
		t.Errorf("ask from a host without sampling = %q, want the server's error", got)
	}
}
