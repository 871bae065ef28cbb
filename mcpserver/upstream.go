package mcpserver

import (
	"context"
	"encoding/json"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/plexus-gw/plexus/gateway"
)

// Upstream asks a capability's own server what is not a call: to complete
// an argument, to say when a resource changes. *gateway.Gateway implements
// it. Neither needs a grant (nothing runs, nothing is read); the front door
// asks only about items of the link's view.
type Upstream interface {
	Complete(ctx context.Context, c gateway.Credentials, id string, params json.RawMessage) (json.RawMessage, error)
	SubscribeResource(ctx context.Context, c gateway.Credentials, id, uri string, updated func()) (func(), error)
}

var _ Upstream = (*gateway.Gateway)(nil)

// complete answers completion/complete for a prompt (by the name it is
// shown under) or a resource template (by its uriTemplate) of the view,
// from the item's own server. Anything else is refused and nothing is
// asked.
func (s *Server) complete(ctx context.Context, req *mcp.CompleteRequest) (*mcp.CompleteResult, error) {
	l := linkOf(req)
	if l == nil {
		return nil, refuse("no Plexus session")
	}
	c, err := s.catalog(ctx, l)
	if err != nil {
		return nil, err
	}
	id, err := c.completable(req.Params.Ref)
	if err != nil {
		return nil, err
	}
	params, err := json.Marshal(struct {
		Argument mcp.CompleteParamsArgument `json:"argument"`
		Context  *mcp.CompleteContext       `json:"context,omitempty"`
	}{req.Params.Argument, req.Params.Context})
	if err != nil {
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: "the completion's params do not encode: " + err.Error()}
	}
	raw, err := s.b.Upstream.Complete(ctx, l.creds(), id, params)
	if err != nil {
		return nil, s.gatewayError(l, err)
	}
	var out mcp.CompleteResult
	if err := json.Unmarshal(raw, &out); err != nil {
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: id + ": the upstream's completion does not decode: " + err.Error()}
	}
	return &out, nil
}

// completable is the capability a completion's ref names in the view.
func (c *catalog) completable(ref *mcp.CompleteReference) (string, error) {
	switch ref.Type {
	case "ref/prompt":
		if e, ok := c.prompt(ref.Name); ok {
			return e.ID, nil
		}
		return "", &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams,
			Message: "unknown prompt: " + clip(ref.Name, 80) + " (prompts/list shows the prompts this agent may get)"}
	case "ref/resource":
		for _, it := range c.templates {
			if it.name == ref.URI {
				return it.entry.ID, nil
			}
		}
		return "", &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams,
			Message: "unknown resource template: " + clip(ref.URI, 200) + " (resources/templates/list shows the templates this agent may read)"}
	}
	return "", &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: "unknown completion ref type: " + clip(ref.Type, 40)}
}
