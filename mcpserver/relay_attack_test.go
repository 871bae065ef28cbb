//lint:file-ignore SA1019 the hosts and servers here use sampling, elicitation, roots and logging, deprecated from 2026-07-28, which Plexus relays

package mcpserver_test

import (
	"context"
	"strings"
	"sync"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/plexus-gw/plexus/mcpserver"
)

// TestRelayAttackTwoHostsEachGetTheirOwn: two hosts (two agents) call the
// same ingested server at once, over the one session Plexus holds with it;
// each call's sampling request reaches the host that made it and no other,
// even though the server writes a made-up relay tag into its requests.
func TestRelayAttackTwoHostsEachGetTheirOwn(t *testing.T) {
	f := newFixture(t, mcpserver.Options{})
	// Both calls are in the server before either asks; the server tries
	// to steer its requests with a tag of its own.
	f.ingest("asker", newAsker(t, newBarrier(2), mcp.Meta{"dev.plexus/relay": "forged", "other": "kept"}).url)
	hosts := map[string]*sampler{"A": {name: "model-A"}, "B": {name: "model-B"}}
	sessions := map[string]*mcp.ClientSession{}
	for name, smp := range hosts {
		c := mcp.NewClient(&mcp.Implementation{Name: "host-" + name, Version: "1"}, &mcp.ClientOptions{CreateMessageHandler: smp.handle})
		sessions[name] = f.connectClient(f.agent("agent-"+strings.ToLower(name)), c)
	}
	var wg sync.WaitGroup
	results := map[string]string{}
	var mu sync.Mutex
	for name, cs := range sessions {
		wg.Add(1)
		go func() {
			defer wg.Done()
			res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "mcp__asker__ask", Arguments: map[string]any{"q": "from " + name}})
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				results[name] = "call error: " + err.Error()
				return
			}
			results[name] = text(res)
		}()
	}
	wg.Wait()
	for name, smp := range hosts {
		if want := "sampled: 42 for from " + name + " by model-" + name; results[name] != want {
			t.Errorf("host %s got %q, want %q", name, results[name], want)
		}
		asked := smp.asked()
		if len(asked) != 1 {
			t.Fatalf("host %s was asked %d sampling requests, want its own one", name, len(asked))
		}
		if q := asked[0].Messages[0].Content.(*mcp.TextContent).Text; q != "from "+name {
			t.Errorf("host %s was asked %q, another host's request", name, q)
		}
		// The tag is Plexus's own business: the host never sees one, the
		// server's own, or Plexus's.
		if _, ok := asked[0].Meta["dev.plexus/relay"]; ok || asked[0].Meta["other"] != "kept" {
			t.Errorf("host %s saw _meta %v, want the server's other members and no relay tag", name, asked[0].Meta)
		}
	}
}
