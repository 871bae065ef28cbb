//lint:file-ignore SA1019 sampling, elicitation, roots and logging are what the relays carry

package mcpclient

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/plexus-gw/plexus"
)

// TestPassHTTPAsTheSDK makes each call on one Streamable HTTP session twice,
// through Dispatch (Plexus's own POST, passhttp.go) and through the SDK's
// ClientSession (viaSDK), with the SDK's server answering with event
// streams and with JSON: the results, what the call's relay was asked and
// told, and the progress reported are the same.
func TestPassHTTPAsTheSDK(t *testing.T) {
	for _, mode := range []struct {
		name string
		json bool
	}{{"SSE", false}, {"JSON", true}} {
		t.Run(mode.name, func(t *testing.T) {
			c := startPassHTTP(t, &mcp.StreamableHTTPOptions{JSONResponse: mode.json})
			s, _ := c.current()
			if !passesHTTP(s) {
				t.Fatal("the session does not pass tools/call through")
			}
			for _, tc := range []struct {
				tool  string
				input map[string]any
			}{
				{"plain", map[string]any{"name": "Ada"}},
				{"structured", map[string]any{"name": "Bo"}},
				{"fails", nil},
				{"image", nil},
				{"protocolError", nil},
				{"nope", nil},
				{"asks", nil},
				{"rounds", nil},
			} {
				t.Run(tc.tool, func(t *testing.T) {
					if mode.json && (tc.tool == "asks" || tc.tool == "rounds") {
						t.Skip("a JSON answer carries no request of the server's")
					}
					pass := passCall(t, c, tc.tool, tc.input, false)
					sdk := passCall(t, c, tc.tool, tc.input, true)
					if tc.tool == "rounds" { // a round's input requests are answered at once, in any order
						slices.Sort(pass.Relayed)
						slices.Sort(sdk.Relayed)
					}
					if diff := cmp.Diff(sdk, pass); diff != "" {
						t.Errorf("through Dispatch vs the SDK (-sdk +dispatch):\n%s", diff)
					}
					if tc.tool == "asks" && (!strings.Contains(pass.Result, "sampled|accept|file:///work") || len(pass.Relayed) != 4 || len(pass.Progress) != 2) {
						t.Errorf("the host's part of the call: %+v", pass)
					}
					// The roots of the second round come from the host too.
					if tc.tool == "rounds" && (!pass.OK || !strings.Contains(pass.Result, `round=2`) || !strings.Contains(pass.Result, `file:///work`) || len(pass.Relayed) != 4) {
						t.Errorf("the host's part of the call in rounds: %+v", pass)
					}
				})
			}
		})
	}
}

// callSeen is what a call answered and what its relay and progress saw.
type callSeen struct {
	OK       bool
	Result   string
	Data     string
	Error    string
	Relayed  []string
	Progress []float64
}

// passCall calls tool on c's session, through the SDK's session when sdk
// is set, as Dispatch does otherwise.
func passCall(t *testing.T, c *Client, tool string, input map[string]any, sdk bool) callSeen {
	t.Helper()
	rec := &recordingRelay{}
	ctx, cancel := context.WithTimeout(plexus.WithRelay(context.Background(), rec), 20*time.Second)
	defer cancel()
	var mu sync.Mutex
	var progress []float64
	report := func(p plexus.InvokeProgress) {
		mu.Lock()
		progress = append(progress, *p.Progress)
		mu.Unlock()
	}
	rt, _ := json.Marshal(route{Primitive: PrimitiveTool, Name: tool})
	entry := plexus.Entry{ID: "mcp.web." + tool, Source: c.source, Route: rt}
	var r plexus.TransportResult
	if sdk {
		s, _ := c.current()
		token := "plexus-sdk-" + tool
		stop := s.c.route(token, report)
		end := s.c.r.calling(rec)
		r = c.viaSDK(ctx, s, route{Primitive: PrimitiveTool, Name: tool}, nil, input, token, entry.ID)
		end()
		stop()
	} else {
		r = c.dispatch(ctx, entry, input, plexus.DispatchContext{Progress: report})
	}
	seen := callSeen{OK: r.OK, Result: string(r.MCPResult), Relayed: rec.all(), Progress: progress}
	if r.Data != nil {
		seen.Data = fmt.Sprint(r.Data)
		if raw, ok := r.Data.(json.RawMessage); ok {
			seen.Data = string(raw)
		}
	}
	if r.Error != nil {
		seen.Error = fmt.Sprintf("%s: %s %v", r.Error.Code, r.Error.Message, r.Error.Detail)
	}
	return seen
}

