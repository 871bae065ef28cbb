package mcpserver

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/plexus-gw/plexus"
)

// TestBindings: a tool's header bindings are found once from its input
// schema, nested ones included; a schema that never names x-mcp-header,
// or does not read, binds nothing.
func TestBindings(t *testing.T) {
	for _, tc := range []struct {
		name, schema string
		want         []string // "path.to.arg=Header", sorted
	}{
		{"none", `{"type":"object","properties":{"q":{"type":"string"}}}`, nil},
		{"empty", ``, nil},
		{"top level", `{"properties":{"region":{"type":"string","x-mcp-header":"Region"},"n":{"type":"integer"}}}`, []string{"region=Region"}},
		{"nested", `{"properties":{"where":{"type":"object","properties":{"zone":{"x-mcp-header":"Zone"}}},"id":{"x-mcp-header":"Id"}}}`,
			[]string{"id=Id", "where.zone=Zone"}},
		{"not a string", `{"properties":{"region":{"x-mcp-header":7}}}`, nil},
		{"empty header", `{"properties":{"region":{"x-mcp-header":""}}}`, nil},
		{"unreadable", `{"properties":{"region":{"x-mcp-header":"Region"}`, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var got []string
			for _, b := range bindings(json.RawMessage(tc.schema)) {
				got = append(got, strings.Join(b.path, ".")+"="+b.header)
			}
			slices.Sort(got)
			if !slices.Equal(got, tc.want) {
				t.Errorf("bindings(%s) = %v, want %v", tc.schema, got, tc.want)
			}
		})
	}
}

// TestCatalogBindings: the catalog finds a tool's bindings by the name it
// shows, and knows whether any tool binds a header; search mode binds none.
func TestCatalogBindings(t *testing.T) {
	bound := testEntry("mcp.up.region", `{"properties":{"region":{"x-mcp-header":"Region"}}}`)
	plain := testEntry("mcp.up.plain", `{"properties":{"q":{"type":"string"}}}`)
	c := buildCatalog(bound, View{})
	if !c.headerBound || len(c.bindings(ToolName("mcp.up.region"))) != 1 {
		t.Errorf("bound catalog: headerBound %v, bindings %v", c.headerBound, c.bindings(ToolName("mcp.up.region")))
	}
	if c := buildCatalog(plain, View{}); c.headerBound || c.bindings(ToolName("mcp.up.plain")) != nil {
		t.Errorf("plain catalog: headerBound %v", c.headerBound)
	}
	if c := buildCatalog(bound, View{Mode: ModeSearch}); c.bindings(ToolName("mcp.up.region")) != nil {
		t.Error("search mode: a bound tool's bindings are used, want none (the host calls the search tools)")
	}
	if c.bindings("no_such_tool") != nil {
		t.Error("an unknown tool has bindings")
	}
}

// testEntry is an MCP tool entry whose input schema is schema.
func testEntry(id, schema string) []plexus.Entry {
	return []plexus.Entry{{ID: id, MCP: &plexus.MCPPassthrough{Primitive: primTool, OriginName: id},
		IO: &plexus.IOSchema{Input: json.RawMessage(schema)}}}
}
