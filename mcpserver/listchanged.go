package mcpserver

import (
	"context"
	"encoding/json"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/plexus-gw/plexus"
	"github.com/plexus-gw/plexus/gateway"
)

// Changes streams the catalog's changes; *gateway.Gateway implements it.
// The channel is closed when ctx ends or the reader fell behind.
type Changes interface {
	Changes(ctx context.Context) <-chan plexus.Event
}

var _ Changes = (*gateway.Gateway)(nil)

// Run sends notifications/tools/list_changed (and the resources' and
// prompts') to the connected hosts whenever the catalog changes — a source
// added or removed, a definition held or released, anything the gateway
// announces as manifest_changed — until ctx ends. A host then lists again
// and sees its agent's view as it is now. Without Backend.Changes it only
// waits for ctx.
//
// Grants do not change what a host sees (the view shows what the agent may
// ask for, and the grants decide what runs), so no grant event is needed
// here; a change of the owner's views is announced by [Server.ViewsChanged].
// When ctx ends, so do the calls held for sessionless hosts' answers.
func (s *Server) Run(ctx context.Context) error {
	defer s.inputs.stop() // the calls held for sessionless hosts end with it
	if s.b.Changes == nil {
		<-ctx.Done()
		return nil
	}
	for ctx.Err() == nil {
		for ev := range s.b.Changes.Changes(ctx) {
			if ev.Type == plexus.EventManifestChanged {
				s.listChanged()
			}
		}
		// Closed: ctx ended, or this reader fell behind and missed some:
		// say everything may have changed, and listen again.
		if ctx.Err() == nil {
			s.listChanged()
		}
	}
	return nil
}

// ViewsChanged tells the connected hosts that their lists may have changed
// because the owner's views did: the daemon calls it after reloading them.
func (s *Server) ViewsChanged() { s.listChanged() }

// marker is the name (and URI) of the placeholder items listChanged sets.
const marker = "plexus-list-changed"

var markerSchema = json.RawMessage(`{"type":"object"}`)

// listChanged sends the three list_changed notifications to every session.
func (s *Server) listChanged() { sendListChanged(s.sdk, true, true, true) }

// sendListChanged has srv send the list_changed notifications named to
// every session. The SDK sends them only when its own lists change, so
// each sets a placeholder item on srv: the front door and the bridge answer
// every list, read, get and call themselves, so no host ever sees or
// reaches one. The SDK debounces the notifications, and sends them to
// every session of srv: a host whose view did not change lists again and
// finds the same list.
func sendListChanged(srv *mcp.Server, tools, resources, prompts bool) {
	if tools {
		srv.AddTool(&mcp.Tool{Name: marker, InputSchema: markerSchema},
			func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
				return &mcp.CallToolResult{}, nil
			})
	}
	if resources {
		srv.AddResource(&mcp.Resource{URI: "plexus:" + marker, Name: marker},
			func(context.Context, *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
				return nil, mcp.ResourceNotFoundError("")
			})
	}
	if prompts {
		srv.AddPrompt(&mcp.Prompt{Name: marker},
			func(context.Context, *mcp.GetPromptRequest) (*mcp.GetPromptResult, error) {
				return &mcp.GetPromptResult{}, nil
			})
	}
}
