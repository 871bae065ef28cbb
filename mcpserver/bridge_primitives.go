package mcpserver

import (
	"context"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// forwardPrimitive forwards a host's resource or prompt request to the
// daemon: only what the method names (cursor, URI, prompt name and
// arguments), none of the host's _meta, which names its own protocol
// version.
func forwardPrimitive(ctx context.Context, up *mcp.ClientSession, method string, req mcp.Request) (mcp.Result, error) {
	switch method {
	case "resources/list":
		p := &mcp.ListResourcesParams{}
		if in := req.(*mcp.ListResourcesRequest).Params; in != nil {
			p.Cursor = in.Cursor
		}
		return up.ListResources(ctx, p)
	case "resources/templates/list":
		p := &mcp.ListResourceTemplatesParams{}
		if in := req.(*mcp.ListResourceTemplatesRequest).Params; in != nil {
			p.Cursor = in.Cursor
		}
		return up.ListResourceTemplates(ctx, p)
	case "resources/read":
		return up.ReadResource(ctx, &mcp.ReadResourceParams{URI: req.(*mcp.ReadResourceRequest).Params.URI})
	case "prompts/list":
		p := &mcp.ListPromptsParams{}
		if in := req.(*mcp.ListPromptsRequest).Params; in != nil {
			p.Cursor = in.Cursor
		}
		return up.ListPrompts(ctx, p)
	}
	in := req.(*mcp.GetPromptRequest).Params
	return up.GetPrompt(ctx, &mcp.GetPromptParams{Name: in.Name, Arguments: in.Arguments})
}
