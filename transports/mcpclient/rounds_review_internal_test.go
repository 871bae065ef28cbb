package mcpclient

import (
	"encoding/json"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Review finding: inputRequired claims to read a result "as the SDK reads
// it", but first looks for the literal bytes "inputRequests". A key the
// server wrote with an escape (valid JSON, the same member to any decoder,
// the SDK's included) is missed: the pass-through (passthrough.go,
// passhttp.go) hands the host an input-required result as if it were the
// call's answer, where the SDK's client (and answerInputs on the SDK's
// path) would go another round.
func TestInputRequiredEscapedKeyReview(t *testing.T) {
	for _, raw := range []string{
		`{"inputRequest\u0073":{"r":{"method":"roots/list","params":{}}},"requestState":"s1"}`,
		`{"\u0069nputRequests":{"r":{"method":"roots/list","params":{}}},"requestState":"s1"}`,
	} {
		var sdk mcp.CallToolResult
		if err := json.Unmarshal([]byte(raw), &sdk); err != nil {
			t.Fatalf("the SDK's decoder: %v", err)
		}
		reqs, state := inputRequired([]byte(raw))
		if len(reqs) != len(sdk.InputRequests) || state != sdk.RequestState {
			t.Errorf("inputRequired(%s) = %d input requests, state %q; the SDK reads %d, state %q", raw, len(reqs), state, len(sdk.InputRequests), sdk.RequestState)
		}
	}
}
