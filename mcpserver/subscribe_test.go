package mcpserver_test

import (
	"context"
	"errors"
	"net"
	"net/http"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/plexus-gw/plexus"
	"github.com/plexus-gw/plexus/mcpserver"
)

const readme = "file:///lib/readme.md"

// restartingLibrary is the completing library served over Streamable HTTP
// on a fixed loopback address, that the test stops and starts again there
// as a new server (which knows no session and no subscription), as when
// the owner's MCP server restarts.
type restartingLibrary struct {
	t    *testing.T
	addr string
	up   *asked
	srv  *mcp.Server
	hs   *http.Server
	done chan struct{}
}

func newRestartingLibrary(t *testing.T) *restartingLibrary {
	r := &restartingLibrary{t: t, up: &asked{subbed: make(chan string, 16), unsubbed: make(chan string, 16)}}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	r.addr = ln.Addr().String()
	r.serve(ln)
	t.Cleanup(r.stop)
	return r
}

func (r *restartingLibrary) serve(ln net.Listener) {
	_, r.srv = newLibraryWith("lib", r.up.serverOptions())
	srv := r.srv
	r.hs = &http.Server{Handler: mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil)}
	r.done = make(chan struct{})
	go func(hs *http.Server, done chan struct{}) {
		defer close(done)
		if err := hs.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			r.t.Errorf("library: %v", err)
		}
	}(r.hs, r.done)
}

// stop ends the server: its connections and its sessions.
func (r *restartingLibrary) stop() {
	if err := r.hs.Close(); err != nil {
		r.t.Errorf("stop the library: %v", err)
	}
	<-r.done
	for ss := range r.srv.Sessions() {
		if err := ss.Close(); err != nil {
			r.t.Logf("close a library session: %v", err)
		}
	}
}

func (r *restartingLibrary) restart() {
	r.stop()
	ln, err := net.Listen("tcp", r.addr)
	if err != nil {
		r.t.Fatalf("listen again on %s: %v", r.addr, err)
	}
	r.serve(ln)
}

func (r *restartingLibrary) update(uri string) {
	r.t.Helper()
	if err := r.srv.ResourceUpdated(context.Background(), &mcp.ResourceUpdatedNotificationParams{URI: uri}); err != nil {
		r.t.Fatal(err)
	}
}

// updatesTo is the options of a host whose resource updates are sent on
// the channel answered.
func updatesTo() (chan string, *mcp.ClientOptions) {
	ch := make(chan string, 16)
	return ch, &mcp.ClientOptions{ResourceUpdatedHandler: func(_ context.Context, r *mcp.ResourceUpdatedNotificationRequest) { ch <- r.Params.URI }}
}

// TestSubscriptionSurvivesUpstreamRestart: a host subscribed (through /mcp)
// to an ingested server's resource keeps receiving its updates after that
// server restarts and Plexus reconnects: the subscription is made again
// upstream, the host is told the resource may have changed meanwhile, and
// the new server's updates reach it.
func TestSubscriptionSurvivesUpstreamRestart(t *testing.T) {
	f := newFixture(t, mcpserver.Options{})
	lib := newRestartingLibrary(t)
	f.addMCPAt("lib", "http://"+lib.addr)
	updates, opts := updatesTo()
	cs := f.connect(f.agent("claude"), "claude-code", opts)
	ctx := context.Background()
	if err := cs.Subscribe(ctx, &mcp.SubscribeParams{URI: readme}); err != nil {
		t.Fatal(err)
	}
	await(t, lib.up.subbed, "upstream subscription")
	lib.update(readme)
	if got := await(t, updates, "update before the restart"); got != readme {
		t.Errorf("update of %s, want %s", got, readme)
	}

	lib.restart()
	if got := await(t, lib.up.subbed, "the subscription made again on the new server"); got != readme {
		t.Errorf("the new server was subscribed to %s, want %s", got, readme)
	}
	if got := await(t, updates, "the update that says the resource may have changed while the server was away"); got != readme {
		t.Errorf("update of %s, want %s", got, readme)
	}
	lib.update(readme)
	if got := await(t, updates, "update from the restarted server"); got != readme {
		t.Errorf("update of %s, want %s", got, readme)
	}
	if err := cs.Unsubscribe(ctx, &mcp.UnsubscribeParams{URI: readme}); err != nil {
		t.Fatal(err)
	}
	if got := await(t, lib.up.unsubbed, "upstream unsubscription"); got != readme {
		t.Errorf("the new server was unsubscribed from %s", got)
	}
}

