package mcpserver_test

import (
	"context"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/plexus-gw/plexus/mcpserver"
)

// TestStuckUpstreamSubscribeFreezesNoOne: an upstream that never answers
// resources/subscribe, and a refresh meanwhile, leave another agent's
// initialize free to go on.
func TestStuckUpstreamSubscribeFreezesNoOne(t *testing.T) {
	vf := viewFile(t)
	f := newFixture(t, mcpserver.Options{Views: vf})
	release, entered := make(chan struct{}), make(chan struct{}, 1)
	t.Cleanup(func() { close(release) })
	_, s := newLibraryWith("lib", &mcp.ServerOptions{
		SubscribeHandler: func(ctx context.Context, _ *mcp.SubscribeRequest) error {
			entered <- struct{}{}
			select {
			case <-release:
			case <-ctx.Done():
			}
			return nil
		},
		UnsubscribeHandler: func(context.Context, *mcp.UnsubscribeRequest) error { return nil }})
	f.addMCP("lib", s)
	gemini := f.connect(f.agent("gemini"), "gemini-cli", nil)
	subscribed := make(chan error, 1)
	go func() { subscribed <- gemini.Subscribe(context.Background(), &mcp.SubscribeParams{URI: readme}) }()
	<-entered
	pat := f.agent("claude")
	f.setView(vf, "cursor", mcpserver.View{Only: []string{libTool}}) // any refresh
	time.Sleep(200 * time.Millisecond)                                // let the refresh reach the watches
	done := make(chan struct{})
	go func() { f.connect(pat, "claude-code", nil); close(done) }()
	select {
	case <-done:
	case err := <-subscribed:
		t.Fatalf("the stuck subscribe ended first (%v): the test proves nothing", err)
	case <-time.After(5 * time.Second):
		t.Fatal("claude's initialize hangs while another agent's upstream subscribe is stuck")
	}
}