// recordingRelay answers what a server asks as a host would, and records
// what it was asked and told.
type recordingRelay struct {
	mu   sync.Mutex
	seen []string
}

func (r *recordingRelay) Request(_ context.Context, method string, params json.RawMessage) (json.RawMessage, error) {
	r.record(method + " " + string(params))
	switch method {
	case plexus.RelaySampling:
		return json.RawMessage(`{"role":"assistant","content":{"type":"text","text":"sampled"},"model":"m"}`), nil
	case plexus.RelayElicitation:
		return json.RawMessage(`{"action":"accept","content":{"ok":true}}`), nil
	case plexus.RelayRoots:
		return json.RawMessage(`{"roots":[{"uri":"file:///work","name":"work"}]}`), nil
	}
	return nil, errors.New("not answered")
}

func (r *recordingRelay) Notify(_ context.Context, method string, params json.RawMessage) error {
	r.record(method + " " + string(params))
	return nil
}

func (r *recordingRelay) Offers(string) bool { return true }

func (r *recordingRelay) record(s string) {
	r.mu.Lock()
	r.seen = append(r.seen, s)
	r.mu.Unlock()
}

func (r *recordingRelay) all() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.seen...)
}

// startPassHTTP runs a client of the SDK's server over Streamable HTTP
// (opts), with tools answering every kind of result and one that asks
// its client everything a relay carries while it runs.
func startPassHTTP(t *testing.T, opts *mcp.StreamableHTTPOptions) *Client {
	t.Helper()
	srv := mcp.NewServer(&mcp.Implementation{Name: "pass-http", Version: "1"}, nil)
	text := func(s string) []mcp.Content { return []mcp.Content{&mcp.TextContent{Text: s}} }
	obj := json.RawMessage(`{"type":"object"}`)
	srv.AddTool(&mcp.Tool{Name: "plain", InputSchema: obj}, func(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return &mcp.CallToolResult{Content: text("hello " + string(req.Params.Arguments))}, nil
	})
	type in struct {
		Name string `json:"name"`
	}
	type out struct {
		Greeting string `json:"greeting"`
	}
	mcp.AddTool(srv, &mcp.Tool{Name: "structured"}, func(_ context.Context, _ *mcp.CallToolRequest, i in) (*mcp.CallToolResult, out, error) {
		return nil, out{Greeting: "hi " + i.Name}, nil
	})
	srv.AddTool(&mcp.Tool{Name: "fails", InputSchema: obj}, func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return &mcp.CallToolResult{IsError: true, Content: text("it broke")}, nil
	})
	srv.AddTool(&mcp.Tool{Name: "image", InputSchema: obj}, func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.ImageContent{Data: []byte("png"), MIMEType: "image/png"}}}, nil
	})
	srv.AddTool(&mcp.Tool{Name: "protocolError", InputSchema: obj}, func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return nil, &jsonrpc.Error{Code: -32042, Message: "not today"}
	})
	srv.AddTool(&mcp.Tool{Name: "asks", InputSchema: obj}, asksEverything)
	srv.AddTool(&mcp.Tool{Name: "rounds", InputSchema: obj}, asksInRounds)
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, opts)
	ts := httptest.NewServer(h)
	t.Cleanup(ts.Close) // after the client's, which ends its streams
	c, err := New("web", ServerConfig{URL: ts.URL}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- c.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
	})
	select {
	case <-c.Ready():
	case <-time.After(20 * time.Second):
		t.Fatal("the client did not list the server")
	}
	return c
}

