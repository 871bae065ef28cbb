package mcpclient_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/plexus-gw/plexus"
	"github.com/plexus-gw/plexus/transports/mcpclient"
)

// sdkServer is the SDK's own server over Streamable HTTP on loopback.
type sdkServer struct {
	srv       *mcp.Server
	ts        *httptest.Server
	cancelled chan string // why each slow call ended

	mu    sync.Mutex
	auths []string // the Authorization headers seen
}

func newSDKServer(t *testing.T) *sdkServer {
	t.Helper()
	s := &sdkServer{cancelled: make(chan string, 4)}
	s.srv = mcp.NewServer(&mcp.Implementation{Name: "sdk-http", Version: "1"}, &mcp.ServerOptions{PageSize: 2})
	type greetIn struct {
		Name string `json:"name"`
	}
	type greetOut struct {
		Greeting string `json:"greeting"`
	}
	mcp.AddTool(s.srv, &mcp.Tool{Name: "greet", Description: "Greets someone.", Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true}},
		func(_ context.Context, _ *mcp.CallToolRequest, in greetIn) (*mcp.CallToolResult, greetOut, error) {
			return nil, greetOut{Greeting: "hello " + in.Name}, nil
		})
	s.srv.AddTool(&mcp.Tool{Name: "progress", InputSchema: json.RawMessage(`{"type":"object"}`)}, func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		for i := 1; i <= 3; i++ {
			if err := req.Session.NotifyProgress(ctx, &mcp.ProgressNotificationParams{ProgressToken: req.Params.GetProgressToken(), Progress: float64(i), Total: 3}); err != nil {
				return nil, err
			}
		}
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "done"}}}, nil
	})
	s.srv.AddTool(&mcp.Tool{Name: "slow", InputSchema: json.RawMessage(`{"type":"object"}`)}, func(ctx context.Context, _ *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		<-ctx.Done()
		s.cancelled <- context.Cause(ctx).Error()
		return nil, ctx.Err()
	})
	for _, n := range []string{"t1", "t2", "t3"} {
		s.srv.AddTool(&mcp.Tool{Name: n, InputSchema: json.RawMessage(`{"type":"object"}`)}, func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return &mcp.CallToolResult{}, nil
		})
	}
	s.srv.AddResource(&mcp.Resource{URI: "mem://readme", Name: "readme", MIMEType: "text/plain"}, func(_ context.Context, req *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
		return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{URI: req.Params.URI, MIMEType: "text/plain", Text: "read me"}}}, nil
	})
	s.srv.AddPrompt(&mcp.Prompt{Name: "hi", Arguments: []*mcp.PromptArgument{{Name: "who", Required: true}}}, func(_ context.Context, req *mcp.GetPromptRequest) (*mcp.GetPromptResult, error) {
		return &mcp.GetPromptResult{Messages: []*mcp.PromptMessage{{Role: "user", Content: &mcp.TextContent{Text: "hi " + req.Params.Arguments["who"]}}}}, nil
	})
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s.srv }, nil)
	s.ts = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		s.auths = append(s.auths, r.Header.Get("Authorization"))
		s.mu.Unlock()
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(s.ts.Close)
	return s
}

