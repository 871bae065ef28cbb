package mcpserver

import (
	"encoding/json"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// completed is res marked complete ("resultType": "complete") for a host
// on 2026-07-28, whose results must say whether they are complete or need
// input. The SDK marks the results of the tools it runs itself; the front
// door answers tools/call before them, and the mark is settable only
// through the result's JSON. Other hosts get res as it is.
func completed(req *mcp.CallToolRequest, res *mcp.CallToolResult) *mcp.CallToolResult {
	if res == nil || req.Session == nil {
		return res
	}
	if ip := req.Session.InitializeParams(); ip == nil || ip.ProtocolVersion < newProtocol {
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
	var out mcp.CallToolResult
	if err := json.Unmarshal(b, &out); err != nil {
		return res
	}
	return &out
}
