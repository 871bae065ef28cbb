package mcpserver

import (
	"encoding/json"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// shaped is res as a 2026-07-28 host must get it, which the SDK does only
// for the results its own handlers answer, and the front door answers
// these before them: a list says only this agent may cache it (it is the
// agent's view), and a call, read or get says it is complete
// ("resultType", settable only through the result's JSON). Other hosts
// get res as it is, but for the lists' cacheScope, which they ignore.
func shaped(req mcp.Request, res mcp.Result) mcp.Result {
	switch r := res.(type) {
	case *mcp.ListToolsResult:
		r.CacheScope = "private"
	case *mcp.ListResourcesResult:
		r.CacheScope = "private"
	case *mcp.ListResourceTemplatesResult:
		r.CacheScope = "private"
	case *mcp.ListPromptsResult:
		r.CacheScope = "private"
	}
	ss, ok := req.GetSession().(*mcp.ServerSession)
	if !ok || ss == nil || res == nil {
		return res
	}
	if ip := ss.InitializeParams(); ip == nil || ip.ProtocolVersion < newProtocol {
		return res
	}
	switch r := res.(type) {
	case *mcp.CallToolResult:
		return complete(r)
	case *mcp.GetPromptResult:
		return complete(r)
	case *mcp.ReadResourceResult:
		return complete(r)
	}
	return res
}

// complete is res with "resultType": "complete" set; res itself when it
// cannot be re-read.
func complete[T any](res *T) *T {
	if res == nil {
		return res
	}
	b, err := json.Marshal(res)
	if err != nil {
		return res
	}
	var wire map[string]json.RawMessage
	if err := json.Unmarshal(b, &wire); err != nil {
		return res
	}
	wire["resultType"] = json.RawMessage(`"complete"`)
	if b, err = json.Marshal(wire); err != nil {
		return res
	}
	var out T
	if err := json.Unmarshal(b, &out); err != nil {
		return res
	}
	return &out
}