// TestStreamableHTTP connects over url to the SDK's server.
func TestStreamableHTTP(t *testing.T) {
	failOnLeakedGoroutines(t)
	s := newSDKServer(t)
	h := startClient(t, "web", mcpclient.ServerConfig{URL: s.ts.URL + "/mcp", Headers: map[string]string{"Authorization": "Bearer tok-3f9a1c"}}, mcpclient.Options{})
	h.waitReady(t)

	t.Run("Listed", func(t *testing.T) {
		m := h.entries(t)
		for _, id := range []string{"mcp.web.greet", "mcp.web.progress", "mcp.web.slow", "mcp.web.t1", "mcp.web.t3", "mcp.web.resource.readme", "mcp.web.prompt.hi"} {
			if _, ok := m[id]; !ok {
				t.Errorf("no entry %s; have %v", id, ids(m))
			}
		}
		greet := m["mcp.web.greet"]
		if greet.Grants[0] != plexus.VerbRead || len(greet.IO.Output) == 0 || greet.MCP.ProtocolVersion == "" {
			t.Errorf("greet: grants %v output %s mcp %+v", greet.Grants, greet.IO.Output, greet.MCP)
		}
		var raw map[string]any
		if err := json.Unmarshal(greet.MCP.Raw, &raw); err != nil || raw["name"] != "greet" || raw["description"] != "Greets someone." {
			t.Errorf("mcp.raw %s", greet.MCP.Raw)
		}
	})

	t.Run("Call", func(t *testing.T) {
		r := h.call(t, context.Background(), "mcp.web.greet", map[string]any{"name": "Ada"}, nil)
		if !r.OK {
			t.Fatal(r.Error)
		}
		if sc, _ := r.Data.(json.RawMessage); string(sc) != `{"greeting":"hello Ada"}` {
			t.Errorf("data %s, mcpResult %s", sc, r.MCPResult)
		}
		if res := h.ok(t, "mcp.web.resource.readme", nil); !strings.Contains(fmt.Sprint(res), "read me") {
			t.Errorf("resource %v", res)
		}
		if res := h.ok(t, "mcp.web.prompt.hi", map[string]any{"who": "Bo"}); !strings.Contains(fmt.Sprint(res), "hi Bo") {
			t.Errorf("prompt %v", res)
		}
	})

	t.Run("Progress", func(t *testing.T) {
		var pl progressLog
		if r := h.call(t, context.Background(), "mcp.web.progress", nil, &pl); !r.OK {
			t.Fatal(r.Error)
		}
		if got := pl.all(); len(got) != 3 || *got[2].Progress != 3 || *got[2].Total != 3 {
			t.Errorf("progress %+v", got)
		}
	})

	t.Run("Cancelled", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
		defer cancel()
		wantErr(t, h.call(t, ctx, "mcp.web.slow", nil, nil), plexus.CodeTransportError, "timed out")
		select {
		case why := <-s.cancelled:
			if !strings.Contains(why, "cancel") {
				t.Errorf("the server's call ended with %q", why)
			}
		case <-time.After(10 * time.Second):
			t.Error("the server's call was not cancelled")
		}
	})

	t.Run("ListChanged", func(t *testing.T) {
		before := h.changeCount()
		s.srv.AddTool(&mcp.Tool{Name: "late", InputSchema: json.RawMessage(`{"type":"object"}`)}, func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return &mcp.CallToolResult{}, nil
		})
		eventually(t, 10*time.Second, "the new tool is listed", func() bool { _, ok := h.entries(t)["mcp.web.late"]; return ok })
		if h.changeCount() <= before {
			t.Error("OnChange was not called")
		}
	})

	h.stop() // before the server goes, so that the session ends cleanly

	t.Run("Headers", func(t *testing.T) {
		s.mu.Lock()
		defer s.mu.Unlock()
		for _, a := range s.auths {
			if a != "Bearer tok-3f9a1c" {
				t.Errorf("a request carried Authorization %q", a)
			}
		}
		if strings.Contains(h.logs.String(), "tok-3f9a1c") {
			t.Error("the log holds a header value")
		}
	})
}

// TestStreamableHTTPSessionGone ends the client's HTTP session on the
// server (as a restarted or expiring server does): the client notices,
// reconnects and lists again.
func TestStreamableHTTPSessionGone(t *testing.T) {
	failOnLeakedGoroutines(t)
	srv := mcp.NewServer(&mcp.Implementation{Name: "sdk-http", Version: "1"}, nil)
	srv.AddTool(&mcp.Tool{Name: "ping", InputSchema: json.RawMessage(`{"type":"object"}`)}, func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "pong"}}}, nil
	})
	handler := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil)
	var mu sync.Mutex
	var sid string
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if id := r.Header.Get("Mcp-Session-Id"); id != "" {
			mu.Lock()
			sid = id
			mu.Unlock()
		}
		handler.ServeHTTP(w, r)
	}))
	t.Cleanup(ts.Close)
	h := startClient(t, "web", mcpclient.ServerConfig{URL: ts.URL}, mcpclient.Options{})
	h.waitReady(t)
	h.ok(t, "mcp.web.ping", nil)
	if n := h.c.Health(context.Background()).Restarts; n != 0 {
		t.Errorf("restarts before any loss = %d, want 0", n)
	}

	mu.Lock()
	req, _ := http.NewRequest(http.MethodDelete, ts.URL, nil)
	req.Header.Set("Mcp-Session-Id", sid)
	mu.Unlock()
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	http.DefaultClient.CloseIdleConnections()

	eventually(t, 20*time.Second, "health goes unavailable", func() bool {
		return slices.ContainsFunc(h.healthLog(), func(hl plexus.Health) bool { return hl.Status == plexus.HealthUnavailable })
	})
	eventually(t, 20*time.Second, "health ok again", func() bool { return h.c.Health(context.Background()).Status == plexus.HealthOK })
	h.ok(t, "mcp.web.ping", nil)
	if n := h.c.Health(context.Background()).Restarts; n != 1 {
		t.Errorf("restarts after one reconnect = %d, want 1", n)
	}
	if hl := h.healthLog(); len(hl) == 0 || hl[len(hl)-1].Status != plexus.HealthOK || hl[len(hl)-1].Restarts != 1 {
		t.Errorf("the last health reported = %+v, want ok with 1 restart", hl)
	}
	h.stop()
}

