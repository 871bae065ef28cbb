//lint:file-ignore SA1019 the hosts and servers here use sampling, elicitation, roots and logging, deprecated from 2026-07-28, which Plexus relays

package mcpserver_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/plexus-gw/plexus"
	"github.com/plexus-gw/plexus/client"
	"github.com/plexus-gw/plexus/gateway"
	"github.com/plexus-gw/plexus/mcpserver"
	"github.com/plexus-gw/plexus/platform"
	"github.com/plexus-gw/plexus/transports/mcpclient"
)

// asker is an MCP server on the official Go SDK that, while its tools run,
// asks its client what the conformance everything-server asks: "ask"
// samples, "elicit" elicits, "roots" lists roots, "log" logs, the way
// servers written for 2025-11-25 do (it would speak 2026-07-28 too, where
// such requests are refused: Plexus asks it for 2025-11-25).
// Each tool answers what it got back, or the error it got, as its text.
type asker struct {
	url string
	// gate, when set, holds each "ask" until that many calls are in it,
	// so that calls overlap.
	gate *barrier
	// meta is written into the _meta of every sampling request, to try
	// to steer it.
	meta mcp.Meta
	// regions counts the calls of "region" that reached the server.
	regions atomic.Int64
	// hostAsked is closed by a test's host when the sampling request of
	// "ask-then-cancel" reached it; the server then withdraws it, and
	// goes on working until hostDone is closed (the host's request ended)
	// or a while has passed.
	hostAsked, hostDone chan struct{}
}

func newAsker(t *testing.T, gate *barrier, meta mcp.Meta) *asker {
	a := &asker{gate: gate, meta: meta, hostAsked: make(chan struct{}), hostDone: make(chan struct{})}
	s := a.server()
	ts := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s }, nil))
	t.Cleanup(ts.Close)
	a.url = ts.URL
	return a
}

