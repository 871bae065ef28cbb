package mcpserver

import (
	"encoding/json"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/plexus-gw/plexus"
)

// The MCP primitives of an ingested entry (its mcp.primitive, and
// resourceTemplate for a resource whose raw definition has a uriTemplate),
// as the mcpclient transport writes them.
const (
	primTool     = "tool"
	primResource = "resource"
	primTemplate = "resourceTemplate"
	primPrompt   = "prompt"
)

// catalog is what one link is shown now: the agent's manifest through the
// owner's view, sorted into MCP primitives. It is rebuilt when the catalog's
// revision or the view changes (index.go), so a source added, a definition
// held or a view changed shows at the next request.
type catalog struct {
	view View
	// tools are the capabilities shown as tools (in search mode, those the
	// search tools reach).
	tools []projected
	// byName indexes tools by name.
	byName    map[string]int
	resources []shown // static resources: the upstream URI
	templates []shown // resource templates: the upstream uriTemplate
	prompts   []shown
	// search is set when the host is shown the search tools instead.
	search bool
	// headerBound is set when a tool binds an argument to a header.
	headerBound bool
}

// shown is an entry shown as a resource, template or prompt under name.
type shown struct {
	entry plexus.Entry
	name  string
}

// buildCatalog sorts the entries the view shows into primitives. With
// original names only the view's one MCP server's items are kept, so a
// second server can never stand in for the first under a shared name; and
// any name (or URI) two shown items would share is shown for neither.
func buildCatalog(entries []plexus.Entry, v View) *catalog {
	c := &catalog{view: v}
	server := ""
	if v.Names == NamesOriginal {
		var err error
		if server, err = v.originalServer(); err != nil {
			return c // an invalid view shows nothing (Validate says why)
		}
	}
	var kept []plexus.Entry
	for _, e := range entries {
		if !v.shows(e.ID) || v.Names == NamesOriginal && (e.MCP == nil || e.MCP.ServerID != server) {
			continue
		}
		kept = append(kept, e)
	}
	c.tools = project(kept, v.Names)
	c.byName = make(map[string]int, len(c.tools))
	for i, p := range c.tools {
		c.byName[p.tool.Name] = i
		c.headerBound = c.headerBound || len(p.headers) > 0
	}
	for _, e := range kept {
		switch primitiveOf(e) {
		case primResource:
			c.resources = append(c.resources, shown{e, e.MCP.OriginName})
		case primTemplate:
			c.templates = append(c.templates, shown{e, e.MCP.OriginName})
		case primPrompt:
			c.prompts = append(c.prompts, shown{e, shownName(e, v.Names)})
		}
	}
	c.resources, c.templates, c.prompts = unique(c.resources), unique(c.templates), unique(c.prompts)
	c.search = v.searching(len(c.tools))
	return c
}

// primitiveOf is the MCP primitive an entry is shown as: a tool unless it
// is an ingested resource, resource template or prompt ("" for a skill).
func primitiveOf(e plexus.Entry) string {
	if e.Kind == plexus.KindSkill {
		return ""
	}
	if e.MCP == nil {
		return primTool
	}
	switch e.MCP.Primitive {
	case "", primTool:
		return primTool
	case primPrompt:
		return primPrompt
	case primResource:
		// A template's entry says "resource" too; its raw definition
		// has a uriTemplate where a resource has a uri.
		var r struct {
			URITemplate string `json:"uriTemplate"`
		}
		if json.Unmarshal(e.MCP.Raw, &r) == nil && r.URITemplate != "" {
			return primTemplate
		}
		return primResource
	}
	return "" // a primitive this front door does not know is not shown
}

// shownName is the name of a tool or prompt: its capability id by the
// naming rule, or its upstream name.
func shownName(e plexus.Entry, names string) string {
	if names == NamesOriginal && e.MCP != nil && e.MCP.OriginName != "" {
		return e.MCP.OriginName
	}
	return ToolName(e.ID)
}

// unique drops every item whose name another item shares.
func unique(items []shown) []shown {
	count := map[string]int{}
	for _, it := range items {
		count[it.name]++
	}
	out := items[:0]
	for _, it := range items {
		if count[it.name] == 1 {
			out = append(out, it)
		}
	}
	return out
}

// tool is the capability the view shows as tool name.
func (c *catalog) tool(name string) (plexus.Entry, error) {
	if i, ok := c.byName[name]; ok && !c.search {
		return c.tools[i].entry, nil
	}
	return plexus.Entry{}, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: "unknown tool: " + clip(name, 80) + " (tools/list shows the tools this agent may call)"}
}

// bindings are the header bindings of tool name, none in search mode,
// where the host calls the search tools.
func (c *catalog) bindings(name string) []paramBinding {
	if i, ok := c.byName[name]; ok && !c.search {
		return c.tools[i].headers
	}
	return nil
}

// byID is the entry of capability id, when the view shows it in any form.
func (c *catalog) byID(id string) (plexus.Entry, bool) {
	for _, p := range c.tools {
		if p.entry.ID == id {
			return p.entry, true
		}
	}
	for _, list := range [][]shown{c.resources, c.templates, c.prompts} {
		for _, it := range list {
			if it.entry.ID == id {
				return it.entry, true
			}
		}
	}
	return plexus.Entry{}, false
}

// listedTools is tools/list's answer: the capabilities, or the search
// tools.
func (c *catalog) listedTools() []*mcp.Tool {
	if c.search {
		return searchTools()
	}
	tools := make([]*mcp.Tool, 0, len(c.tools))
	for _, p := range c.tools {
		tools = append(tools, p.tool)
	}
	return tools
}
