package mcpserver_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/plexus-gw/plexus"
	"github.com/plexus-gw/plexus/mcpserver"
)

// The results of the verbatim server's tools: each carries a member the
// SDK's types do not know ("x-upstream"), which only a result passed byte
// for byte keeps, and characters an HTML-escaping encoder would rewrite.
var verbatimResults = map[string]string{
	"ok":   `{"content":[{"type":"text","text":"kept <&> as sent"}],"x-upstream":{"kept":true}}`,
	"fail": `{"content":[{"type":"text","text":"it broke"}],"isError":true,"x-upstream":{"kept":true}}`,
}

// rawResult is a tool result the verbatim server sends as raw.
type rawResult struct {
	*mcp.CallToolResult
	raw string
}

func (r *rawResult) MarshalJSON() ([]byte, error) { return []byte(r.raw), nil }

// newVerbatim serves, over Streamable HTTP, an MCP server whose tools
// answer verbatimResults, and returns its URL.
func newVerbatim(t *testing.T) string {
	s := mcp.NewServer(&mcp.Implementation{Name: "verbatim", Version: "1"}, nil)
	for name := range verbatimResults {
		s.AddTool(&mcp.Tool{Name: name, InputSchema: json.RawMessage(`{"type":"object"}`), Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true}},
			func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
				return &mcp.CallToolResult{}, nil
			})
	}
	s.AddReceivingMiddleware(func(next mcp.MethodHandler) mcp.MethodHandler {
		return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
			if call, ok := req.(*mcp.CallToolRequest); ok && method == "tools/call" {
				return &rawResult{CallToolResult: &mcp.CallToolResult{}, raw: verbatimResults[call.Params.Name]}, nil
			}
			return next(ctx, method, req)
		}
	})
	ts := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s }, nil))
	t.Cleanup(ts.Close)
	return ts.URL
}

// teeTransport keeps a copy of every response body the host reads.
type teeTransport struct {
	base http.RoundTripper
	mu   sync.Mutex
	read bytes.Buffer
}

func (t *teeTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	resp, err := t.base.RoundTrip(r)
	if err == nil {
		resp.Body = struct {
			io.Reader
			io.Closer
		}{io.TeeReader(resp.Body, t), resp.Body}
	}
	return resp, err
}

func (t *teeTransport) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.read.Write(p)
}

func (t *teeTransport) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.read.String()
}

// TestToolResultVerbatim: an ingested MCP tool's result, success or
// isError, reaches a 2025-11-25 host as the bytes its server sent (issue
// 16: no decode and re-encode); a 2026-07-28 host gets it reshaped
// (resultType), and a front door with middleware hands it to them as the
// SDK's type, isError and all.
func TestToolResultVerbatim(t *testing.T) {
	var seen []*mcp.CallToolResult
	var seenMu sync.Mutex
	watch := func(next mcp.MethodHandler) mcp.MethodHandler {
		return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
			res, err := next(ctx, method, req)
			if r, ok := res.(*mcp.CallToolResult); ok {
				seenMu.Lock()
				seen = append(seen, r)
				seenMu.Unlock()
			}
			return res, err
		}
	}
	for _, tc := range []struct {
		name, version string
		opts          mcpserver.Options
		verbatim      bool
	}{
		{"2025-11-25", "2025-11-25", mcpserver.Options{}, true},
		{"2026-07-28", "2026-07-28", mcpserver.Options{}, false},
		{"with middleware", "2025-11-25", mcpserver.Options{Middleware: []mcp.Middleware{watch}}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, tc.opts)
			f.ingest("verbatim", newVerbatim(t))
			pat := f.agent("desk", standing("mcp.verbatim.ok", plexus.VerbRead), standing("mcp.verbatim.fail", plexus.VerbRead))
			tee := &teeTransport{base: bearerTransport{pat: pat, base: f.hosts}}
			cs, err := mcp.NewClient(&mcp.Implementation{Name: "desk", Version: "1"}, nil).Connect(context.Background(),
				&mcp.StreamableClientTransport{Endpoint: f.url, HTTPClient: &http.Client{Transport: tee}},
				&mcp.ClientSessionOptions{ProtocolVersion: tc.version})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() {
				if err := cs.Close(); err != nil {
					t.Logf("close: %v", err)
				}
			})
			for tool, raw := range verbatimResults {
				res := call(t, cs, "mcp__verbatim__"+tool, map[string]any{})
				if res.IsError != (tool == "fail") || text(res) == "" {
					t.Errorf("%s: isError %v, text %q", tool, res.IsError, text(res))
				}
				if got := strings.Contains(tee.String(), `"result":`+raw); got != tc.verbatim {
					t.Errorf("%s: the server's result verbatim in what the host read: %v, want %v\nread: %s", tool, got, tc.verbatim, tee.String())
				}
			}
			if tc.opts.Middleware == nil {
				return
			}
			seenMu.Lock()
			defer seenMu.Unlock()
			if len(seen) != 2 || seen[0].IsError == seen[1].IsError {
				t.Errorf("the middleware saw %d tool results as the SDK's type, want both, one an error", len(seen))
			}
		})
	}
}

