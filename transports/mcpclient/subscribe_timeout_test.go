package mcpclient_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/plexus-gw/plexus"
	"github.com/plexus-gw/plexus/transports/mcpclient"
)

// TestSubscribeToSilentServerEnds: a server that never answers
// resources/subscribe holds the caller (whose context may live as long as
// a host's stream) only for the bound, and the caller is told why.
func TestSubscribeToSilentServerEnds(t *testing.T) {
	release := make(chan struct{})
	srv := mcp.NewServer(&mcp.Implementation{Name: "notes", Version: "1"}, &mcp.ServerOptions{
		SubscribeHandler: func(ctx context.Context, _ *mcp.SubscribeRequest) error {
			select {
			case <-release:
			case <-ctx.Done():
			}
			return nil
		},
		UnsubscribeHandler: func(context.Context, *mcp.UnsubscribeRequest) error { return nil },
	})
	srv.AddResource(&mcp.Resource{URI: watchedURI, Name: "today"}, func(context.Context, *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
		return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{URI: watchedURI, Text: "hi"}}}, nil
	})
	ts := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil))
	t.Cleanup(ts.Close)
	t.Cleanup(func() { close(release) })
	h := startClient(t, "notes", mcpclient.ServerConfig{URL: ts.URL}, mcpclient.Options{})
	h.waitReady(t)
	var entry plexus.Entry
	for _, e := range h.entries(t) {
		if e.MCP != nil && e.MCP.Primitive == "resource" {
			entry = e
		}
	}
	_, err := h.tr.SubscribeResource(context.Background(), entry, watchedURI, func() {})
	var perr *plexus.Error
	if !errors.As(err, &perr) || perr.Code != plexus.CodeTransportError || !strings.Contains(perr.Message, "did not answer resources/subscribe") {
		t.Fatalf("subscribe to a silent server: %v, want a transport_error saying it did not answer", err)
	}
	h.stop()
}