// TestRedirectKeepsSecretsHome: a url server's token (the SDK sets it per
// request) and its configured headers (secrets from ${secret:…}) never
// reach another origin, however the server redirects: another port of the
// same host (net/http would keep Authorization there) or another host
// name for the same address. The configured server (A) answers every
// request with a 307 to B; B must never see either secret.
func TestRedirectKeepsSecretsHome(t *testing.T) {
	for _, tc := range []struct {
		name   string
		header string
		other  func(b string) string
		cfg    func(a string) mcpclient.ServerConfig
		opts   mcpclient.Options
	}{
		{name: "TokenToAnotherPort", header: "Authorization", other: func(b string) string { return b },
			cfg: func(a string) mcpclient.ServerConfig { return mcpclient.ServerConfig{URL: a + "/mcp"} },
			opts: mcpclient.Options{SignIn: &mcpclient.SignIn{Handler: &tokenHandler{token: "canary-access-token"},
				Needed: func(err error) bool { return errors.Is(err, errNeedsSignIn) }}}},
		{name: "HeaderToAnotherHost", header: "X-Api-Key",
			other: func(b string) string { return strings.Replace(b, "127.0.0.1", "localhost", 1) },
			cfg: func(a string) mcpclient.ServerConfig {
				return mcpclient.ServerConfig{URL: a + "/mcp", Headers: map[string]string{"X-Api-Key": "canary-api-key"}}
			}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var mu sync.Mutex
			var leaked []string
			b := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				mu.Lock()
				leaked = append(leaked, r.Header.Get(tc.header))
				mu.Unlock()
				http.Error(w, "nope", http.StatusNotFound)
			}))
			defer b.Close()
			var hits int
			a := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				mu.Lock()
				hits++
				mu.Unlock()
				http.Redirect(w, r, tc.other(b.URL)+"/mcp", http.StatusTemporaryRedirect)
			}))
			defer a.Close()
			tc.opts.MinBackoff, tc.opts.MaxBackoff = time.Millisecond, 5*time.Millisecond
			startClient(t, "r", tc.cfg(a.URL), tc.opts)
			eventually(t, 10*time.Second, "three connection attempts", func() bool {
				mu.Lock()
				defer mu.Unlock()
				return hits >= 3
			})
			mu.Lock()
			defer mu.Unlock()
			for _, v := range leaked {
				if v != "" {
					t.Fatalf("another origin received the server's %s: %q", tc.header, v)
				}
			}
			if len(leaked) > 0 {
				t.Fatalf("the redirect to another origin was followed %d times (bare, but followed)", len(leaked))
			}
		})
	}
}

// TestStreamableHTTPResultRaw: a tools/call result reaches the caller as
// the server wrote it, whether the server answers with an event stream
// or with JSON, members the SDK does not model included (a re-encoding
// of the SDK's decoding would drop them).
func TestStreamableHTTPResultRaw(t *testing.T) {
	for _, tc := range []struct {
		name string
		json bool
	}{{"SSE", false}, {"JSON", true}} {
		t.Run(tc.name, func(t *testing.T) {
			failOnLeakedGoroutines(t)
			srv := mcp.NewServer(&mcp.Implementation{Name: "raw-http", Version: "1"}, nil)
			srv.AddTool(&mcp.Tool{Name: "odd", InputSchema: json.RawMessage(`{"type":"object"}`)}, func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
				return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "odd"}}}, nil
			})
			h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, &mcp.StreamableHTTPOptions{JSONResponse: tc.json})
			ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				h.ServeHTTP(&oddResult{ResponseWriter: w}, r)
			}))
			t.Cleanup(ts.Close)
			c := startClient(t, "web", mcpclient.ServerConfig{URL: ts.URL}, mcpclient.Options{})
			c.waitReady(t)
			r := c.call(t, context.Background(), "mcp.web.odd", nil, nil)
			if !r.OK {
				t.Fatal(r.Error)
			}
			if want := `{"x-unknown": [1,  2.50],"content":[{"type":"text","text":"odd"}]}`; string(r.MCPResult) != want {
				t.Errorf("mcpResult %s, want %s", r.MCPResult, want)
			}
			c.stop()
		})
	}
}

// oddResult writes a server's answers with a member the SDK does not model,
// spaced oddly, at the head of each tools/call result.
type oddResult struct{ http.ResponseWriter }

func (o *oddResult) WriteHeader(code int) {
	o.Header().Del("Content-Length")
	o.ResponseWriter.WriteHeader(code)
}

func (o *oddResult) Write(b []byte) (int, error) {
	if bytes.Contains(b, []byte(`"text":"odd"`)) {
		b = bytes.Replace(b, []byte(`"result":{`), []byte(`"result":{"x-unknown": [1,  2.50],`), 1)
	}
	if _, err := o.ResponseWriter.Write(b); err != nil {
		return 0, err
	}
	return len(b), nil
}

func (o *oddResult) Flush() { http.NewResponseController(o.ResponseWriter).Flush() }
