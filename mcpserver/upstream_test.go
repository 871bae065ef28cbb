package mcpserver_test

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/plexus-gw/plexus"
	"github.com/plexus-gw/plexus/mcpserver"
)

// asked is what an upstream was asked that is not a call: the completions
// (their ref) and the subscriptions and unsubscriptions (their URI), in
// order; each subscription and unsubscription is also sent on its channel.
type asked struct {
	mu                        sync.Mutex
	completions, subs, unsubs []string
	subbed, unsubbed          chan string
}

func (a *asked) add(list *[]string, what string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	*list = append(*list, what)
}

func (a *asked) get(list *[]string) []string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return slices.Clone(*list)
}

// newCompletingLibrary is the library of newLibrary on a server that
// completes arguments (the value typed, with "da" and "lan" after it) and
// takes subscriptions, recording what it is asked.
func newCompletingLibrary() (*library, *asked, *mcp.Server) {
	a := &asked{subbed: make(chan string, 16), unsubbed: make(chan string, 16)}
	lib, s := newLibraryWith("lib", a.serverOptions())
	return lib, a, s
}

// serverOptions are the options of a server that completes and takes
// subscriptions, recording them in a.
func (a *asked) serverOptions() *mcp.ServerOptions {
	return &mcp.ServerOptions{
		CompletionHandler: func(_ context.Context, req *mcp.CompleteRequest) (*mcp.CompleteResult, error) {
			a.add(&a.completions, req.Params.Ref.Type+" "+req.Params.Ref.Name+req.Params.Ref.URI)
			v := req.Params.Argument.Value
			return &mcp.CompleteResult{Completion: mcp.CompletionResultDetails{Values: []string{v + "da", v + "lan"}, Total: 2}}, nil
		},
		SubscribeHandler: func(_ context.Context, req *mcp.SubscribeRequest) error {
			a.add(&a.subs, req.Params.URI)
			a.subbed <- req.Params.URI
			return nil
		},
		UnsubscribeHandler: func(_ context.Context, req *mcp.UnsubscribeRequest) error {
			a.add(&a.unsubs, req.Params.URI)
			a.unsubbed <- req.Params.URI
			return nil
		},
	}
}

// await is the next value of ch, failing the test when none comes within
// a generous bound (a hang, not a speed check).
func await(t *testing.T, ch <-chan string, what string) string {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(30 * time.Second):
		t.Fatalf("no %s came", what)
		return ""
	}
}

// TestCompletionPassesThrough: a completion for a prompt of the view (by
// its shown name) or a template (by its uriTemplate) is answered by the
// item's own server, asked under the item's upstream name; it needs no
// grant and runs no call. The capability is declared.
func TestCompletionPassesThrough(t *testing.T) {
	f := newFixture(t, mcpserver.Options{})
	lib, up, s := newCompletingLibrary()
	f.addMCP("lib", s)
	cs := f.connect(f.agent("claude"), "claude-code", nil)
	caps := cs.InitializeResult().Capabilities
	if caps.Completions == nil || caps.Resources == nil || !caps.Resources.Subscribe {
		t.Errorf("capabilities = %s, want completions and resources.subscribe", jsonOf(t, caps))
	}
	ctx, mark := context.Background(), f.mark()
	for _, ref := range []*mcp.CompleteReference{
		{Type: "ref/prompt", Name: mcpserver.ToolName(libPrompt)},
		{Type: "ref/resource", URI: "notes://{topic}"},
	} {
		res, err := cs.Complete(ctx, &mcp.CompleteParams{Ref: ref, Argument: mcp.CompleteParamsArgument{Name: "name", Value: "A"}})
		if err != nil || !slices.Equal(res.Completion.Values, []string{"Ada", "Alan"}) || res.Completion.Total != 2 {
			t.Errorf("complete %s = %s, %v; want the upstream's Ada, Alan", jsonOf(t, ref), jsonOf(t, res), err)
		}
	}
	if got, want := up.get(&up.completions), []string{"ref/prompt greet", "ref/resource notes://{topic}"}; !slices.Equal(got, want) {
		t.Errorf("upstream was asked %v, want %v", got, want)
	}
	f.ranNothing(mark, lib)
}

