//lint:file-ignore SA1019 roots, deprecated from 2026-07-28 but served through its deprecation window, is what Plexus relays

package mcpclient_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/plexus-gw/plexus"
	"github.com/plexus-gw/plexus/transports/mcpclient"
)

// rootsAsker is the SDK's server with a tool, a prompt and a resource, each
// named roots, that ask their client for its roots in two rounds (SEP-2322)
// and answer "first=<uris> second=<uris>". On a session (2025-11-25) the
// SDK's server asks the first round in-band and the second reaches the
// client as a result asking for input; sessionless (2026-07-28), both do.
// The second round waits until together calls of its primitive are in
// it, so that the hosts' calls overlap when their roots are asked.
type rootsAsker struct {
	together int
	mu       sync.Mutex
	arrived  map[string]int
	all      map[string]chan struct{}
}

// rootsServer is a rootsAsker's server, speaking only 2026-07-28 (and
// without initialize, as the SDK's sessionless servers) when sessionless.
func rootsServer(sessionless bool, together int) *mcp.Server {
	var versions []string
	if sessionless {
		versions = []string{"2026-07-28"}
	}
	a := &rootsAsker{together: together, arrived: map[string]int{}, all: map[string]chan struct{}{}}
	srv := mcp.NewServer(&mcp.Implementation{Name: "roots", Version: "1"}, &mcp.ServerOptions{SupportedProtocolVersions: versions})
	srv.AddTool(&mcp.Tool{Name: "roots", InputSchema: json.RawMessage(`{"type":"object"}`)}, func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		reqs, state, text, err := a.round(ctx, "tool", req.Params.RequestState, req.Params.InputResponses)
		if err != nil || reqs != nil {
			return &mcp.CallToolResult{InputRequests: reqs, RequestState: state}, err
		}
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: text}}}, nil
	})
	srv.AddPrompt(&mcp.Prompt{Name: "roots"}, func(ctx context.Context, req *mcp.GetPromptRequest) (*mcp.GetPromptResult, error) {
		reqs, state, text, err := a.round(ctx, "prompt", req.Params.RequestState, req.Params.InputResponses)
		if err != nil || reqs != nil {
			return &mcp.GetPromptResult{InputRequests: reqs, RequestState: state}, err
		}
		return &mcp.GetPromptResult{Messages: []*mcp.PromptMessage{{Role: "user", Content: &mcp.TextContent{Text: text}}}}, nil
	})
	srv.AddResource(&mcp.Resource{URI: "file:///roots", Name: "roots"}, func(ctx context.Context, req *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
		reqs, state, text, err := a.round(ctx, "resource", req.Params.RequestState, req.Params.InputResponses)
		if err != nil || reqs != nil {
			// Contents empty, not nil: the SDK's server refuses nil contents
			// where the result type is not sent (2025-11-25).
			return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{}, InputRequests: reqs, RequestState: state}, err
		}
		return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{URI: "file:///roots", Text: text}}}, nil
	})
	if sessionless {
		srv.AddReceivingMiddleware(func(next mcp.MethodHandler) mcp.MethodHandler {
			return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
				if method == "initialize" {
					return nil, &jsonrpc.Error{Code: jsonrpc.CodeMethodNotFound, Message: "method not found: " + method}
				}
				return next(ctx, method, req)
			}
		})
	}
	return srv
}

// round is what the call of what asks or answers in the round state.
func (a *rootsAsker) round(ctx context.Context, what, state string, answers mcp.InputResponseMap) (mcp.InputRequestMap, string, string, error) {
	ask := mcp.InputRequestMap{"roots": &mcp.ListRootsParams{}}
	switch {
	case state == "":
		return ask, "first", "", nil
	case state == "first":
		if err := a.arrive(ctx, what); err != nil {
			return nil, "", "", err
		}
		return ask, "second " + rootURIs(answers), "", nil
	case strings.HasPrefix(state, "second "):
		return nil, "", "first=" + strings.TrimPrefix(state, "second ") + " second=" + rootURIs(answers), nil
	}
	return nil, "", "", fmt.Errorf("unknown request state %q", state)
}