// asksEverything asks its client to sample, to elicit and for its roots,
// logs and reports progress, and answers what it was told.
func asksEverything(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	ss := req.Session
	if err := ss.NotifyProgress(ctx, &mcp.ProgressNotificationParams{ProgressToken: req.Params.GetProgressToken(), Progress: 1, Total: 2}); err != nil {
		return nil, err
	}
	if err := ss.Log(ctx, &mcp.LoggingMessageParams{Level: "info", Data: "working"}); err != nil {
		return nil, err
	}
	sampled, err := ss.CreateMessage(ctx, &mcp.CreateMessageParams{MaxTokens: 5, Messages: []*mcp.SamplingMessage{{Role: "user", Content: &mcp.TextContent{Text: "say"}}}})
	if err != nil {
		return nil, fmt.Errorf("sampling: %w", err)
	}
	elicited, err := ss.Elicit(ctx, &mcp.ElicitParams{Message: "ok?", RequestedSchema: json.RawMessage(`{"type":"object","properties":{"ok":{"type":"boolean"}}}`)})
	if err != nil {
		return nil, fmt.Errorf("elicitation: %w", err)
	}
	roots, err := ss.ListRoots(ctx, nil)
	if err != nil || len(roots.Roots) == 0 {
		return nil, fmt.Errorf("roots: %v %v", roots, err)
	}
	if err := ss.NotifyProgress(ctx, &mcp.ProgressNotificationParams{ProgressToken: req.Params.GetProgressToken(), Progress: 2, Total: 2}); err != nil {
		return nil, err
	}
	answer := sampled.Content.(*mcp.TextContent).Text + "|" + elicited.Action + "|" + roots.Roots[0].URI
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: answer}}}, nil
}

// asksInRounds asks its client for input in rounds (SEP-2322): the first,
// on a session, the SDK's server asks in-band and calls it again with the
// answer; the second reaches the client as a result asking for input,
// which the client answers before it calls again.
func asksInRounds(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	okSchema := json.RawMessage(`{"type":"object","properties":{"ok":{"type":"boolean"}}}`)
	switch req.Params.RequestState {
	case "":
		return &mcp.CallToolResult{RequestState: "round=1",
			InputRequests: mcp.InputRequestMap{"first": &mcp.ElicitParams{Message: "one?", RequestedSchema: okSchema}}}, nil
	case "round=1":
		return &mcp.CallToolResult{RequestState: "round=2", InputRequests: mcp.InputRequestMap{
			"again":  &mcp.ElicitParams{Message: "two?", RequestedSchema: okSchema},
			"sample": &mcp.CreateMessageParams{MaxTokens: 5, Messages: []*mcp.SamplingMessage{{Role: "user", Content: &mcp.TextContent{Text: "say"}}}},
			"roots":  &mcp.ListRootsParams{},
		}}, nil
	}
	answers, err := json.Marshal(req.Params.InputResponses)
	if err != nil {
		return nil, err
	}
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: req.Params.RequestState + " " + string(answers)}}}, nil
}

