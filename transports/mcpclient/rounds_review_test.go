package mcpclient_test

import (
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/plexus-gw/plexus/transports/mcpclient"
)

// nullInputServer is a stdio MCP server (a shell script) with one tool, t,
// whose result has an inputRequests member whose value is null.
const nullInputServer = `while IFS= read -r line; do
  id=$(printf '%s' "$line" | sed -n 's/^{"jsonrpc":"2.0","id":\([^,]*\),.*/\1/p')
  case "$line" in
    *'"method":"initialize"'*) printf '{"jsonrpc":"2.0","id":%s,"result":{"protocolVersion":"2025-06-18","capabilities":{"tools":{},"prompts":{}},"serverInfo":{"name":"n","version":"1"}}}\n' "$id";;
    *'"method":"tools/list"'*) printf '{"jsonrpc":"2.0","id":%s,"result":{"tools":[{"name":"t","inputSchema":{"type":"object"}}]}}\n' "$id";;
    *'"method":"prompts/list"'*) printf '{"jsonrpc":"2.0","id":%s,"result":{"prompts":[{"name":"p"}]}}\n' "$id";;
    *'"method":"prompts/get"'*) printf '{"jsonrpc":"2.0","id":%s,"result":{"messages":[],"inputRequests":{"a":null}}}\n' "$id";;
    *'"method":"tools/call"'*) printf '{"jsonrpc":"2.0","id":%s,"result":{"content":[],"inputRequests":{"a":null}}}\n' "$id";;
    *) [ -n "$id" ] && printf '{"jsonrpc":"2.0","id":%s,"result":{}}\n' "$id";;
  esac
done`

// Review finding: an upstream server's tools/call result with
// "inputRequests":{"a":null} panics the goroutine that makes the call
// (the SDK's InputRequestMap.UnmarshalJSON dereferences nil, reached from
// inputRequired on the pass-through path). The call runs in a child
// process here, so that the panic shows as its exit and does not end this
// test binary. The call should fail with an error; nothing should panic.
func TestNullInputRequestPanicsReview(t *testing.T) {
	if id := os.Getenv("PLEXUS_REVIEW_NULL_INPUT"); id != "" {
		h := startClient(t, "n", mcpclient.ServerConfig{Command: "/bin/sh", Args: []string{"-c", nullInputServer}}, mcpclient.Options{})
		h.waitReady(t)
		r := h.call(t, t.Context(), id, nil, nil)
		t.Logf("the call: ok=%v error=%v", r.OK, r.Error)
		return
	}
	for _, id := range []string{"mcp.n.t", "mcp.n.prompt.p"} {
		cmd := exec.Command(os.Args[0], "-test.run=^TestNullInputRequestPanicsReview$", "-test.count=1", "-test.v")
		cmd.Env = append(os.Environ(), "PLEXUS_REVIEW_NULL_INPUT="+id)
		out, err := cmd.CombinedOutput()
		if i := strings.Index(string(out), "panic:"); i >= 0 {
			t.Errorf("%s: the call panicked the process (%v):\n%.1200s", id, err, out[i:])
		} else if err != nil {
			t.Errorf("%s: the child failed without a panic (%v):\n%s", id, err, out)
		}
	}
}