// server is the asker's MCP server.
func (a *asker) server() *mcp.Server {
	s := mcp.NewServer(&mcp.Implementation{Name: "asker", Version: "1"}, nil)
	ro := &mcp.ToolAnnotations{ReadOnlyHint: true}
	type q struct {
		Q string `json:"q"`
	}
	answer := func(s string, err error) (*mcp.CallToolResult, any, error) {
		if err != nil {
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "error: " + err.Error()}}}, nil, nil
		}
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: s}}}, nil, nil
	}
	mcp.AddTool(s, &mcp.Tool{Name: "ask", Annotations: ro}, func(ctx context.Context, req *mcp.CallToolRequest, in q) (*mcp.CallToolResult, any, error) {
		if a.gate != nil {
			if err := a.gate.arrive(ctx); err != nil {
				return nil, nil, err
			}
		}
		res, err := req.Session.CreateMessage(ctx, &mcp.CreateMessageParams{Meta: a.meta, MaxTokens: 50,
			Messages: []*mcp.SamplingMessage{{Role: "user", Content: &mcp.TextContent{Text: in.Q}}}})
		if err != nil {
			return answer("", err)
		}
		tc, _ := res.Content.(*mcp.TextContent)
		if tc == nil {
			return answer("", errors.New("no text in the sampling result"))
		}
		return answer("sampled: "+tc.Text+" by "+res.Model, nil)
	})
	// ask-then-cancel withdraws its sampling request once the host has it,
	// as a server does that stops waiting (notifications/cancelled).
	mcp.AddTool(s, &mcp.Tool{Name: "ask-then-cancel", Annotations: ro}, func(ctx context.Context, req *mcp.CallToolRequest, in q) (*mcp.CallToolResult, any, error) {
		cctx, cancel := context.WithCancel(ctx)
		defer cancel()
		go func() {
			select {
			case <-a.hostAsked:
				cancel()
			case <-cctx.Done():
			}
		}()
		_, err := req.Session.CreateMessage(cctx, &mcp.CreateMessageParams{MaxTokens: 50,
			Messages: []*mcp.SamplingMessage{{Role: "user", Content: &mcp.TextContent{Text: in.Q}}}})
		if err == nil {
			return answer("the host answered a withdrawn request", nil)
		}
		// The notifications/cancelled travels on this call's stream, so
		// the tool keeps working (as a real one would) rather than end it.
		select {
		case <-a.hostDone:
			return answer("withdrawn", nil)
		case <-time.After(20 * time.Second):
			return answer("withdrawn, and the host never heard", nil)
		}
	})
	mcp.AddTool(s, &mcp.Tool{Name: "elicit", Annotations: ro}, func(ctx context.Context, req *mcp.CallToolRequest, in q) (*mcp.CallToolResult, any, error) {
		res, err := req.Session.Elicit(ctx, &mcp.ElicitParams{Message: in.Q, RequestedSchema: map[string]any{
			"type": "object", "properties": map[string]any{"name": map[string]any{"type": "string"}}}})
		if err != nil {
			return answer("", err)
		}
		return answer(fmt.Sprintf("elicited: %s %v", res.Action, res.Content["name"]), nil)
	})
	// What Plexus does not declare, asked all the same: the SDK's server
	// checks url mode against the client's capabilities, so the asker
	// claims its client declared it (receivingMiddleware).
	mcp.AddTool(s, &mcp.Tool{Name: "elicit-url", Annotations: ro}, func(ctx context.Context, req *mcp.CallToolRequest, in q) (*mcp.CallToolResult, any, error) {
		res, err := req.Session.Elicit(ctx, &mcp.ElicitParams{Mode: "url", Message: in.Q, URL: "https://evil.example/login", ElicitationID: "e1"})
		if err != nil {
			return answer("", err)
		}
		return answer("elicited: "+string(res.Action), nil)
	})
	mcp.AddTool(s, &mcp.Tool{Name: "ask-tools", Annotations: ro}, func(ctx context.Context, req *mcp.CallToolRequest, in q) (*mcp.CallToolResult, any, error) {
		res, err := req.Session.CreateMessageWithTools(ctx, &mcp.CreateMessageWithToolsParams{MaxTokens: 50,
			Messages: []*mcp.SamplingMessageV2{{Role: "user", Content: []mcp.Content{&mcp.TextContent{Text: in.Q}}}},
			Tools:    []*mcp.Tool{{Name: "fetch", InputSchema: map[string]any{"type": "object"}}}})
		if err != nil {
			return answer("", err)
		}
		return answer("sampled by "+res.Model, nil)
	})
	s.AddReceivingMiddleware(claimURLElicitation)
	// A SEP-2243 tool: its region argument is mirrored into an
	// Mcp-Param-Region header.
	mcp.AddTool(s, &mcp.Tool{Name: "region", Annotations: ro, InputSchema: json.RawMessage(`{"type":"object","properties":{
		"region":{"type":"string","x-mcp-header":"Region"},"level":{"type":"integer"}}}`)},
		func(ctx context.Context, req *mcp.CallToolRequest, in struct {
			Region string `json:"region"`
		}) (*mcp.CallToolResult, any, error) {
			a.regions.Add(1)
			return answer("region="+in.Region, nil)
		})
	// What the conformance everything-server's test_missing_capability
	// does: refuse a caller that does not declare sampling, as the caller
	// declares it for this very request or else at its handshake.
	mcp.AddTool(s, &mcp.Tool{Name: "needs-sampling", Annotations: ro}, func(ctx context.Context, req *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, any, error) {
		if caps := req.ClientCapabilities(); caps != nil && caps.Sampling != nil {
			return answer("ran", nil)
		}
		data, err := json.Marshal(mcp.MissingRequiredClientCapabilityData{RequiredCapabilities: &mcp.ClientCapabilities{Sampling: &mcp.SamplingCapabilities{}}})
		if err != nil {
			return nil, nil, err
		}
		return nil, nil, &jsonrpc.Error{Code: mcp.CodeMissingRequiredClientCapabilities, Message: "sampling required", Data: data}
	})
	mcp.AddTool(s, &mcp.Tool{Name: "roots", Annotations: ro}, func(ctx context.Context, req *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, any, error) {
		res, err := req.Session.ListRoots(ctx, nil)
		if err != nil {
			return answer("", err)
		}
		var uris []string
		for _, r := range res.Roots {
			uris = append(uris, r.URI)
		}
		return answer("roots: "+strings.Join(uris, ","), nil)
	})
	mcp.AddTool(s, &mcp.Tool{Name: "log", Annotations: ro}, func(ctx context.Context, req *mcp.CallToolRequest, in q) (*mcp.CallToolResult, any, error) {
		for _, level := range []mcp.LoggingLevel{"debug", "warning"} {
			if err := req.Session.Log(ctx, &mcp.LoggingMessageParams{Level: level, Logger: "asker", Data: in.Q + " at " + string(level)}); err != nil {
				return answer("", err)
			}
		}
		return answer("logged", nil)
	})
	return s
}