// TestPassHTTPScripted: what a server may do on a call's stream that the
// SDK's server does not, through Dispatch and through the SDK's session
// alike: end the stream without the answer, end it early after events with
// ids (the call resumes it with Last-Event-ID), ask for ping or for a
// method nobody serves, say its tools changed, refuse with 404 (the
// session is gone) or 503 (busy).
func TestPassHTTPScripted(t *testing.T) {
	answer := `{"jsonrpc":"2.0","id":%s,"result":{"content":[{"type":"text","text":"done"}]}}`
	for _, tc := range []struct {
		name   string
		script func(ss *scriptedServer, w http.ResponseWriter, id string)
		resume func(w http.ResponseWriter, id string)
		check  func(t *testing.T, ss *scriptedServer, seen callSeen)
		// the SDK's error says "rejected by transport" (its code -32005),
		// Plexus's the status
		ownError bool
	}{
		{name: "NoAnswer", script: func(_ *scriptedServer, w http.ResponseWriter, _ string) {
			sse(w, "", `{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":"%s","progress":1}}`)
		}, check: func(t *testing.T, _ *scriptedServer, seen callSeen) {
			if seen.OK || !strings.Contains(seen.Error, "terminated without response") {
				t.Errorf("%+v, want a transport error", seen)
			}
		}},
		{name: "Resumed", script: func(_ *scriptedServer, w http.ResponseWriter, _ string) {
			fmt.Fprint(w, "retry: 20\n")
			sse(w, "e1", `{"jsonrpc":"2.0","method":"notifications/message","params":{"level":"info","data":"half"}}`)
		}, resume: func(w http.ResponseWriter, id string) {
			sse(w, "e2", fmt.Sprintf(answer, id))
		}, check: func(t *testing.T, ss *scriptedServer, seen callSeen) {
			if !seen.OK || len(seen.Relayed) != 1 {
				t.Errorf("%+v, want the answer after the log message", seen)
			}
			if got := ss.take("GET"); len(got) != 1 || got[0] != "e1" {
				t.Errorf("resumed with Last-Event-ID %v, want [e1]", got)
			}
		}},
		{name: "PingAndUnknown", script: func(ss *scriptedServer, w http.ResponseWriter, id string) {
			sse(w, "", `{"jsonrpc":"2.0","id":"p1","method":"ping"}`)
			sse(w, "", `{"jsonrpc":"2.0","id":"u1","method":"foo/bar","params":{}}`)
			ss.await(2)
			sse(w, "", fmt.Sprintf(answer, id))
		}, check: func(t *testing.T, ss *scriptedServer, seen callSeen) {
			got := ss.take("answer")
			want := []string{`{"jsonrpc":"2.0","id":"p1","result":{}}`, `{"jsonrpc":"2.0","id":"u1","error":{"code":-32601,"message":"method \"foo/bar\" not found"}}`}
			if !seen.OK || len(got) != 2 || !strings.Contains(strings.Join(got, " "), `"id":"p1","result":{}`) || !strings.Contains(strings.Join(got, " "), `"id":"u1","error":{"code":-32601`) {
				t.Errorf("%+v answered %q, want %q", seen, got, want)
			}
		}},
		// Params the SDK's client reads as it reads every message: member
		// names exactly (the elicitation's "Message" is not its message).
		{name: "ParamsAsTheSDK", script: func(ss *scriptedServer, w http.ResponseWriter, id string) {
			sse(w, "", `{"jsonrpc":"2.0","id":"e1","method":"elicitation/create","params":{"Message":"forged","requestedSchema":{"type":"object"}}}`)
			ss.await(1)
			sse(w, "", fmt.Sprintf(answer, id))
		}, check: func(t *testing.T, ss *scriptedServer, seen callSeen) {
			if got := ss.take("answer"); !seen.OK || len(got) != 1 || !strings.Contains(got[0], `"id":"e1","result":{"action":"accept"`) {
				t.Errorf("%+v answered %q, want the elicitation answered", seen, got)
			}
			if len(seen.Relayed) != 1 || !strings.Contains(seen.Relayed[0], `"message":""`) {
				t.Errorf("relayed %q, want the elicitation, without a message", seen.Relayed)
			}
		}},
		{name: "ManyAsks", script: func(ss *scriptedServer, w http.ResponseWriter, id string) {
			for i := range 3 * maxAsks {
				sse(w, "", fmt.Sprintf(`{"jsonrpc":"2.0","id":"p%d","method":"ping"}`, i))
			}
			ss.await(3 * maxAsks)
			sse(w, "", fmt.Sprintf(answer, id))
		}, check: func(t *testing.T, ss *scriptedServer, seen callSeen) {
			if got := ss.take("answer"); !seen.OK || len(got) != 3*maxAsks {
				t.Errorf("%+v after %d answers, want %d", seen, len(got), 3*maxAsks)
			}
		}},
		{name: "ListChanged", script: func(ss *scriptedServer, w http.ResponseWriter, id string) {
			ss.mu.Lock()
			ss.tools = `{"name":"t"},{"name":"late"}`
			ss.mu.Unlock()
			sse(w, "", `{"jsonrpc":"2.0","method":"notifications/tools/list_changed"}`)
			sse(w, "", fmt.Sprintf(answer, id))
		}, check: func(t *testing.T, ss *scriptedServer, seen callSeen) {
			deadline := time.Now().Add(10 * time.Second)
			for ss.count("tools/list") < 2 && time.Now().Before(deadline) {
				time.Sleep(10 * time.Millisecond)
			}
			if !seen.OK || ss.count("tools/list") < 2 {
				t.Errorf("%+v; tools/list asked %d times, want a new listing", seen, ss.count("tools/list"))
			}
		}},
		{name: "Busy", script: func(_ *scriptedServer, w http.ResponseWriter, _ string) {
			http.Error(w, "busy", http.StatusServiceUnavailable)
		}, check: func(t *testing.T, ss *scriptedServer, seen callSeen) {
			if seen.OK || !strings.HasPrefix(seen.Error, "transport_error") || ss.count("initialize") != 1 {
				t.Errorf("%+v after %d initialize, want a transport error on the same session", seen, ss.count("initialize"))
			}
		}, ownError: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var results [2]callSeen
			for i, sdk := range []bool{false, true} {
				ss := &scriptedServer{script: tc.script, resume: tc.resume, tools: `{"name":"t"}`}
				c := startScripted(t, ss)
				results[i] = passCall(t, c, "t", nil, sdk)
				tc.check(t, ss, results[i])
			}
			if tc.ownError {
				results[0].Error, results[1].Error = "", ""
			}
			if diff := cmp.Diff(results[1], results[0]); diff != "" {
				t.Errorf("through Dispatch vs the SDK (-sdk +dispatch):\n%s", diff)
			}
		})
	}
}

