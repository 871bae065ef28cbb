package mcpserver

import (
	"encoding/json"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// shaped is res as a 2026-07-28 host must get it, which the SDK does only
// for the results its own handlers answer, and the front door answers
// these before them: a list says only this agent may cache it (it is the
// agent's view), and a call, read or get says it is complete
// ("resultType", settable only through the result's JSON), or that it
// asks the host first. Other hosts
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
		return withResultType(r, r.InputRequests != nil)
	case *mcp.GetPromptResult:
		return withResultType(r, r.InputRequests != nil)
	case *mcp.ReadResourceResult:
		return withResultType(r, r.InputRequests != nil)
	}
	return res
}

// withResultType is res with its "resultType" set: input_required when
// it asks the host (inputs.go), complete otherwise; res itself when it
// cannot be re-read.
func withResultType[T any](res *T, asks bool) *T {
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
	if asks {
		wire["resultType"] = json.RawMessage(`"input_required"`)
		delete(wire, "content") // an input_required result has none
	}
	if b, err = json.Marshal(wire); err != nil {
		return res
	}
	var out T
	if err := json.Unmarshal(b, &out); err != nil {
		return res
	}
	return &out
}
