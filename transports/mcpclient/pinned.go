package mcpclient

import (
	"context"

	"github.com/plexus-gw/plexus"
)

// PinCheck compares a server's tool definitions with what the owner
// accepted and returns the entry ids to hold for the owner's review (the
// gateway's CheckPins, which journals what it holds). It is called from the
// registry's scan, with the scan's context; an error fails the scan.
type PinCheck func(ctx context.Context, source string, defs []Definition) (held map[string]bool, err error)

// Pinned is an MCP server's source as the registry sees it: the client's
// projection minus the tools whose definition changed since the owner
// accepted it. This is the one rug-pull guard: a held tool is never in the
// registry, so it can be neither listed nor called. A pin check that fails
// fails the scan, so the registry keeps what it had rather than serve
// unchecked definitions.
type Pinned struct {
	*Client
	Check PinCheck
}

var _ plexus.Source = (*Pinned)(nil)

// Scan returns the client's entries less those Check holds. Only tools are
// pinned: resources and prompts are read-only data (docs/mcp.md).
func (p *Pinned) Scan(ctx context.Context) ([]plexus.Entry, error) {
	entries, err := p.Client.Scan(ctx)
	if err != nil {
		return nil, err
	}
	var tools []Definition
	for _, d := range p.Definitions() {
		if d.Primitive == "tool" {
			tools = append(tools, d)
		}
	}
	held, err := p.Check(ctx, p.ID(), tools)
	if err != nil {
		return nil, err
	}
	if len(held) == 0 {
		return entries, nil
	}
	out := entries[:0:0]
	for _, e := range entries {
		if !held[e.ID] {
			out = append(out, e)
		}
	}
	return out, nil
}