// sse writes one event, its data data (a %s in it gets the progress
// token "plexus-…" of the call: progress is not compared), and flushes.
func sse(w http.ResponseWriter, id, data string) {
	if strings.Contains(data, "%s") {
		data = fmt.Sprintf(data, "none")
	}
	if id != "" {
		fmt.Fprintf(w, "id: %s\n", id)
	}
	fmt.Fprintf(w, "data: %s\n\n", data)
	http.NewResponseController(w).Flush()
}

// scriptedServer is a Streamable HTTP MCP server written by hand (a
// session of 2025-11-25 with one tool, t), whose answer to tools/call is a
// test's script.
type scriptedServer struct {
	script func(ss *scriptedServer, w http.ResponseWriter, id string)
	resume func(w http.ResponseWriter, id string)

	mu     sync.Mutex
	tools  string
	counts map[string]int
	seen   map[string][]string // "answer": the client's answers; "GET": Last-Event-IDs
	lastID string
}

func (ss *scriptedServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method == http.MethodGet {
		ss.mu.Lock()
		id := ss.lastID
		ss.mu.Unlock()
		if last := r.Header.Get("Last-Event-ID"); last != "" && ss.resume != nil {
			ss.note("GET", last)
			w.Header().Set("Content-Type", "text/event-stream")
			ss.resume(w, id)
			return
		}
		http.Error(w, "no standalone stream", http.StatusMethodNotAllowed)
		return
	}
	if r.Method != http.MethodPost {
		w.WriteHeader(http.StatusOK)
		return
	}
	var body []byte
	var msg struct {
		ID     json.RawMessage `json:"id"`
		Method string          `json:"method"`
	}
	body, _ = io.ReadAll(r.Body)
	if json.Unmarshal(body, &msg) != nil {
		http.Error(w, "bad", http.StatusBadRequest)
		return
	}
	ss.mu.Lock()
	if ss.counts == nil {
		ss.counts = map[string]int{}
	}
	ss.counts[msg.Method]++
	ss.mu.Unlock()
	switch {
	case msg.Method == "" && msg.ID != nil: // an answer to the server
		ss.note("answer", string(body))
		w.WriteHeader(http.StatusAccepted)
	case msg.ID == nil:
		w.WriteHeader(http.StatusAccepted)
	case msg.Method == "initialize":
		w.Header().Set("Mcp-Session-Id", "s1")
		jsonAnswer(w, msg.ID, `{"protocolVersion":"2025-11-25","capabilities":{"tools":{"listChanged":true}},"serverInfo":{"name":"scripted","version":"1"}}`)
	case msg.Method == "tools/list":
		ss.mu.Lock()
		tools := strings.ReplaceAll(ss.tools, `"}`, `","inputSchema":{"type":"object"}}`)
		ss.mu.Unlock()
		jsonAnswer(w, msg.ID, `{"tools":[`+tools+`]}`)
	case msg.Method == "tools/call":
		ss.mu.Lock()
		ss.lastID = string(msg.ID)
		ss.mu.Unlock()
		w.Header().Set("Content-Type", "text/event-stream")
		ss.script(ss, w, string(msg.ID))
	default:
		jsonAnswer(w, msg.ID, `{}`)
	}
}

