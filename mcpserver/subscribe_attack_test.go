package mcpserver_test

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/plexus-gw/plexus"
	"github.com/plexus-gw/plexus/gateway"
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
	time.Sleep(200 * time.Millisecond)                               // let the refresh reach the watches
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

// TestAttackListenStreamFlood: one PAT opens more subscriptions/listen
// streams than the cap: those over it are refused (429), and the owner's
// other agents still connect and listen.
func TestAttackListenStreamFlood(t *testing.T) {
	const limit = 3
	f := newFixture(t, mcpserver.Options{ListensPerAgent: limit})
	_, s := newLibrary("lib")
	f.addMCP("lib", s)
	pat := f.agent("gemini")
	listening := func(pat string) error {
		// A ToolListChangedHandler makes the SDK open a listen stream at
		// connect, and fail the connect if it is refused.
		c := mcp.NewClient(&mcp.Implementation{Name: "gemini-cli", Version: "1"},
			&mcp.ClientOptions{ToolListChangedHandler: func(context.Context, *mcp.ToolListChangedRequest) {}})
		tr := &mcp.StreamableClientTransport{Endpoint: f.url,
			HTTPClient: &http.Client{Transport: bearerTransport{pat: pat, base: f.hosts}}}
		cs, err := c.Connect(context.Background(), tr, &mcp.ClientSessionOptions{ProtocolVersion: "2026-07-28"})
		if err != nil {
			return err
		}
		t.Cleanup(func() {
			if err := cs.Close(); err != nil {
				t.Logf("close: %v", err)
			}
		})
		return nil
	}
	for i := range limit {
		if err := listening(pat); err != nil {
			t.Fatalf("listen stream %d of %d refused: %v", i+1, limit, err)
		}
	}
	for range 3 {
		// The SDK client opens its stream in the background and drops a
		// refusal: ask as a host would, and read the answer.
		body := `{"jsonrpc":"2.0","id":1,"method":"subscriptions/listen","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientInfo":{"name":"gemini-cli","version":"1"},"io.modelcontextprotocol/clientCapabilities":{}},"notifications":{"toolsListChanged":true}}}`
		req, err := http.NewRequest(http.MethodPost, f.url, strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		req.Header.Set("Mcp-Protocol-Version", "2026-07-28")
		req.Header.Set("Mcp-Method", "subscriptions/listen")
		resp, err := (&http.Client{Transport: bearerTransport{pat: pat, base: f.hosts}}).Do(req)
		if err != nil {
			t.Fatal(err)
		}
		if resp.StatusCode != http.StatusTooManyRequests {
			t.Fatalf("a listen stream over the agent's cap: %d, want 429", resp.StatusCode) // the cleanup ends the stream
		}
		msg, err := io.ReadAll(resp.Body)
		if cerr := resp.Body.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(msg), "subscriptions/listen streams already") {
			t.Errorf("the refusal %q does not say why", msg)
		}
	}
	if err := listening(f.agent("claude")); err != nil {
		t.Fatalf("another agent of the owner cannot listen: %v", err)
	}
	f.connect(f.agent("cursor"), "cursor", nil)
}

// TestRevokedAgentListenUnsubscribes: the owner revokes an agent whose
// listen stream subscribed a resource: the stream ends, and so does its
// upstream subscription.
func TestRevokedAgentListenUnsubscribes(t *testing.T) {
	f := newFixture(t, mcpserver.Options{})
	_, up, s := newCompletingLibrary()
	f.addMCP("lib", s)
	_, opts := updatesTo()
	cs := f.connectVersion(f.agent("gemini"), "gemini-cli", "2026-07-28", opts)
	if err := cs.Subscribe(context.Background(), &mcp.SubscribeParams{URI: readme}); err != nil {
		t.Fatal(err)
	}
	await(t, up.subbed, "upstream subscription")
	if _, err := f.gw.RevokeAgent(context.Background(), gateway.Credentials{ConnectionKey: f.home.ConnectionKey},
		plexus.AgentRevokeRequest{AgentID: "gemini"}); err != nil {
		t.Fatal(err)
	}
	select {
	case <-up.unsubbed:
	case <-time.After(3 * time.Second):
		t.Fatal("the revoked agent's listen stream still holds its upstream subscription")
	}
}

// TestRevokedAgentSessionUnsubscribes: the same for a 2025-11-25 session's
// subscription, which sends no request after the revocation.
func TestRevokedAgentSessionUnsubscribes(t *testing.T) {
	f := newFixture(t, mcpserver.Options{})
	_, up, s := newCompletingLibrary()
	f.addMCP("lib", s)
	cs := f.connect(f.agent("claude", standing(libResource, plexus.VerbRead)), "claude-code", nil)
	if err := cs.Subscribe(context.Background(), &mcp.SubscribeParams{URI: readme}); err != nil {
		t.Fatal(err)
	}
	await(t, up.subbed, "upstream subscription")
	if _, err := f.gw.RevokeAgent(context.Background(), gateway.Credentials{ConnectionKey: f.home.ConnectionKey},
		plexus.AgentRevokeRequest{AgentID: "claude"}); err != nil {
		t.Fatal(err)
	}
	select {
	case <-up.unsubbed:
	case <-time.After(3 * time.Second):
		t.Fatal("the revoked agent's session still holds its upstream subscription")
	}
}
