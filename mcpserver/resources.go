package mcpserver

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/plexus-gw/plexus"
	"github.com/yosida95/uritemplate/v3"
)

// primitives answers the resource and prompt methods from the link's
// catalog.
func (s *Server) primitives(ctx context.Context, l *link, method string, req mcp.Request) (mcp.Result, error) {
	c, err := s.catalog(ctx, l)
	if err != nil {
		return nil, err
	}
	switch method {
	case "resources/list":
		return &mcp.ListResourcesResult{Resources: c.listedResources()}, nil
	case "resources/templates/list":
		return &mcp.ListResourceTemplatesResult{ResourceTemplates: c.listedTemplates()}, nil
	case "resources/read":
		return s.readResource(ctx, l, c, req.(*mcp.ReadResourceRequest))
	case "prompts/list":
		return &mcp.ListPromptsResult{Prompts: c.listedPrompts()}, nil
	}
	return s.getPrompt(ctx, l, c, req.(*mcp.GetPromptRequest))
}

// listedResources is resources/list's answer.
func (c *catalog) listedResources() []*mcp.Resource {
	out := []*mcp.Resource{}
	for _, it := range c.resources {
		var r mcp.Resource
		out = append(out, withRaw(&r, it.entry, c.resourceName(it), func(n string) { r.Name = n }, func(m mcp.Meta) { r.Meta = m }))
	}
	return out
}

// listedTemplates is resources/templates/list's answer.
func (c *catalog) listedTemplates() []*mcp.ResourceTemplate {
	out := []*mcp.ResourceTemplate{}
	for _, it := range c.templates {
		var r mcp.ResourceTemplate
		out = append(out, withRaw(&r, it.entry, c.resourceName(it), func(n string) { r.Name = n }, func(m mcp.Meta) { r.Meta = m }))
	}
	return out
}

// listedPrompts is prompts/list's answer.
func (c *catalog) listedPrompts() []*mcp.Prompt {
	out := []*mcp.Prompt{}
	for _, it := range c.prompts {
		var p mcp.Prompt
		out = append(out, withRaw(&p, it.entry, it.name, func(n string) { p.Name = n }, func(m mcp.Meta) { p.Meta = m }))
	}
	return out
}

// resourceName is the name a resource or template is listed under: its
// capability id by the naming rule, or with original names the upstream's
// own (its URI is the upstream's either way: it is what a read names).
func (c *catalog) resourceName(it shown) string {
	if c.view.Names == NamesOriginal {
		return ""
	}
	return ToolName(it.entry.ID)
}

// withRaw is e's upstream definition decoded into v, verbatim but for its
// name (set to name unless that is "") and the capability id added to its
// _meta.
func withRaw[T any](v *T, e plexus.Entry, name string, setName func(string), setMeta func(mcp.Meta)) *T {
	var meta struct {
		Meta mcp.Meta `json:"_meta"`
	}
	if err := json.Unmarshal(e.MCP.Raw, v); err != nil && name == "" {
		name = e.MCP.OriginName
	}
	if name != "" {
		setName(name)
	}
	m := mcp.Meta{}
	if json.Unmarshal(e.MCP.Raw, &meta) == nil {
		maps.Copy(m, meta.Meta)
	}
	m[MetaCapability] = e.ID
	setMeta(m)
	return v
}

// readResource answers resources/read: the resource the URI names in the
// view, or the one template of the view the URI matches (its variables
// the call's input), read through the gateway like any call (a read-verb
// grant, the owner's approval when there is none, the journal). A URI
// outside the view is refused and nothing runs.
func (s *Server) readResource(ctx context.Context, l *link, c *catalog, req *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
	uri := req.Params.URI
	entry, input, err := c.resource(uri)
	if err != nil {
		return nil, err
	}
	p := &progress{ctx: ctx, ss: req.Session, token: req.Params.GetProgressToken()}
	p.caps, p.sessionless = declared(req.Session, req.ClientCapabilities())
	resp, answer, err := s.run(ctx, l, entry, what{kind: "the MCP resource", name: uri}, input, p)
	if err != nil {
		return nil, err
	}
	var out mcp.ReadResourceResult
	if err := upstreamResult(entry, resp, answer, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// resource is the entry the view shows at uri, with the input a read of it
// takes.
func (c *catalog) resource(uri string) (plexus.Entry, map[string]any, error) {
	for _, it := range c.resources {
		if it.name == uri {
			return it.entry, map[string]any{}, nil
		}
	}
	var hits []shown
	var inputs []map[string]any
	for _, it := range c.templates {
		if input, ok := matchTemplate(it.name, uri); ok {
			hits = append(hits, it)
			inputs = append(inputs, input)
		}
	}
	switch len(hits) {
	case 0:
		return plexus.Entry{}, nil, mcp.ResourceNotFoundError(uri)
	case 1:
		return hits[0].entry, inputs[0], nil
	}
	ids := make([]string, len(hits))
	for i, h := range hits {
		ids[i] = h.entry.ID
	}
	return plexus.Entry{}, nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams,
		Message: fmt.Sprintf("the URI matches %d resource templates (%s): ask the owner to narrow this agent's view", len(hits), strings.Join(ids, ", "))}
}

// matchTemplate is the variables of tmpl that uri expands from, when it
// does — exactly: the upstream transport expands them again, and the read
// must reach uri itself.
func matchTemplate(tmpl, uri string) (map[string]any, bool) {
	t, err := uritemplate.New(tmpl)
	if err != nil {
		return nil, false
	}
	vals := t.Match(uri)
	if vals == nil {
		return nil, false
	}
	if again, err := t.Expand(vals); err != nil || again != uri {
		return nil, false
	}
	input := map[string]any{}
	for _, name := range t.Varnames() {
		input[name] = vals.Get(name).String()
	}
	return input, true
}

// upstreamResult decodes the upstream's result of a read or get into out,
// or answers why there is none: a call that ended before running
// (answer), or one the gateway refused or that failed, as a JSON-RPC error
// carrying the Plexus error in its data.
func upstreamResult(entry plexus.Entry, resp plexus.InvokeResponse, answer *mcp.CallToolResult, out any) error {
	if answer == nil && !resp.OK {
		body := resp.Error
		if body == nil {
			body = &plexus.ErrorBody{Code: plexus.CodeInternalError, Message: "the call failed without an error"}
		}
		answer = errorResult(body, entry.ID)
	}
	if answer != nil {
		data, err := json.Marshal(answer.Meta)
		if err != nil {
			data = nil
		}
		var msg strings.Builder
		for _, c := range answer.Content {
			if tc, ok := c.(*mcp.TextContent); ok {
				msg.WriteString(tc.Text)
			}
		}
		return &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: msg.String(), Data: data}
	}
	if len(resp.MCPResult) == 0 {
		return &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: entry.ID + " answered no MCP result"}
	}
	if err := json.Unmarshal(resp.MCPResult, out); err != nil {
		return &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: entry.ID + ": the upstream's result does not decode: " + err.Error()}
	}
	return nil
}