// TestNarrowedViewEndsSubscription: when the owner's view of an agent no
// longer shows a resource, that agent's sessions stop receiving its
// updates, and the upstream is unsubscribed once no host watches it. Told:
// the daemon says the views changed (the front door compares at once).
// Untold: it has not yet, and the next update finds the view narrowed.
// Another agent, whose view still shows the resource, keeps its updates.
func TestNarrowedViewEndsSubscription(t *testing.T) {
	for _, tc := range []struct {
		name string
		tell bool
	}{{"Told", true}, {"Untold", false}} {
		t.Run(tc.name, func(t *testing.T) {
			vf := viewFile(t)
			f := newFixture(t, mcpserver.Options{Views: vf})
			_, up, s := newCompletingLibrary()
			f.addMCP("lib", s)
			ctx := context.Background()
			claudeUpdates, opts := updatesTo()
			claude := f.connect(f.agent("claude"), "claude-code", opts)
			cursorUpdates, opts := updatesTo()
			cursor := f.connect(f.agent("cursor"), "cursor", opts)
			for _, sub := range []struct {
				cs  *mcp.ClientSession
				uri string
			}{{claude, readme}, {claude, "notes://x"}, {cursor, readme}} {
				if err := sub.cs.Subscribe(ctx, &mcp.SubscribeParams{URI: sub.uri}); err != nil {
					t.Fatal(err)
				}
			}
			await(t, up.subbed, "upstream subscription")
			await(t, up.subbed, "upstream subscription")

			// claude's view keeps the template, not the resource.
			if err := mcpserver.SetView(vf.Path(), "claude", mcpserver.View{Only: []string{libTemplate, libTool}}); err != nil {
				t.Fatal(err)
			}
			if _, err := vf.Reload(); err != nil {
				t.Fatal(err)
			}
			if tc.tell {
				f.front.ViewsChanged()
			}
			if err := s.ResourceUpdated(ctx, &mcp.ResourceUpdatedNotificationParams{URI: readme}); err != nil {
				t.Fatal(err)
			}
			if got := await(t, cursorUpdates, "cursor's update"); got != readme {
				t.Errorf("cursor's update of %s, want %s", got, readme)
			}
			// The update of readme was handled before this one: had claude
			// been sent it, it would come first on claude's stream.
			if err := s.ResourceUpdated(ctx, &mcp.ResourceUpdatedNotificationParams{URI: "notes://x"}); err != nil {
				t.Fatal(err)
			}
			if got := await(t, claudeUpdates, "claude's update of the template's URI"); got != "notes://x" {
				t.Errorf("claude was sent an update of %s after its view stopped showing it", got)
			}
			if n := len(up.get(&up.unsubs)); n != 0 {
				t.Errorf("upstream unsubscribed %d times while cursor still watched", n)
			}
			if err := cursor.Unsubscribe(ctx, &mcp.UnsubscribeParams{URI: readme}); err != nil {
				t.Fatal(err)
			}
			if got := await(t, up.unsubbed, "upstream unsubscription once no host watches"); got != readme {
				t.Errorf("upstream unsubscribed %s, want %s", got, readme)
			}
			// claude may subscribe again only to what its view shows.
			if err := claude.Subscribe(ctx, &mcp.SubscribeParams{URI: readme}); err == nil {
				t.Error("claude subscribed to a resource its view no longer shows")
			}
		})
	}
}

// TestNarrowedViewUnsubscribesUpstream: the one host watching a resource
// loses it from its view: the upstream is unsubscribed at once.
func TestNarrowedViewUnsubscribesUpstream(t *testing.T) {
	vf := viewFile(t)
	f := newFixture(t, mcpserver.Options{Views: vf})
	_, up, s := newCompletingLibrary()
	f.addMCP("lib", s)
	cs := f.connect(f.agent("claude", standing(libResource, plexus.VerbRead)), "claude-code", nil)
	if err := cs.Subscribe(context.Background(), &mcp.SubscribeParams{URI: readme}); err != nil {
		t.Fatal(err)
	}
	await(t, up.subbed, "upstream subscription")
	f.setView(vf, "claude", mcpserver.View{Only: []string{libTool}})
	if got := await(t, up.unsubbed, "upstream unsubscription after the view narrowed"); got != readme {
		t.Errorf("upstream unsubscribed %s, want %s", got, readme)
	}
}

