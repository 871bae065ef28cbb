package mcpserver

import (
	"context"
	"fmt"
	"log/slog"
	"runtime"
	"runtime/debug"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// recovered is the outermost middleware of every SDK server the front door
// makes. The SDK answers each request on a goroutine of its own with no
// recover, so a panic while answering one host's request (a bug of
// Plexus's, or of the SDK reading what a server sent) would end the
// daemon, and every host's session and every call in flight with it. As
// net/http does for /invoke, the request fails alone instead: an internal
// error to the host, and the stack in the daemon's log (never the panic's
// value unless it is the runtime's own error: a value could hold what a
// host or server sent).
func recovered(log *slog.Logger) mcp.Middleware {
	return func(next mcp.MethodHandler) mcp.MethodHandler {
		return func(ctx context.Context, method string, req mcp.Request) (res mcp.Result, err error) {
			defer func() {
				p := recover()
				if p == nil {
					return
				}
				what := fmt.Sprintf("%T", p)
				if rerr, ok := p.(runtime.Error); ok {
					what = rerr.Error()
				}
				log.Error("mcp: answering a request panicked; that request fails", "method", method, "panic", what, "stack", string(debug.Stack()))
				res, err = nil, &jsonrpc.Error{Code: jsonrpc.CodeInternalError,
					Message: fmt.Sprintf("Plexus failed answering %s (an internal error; the daemon's log has it)", method)}
			}()
			return next(ctx, method, req)
		}
	}
}
