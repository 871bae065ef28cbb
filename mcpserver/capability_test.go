//lint:file-ignore SA1019 sampling, elicitation and roots, deprecated from 2026-07-28 but served through its deprecation window, are what Plexus relays

package mcpserver_test

import (
	"context"
	"encoding/json"
	"errors"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/plexus-gw/plexus"
	"github.com/plexus-gw/plexus/mcpserver"
)

// TestMissingClientCapability: a tool whose server needs sampling learns,
// on each call, what the host that made it declared (not what Plexus
// declared to the server), so that a host that cannot answer sampling is
// refused with MissingRequiredClientCapability (-32021, data naming
// sampling), sessionless or not, and the tool does not run; a host that
// declared sampling has it run.
func TestMissingClientCapability(t *testing.T) {
	f := newFixture(t, mcpserver.Options{})
	f.ingest("asker", newAsker(t, nil, nil).url)
	pat := f.agent("claude", standing("mcp.asker.needs-sampling", plexus.VerbRead))
	sampling := &mcp.ClientOptions{CreateMessageHandler: (&sampler{name: "m"}).handle}
	for _, tc := range []struct {
		name, version string
		opts          *mcp.ClientOptions
		runs          bool
	}{
		{"sessionless without sampling", "2026-07-28", nil, false},
		{"session without sampling", "2025-11-25", nil, false},
		{"session with sampling", "2025-11-25", sampling, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cs := f.connectVersion(pat, "cursor", tc.version, tc.opts)
			res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "mcp__asker__needs-sampling", Arguments: map[string]any{}})
			if tc.runs {
				if err != nil || res.IsError || text(res) != "ran" {
					t.Fatalf("call = %v, %v; want the tool to run", res, err)
				}
				return
			}
			var werr *jsonrpc.Error
			if !errors.As(err, &werr) || werr.Code != mcp.CodeMissingRequiredClientCapabilities {
				t.Fatalf("call = %v, %v; want a -32021 error", res, err)
			}
			var data mcp.MissingRequiredClientCapabilityData
			if err := json.Unmarshal(werr.Data, &data); err != nil || data.RequiredCapabilities == nil || data.RequiredCapabilities.Sampling == nil {
				t.Errorf("error data = %s, want requiredCapabilities naming sampling", werr.Data)
			}
		})
	}
}