// rawPrompt is a prompt result the null-input server sends as raw.
type rawPrompt struct {
	*mcp.GetPromptResult
	raw string
}

func (r *rawPrompt) MarshalJSON() ([]byte, error) { return []byte(r.raw), nil }

// newNullInput serves, over Streamable HTTP, an MCP server whose tool
// "null" and prompt "null" answer with an input request that is null
// (which the MCP Go SDK v1.8.0 panics decoding: docs/mcp.md), and whose
// tool "ok" answers; it returns its URL.
func newNullInput(t *testing.T) string {
	s := mcp.NewServer(&mcp.Implementation{Name: "nullinput", Version: "1"}, nil)
	for _, name := range []string{"null", "ok"} {
		s.AddTool(&mcp.Tool{Name: name, InputSchema: json.RawMessage(`{"type":"object"}`), Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true}},
			func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
				return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "fine"}}}, nil
			})
	}
	s.AddPrompt(&mcp.Prompt{Name: "null"}, func(context.Context, *mcp.GetPromptRequest) (*mcp.GetPromptResult, error) {
		return &mcp.GetPromptResult{}, nil
	})
	s.AddReceivingMiddleware(func(next mcp.MethodHandler) mcp.MethodHandler {
		return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
			switch r := req.(type) {
			case *mcp.CallToolRequest:
				if r.Params.Name == "null" {
					return &rawResult{CallToolResult: &mcp.CallToolResult{}, raw: `{"content":[],"inputRequests":{"a":null}}`}, nil
				}
			case *mcp.GetPromptRequest:
				return &rawPrompt{GetPromptResult: &mcp.GetPromptResult{}, raw: `{"messages":[],"inputRequests":{"a":null},"requestState":"s"}`}, nil
			}
			return next(ctx, method, req)
		}
	})
	ts := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s }, nil))
	t.Cleanup(ts.Close)
	return ts.URL
}

// TestUpstreamNullInputRequest: an upstream whose result has an input
// request that is null (which panics the MCP Go SDK's decoder) fails the
// host's call through the front door with an error, on the pass-through
// (tools/call) and on the SDK's path (prompts/get), and the daemon keeps
// serving: the next call answers. The SDK is never handed the result, and
// nothing of it reaches the log.
func TestUpstreamNullInputRequest(t *testing.T) {
	f := newFixture(t, mcpserver.Options{})
	f.ingest("nullinput", newNullInput(t))
	pat := f.agent("desk", standing("mcp.nullinput.null", plexus.VerbRead), standing("mcp.nullinput.ok", plexus.VerbRead),
		standing("mcp.nullinput.prompt.null", plexus.VerbRead))
	cs := f.connect(pat, "desk", nil)
	ctx := context.Background()
	for range 2 { // twice: the first failure left everything serving
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "mcp__nullinput__null", Arguments: map[string]any{}})
		if err == nil && !res.IsError {
			t.Errorf("the tool whose result has a null input request answered %s, want an error", jsonOf(t, res))
		}
		gp, err := cs.GetPrompt(ctx, &mcp.GetPromptParams{Name: mcpserver.ToolName("mcp.nullinput.prompt.null")})
		if err == nil {
			t.Errorf("the prompt whose result has a null input request answered %s, want an error", jsonOf(t, gp))
		}
		if res := call(t, cs, "mcp__nullinput__ok", map[string]any{}); res.IsError || text(res) != "fine" {
			t.Errorf("after the failed calls: ok answered %s, want fine", jsonOf(t, res))
		}
	}
	logs := f.logs.String()
	if strings.Contains(logs, `"a":null`) {
		t.Errorf("the server's result reached the log:\n%s", logs)
	}
	// Refused before the SDK's decoder saw it, not recovered after.
	if strings.Contains(logs, "panicked") {
		t.Errorf("the SDK's decoder was handed the result:\n%s", logs)
	}
}
