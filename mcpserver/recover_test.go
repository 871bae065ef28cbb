package mcpserver_test

import (
	"context"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/plexus-gw/plexus"
	"github.com/plexus-gw/plexus/mcpserver"
)

// crashOn is a crash injector: a middleware that panics on a tools/call
// whose arguments say "crash", as a bug in answering one request would.
func crashOn(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		if p, ok := req.GetParams().(*mcp.CallToolParamsRaw); ok && strings.Contains(string(p.Arguments), "crash") {
			var m map[string]int
			m["crash"]++ // a nil map: the runtime's own panic
		}
		return next(ctx, method, req)
	}
}

// TestPanicFailsOneRequest: a panic while the front door answers one
// request fails that request with an internal error and a log line with
// its stack; the daemon, the host's session and another host go on.
func TestPanicFailsOneRequest(t *testing.T) {
	for _, version := range []string{"2025-11-25", "2026-07-28"} {
		t.Run(version, func(t *testing.T) {
			f := newFixture(t, mcpserver.Options{Middleware: []mcp.Middleware{crashOn}})
			grant := standing("portal.docs.read", plexus.VerbRead)
			cs := f.connectVersion(f.agent("claude", grant), "claude-code", version, nil)
			other := f.connectVersion(f.agent("cursor", grant), "cursor", version, nil)
			ctx := context.Background()

			_, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "portal__docs__read", Arguments: map[string]any{"path": "crash"}})
			if err == nil || !strings.Contains(err.Error(), "internal error") {
				t.Fatalf("the crashing call answered %v, want an internal error", err)
			}
			if logs := f.logs.String(); !strings.Contains(logs, "answering a request panicked") || !strings.Contains(logs, "assignment to entry in nil map") {
				t.Errorf("the daemon's log does not tell the panic:\n%s", logs)
			}
			for name, s := range map[string]*mcp.ClientSession{"the same host": cs, "another host": other} {
				res := call(t, s, "portal__docs__read", map[string]any{"path": "hello.txt"})
				if res.IsError || text(res) == "" {
					t.Errorf("%s after the panic: %+v", name, res)
				}
			}
		})
	}
}