// claimURLElicitation records the client's capabilities as offering url
// elicitation, whatever it declared.
func claimURLElicitation(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		if p, ok := req.GetParams().(*mcp.InitializeParams); ok && p != nil && p.Capabilities != nil && p.Capabilities.Elicitation != nil {
			p.Capabilities.Elicitation.URL = &mcp.URLElicitationCapabilities{}
		}
		return next(ctx, method, req)
	}
}

// barrier lets n callers through together.
type barrier struct {
	mu   sync.Mutex
	n    int
	open chan struct{}
}

func newBarrier(n int) *barrier { return &barrier{n: n, open: make(chan struct{})} }

func (b *barrier) arrive(ctx context.Context) error {
	b.mu.Lock()
	if b.n--; b.n == 0 {
		close(b.open)
	}
	b.mu.Unlock()
	select {
	case <-b.open:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// ingest adds the MCP server at url as the source name, its client run
// until the test ends.
func (f *fixture) ingest(name, url string) *mcpclient.Client {
	f.t.Helper()
	return f.ingestServer(name, mcpclient.ServerConfig{URL: url}, mcpclient.Options{})
}

// ingestServer adds the MCP server cfg as the source name.
func (f *fixture) ingestServer(name string, cfg mcpclient.ServerConfig, opts mcpclient.Options) *mcpclient.Client {
	f.t.Helper()
	opts.Logger = f.log
	c, err := mcpclient.New(name, cfg, opts)
	if err != nil {
		f.t.Fatal(err)
	}
	f.mcpT.Attach(c)
	ctx, cancel := context.WithCancel(f.ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := c.Run(ctx); err != nil {
			f.t.Errorf("mcp client %s: %v", name, err)
		}
	}()
	f.t.Cleanup(func() { cancel(); <-done })
	select {
	case <-c.Ready():
	case <-time.After(30 * time.Second):
		f.t.Fatalf("the MCP server %s was not listed", name)
	}
	if _, err := f.reg.Add(f.ctx, c); err != nil {
		f.t.Fatal(err)
	}
	return c
}

// sampler answers sampling requests as the host's model would, recording
// what it was asked.
type sampler struct {
	name string
	mu   sync.Mutex
	seen []*mcp.CreateMessageParams
}

func (s *sampler) handle(_ context.Context, req *mcp.CreateMessageRequest) (*mcp.CreateMessageResult, error) {
	s.mu.Lock()
	s.seen = append(s.seen, req.Params)
	s.mu.Unlock()
	q := req.Params.Messages[0].Content.(*mcp.TextContent).Text
	return &mcp.CreateMessageResult{Role: "assistant", Model: s.name, Content: &mcp.TextContent{Text: "42 for " + q}}, nil
}

func (s *sampler) asked() []*mcp.CreateMessageParams {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]*mcp.CreateMessageParams(nil), s.seen...)
}

