package mcpclient

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// A panic inside the SDK's sending path (where it decodes a call's result)
// fails that call with errSDKPanicked and is logged with its method, never
// with what the panic carries unless it is a runtime error's message.
func TestRecoverDecoding(t *testing.T) {
	const secret = `{"inputRequests":{"a":null}}`
	for _, tc := range []struct {
		name  string
		panic func()
		want  string // in the log
	}{
		{name: "runtime error", panic: func() {
			var m map[string]*struct{ Method string }
			_ = m["a"].Method // the SDK's own: a nil pointer
		}, want: "nil pointer dereference"},
		{name: "a value", panic: func() { panic(errors.New(secret)) }, want: "*errors.errorString"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var logs bytes.Buffer
			c, err := New("up", ServerConfig{URL: "http://127.0.0.1:1/mcp"}, Options{Logger: slog.New(slog.NewTextHandler(&logs, nil))})
			if err != nil {
				t.Fatal(err)
			}
			h := c.recoverDecoding(func(context.Context, string, mcp.Request) (mcp.Result, error) {
				tc.panic()
				return &mcp.GetPromptResult{}, nil
			})
			res, err := h(t.Context(), "prompts/get", nil)
			if res != nil || !errors.Is(err, errSDKPanicked) {
				t.Errorf("got %v, %v; want no result and %v", res, err, errSDKPanicked)
			}
			if l := logs.String(); !strings.Contains(l, "prompts/get") || !strings.Contains(l, tc.want) || strings.Contains(l, "inputRequests") {
				t.Errorf("log = %s, want the method and %q, and nothing of the panic's value", l, tc.want)
			}
		})
	}
	c, err := New("up", ServerConfig{URL: "http://127.0.0.1:1/mcp"}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	want := &mcp.GetPromptResult{Description: "d"}
	if res, err := c.recoverDecoding(func(context.Context, string, mcp.Request) (mcp.Result, error) { return want, nil })(t.Context(), "prompts/get", nil); res != want || err != nil {
		t.Errorf("without a panic: %v, %v; want the result as it was", res, err)
	}
}

// sdkReadable refuses every result the SDK's decoder panics on, and only
// those: each is decoded here by the SDK (under recover) to check.
func TestSDKReadable(t *testing.T) {
	for _, raw := range []string{
		`{"content":[],"inputRequests":{"a":null}}`,
		`{"content":[],"inputRequests":{"a":{"method":"roots/list","params":{}},"b":null}}`,
		`{"content":[],"inputRequests":{"a":null,"a":{"method":"roots/list","params":{}}}}`, // the last of a name wins
		`{"content":[],"inputRequests":{"a":null},"inputRequests":{}}`,                      // repeated: each decoded
		`{"content":[],"inputRequest\u0073":{"a" : null }}`,
		`{"content":[],"inputRequests":null}`,
		`{"content":[],"inputRequests":{}}`,
		`{"content":[],"inputRequests":{"a":{"method":"roots/list","params":{}}}}`,
		`{"content":[],"inputRequests":{"a":1}}`,
		`{"content":[],"inputRequests":[null]}`,
		`{"content":[{"type":"text","text":"\"inputRequests\":{\"a\":null}"}]}`,
		`{"content":[],"x":{"inputRequests":{"a":null}}}`,
	} {
		panicked := func() (p any) {
			defer func() { p = recover() }()
			var res mcp.CallToolResult
			_ = json.Unmarshal([]byte(raw), &res) // whether it refuses is not the question
			return nil
		}() != nil
		if got := sdkReadable([]byte(raw)) != nil; got != panicked {
			t.Errorf("sdkReadable(%s) refuses: %v; the SDK's decoder panics: %v", raw, got, panicked)
		}
	}
}