// TestSubscriptionPassesThrough: subscribing to a resource of the view (or
// a URI a template of it expands to) subscribes upstream once, however
// many hosts subscribe; its updates reach the host; the last unsubscribe,
// or the end of the last subscribed session, unsubscribes upstream.
func TestSubscriptionPassesThrough(t *testing.T) {
	f := newFixture(t, mcpserver.Options{})
	_, up, s := newCompletingLibrary()
	f.addMCP("lib", s)
	updates := make(chan string, 16)
	opts := &mcp.ClientOptions{ResourceUpdatedHandler: func(_ context.Context, r *mcp.ResourceUpdatedNotificationRequest) { updates <- r.Params.URI }}
	a := f.connect(f.agent("claude", standing(libResource, plexus.VerbRead)), "claude-code", opts)
	b := f.connect(f.agent("cursor"), "cursor", nil)
	ctx := context.Background()
	const readme = "file:///lib/readme.md"
	for _, cs := range []*mcp.ClientSession{a, b} {
		if err := cs.Subscribe(ctx, &mcp.SubscribeParams{URI: readme}); err != nil {
			t.Fatalf("subscribe: %v", err)
		}
	}
	if got := await(t, up.subbed, "upstream subscription"); got != readme {
		t.Fatalf("upstream subscribed to %s", got)
	}
	if err := s.ResourceUpdated(ctx, &mcp.ResourceUpdatedNotificationParams{URI: readme}); err != nil {
		t.Fatal(err)
	}
	if got := await(t, updates, "update"); got != readme {
		t.Errorf("update of %s, want %s", got, readme)
	}
	if err := a.Unsubscribe(ctx, &mcp.UnsubscribeParams{URI: readme}); err != nil {
		t.Fatal(err)
	}
	if err := b.Subscribe(ctx, &mcp.SubscribeParams{URI: "notes://x"}); err != nil {
		t.Fatalf("subscribe to a template's URI: %v", err)
	}
	if got := await(t, up.subbed, "upstream subscription"); got != "notes://x" {
		t.Fatalf("upstream subscribed to %s, want notes://x", got)
	}
	if n := len(up.get(&up.unsubs)); n != 0 {
		t.Errorf("upstream unsubscribed %d times while a host still watched", n)
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	got := []string{await(t, up.unsubbed, "upstream unsubscription"), await(t, up.unsubbed, "upstream unsubscription")}
	slices.Sort(got)
	if want := []string{"file:///lib/readme.md", "notes://x"}; !slices.Equal(got, want) {
		t.Errorf("upstream unsubscribed %v at the session's end, want %v", got, want)
	}
	if subs := up.get(&up.subs); len(subs) != 2 {
		t.Errorf("upstream subscriptions = %v, want one per URI", subs)
	}
}

// TestBridgeCompletionAndSubscription: through the stdio bridge, a
// completion reaches the item's server, and a subscription's updates
// reach the host, until it unsubscribes.
func TestBridgeCompletionAndSubscription(t *testing.T) {
	f := newFixture(t, mcpserver.Options{})
	_, up, s := newCompletingLibrary()
	f.addMCP("lib", s)
	updates := make(chan string, 16)
	// A 2025-11-25 host: a newer one subscribes through a
	// subscriptions/listen stream the SDK opens in the background, so its
	// Subscribe is no sign the daemon has subscribed yet.
	cs := bridgedVersion(t, mcpserver.BridgeOptions{Endpoint: f.url, PAT: f.agent("desk")}, "claude-desktop", "2025-11-25",
		&mcp.ClientOptions{ResourceUpdatedHandler: func(_ context.Context, r *mcp.ResourceUpdatedNotificationRequest) { updates <- r.Params.URI }})
	ctx := context.Background()
	res, err := cs.Complete(ctx, &mcp.CompleteParams{Ref: &mcp.CompleteReference{Type: "ref/prompt", Name: mcpserver.ToolName(libPrompt)},
		Argument: mcp.CompleteParamsArgument{Name: "name", Value: "A"}})
	if err != nil || !slices.Equal(res.Completion.Values, []string{"Ada", "Alan"}) {
		t.Errorf("complete through the bridge = %s, %v", jsonOf(t, res), err)
	}
	if err := cs.Subscribe(ctx, &mcp.SubscribeParams{URI: "notes://x"}); err != nil {
		t.Fatal(err)
	}
	await(t, up.subbed, "upstream subscription")
	if err := s.ResourceUpdated(ctx, &mcp.ResourceUpdatedNotificationParams{URI: "notes://x"}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { t.Log(f.logs.String()) })
	if got := await(t, updates, "update through the bridge"); got != "notes://x" {
		t.Errorf("update of %s, want notes://x", got)
	}
	if err := cs.Unsubscribe(ctx, &mcp.UnsubscribeParams{URI: "notes://x"}); err != nil {
		t.Fatal(err)
	}
	if got := await(t, up.unsubbed, "upstream unsubscription"); got != "notes://x" {
		t.Errorf("upstream unsubscribed %s", got)
	}
}
