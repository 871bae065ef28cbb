package mcpserver

import (
	"context"
	"encoding/json"
	"time"

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

// Run keeps the hosts' sessions told, until ctx ends: whenever the
// catalog changes (a source added or removed, a definition held or
// released: anything the gateway announces as manifest_changed) or the
// owner's views do ([Server.ViewsChanged]), it compares each session's
// lists with those it was last shown, sends notifications/tools/list_changed
// (and the resources' and prompts') to the sessions whose lists changed and
// no other, and ends their subscriptions to resources their view no longer
// shows (hosts.go). It also delivers the subscribed resources' updates
// (subscribe.go). Without Backend.Changes only the views' changes are
// compared.
//
// Grants do not change what a host is listed (the view shows what the
// agent may ask for, and the grants decide what runs), so no grant event is
// needed here. A revoked agent's hosts, and those whose Plexus session
// expired, are ended by a sweep every Options.SessionCheck (sweep.go),
// which drops their subscriptions. When ctx ends, so do the calls held for sessionless
// hosts' answers.
func (s *Server) Run(ctx context.Context) error {
	defer s.inputs.stop() // the calls held for sessionless hosts end with it
	changes := s.changes(ctx)
	check := time.NewTicker(s.opts.SessionCheck)
	defer check.Stop()
	gen := s.b.Sessions.StateGeneration()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-check.C:
			s.sweep(ctx, &gen)
		case <-s.kick:
			s.refresh(ctx)
		case <-s.updates.ready:
			s.deliver(ctx)
		case ev, ok := <-changes:
			if !ok {
				if ctx.Err() != nil {
					return nil
				}
				// This reader fell behind and missed some: compare
				// everything, and listen again.
				changes = s.changes(ctx)
				s.refresh(ctx)
				continue
			}
			if ev.Type == plexus.EventManifestChanged {
				s.refresh(ctx)
			}
		}
	}
}

// changes is the catalog's change stream, nil (never ready) without one.
func (s *Server) changes(ctx context.Context) <-chan plexus.Event {
	if s.b.Changes == nil {
		return nil
	}
	return s.b.Changes.Changes(ctx)
}

// ViewsChanged tells the front door that the owner's views changed: the
// daemon calls it after reloading them, and Run tells the sessions whose
// lists changed.
func (s *Server) ViewsChanged() {
	select {
	case s.kick <- struct{}{}:
	default: // a comparison is asked already
	}
}

// marker is the name (and URI) of the placeholder items listChanged sets.
const marker = "plexus-list-changed"

var markerSchema = json.RawMessage(`{"type":"object"}`)

// sendListChanged has srv send the list_changed notifications named to
// every session. The SDK sends them only when its own lists change, so
// each sets a placeholder item on srv: the front door and the bridge answer
// every list, read, get and call themselves, so no host ever sees or
// reaches one. The SDK debounces the notifications, and sends them to
// every session of srv: the front door's servers have one session each
// (hosts.go), the bridge's one host.
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
