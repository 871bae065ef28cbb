package mcpclient

import (
	"encoding/json"
	"fmt"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestSpeaksOnlyNewer: only a refusal listing versions, none older than
// 2026-07-28, spares connect the plain initialize.
func TestSpeaksOnlyNewer(t *testing.T) {
	refusal := func(code int64, data string) error {
		werr := &jsonrpc.Error{Code: code, Message: "Unsupported protocol version"}
		if data != "" {
			werr.Data = json.RawMessage(data)
		}
		return fmt.Errorf("calling \"initialize\": %w", werr)
	}
	for _, tc := range []struct {
		name string
		err  error
		want bool
	}{
		{"Only0728", refusal(mcp.CodeUnsupportedProtocolVersion, `{"supported":["2026-07-28"],"requested":"2025-11-25"}`), true},
		{"Legacy", refusal(mcp.CodeUnsupportedProtocolVersion, `{"supported":["2025-11-25","2025-06-18"]}`), false},
		{"Mixed", refusal(mcp.CodeUnsupportedProtocolVersion, `{"supported":["2026-07-28","2025-11-25"]}`), false},
		{"EmptyList", refusal(mcp.CodeUnsupportedProtocolVersion, `{"supported":[]}`), false},
		{"NoData", refusal(mcp.CodeUnsupportedProtocolVersion, ""), false},
		{"BadData", refusal(mcp.CodeUnsupportedProtocolVersion, `"2026-07-28"`), false},
		{"OtherCode", refusal(jsonrpc.CodeInvalidParams, `{"supported":["2026-07-28"]}`), false},
		{"NotJSONRPC", fmt.Errorf("Bad Request"), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := speaksOnlyNewer(tc.err); got != tc.want {
				t.Errorf("speaksOnlyNewer(%v) = %v, want %v", tc.err, got, tc.want)
			}
		})
	}
}
