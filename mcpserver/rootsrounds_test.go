//lint:file-ignore SA1019 the hosts and servers here use roots, deprecated from 2026-07-28, which Plexus relays

package mcpserver_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/plexus-gw/plexus/mcpserver"
)

// roundsUpstream is an MCP server on the official Go SDK whose tool
// "roots" asks its client for its roots in two rounds (SEP-2322) and
// answers "first=<uris> second=<uris>": on a session (2025-11-25) the
// first round is asked in-band and the second comes to Plexus as a result
// asking for input; sessionless (2026-07-28), both do. The second round
// waits for gate, so that the hosts' calls overlap.
func roundsUpstream(t *testing.T, sessionless bool, gate *barrier) string {
	var versions []string
	if sessionless {
		versions = []string{"2026-07-28"}
	}
	srv := mcp.NewServer(&mcp.Implementation{Name: "rounds", Version: "1"}, &mcp.ServerOptions{SupportedProtocolVersions: versions})
	ask := mcp.InputRequestMap{"roots": &mcp.ListRootsParams{}}
	uris := func(answers mcp.InputResponseMap) string {
		res, ok := answers["roots"].(*mcp.ListRootsResult)
		if !ok || len(res.Roots) == 0 {
			return "none"
		}
		var out []string
		for _, r := range res.Roots {
			out = append(out, r.URI)
		}
		return strings.Join(out, ",")
	}
	mcp.AddTool(srv, &mcp.Tool{Name: "roots", Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true}}, func(ctx context.Context, req *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, any, error) {
		switch state := req.Params.RequestState; {
		case state == "":
			return &mcp.CallToolResult{InputRequests: ask, RequestState: "first"}, nil, nil
		case state == "first":
			if err := gate.arrive(ctx); err != nil {
				return nil, nil, err
			}
			return &mcp.CallToolResult{InputRequests: ask, RequestState: "second " + uris(req.Params.InputResponses)}, nil, nil
		default:
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{
				Text: "first=" + strings.TrimPrefix(state, "second ") + " second=" + uris(req.Params.InputResponses)}}}, nil, nil
		}
	})
	ts := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, &mcp.StreamableHTTPOptions{Stateless: sessionless}))
	t.Cleanup(ts.Close)
	return ts.URL
}

// TestRootsInRoundsReachTheirHost: the roots an ingested server asks for
// in a result asking for input are those of the host whose call it is:
// two hosts with roots of their own (one on a session, one sessionless)
// call at once, each gets its own and never the other's; a host that declared no roots fails its call with the
// front door's refusal, and nobody answers for it.
func TestRootsInRoundsReachTheirHost(t *testing.T) {
	for _, tc := range []struct {
		name        string
		sessionless bool
	}{{"Session", false}, {"Sessionless", true}} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, mcpserver.Options{})
			f.ingest("rounds", roundsUpstream(t, tc.sessionless, newBarrier(2)))
			// One host on a session, asked on its call's stream; one
			// sessionless, asked through input_required results.
			hosts := []struct{ agent, root, version string }{{"claude-code", "file:///work/a", "2025-11-25"}, {"cursor", "file:///work/b", "2026-07-28"}}
			got := make([]*mcp.CallToolResult, len(hosts))
			var wg sync.WaitGroup
			for i, h := range hosts {
				c := mcp.NewClient(&mcp.Implementation{Name: h.agent, Version: "1"}, nil)
				c.AddRoots(&mcp.Root{URI: h.root, Name: "work"})
				tr := &mcp.StreamableClientTransport{Endpoint: f.url, HTTPClient: &http.Client{Transport: bearerTransport{pat: f.agent(h.agent), base: f.hosts}}}
				cs, err := c.Connect(t.Context(), tr, &mcp.ClientSessionOptions{ProtocolVersion: h.version})
				if err != nil {
					t.Fatalf("connect %s: %v", h.agent, err)
				}
				t.Cleanup(func() {
					if err := cs.Close(); err != nil {
						t.Logf("close session: %v", err)
					}
				})
				wg.Go(func() { got[i] = call(t, cs, "mcp__rounds__roots", map[string]any{}) })
			}
			wg.Wait()
			for i, h := range hosts {
				if want := "first=" + h.root + " second=" + h.root; got[i].IsError || text(got[i]) != want {
					t.Errorf("%s: %q (isError %v), want %q", h.agent, text(got[i]), got[i].IsError, want)
				}
			}
			cs := f.connectVersion(f.agent("windsurf"), "windsurf", "2025-11-25", &mcp.ClientOptions{Capabilities: &mcp.ClientCapabilities{}})
			if res := call(t, cs, "mcp__rounds__roots", map[string]any{}); !res.IsError || !strings.Contains(text(res), "windsurf does not offer roots/list") {
				t.Errorf("a host without roots: %q (isError %v), want its call failed with the refusal", text(res), res.IsError)
			}
		})
	}
}
