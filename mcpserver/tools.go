package mcpserver

import (
	"context"
	"encoding/json"
	"slices"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/plexus-gw/plexus"
)

// MetaCapability is the tool _meta key holding the capability id.
const MetaCapability = "plexus/capability"

// emptyInput is the input schema of an entry that declares none.
var emptyInput = json.RawMessage(`{"type":"object"}`)

// listTools answers tools/list: the link's catalog as tools, in one page.
func (s *Server) listTools(ctx context.Context, l *link) (*mcp.ListToolsResult, error) {
	c, err := s.catalog(ctx, l)
	if err != nil {
		return nil, err
	}
	return &mcp.ListToolsResult{Tools: c.listedTools()}, nil
}

// manifest is the link's current manifest; a session that ended (its
// agent revoked, or expired) forgets the link, so the host's next request
// is told to start over and meets the PAT check again.
func (s *Server) manifest(ctx context.Context, l *link) (plexus.Manifest, error) {
	resp, err := s.b.Sessions.Manifest(ctx, l.creds())
	if err != nil {
		return plexus.Manifest{}, s.gatewayError(l, err)
	}
	return resp.Manifest, nil
}

// gatewayError is the JSON-RPC error of a gateway failure outside a call.
func (s *Server) gatewayError(l *link, err error) error {
	e := plexus.AsError(err)
	if e.Code == plexus.CodeSessionExpired {
		s.links.forget(l)
		return &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: "the Plexus session ended (the agent was revoked, or the session expired): reconnect"}
	}
	return &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: string(e.Code) + ": " + e.Message}
}

// projected is a manifest entry shown as a tool.
type projected struct {
	entry plexus.Entry
	tool  *mcp.Tool
	// headers are the arguments its input schema mirrors into Mcp-Param
	// headers (paramheaders.go), found once per catalog.
	headers []paramBinding
}

// project shows the callable entries as tools, in manifest order, named
// by names (a [View.Names]). Skills are documents, and an MCP server's
// resources and prompts are not tools: neither is shown. Entries whose
// names collide (a hash collision between hashed names, see [ToolName]) are
// all left out rather than one shadowing another.
func project(entries []plexus.Entry, names string) []projected {
	out := make([]projected, 0, len(entries))
	count := map[string]int{}
	for _, e := range entries {
		if primitiveOf(e) != primTool {
			continue
		}
		t := toolOf(e)
		t.Name = shownName(e, names)
		count[t.Name]++
		var headers []paramBinding
		if e.IO != nil {
			headers = bindings(e.IO.Input)
		}
		out = append(out, projected{entry: e, tool: t, headers: headers})
	}
	return slices.DeleteFunc(out, func(p projected) bool { return count[p.tool.Name] > 1 })
}

// toolOf is e as an MCP tool: its schemas verbatim, its hints from the verbs
// a call needs.
func toolOf(e plexus.Entry) *mcp.Tool {
	t := &mcp.Tool{Name: ToolName(e.ID), Title: e.Label, Description: e.Describe, InputSchema: emptyInput,
		Meta: mcp.Meta{MetaCapability: e.ID}}
	if e.IO != nil && len(e.IO.Input) > 0 {
		t.InputSchema = e.IO.Input
	}
	if e.IO != nil && len(e.IO.Output) > 0 {
		t.OutputSchema = e.IO.Output
	}
	readOnly := !slices.ContainsFunc(requiredVerbs(e), func(v plexus.Verb) bool { return v != plexus.VerbRead })
	t.Annotations = &mcp.ToolAnnotations{Title: e.Label, ReadOnlyHint: readOnly, DestructiveHint: &[]bool{!readOnly}[0]}
	return t
}

// requiredVerbs is what a call of e needs a scope to carry: its grants, or
// read when it names none (as the agent client decides).
func requiredVerbs(e plexus.Entry) []plexus.Verb {
	v := plexus.NormalizeVerbs(e.Grants)
	if len(v) == 0 {
		return []plexus.Verb{plexus.VerbRead}
	}
	return v
}

// clip shortens s to n bytes for an error message.
func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}
