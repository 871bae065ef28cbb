package mcpserver

import (
	"context"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/plexus-gw/plexus"
)

// getPrompt answers prompts/get: the prompt the name shows in the view,
// got through the gateway like any call (a read-verb grant, the owner's
// approval when there is none, the journal), its arguments the call's
// input. A name outside the view is refused and nothing runs.
func (s *Server) getPrompt(ctx context.Context, l *link, c *catalog, req *mcp.GetPromptRequest) (*mcp.GetPromptResult, error) {
	entry, ok := c.prompt(req.Params.Name)
	if !ok {
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams,
			Message: "unknown prompt: " + clip(req.Params.Name, 80) + " (prompts/list shows the prompts this agent may get)"}
	}
	input := make(map[string]any, len(req.Params.Arguments))
	for k, v := range req.Params.Arguments {
		input[k] = v
	}
	p := &progress{ctx: ctx, ss: req.Session, token: req.Params.GetProgressToken()}
	p.caps, p.sessionless = declared(req.Session, req.ClientCapabilities())
	resp, answer, err := s.run(ctx, l, entry, what{kind: "the MCP prompt", name: req.Params.Name}, input, p)
	if err != nil {
		return nil, err
	}
	var out mcp.GetPromptResult
	if err := upstreamResult(entry, resp, answer, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

func (c *catalog) prompt(name string) (plexus.Entry, bool) {
	for _, it := range c.prompts {
		if it.name == name {
			return it.entry, true
		}
	}
	return plexus.Entry{}, false
}
