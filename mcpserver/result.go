package mcpserver

import (
	"bytes"
	"encoding/json"
	"fmt"
	"path/filepath"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/plexus-gw/plexus"
)

// MetaError is the _meta key of a tool error's Plexus error (code,
// message, and the pending id where there is one).
const MetaError = "plexus/error"

// callResult is the gateway's answer as a tools/call result. An ingested
// MCP tool's own result (success, or its isError) passes through as the
// server gave it; any other success is its output as JSON text, and as
// structuredContent when the entry declares an output schema; any other
// failure is a tool error naming the Plexus code.
func callResult(entry plexus.Entry, resp plexus.InvokeResponse) *mcp.CallToolResult {
	if len(resp.MCPResult) > 0 && (resp.OK || resp.Error != nil && resp.Error.Code == plexus.CodeMCPToolError) {
		var r mcp.CallToolResult
		if err := json.Unmarshal(resp.MCPResult, &r); err == nil && (resp.OK || r.IsError) {
			return &r
		}
	}
	if !resp.OK {
		body := resp.Error
		if body == nil {
			body = &plexus.ErrorBody{Code: plexus.CodeInternalError, Message: "the call failed without an error"}
		}
		return errorResult(body, entry.ID)
	}
	text, err := json.Marshal(resp.Output)
	if err != nil {
		return errorResult(&plexus.ErrorBody{Code: plexus.CodeInternalError, Message: "the output could not be encoded"}, entry.ID)
	}
	r := &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: string(text)}}}
	if entry.IO != nil && len(entry.IO.Output) > 0 {
		// An output schema promises structuredContent: an object, whatever
		// Go type the transport gave it as.
		var obj map[string]any
		if json.Unmarshal(text, &obj) == nil && obj != nil {
			r.StructuredContent = obj
		}
	}
	return r
}

// passedResult is an ingested MCP tool's result passed to the host as
// the bytes its server sent (see [Server.toolResult]). The embedded result
// only says isError, and makes it an [mcp.Result].
type passedResult struct {
	*mcp.CallToolResult
	raw json.RawMessage
}

// MarshalJSON is the server's result, byte for byte.
func (r *passedResult) MarshalJSON() ([]byte, error) { return r.raw, nil }

// toolResult is the gateway's answer as req's result. An ingested MCP
// tool's own result (success, or its isError) passes to a host on the
// wire it came in on (a session of 2025-11-25 or earlier, as Plexus
// speaks to upstreams) as its server's bytes, which the mcp transport has
// already checked as the SDK's client decodes a tool result (a plain
// result of text blocks read in place, anything else decoded by the SDK
// into its CallToolResult; what it refuses never gets here), with isError
// read by its exact key as the host reads it: no decode into the SDK's
// types and encode back, byte for byte as over /invoke. A
// 2026-07-28 host's result is reshaped (shaped), and a front door with
// Middleware decodes it for them (they inspect results as the SDK's
// types): both get [callResult]'s.
func (s *Server) toolResult(req *mcp.CallToolRequest, entry plexus.Entry, resp plexus.InvokeResponse) mcp.Result {
	raw := bytes.TrimLeft(resp.MCPResult, " \t\r\n")
	passes := len(raw) > 0 && raw[0] == '{' && primitiveOf(entry) == primTool && entry.MCP != nil &&
		(resp.OK || resp.Error != nil && resp.Error.Code == plexus.CodeMCPToolError) && len(s.opts.Middleware) == 0
	if ss := sessionOf(req); passes && ss != nil {
		if ip := ss.InitializeParams(); ip != nil && ip.ProtocolVersion < newProtocol {
			return &passedResult{CallToolResult: &mcp.CallToolResult{IsError: !resp.OK}, raw: resp.MCPResult}
		}
	}
	return callResult(entry, resp)
}

// errorResult is a tool error carrying a Plexus error: its code in the text
// and in _meta.
func errorResult(e *plexus.ErrorBody, capability string) *mcp.CallToolResult {
	meta := map[string]any{"code": e.Code, "message": e.Message}
	if e.PendingID != "" {
		meta["pendingId"] = e.PendingID
	}
	r := &mcp.CallToolResult{IsError: true,
		Content: []mcp.Content{&mcp.TextContent{Text: fmt.Sprintf("Plexus refused or failed the call of %s (%s): %s", capability, e.Code, e.Message)}}}
	r.Meta = mcp.Meta{MetaError: meta, MetaCapability: capability}
	return r
}

// deniedResult is the owner's denial, with the reason the owner gave.
func deniedResult(capability, reason string) *mcp.CallToolResult {
	return errorResult(&plexus.ErrorBody{Code: plexus.CodeGrantRequired,
		Message: "the owner denied the request to call it: " + reason}, capability)
}

// undecidedResult is the answer of a call whose wait for the owner ended
// undecided: exactly how the owner approves, and that the call must be
// made again. The decision stays open; the next call waits on it.
func (s *Server) undecidedResult(capability, pendingID string) *mcp.CallToolResult {
	msg := fmt.Sprintf("the owner has not decided yet (waited %s); the call was not made. "+
		"To approve, run `plexus approve %s`", s.opts.ApprovalWait, pendingID)
	if s.opts.Inbox != "" {
		file := filepath.Join(s.opts.Inbox, pendingID+".md")
		if s.opts.Active != "" {
			msg += fmt.Sprintf(", or move %s into %s", file, s.opts.Active+string(filepath.Separator))
		} else {
			msg += ", or approve the decision file " + file
		}
	}
	msg += "; then call this tool again."
	return errorResult(&plexus.ErrorBody{Code: plexus.CodeGrantPendingUser, Message: msg, PendingID: pendingID}, capability)
}