// TestListChangedOnlyToItsAgent: a change of one agent's view tells that
// agent's sessions, and no other agent's, that their lists changed; and
// only the lists that did change.
func TestListChangedOnlyToItsAgent(t *testing.T) {
	vf := viewFile(t)
	f := newFixture(t, mcpserver.Options{Views: vf})
	_, s := newLibrary("lib")
	f.addMCP("lib", s)
	type told struct{ tools, prompts chan struct{} }
	hostOf := func(pat, name string) (*mcp.ClientSession, told) {
		tl := told{make(chan struct{}, 16), make(chan struct{}, 16)}
		cs := f.connect(pat, name, &mcp.ClientOptions{
			ToolListChangedHandler:   func(context.Context, *mcp.ToolListChangedRequest) { tl.tools <- struct{}{} },
			PromptListChangedHandler: func(context.Context, *mcp.PromptListChangedRequest) { tl.prompts <- struct{}{} }})
		toolNames(t, cs)
		return cs, tl
	}
	claude, claudeTold := hostOf(f.agent("claude"), "claude-code")
	_, cursorTold := hostOf(f.agent("cursor"), "cursor")

	f.setView(vf, "claude", mcpserver.View{Only: []string{"mcp.up.*"}})
	awaitSignal(t, claudeTold.tools, "claude's tools/list_changed")
	if got := toolNames(t, claude); len(got) != 3 {
		t.Errorf("claude's tools after its view changed = %v, want up's three", got)
	}
	// Now a change that hides cursor's one prompt and nothing else: cursor
	// is told its prompts changed. Had it been told of claude's change, that
	// tools/list_changed would have come before, on the same stream.
	f.setView(vf, "cursor", mcpserver.View{Only: []string{"portal.*", "mcp.up.*", libTool, libResource, libTemplate}})
	awaitSignal(t, cursorTold.prompts, "cursor's prompts/list_changed")
	select {
	case <-cursorTold.tools:
		t.Error("cursor was told its tools changed when only claude's view, or its own prompts, did")
	default:
	}
}

// TestSessionlessListen: a sessionless (2026-07-28) host subscribes through
// a subscriptions/listen stream (the SDK client opens one): the resource
// is subscribed upstream and its updates reach the stream; a change of its
// own agent's view is announced on it, and the narrowed view ends the
// subscription upstream.
func TestSessionlessListen(t *testing.T) {
	vf := viewFile(t)
	f := newFixture(t, mcpserver.Options{Views: vf})
	_, up, s := newCompletingLibrary()
	f.addMCP("lib", s)
	updates, opts := updatesTo()
	toolsChanged := make(chan struct{}, 16)
	opts.ToolListChangedHandler = func(context.Context, *mcp.ToolListChangedRequest) { toolsChanged <- struct{}{} }
	cs := f.connectVersion(f.agent("gemini"), "gemini-cli", "2026-07-28", opts)
	if err := cs.Subscribe(context.Background(), &mcp.SubscribeParams{URI: readme}); err != nil {
		t.Fatalf("subscribe: %v", err)
	}
	if got := await(t, up.subbed, "upstream subscription"); got != readme {
		t.Fatalf("upstream subscribed to %s", got)
	}
	if err := s.ResourceUpdated(context.Background(), &mcp.ResourceUpdatedNotificationParams{URI: readme}); err != nil {
		t.Fatal(err)
	}
	if got := await(t, updates, "update on the listen stream"); got != readme {
		t.Errorf("update of %s, want %s", got, readme)
	}
	f.setView(vf, "gemini", mcpserver.View{Only: []string{libTool}})
	awaitSignal(t, toolsChanged, "tools/list_changed on the listen stream")
	if got := await(t, up.unsubbed, "upstream unsubscription after the view narrowed"); got != readme {
		t.Errorf("upstream unsubscribed %s, want %s", got, readme)
	}
}