// TestRelays: what the ingested server asks while a host's call runs
// reaches that host's handlers, and their answers come back to the server's
// tool: sampling, elicitation, roots; its log messages reach the host at
// the level the host set.
func TestRelays(t *testing.T) {
	f := newFixture(t, mcpserver.Options{})
	f.ingest("asker", newAsker(t, nil, nil).url)
	smp := &sampler{name: "host-model"}
	logs := make(chan *mcp.LoggingMessageParams, 10)
	hostClient := mcp.NewClient(&mcp.Implementation{Name: "claude-code", Version: "1"}, &mcp.ClientOptions{
		CreateMessageHandler: smp.handle,
		ElicitationHandler: func(_ context.Context, req *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
			return &mcp.ElicitResult{Action: "accept", Content: map[string]any{"name": "Ada (" + req.Params.Message + ")"}}, nil
		},
		LoggingMessageHandler: func(_ context.Context, req *mcp.LoggingMessageRequest) { logs <- req.Params },
	})
	hostClient.AddRoots(&mcp.Root{URI: "file:///work/project", Name: "project"})
	cs := f.connectClient(f.agent("claude"), hostClient)
	if err := cs.SetLoggingLevel(context.Background(), &mcp.SetLoggingLevelParams{Level: "info"}); err != nil {
		t.Fatal(err)
	}

	for _, tc := range []struct {
		tool string
		args map[string]any
		want string
	}{
		{"mcp__asker__ask", map[string]any{"q": "the answer?"}, "sampled: 42 for the answer? by host-model"},
		{"mcp__asker__elicit", map[string]any{"q": "your name?"}, `elicited: accept Ada ([from MCP server "asker" via Plexus — answering here approves nothing in Plexus] your name?)`},
		{"mcp__asker__roots", map[string]any{}, "roots: file:///work/project"},
		{"mcp__asker__log", map[string]any{"q": "hello"}, "logged"},
	} {
		t.Run(tc.tool, func(t *testing.T) {
			res := call(t, cs, tc.tool, tc.args)
			if res.IsError || text(res) != tc.want {
				t.Errorf("%s = %q (isError %v), want %q", tc.tool, text(res), res.IsError, tc.want)
			}
		})
	}
	if got := smp.asked(); len(got) != 1 || got[0].MaxTokens != 50 || len(got[0].Meta) != 0 {
		t.Errorf("the host was asked %+v, want the one sampling request as the server sent it", got)
	}
	// The host set info: the debug message is not sent, the warning is.
	select {
	case p := <-logs:
		if p.Level != "warning" || p.Data != "hello at warning" || p.Logger != "asker" {
			t.Errorf("log message = %+v, want the server's warning", p)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the server's log message did not reach the host")
	}
}

// TestRelayRefusedWhereTheHostCannotAnswer: a host that does not offer
// sampling, with a session or sessionless, is not asked; the server's
// request gets an error at once, which its tool reports.
func TestRelayRefusedWhereTheHostCannotAnswer(t *testing.T) {
	f := newFixture(t, mcpserver.Options{})
	f.ingest("asker", newAsker(t, nil, nil).url)
	pat := f.agent("claude")
	for _, tc := range []struct {
		name, version, want string
	}{
		{"no sampling", "2025-11-25", "does not offer sampling/createMessage"},
		{"sessionless without sampling", "2026-07-28", "cursor does not offer sampling/createMessage"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cs := f.connectVersion(pat, "cursor", tc.version, nil)
			res := call(t, cs, "mcp__asker__ask", map[string]any{"q": "x"})
			if !strings.HasPrefix(text(res), "error: ") || !strings.Contains(text(res), tc.want) {
				t.Errorf("ask = %q, want the server's error saying %q", text(res), tc.want)
			}
		})
	}
}

