package mcpclient_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/plexus-gw/plexus"
	"github.com/plexus-gw/plexus/transports/mcpclient"
)

// restartable is an SDK server over Streamable HTTP whose process can be
// "restarted": a new server (knowing no session, no subscription) takes
// over the same address, and the old connections are cut.
type restartable struct {
	ts      *httptest.Server
	handler atomic.Pointer[http.Handler]
	srv     atomic.Pointer[mcp.Server]
	subbed  chan string // every resources/subscribe the servers took
}

const watchedURI = "file:///notes/today.md"

func newRestartable(t *testing.T) *restartable {
	r := &restartable{subbed: make(chan string, 16)}
	r.start()
	r.ts = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		(*r.handler.Load()).ServeHTTP(w, req)
	}))
	t.Cleanup(r.ts.Close)
	return r
}

// start puts a fresh server behind the address.
func (r *restartable) start() {
	srv := mcp.NewServer(&mcp.Implementation{Name: "notes", Version: "1"}, &mcp.ServerOptions{
		SubscribeHandler: func(_ context.Context, req *mcp.SubscribeRequest) error {
			r.subbed <- req.Params.URI
			return nil
		},
		UnsubscribeHandler: func(context.Context, *mcp.UnsubscribeRequest) error { return nil },
	})
	srv.AddResource(&mcp.Resource{URI: watchedURI, Name: "today"}, func(context.Context, *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
		return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{URI: watchedURI, Text: "hi"}}}, nil
	})
	var h http.Handler = mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil)
	r.srv.Store(srv)
	r.handler.Store(&h)
}

func (r *restartable) restart(t *testing.T) {
	old := r.srv.Load()
	r.start()
	r.ts.CloseClientConnections()
	for ss := range old.Sessions() {
		if err := ss.Close(); err != nil {
			t.Logf("close the old server's session: %v", err)
		}
	}
}

func (r *restartable) update(t *testing.T) {
	t.Helper()
	if err := r.srv.Load().ResourceUpdated(context.Background(), &mcp.ResourceUpdatedNotificationParams{URI: watchedURI}); err != nil {
		t.Fatal(err)
	}
}

func awaitString(t *testing.T, ch <-chan string, what string) string {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(30 * time.Second):
		t.Fatalf("no %s came", what)
		return ""
	}
}

// TestSubscriptionRenewedAfterReconnect: a resource subscription outlives
// the server's session. After the server restarts (a new process knows no
// subscription) the client subscribes again on its new session, says the
// resource may have changed meanwhile, and the server's later updates
// reach the watcher as before; an unsubscribe then ends it upstream.
func TestSubscriptionRenewedAfterReconnect(t *testing.T) {
	failOnLeakedGoroutines(t)
	up := newRestartable(t)
	h := startClient(t, "notes", mcpclient.ServerConfig{URL: up.ts.URL}, mcpclient.Options{})
	h.waitReady(t)
	var entry plexus.Entry
	for _, e := range h.entries(t) {
		if e.MCP != nil && e.MCP.Primitive == "resource" {
			entry = e
		}
	}
	updated := make(chan string, 16)
	unsub, err := h.tr.SubscribeResource(context.Background(), entry, watchedURI, func() { updated <- "updated" })
	if err != nil {
		t.Fatalf("subscribe: %v", err)
	}
	awaitString(t, up.subbed, "first subscription")
	up.update(t)
	awaitString(t, updated, "update before the restart")

	up.restart(t)
	if got := awaitString(t, up.subbed, "subscription renewed on the new session"); got != watchedURI {
		t.Errorf("renewed %s, want %s", got, watchedURI)
	}
	awaitString(t, updated, "the update that says the resource may have changed while the server was away")
	up.update(t)
	awaitString(t, updated, "update after the restart")
	if n := h.c.Health(context.Background()).Restarts; n != 1 {
		t.Errorf("restarts = %d, want 1", n)
	}

	unsub()
	up.update(t)
	// An update after the unsubscribe reaches nobody; the next subscription
	// (proof the server's notices are flowing) is the only thing seen.
	unsub2, err := h.tr.SubscribeResource(context.Background(), entry, watchedURI, func() {})
	if err != nil {
		t.Fatal(err)
	}
	awaitString(t, up.subbed, "subscription after the unsubscribe")
	unsub2()
	select {
	case <-updated:
		t.Error("an update reached a watcher that had unsubscribed")
	default:
	}
	h.stop()
}