func jsonAnswer(w http.ResponseWriter, id json.RawMessage, result string) {
	w.Header().Set("Content-Type", "application/json")
	fmt.Fprintf(w, `{"jsonrpc":"2.0","id":%s,"result":%s}`, id, result)
}

func (ss *scriptedServer) note(kind, v string) {
	ss.mu.Lock()
	if ss.seen == nil {
		ss.seen = map[string][]string{}
	}
	ss.seen[kind] = append(ss.seen[kind], v)
	ss.mu.Unlock()
}

func (ss *scriptedServer) take(kind string) []string {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	return ss.seen[kind]
}

func (ss *scriptedServer) count(method string) int {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	return ss.counts[method]
}

// await waits until the client has answered n requests of the server's.
func (ss *scriptedServer) await(n int) {
	for deadline := time.Now().Add(10 * time.Second); len(ss.take("answer")) < n && time.Now().Before(deadline); {
		time.Sleep(5 * time.Millisecond)
	}
}

// startScripted runs a client of ss until the test ends.
func startScripted(t *testing.T, ss *scriptedServer) *Client {
	t.Helper()
	ts := httptest.NewServer(ss)
	t.Cleanup(ts.Close)
	c, err := New("web", ServerConfig{URL: ts.URL}, Options{MinBackoff: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- c.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
	})
	select {
	case <-c.Ready():
	case <-time.After(20 * time.Second):
		t.Fatal("the client did not list the server")
	}
	return c
}

// TestEventReader reads server-sent events as the HTML standard says (the
// SDK's scanner's reading): fields, comments, line ends, events without
// data, and what ends a stream.
func TestEventReader(t *testing.T) {
	for _, tc := range []struct {
		name   string
		stream string
		want   []event
		err    error
	}{
		{name: "Data", stream: "data: {\"a\":1}\n\n", want: []event{{data: []byte(`{"a":1}`)}}},
		{name: "CRLFAndComments", stream: ": hi\r\nevent: message\r\nid: 7\r\ndata:x\r\n\r\n", want: []event{{name: "message", id: "7", data: []byte("x")}}},
		{name: "MultiLineData", stream: "data: a\ndata:  b \ndata:\n\n", want: []event{{data: []byte("a\nb\n")}}},
		{name: "ValuesTrimmed", stream: "event: message \nid:\t7 \nretry: 5 \ndata: x\n\n", want: []event{{name: "message", id: "7", retry: "5", data: []byte("x")}}},
		{name: "LineWithoutColon", stream: "data\ndata: x\n\n", err: errBroken},
		{name: "IDAndRetryOnly", stream: "id: p\nretry: 5\n\n\n\ndata: y\n\n", want: []event{{id: "p", retry: "5"}, {data: []byte("y")}}},
		{name: "UnknownFieldsIgnored", stream: "foo: bar\ndata: z\n\n", want: []event{{data: []byte("z")}}},
		// An event the stream ends without its blank line, or its last
		// line's end, is dispatched, as the SDK's scanner dispatches it.
		{name: "NoNewlineAtEnd", stream: "data: y\n\ndata: cut", want: []event{{data: []byte("y")}, {data: []byte("cut")}}},
		{name: "NoBlankLineAtEnd", stream: "data: y\n", want: []event{{data: []byte("y")}}},
		{name: "IDAtEnd", stream: "id: 9", want: []event{{id: "9"}}},
		{name: "BlankAtEnd", stream: "data: y\n\n\n", want: []event{{data: []byte("y")}}},
		{name: "TooLarge", stream: "data: " + strings.Repeat("x", maxCapture) + "\n\n", err: errFrameTooLarge},
	} {
		t.Run(tc.name, func(t *testing.T) {
			er := eventReader{r: bufio.NewReader(strings.NewReader(tc.stream))}
			var got []event
			var err error
			for {
				var ev event
				if ev, err = er.next(); err != nil {
					break
				}
				got = append(got, ev)
			}
			wantErr := tc.err
			if wantErr == nil {
				wantErr = io.EOF
			}
			if !errors.Is(err, wantErr) {
				t.Errorf("error %v, want %v", err, wantErr)
			}
			if diff := cmp.Diff(tc.want, got, cmp.AllowUnexported(event{})); diff != "" {
				t.Errorf("events (-want +got):\n%s", diff)
			}
		})
	}
}
