//lint:file-ignore SA1019 sampling, elicitation, roots and logging, deprecated from 2026-07-28 but served through its deprecation window, are what Plexus relays

package mcpserver

import (
	"context"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// clientOptions are the options of the bridge's session with the daemon:
// progress relayed, and what the daemon passes on from an ingested server
// while a call runs (sampling, elicitation, roots, log messages) asked of
// the host, the bridge's one host. The bridge declares to the daemon what
// the host declared to it, no more, and of that no more than the daemon
// relays (form elicitation, sampling without tools), which it refuses
// besides; the daemon has already said in each elicitation's message
// which server asks.
func (b *bridge) clientOptions(ss *mcp.ServerSession) *mcp.ClientOptions {
	opts := &mcp.ClientOptions{ProgressNotificationHandler: b.relay, Capabilities: &mcp.ClientCapabilities{}}
	var caps *mcp.ClientCapabilities
	if ss != nil && ss.InitializeParams() != nil {
		caps = ss.InitializeParams().Capabilities
	}
	if caps == nil {
		return opts
	}
	if caps.Sampling != nil {
		opts.Capabilities.Sampling = &mcp.SamplingCapabilities{Context: caps.Sampling.Context}
		opts.CreateMessageWithToolsHandler = func(ctx context.Context, req *mcp.CreateMessageWithToolsRequest) (*mcp.CreateMessageWithToolsResult, error) {
			if err := undeclared(req.Params); err != nil {
				return nil, err
			}
			return ss.CreateMessageWithTools(ctx, req.Params)
		}
	}
	if caps.Elicitation != nil {
		opts.Capabilities.Elicitation = &mcp.ElicitationCapabilities{Form: &mcp.FormElicitationCapabilities{}}
		opts.ElicitationHandler = func(ctx context.Context, req *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
			if err := undeclared(req.Params); err != nil {
				return nil, err
			}
			return ss.Elicit(ctx, req.Params)
		}
	}
	if caps.RootsV2 != nil {
		opts.Capabilities.RootsV2 = &mcp.RootCapabilities{}
	}
	opts.LoggingMessageHandler = func(ctx context.Context, req *mcp.LoggingMessageRequest) {
		if err := ss.Log(ctx, req.Params); err != nil {
			b.o.Logger.Debug("relay a log message to the host", "err", err)
		}
	}
	return opts
}

// relayRoots answers the daemon's roots/list with the host's roots: the
// SDK's client would answer from its own list.
func relayRoots(ss *mcp.ServerSession) mcp.Middleware {
	return func(next mcp.MethodHandler) mcp.MethodHandler {
		return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
			p, ok := req.GetParams().(*mcp.ListRootsParams)
			if method != "roots/list" || !ok || ss == nil {
				return next(ctx, method, req)
			}
			return ss.ListRoots(ctx, p)
		}
	}
}