// TestRelayInvokeCallerGetsError: a call made through HTTP /invoke has no
// host to ask: the server's sampling request is answered with an error at
// once rather than left waiting, and the call completes.
func TestRelayInvokeCallerGetsError(t *testing.T) {
	f := newFixture(t, mcpserver.Options{})
	f.ingest("asker", newAsker(t, nil, nil).url)
	ctx := context.Background()
	conn, err := f.gw.ConnectAgent(ctx, gateway.Credentials{ConnectionKey: f.home.ConnectionKey}, plexus.ConnectRequest{AgentID: "script"})
	if err != nil {
		t.Fatal(err)
	}
	agent, err := client.NewAgent(f.base, client.NewCredStore(t.TempDir()))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := agent.Enroll(ctx, conn.Code, false); err != nil {
		t.Fatal(err)
	}
	cctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	resp, err := agent.Call(cctx, "mcp.asker.ask", map[string]any{"q": "x"}, client.CallOptions{})
	if err != nil {
		t.Fatalf("call: %v", err)
	}
	if got := string(resp.MCPResult); !strings.Contains(got, "error: ") || !strings.Contains(got, "Plexus cannot relay sampling/createMessage") {
		t.Errorf("result = %s, want the server's tool reporting Plexus's refusal", got)
	}
}

// connectClient opens an MCP session with c as the host, over Streamable
// HTTP, at 2025-11-25.
func (f *fixture) connectClient(pat string, c *mcp.Client) *mcp.ClientSession {
	f.t.Helper()
	tr := &mcp.StreamableClientTransport{Endpoint: f.url,
		HTTPClient: &http.Client{Transport: bearerTransport{pat: pat, base: f.hosts}}}
	cs, err := c.Connect(context.Background(), tr, &mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
	if err != nil {
		f.t.Fatalf("connect: %v", err)
	}
	f.t.Cleanup(func() {
		if err := cs.Close(); err != nil {
			f.t.Logf("close session: %v", err)
		}
	})
	return cs
}

// TestRelaysOverStdio: a server reached over stdio (this test binary, see
// TestMain) asks the host whose call it runs: the one caller in flight.
func TestRelaysOverStdio(t *testing.T) {
	f := newFixture(t, mcpserver.Options{})
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	plat := platform.New(platform.Options{Home: t.TempDir(), Env: os.Environ()})
	f.ingestServer("asker", mcpclient.ServerConfig{Command: self, Env: map[string]string{askerEnv: "1"}},
		mcpclient.Options{Env: plat.Env(), Processes: plat})
	smp := &sampler{name: "stdio-model"}
	cs := f.connectClient(f.agent("claude"), mcp.NewClient(&mcp.Implementation{Name: "claude-code", Version: "1"},
		&mcp.ClientOptions{CreateMessageHandler: smp.handle}))
	if got := text(call(t, cs, "mcp__asker__ask", map[string]any{"q": "over stdio"})); got != "sampled: 42 for over stdio by stdio-model" {
		t.Errorf("ask = %q, want the host's sampled answer", got)
	}
}

// TestRelayCancelledByTheServer: cancellation runs upstream → host too: a
// server that withdraws the sampling request it sent during a call
// (notifications/cancelled) has the host's pending request cancelled, and
// the call completes with what the server answers then.
func TestRelayCancelledByTheServer(t *testing.T) {
	f := newFixture(t, mcpserver.Options{})
	a := newAsker(t, nil, nil)
	f.ingest("asker", a.url)
	cancelled := make(chan error, 1)
	hostClient := mcp.NewClient(&mcp.Implementation{Name: "claude-code", Version: "1"}, &mcp.ClientOptions{
		CreateMessageHandler: func(ctx context.Context, _ *mcp.CreateMessageRequest) (*mcp.CreateMessageResult, error) {
			defer close(a.hostDone)
			close(a.hostAsked)
			select {
			case <-ctx.Done():
				cancelled <- context.Cause(ctx)
				return nil, ctx.Err()
			case <-time.After(30 * time.Second):
				cancelled <- nil
				return nil, errors.New("never cancelled")
			}
		},
	})
	cs := f.connectClient(f.agent("claude"), hostClient)
	res := call(t, cs, "mcp__asker__ask-then-cancel", map[string]any{"q": "still there?"})
	if res.IsError || text(res) != "withdrawn" {
		t.Errorf("the call = %q (isError %v), want the server's answer after withdrawing", text(res), res.IsError)
	}
	if err := <-cancelled; err == nil {
		t.Error("the host's sampling request was never cancelled")
	}
}
