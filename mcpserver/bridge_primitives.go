package mcpserver

import (
	"context"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// forwardPrimitive forwards a host's resource or prompt request to the
// daemon: only what the method names (cursor, URI, prompt name and
// arguments), none of the host's _meta, which names its own protocol
// version.
func forwardPrimitive(ctx context.Context, up *mcp.ClientSession, method string, req mcp.Request) (mcp.Result, error) {
	switch method {
	case "resources/list":
		p := &mcp.ListResourcesParams{}
		if in := req.(*mcp.ListResourcesRequest).Params; in != nil {
			p.Cursor = in.Cursor
		}
		return up.ListResources(ctx, p)
	case "resources/templates/list":
		p := &mcp.ListResourceTemplatesParams{}
		if in := req.(*mcp.ListResourceTemplatesRequest).Params; in != nil {
			p.Cursor = in.Cursor
		}
		return up.ListResourceTemplates(ctx, p)
	case "resources/read":
		return up.ReadResource(ctx, &mcp.ReadResourceParams{URI: req.(*mcp.ReadResourceRequest).Params.URI})
	case "prompts/list":
		p := &mcp.ListPromptsParams{}
		if in := req.(*mcp.ListPromptsRequest).Params; in != nil {
			p.Cursor = in.Cursor
		}
		return up.ListPrompts(ctx, p)
	}
	in := req.(*mcp.GetPromptRequest).Params
	return up.GetPrompt(ctx, &mcp.GetPromptParams{Name: in.Name, Arguments: in.Arguments})
}

// complete forwards a completion (its ref, argument and context) to the
// daemon.
func (b *bridge) complete(ctx context.Context, req *mcp.CompleteRequest) (*mcp.CompleteResult, error) {
	up, err := b.session(ctx, req)
	if err != nil {
		return nil, err
	}
	res, err := up.Complete(ctx, &mcp.CompleteParams{Ref: req.Params.Ref, Argument: req.Params.Argument, Context: req.Params.Context})
	return res, b.failed(up, err)
}

// subscribe forwards a subscription to the daemon. One made before the
// daemon restarted is not made again: the host subscribes anew after the
// list_changed it is sent then.
func (b *bridge) subscribe(ctx context.Context, req *mcp.SubscribeRequest) error {
	up, err := b.session(ctx, req)
	if err != nil {
		return err
	}
	return b.failed(up, up.Subscribe(ctx, &mcp.SubscribeParams{URI: req.Params.URI}))
}

// unsubscribe forwards an unsubscription. The SDK unsubscribes a
// 2026-07-28 host when its subscriptions/listen stream ends, with that
// stream's context ended: the daemon is told all the same.
func (b *bridge) unsubscribe(ctx context.Context, req *mcp.UnsubscribeRequest) error {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), unsubscribeWait)
	defer cancel()
	up, err := b.session(ctx, req)
	if err != nil {
		return err
	}
	return b.failed(up, up.Unsubscribe(ctx, &mcp.UnsubscribeParams{URI: req.Params.URI}))
}

// updated hands the daemon's update of a resource to the host, which the
// SDK sends it only if it subscribed.
func (b *bridge) updated(ctx context.Context, req *mcp.ResourceUpdatedNotificationRequest) {
	if req.Params == nil {
		return
	}
	if err := b.srv.ResourceUpdated(ctx, &mcp.ResourceUpdatedNotificationParams{URI: req.Params.URI}); err != nil {
		b.o.Logger.Debug("relay a resource update to the host", "err", err)
	}
}

// unsubscribeWait bounds an unsubscription whose request has ended.
const unsubscribeWait = 10 * time.Second
