package mcpserver_test

import (
	"context"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/plexus-gw/plexus"
	"github.com/plexus-gw/plexus/mcpserver"
)

// The attacks on the pass-through of completions and subscriptions: an
// item outside the view is never asked about, and an update reaches the
// hosts that subscribed and no other.

// TestAttackUpstreamOutsideView: a completion or a subscription naming a
// prompt, template or resource the view hides (or the placeholder items
// list_changed uses, or a ref of no known type) is refused, and the
// upstream is asked nothing, even when the agent holds standing grants.
func TestAttackUpstreamOutsideView(t *testing.T) {
	vf := viewFile(t)
	f := newFixture(t, mcpserver.Options{Views: vf})
	lib, up, s := newCompletingLibrary()
	f.addMCP("lib", s)
	f.setView(vf, "claude", mcpserver.View{Only: []string{"mcp.up.count"}})
	cs := f.connect(f.agent("claude", standing(libResource, plexus.VerbRead), standing(libTemplate, plexus.VerbRead),
		standing(libPrompt, plexus.VerbRead)), "claude-code", nil)
	ctx, mark := context.Background(), f.mark()
	arg := mcp.CompleteParamsArgument{Name: "name", Value: "A"}
	for _, ref := range []*mcp.CompleteReference{
		{Type: "ref/prompt", Name: mcpserver.ToolName(libPrompt)},
		{Type: "ref/prompt", Name: "greet"},
		{Type: "ref/resource", URI: "notes://{topic}"},
		{Type: "ref/resource", URI: "file:///lib/readme.md"},
		{Type: "ref/prompt", Name: "plexus-list-changed"},
		{Type: "ref/tool", Name: "greet"},
	} {
		if res, err := cs.Complete(ctx, &mcp.CompleteParams{Ref: ref, Argument: arg}); err == nil {
			t.Errorf("complete %s outside the view = %s, want refused", jsonOf(t, ref), jsonOf(t, res))
		}
	}
	for _, uri := range []string{"file:///lib/readme.md", "notes://x", "plexus:plexus-list-changed"} {
		if err := cs.Subscribe(ctx, &mcp.SubscribeParams{URI: uri}); err == nil {
			t.Errorf("subscribe to %s outside the view succeeded", uri)
		}
	}
	if c, sub := up.get(&up.completions), up.get(&up.subs); len(c) != 0 || len(sub) != 0 {
		t.Errorf("the upstream was asked completions %v, subscriptions %v; want nothing", c, sub)
	}
	f.ranNothing(mark, lib)
}

// TestAttackUpdateOnlyToSubscriber: an update of a resource reaches the
// host that subscribed to it, not another host of another agent that sees
// the same resource but did not subscribe to it (it subscribed to another
// URI, whose update it does get, after the first).
func TestAttackUpdateOnlyToSubscriber(t *testing.T) {
	f := newFixture(t, mcpserver.Options{})
	_, up, s := newCompletingLibrary()
	f.addMCP("lib", s)
	watcher := func() (chan string, *mcp.ClientOptions) {
		ch := make(chan string, 16)
		return ch, &mcp.ClientOptions{ResourceUpdatedHandler: func(_ context.Context, r *mcp.ResourceUpdatedNotificationRequest) { ch <- r.Params.URI }}
	}
	aUpdates, aOpts := watcher()
	bUpdates, bOpts := watcher()
	a := f.connect(f.agent("claude"), "claude-code", aOpts)
	b := f.connect(f.agent("cursor"), "cursor", bOpts)
	ctx := context.Background()
	const readme = "file:///lib/readme.md"
	if err := a.Subscribe(ctx, &mcp.SubscribeParams{URI: readme}); err != nil {
		t.Fatal(err)
	}
	await(t, up.subbed, "upstream subscription")
	if err := s.ResourceUpdated(ctx, &mcp.ResourceUpdatedNotificationParams{URI: readme}); err != nil {
		t.Fatal(err)
	}
	if got := await(t, aUpdates, "update to the subscriber"); got != readme {
		t.Errorf("the subscriber got an update of %s", got)
	}
	if err := b.Subscribe(ctx, &mcp.SubscribeParams{URI: "notes://b"}); err != nil {
		t.Fatal(err)
	}
	await(t, up.subbed, "upstream subscription")
	if err := s.ResourceUpdated(ctx, &mcp.ResourceUpdatedNotificationParams{URI: "notes://b"}); err != nil {
		t.Fatal(err)
	}
	var got []string
	for u := await(t, bUpdates, "update to the second host"); ; u = await(t, bUpdates, "update") {
		got = append(got, u)
		if u == "notes://b" {
			break
		}
	}
	if !slices.Equal(got, []string{"notes://b"}) {
		t.Errorf("the second host got updates of %v, want only notes://b (it never subscribed to %s)", got, readme)
	}
	if len(aUpdates) != 0 {
		t.Errorf("the first host got an update of %s it never subscribed to", <-aUpdates)
	}
}

// TestAttackSessionlessSubscribe: a sessionless (2026-07-28) host
// subscribes only on a subscriptions/listen stream, and only to what its
// view shows: a listen stream naming a hidden resource, a bare
// resources/subscribe (there is no session to send updates on), and one
// whose Mcp-Method header calls it a listen stream are all refused, and the
// upstream is asked nothing.
func TestAttackSessionlessSubscribe(t *testing.T) {
	vf := viewFile(t)
	f := newFixture(t, mcpserver.Options{Views: vf})
	_, up, s := newCompletingLibrary()
	f.addMCP("lib", s)
	f.setView(vf, "gemini", mcpserver.View{Only: []string{libTemplate}})
	pat := f.agent("gemini", standing(libResource, plexus.VerbRead))
	listen := func(uris ...string) map[string]any {
		return map[string]any{"notifications": map[string]any{"resourceSubscriptions": uris}}
	}
	for _, tc := range []struct {
		name, method string
		params       map[string]any
		header       map[string]string
	}{
		{"ListenHidden", "subscriptions/listen", listen(readme), nil},
		{"ListenHiddenBesideShown", "subscriptions/listen", listen("notes://x", readme), nil},
		{"BareSubscribe", "resources/subscribe", map[string]any{"uri": "notes://x"}, nil},
		{"SubscribeCalledListen", "resources/subscribe", map[string]any{"uri": "notes://x"}, map[string]string{"Mcp-Method": "subscriptions/listen"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			status, body := f.sessionlessPost(pat, tc.method, "", tc.params, tc.header)
			if status == http.StatusOK && !strings.Contains(string(body), `"error"`) {
				t.Errorf("status %d, body %s; want refused", status, body)
			}
		})
	}
	// notes://x is shown, but was named only beside a hidden URI (the
	// listen failed whole) or outside a listen stream: it may have been
	// subscribed and dropped at once, never kept.
	for _, uri := range up.get(&up.subs) {
		if uri == readme {
			t.Errorf("the upstream was asked to subscribe to the hidden %s", uri)
		}
	}
	if subs, unsubs := up.get(&up.subs), up.get(&up.unsubs); len(subs) != len(unsubs) {
		t.Errorf("upstream subscriptions %v, unsubscriptions %v: one is kept", subs, unsubs)
	}
}