// arrive waits until together calls of what have arrived.
func (a *rootsAsker) arrive(ctx context.Context, what string) error {
	a.mu.Lock()
	all := a.all[what]
	if all == nil {
		all = make(chan struct{})
		a.all[what] = all
	}
	if a.arrived[what]++; a.arrived[what] == a.together {
		close(all)
	}
	a.mu.Unlock()
	select {
	case <-all:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// rootURIs are the URIs of the roots answered, or "none".
func rootURIs(answers mcp.InputResponseMap) string {
	res, ok := answers["roots"].(*mcp.ListRootsResult)
	if !ok || len(res.Roots) == 0 {
		return "none"
	}
	var uris []string
	for _, r := range res.Roots {
		uris = append(uris, r.URI)
	}
	return strings.Join(uris, ",")
}

// runRootsServer is the stdio server of TestMain's "sdk-asks-in-rounds".
// (The mode's name is not a word a message holds: Plexus redacts the
// values of a server's environment from what it reports.)
func runRootsServer() error {
	together, err := strconv.Atoi(os.Getenv("MCPCLIENT_TOGETHER"))
	if err != nil {
		return fmt.Errorf("MCPCLIENT_TOGETHER: %w", err)
	}
	return rootsServer(os.Getenv("MCPCLIENT_SESSIONLESS") != "", together).Run(context.Background(), &mcp.StdioTransport{})
}

// rootsHost is the relay of a host whose roots are root: it answers the
// first answers roots requests and refuses the rest, as Plexus's front
// door refuses a host that does not offer roots.
type rootsHost struct {
	root    string
	answers int
	mu      sync.Mutex
	asked   int
}

func (h *rootsHost) Request(_ context.Context, method string, _ json.RawMessage) (json.RawMessage, error) {
	h.mu.Lock()
	h.asked++
	n := h.asked
	h.mu.Unlock()
	if method != plexus.RelayRoots || n > h.answers {
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidRequest, Message: "the host does not offer " + method}
	}
	return json.Marshal(map[string]any{"roots": []map[string]string{{"uri": h.root, "name": "work"}}})
}

func (h *rootsHost) Notify(context.Context, string, json.RawMessage) error { return nil }

func (h *rootsHost) Offers(method string) bool { return method == plexus.RelayRoots }

// TestRootsInRounds: a server's roots/list that reaches Plexus inside a
// result asking for input (SEP-2322) is asked of the host that made the
// call, on every path: tools/call sent by Plexus itself over stdio and
// Streamable HTTP, prompts/get and resources/read, and every call of a
// sessionless server (the SDK's session). Two hosts call at once (over
// stdio at 2025-11-25 one after the other: there the first round is asked
// in-band, which Plexus relays only when one relay has calls in flight):
// each host's roots reach its own call, never the other's. A host that
// refuses fails its call with its refusal, as it would an elicitation; a
// caller with no host (HTTP /invoke) has no roots to offer and answers
// an empty list in rounds (refusing in band, as before).
func TestRootsInRounds(t *testing.T) {
	for _, tc := range []struct {
		name        string
		http        bool
		sessionless bool
	}{
		{"Stdio", false, false},
		{"StdioSessionless", false, true},
		{"HTTP", true, false},
		{"HTTPSessionless", true, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			failOnLeakedGoroutines(t)
			together := 2
			if !tc.http && !tc.sessionless {
				together = 1
			}
			h := startClient(t, "rt", rootsConfig(t, tc.http, tc.sessionless, together), mcpclient.Options{})
			h.waitReady(t)
			for _, id := range []string{"mcp.rt.roots", "mcp.rt.prompt.roots", "mcp.rt.resource.roots"} {
				t.Run(id, func(t *testing.T) {
					hosts := []*rootsHost{{root: "file:///a", answers: 2}, {root: "file:///b", answers: 2}}
					got := make([]plexus.TransportResult, len(hosts))
					var wg sync.WaitGroup
					for i, host := range hosts {
						call := func() { got[i] = rootsCall(t, h, id, host) }
						if together == 1 {
							call()
							continue
						}
						wg.Go(call)
					}
					wg.Wait()
					for i, host := range hosts {
						want := "first=" + host.root + " second=" + host.root
						if !got[i].OK || !strings.Contains(string(got[i].MCPResult), want) {
							t.Errorf("host %s: %s %v, want %q", host.root, got[i].MCPResult, got[i].Error, want)
						}
					}
					refuses := &rootsHost{root: "file:///c", answers: 1}
					if r := rootsCall(t, h, id, refuses); r.OK || r.Error == nil || !strings.Contains(r.Error.Message, "the host does not offer roots/list") {
						t.Errorf("a host refusing roots: %s %v, want the call failed with its refusal", r.MCPResult, r.Error)
					}
					// An HTTP /invoke caller has no host to ask, and no roots:
					// asked in rounds, it answers an empty list; asked in
					// band (the first round on a session), it refuses, and
					// this server fails its call with the refusal.
					r := rootsCall(t, h, id, nil)
					if tc.sessionless && (!r.OK || !strings.Contains(string(r.MCPResult), "first=none second=none")) {
						t.Errorf("a caller without a relay: %s %v, want no roots in either round", r.MCPResult, r.Error)
					}
					if !tc.sessionless && (r.OK || r.Error == nil || !strings.Contains(r.Error.Message, "Plexus cannot relay roots/list")) {
						t.Errorf("a caller without a relay: %s %v, want the call failed with the in-band refusal", r.MCPResult, r.Error)
					}
				})
			}
		})
	}
}

// rootsCall makes the call id as host (nil: a caller without a relay).
func rootsCall(t *testing.T, h *harness, id string, host *rootsHost) plexus.TransportResult {
	ctx := context.Background()
	if host != nil {
		ctx = plexus.WithRelay(ctx, host)
	}
	ctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	return h.call(t, ctx, id, nil, nil)
}

// rootsConfig is the configuration of a rootsAsker reached over stdio
// (this test binary, see TestMain) or Streamable HTTP.
func rootsConfig(t *testing.T, overHTTP, sessionless bool, together int) mcpclient.ServerConfig {
	t.Helper()
	if overHTTP {
		srv := rootsServer(sessionless, together)
		ts := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, &mcp.StreamableHTTPOptions{Stateless: sessionless}))
		t.Cleanup(ts.Close)
		return mcpclient.ServerConfig{URL: ts.URL}
	}
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	env := map[string]string{helperEnv: "sdk-asks-in-rounds", "MCPCLIENT_TOGETHER": strconv.Itoa(together)}
	if sessionless {
		env["MCPCLIENT_SESSIONLESS"] = "1"
	}
	return mcpclient.ServerConfig{Command: exe, Env: env}
}
