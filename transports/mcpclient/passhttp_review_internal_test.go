package mcpclient

// The HTTP pass-through (passhttp.go) against a hostile or broken
// upstream: each answer made through Dispatch and through the SDK's
// session, compared.

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/plexus-gw/plexus"
)

const revAnswer = `{"jsonrpc":"2.0","id":%s,"result":{"content":[{"type":"text","text":"done"}]}}`

// TestRevStreamShapes: streams the SDK's scanner reads to the answer; the
// pass-through must read them the same.
func TestRevStreamShapes(t *testing.T) {
	for _, tc := range []struct {
		name   string
		script func(ss *scriptedServer, w http.ResponseWriter, id string)
	}{
		// The stream ends after the answer's data line, without the blank
		// line: the SDK's scanner dispatches the event at EOF.
		{"NoBlankLineAtEnd", func(_ *scriptedServer, w http.ResponseWriter, id string) {
			fmt.Fprintf(w, "data: "+revAnswer+"\n", id)
		}},
		{"NoNewlineAtEnd", func(_ *scriptedServer, w http.ResponseWriter, id string) {
			fmt.Fprintf(w, "data: "+revAnswer, id)
		}},
		// A line without a colon: the SDK's scanner refuses the stream
		// (errMalformedEvent, the connection failed); TestEventReader's
		// MultiLineData takes it as an empty data field.
		{"LineWithoutColon", func(_ *scriptedServer, w http.ResponseWriter, id string) {
			fmt.Fprintf(w, "data\ndata: "+revAnswer+"\n\n", id)
		}},
		// A content type whose parameter does not parse: the SDK's
		// baseMediaType is "" (unsupported content type); the
		// pass-through keeps mime.ParseMediaType's media type.
		{"BadContentTypeParam", func(_ *scriptedServer, w http.ResponseWriter, id string) {
			w.Header().Set("Content-Type", "text/event-stream; charset")
			fmt.Fprintf(w, "data: "+revAnswer+"\n\n", id)
		}},
		// The SDK trims the event name (strings.TrimSpace).
		{"EventNameTrailingSpace", func(_ *scriptedServer, w http.ResponseWriter, id string) {
			fmt.Fprintf(w, "event: message \ndata: "+revAnswer+"\n\n", id)
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var results [2]callSeen
			for i, sdk := range []bool{false, true} {
				ss := &scriptedServer{script: tc.script, tools: `{"name":"t"}`}
				c := startScripted(t, ss)
				results[i] = passCall(t, c, "t", nil, sdk)
			}
			if diff := cmp.Diff(results[1], results[0]); diff != "" {
				t.Errorf("through Dispatch vs the SDK (-sdk +dispatch):\n%s", diff)
			}
		})
	}
}

// TestRevAnswerNotHeldByOpenStream: a server that answers and keeps its
// stream open (the spec's SHOULD close, not MUST) holds the SDK's call not
// at all; the pass-through's call does not wait for the stream either (it
// is drained on the session's background).
func TestRevAnswerNotHeldByOpenStream(t *testing.T) {
	for _, sdk := range []bool{false, true} {
		release := make(chan struct{})
		ss := &scriptedServer{tools: `{"name":"t"}`, script: func(_ *scriptedServer, w http.ResponseWriter, id string) {
			sse(w, "", fmt.Sprintf(revAnswer, id))
			select { // the stream stays open
			case <-release:
			case <-time.After(30 * time.Second):
			}
		}}
		c := startScripted(t, ss)
		t.Cleanup(func() { close(release) }) // before the server closes (LIFO)
		start := time.Now()
		seen := passCall(t, c, "t", nil, sdk)
		took := time.Since(start)
		t.Logf("sdk=%v: %v ok=%v", sdk, took, seen.OK)
		if !seen.OK {
			t.Fatalf("sdk=%v: %+v", sdk, seen)
		}
		// finishWait is the pass-through's own timer: a call that took it
		// whole waited for the server's stream, not for its answer.
		if took >= finishWait {
			t.Errorf("sdk=%v: the call took %v (≥ finishWait %v) with its answer in hand", sdk, took, finishWait)
		}
	}
}

// TestRevStatusClassification: a failing status as the SDK classifies it.
// Its 500 is transient (isTransientHTTPStatus): the body is not read, the
// call fails "rejected", no server message reaches the agent; a 400 with
// no JSON-RPC error fails the connection (unavailable, reconnecting).
func TestRevStatusClassification(t *testing.T) {
	for _, tc := range []struct {
		name   string
		status int
		body   string
	}{
		{"500WithJSONRPCError", http.StatusInternalServerError, `{"jsonrpc":"2.0","id":"x","error":{"code":-32000,"message":"db password is hunter2"}}`},
		{"400Plain", http.StatusBadRequest, `bad`},
		{"500Plain", http.StatusInternalServerError, `oops`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var results [2]callSeen
			for i, sdk := range []bool{false, true} {
				ss := &scriptedServer{tools: `{"name":"t"}`, script: func(_ *scriptedServer, w http.ResponseWriter, _ string) {
					w.Header().Set("Content-Type", "application/json")
					w.WriteHeader(tc.status)
					fmt.Fprint(w, tc.body)
				}}
				c := startScripted(t, ss)
				results[i] = passCall(t, c, "t", nil, sdk)
			}
			t.Logf("dispatch: %s", results[0].Error)
			t.Logf("sdk:      %s", results[1].Error)
			if code(results[0].Error) != code(results[1].Error) || strings.Contains(results[0].Error, "-32000") != strings.Contains(results[1].Error, "-32000") {
				t.Errorf("the pass-through classifies a %d (%s) otherwise than the SDK", tc.status, tc.body)
			}
		})
	}
}

// TestRevAnswerShapes: each answer shape, as an event and as a JSON body,
// through Dispatch and through the SDK's session: the same result, or a
// failure both ways.
func TestRevAnswerShapes(t *testing.T) {
	deep := strings.Repeat(`{"a":`, 1001) + "1" + strings.Repeat("}", 1001)
	for _, tc := range []struct{ name, msg string }{
		{"IsError", `{"jsonrpc":"2.0","id":%s,"result":{"content":[{"type":"text","text":"bad"}],"isError":true}}`},
		{"ISERRORCase", `{"jsonrpc":"2.0","id":%s,"result":{"content":[{"type":"text","text":"bad"}],"ISERROR":true}}`},
		{"DuplicateIsError", `{"jsonrpc":"2.0","id":%s,"result":{"content":[],"isError":false,"isError":true}}`},
		{"Structured", `{"jsonrpc":"2.0","id":%s,"result":{"content":[],"structuredContent":{"x":1},"_meta":{"k":"v"}}}`},
		{"ContentKinds", `{"jsonrpc":"2.0","id":%s,"result":{"content":[{"type":"audio","data":"AAA=","mimeType":"audio/wav"},{"type":"resource_link","uri":"file:///a","name":"a"},{"type":"resource","resource":{"uri":"file:///b","text":"b"}}]}}`},
		{"UnknownContent", `{"jsonrpc":"2.0","id":%s,"result":{"content":[{"type":"video","data":"x"}]}}`},
		{"Deep", `{"jsonrpc":"2.0","id":%s,"result":{"content":[],"structuredContent":` + deep + `}}`},
		{"BadUTF8", "{\"jsonrpc\":\"2.0\",\"id\":%s,\"result\":{\"content\":[{\"type\":\"text\",\"text\":\"a\xffb\"}]}}"},
		{"ResultNull", `{"jsonrpc":"2.0","id":%s,"result":null}`},
		{"ResultMissing", `{"jsonrpc":"2.0","id":%s}`},
		{"ErrorNull", `{"jsonrpc":"2.0","id":%s,"result":{"content":[]},"error":null}`},
		{"ErrorWithData", `{"jsonrpc":"2.0","id":%s,"error":{"code":-32602,"message":"no","data":{"x":1}}}`},
		{"Version1", `{"jsonrpc":"1.0","id":%s,"result":{"content":[]}}`},
		{"TrailingGarbage", `{"jsonrpc":"2.0","id":%s,"result":{"content":[]}} xx`},
		{"Batch", `[{"jsonrpc":"2.0","id":%s,"result":{"content":[]}}]`},
		{"ResultString", `{"jsonrpc":"2.0","id":%s,"result":"hi"}`},
	} {
		for _, mode := range []string{"SSE", "JSON"} {
			t.Run(tc.name+"/"+mode, func(t *testing.T) {
				var results [2]callSeen
				for i, sdk := range []bool{false, true} {
					ss := &scriptedServer{tools: `{"name":"t"}`, script: func(_ *scriptedServer, w http.ResponseWriter, id string) {
						body := strings.ReplaceAll(tc.msg, "%s", id)
						if mode == "JSON" {
							w.Header().Set("Content-Type", "application/json")
							fmt.Fprint(w, body)
							return
						}
						fmt.Fprintf(w, "data: %s\n\n", body)
					}}
					c := startScripted(t, ss)
					ctxSeen := passCallTimeout(t, c, "t", sdk, 3*time.Second)
					results[i] = ctxSeen
				}
				t.Logf("dispatch: %+v", results[0])
				t.Logf("sdk:      %+v", results[1])
				if results[0].OK != results[1].OK || results[0].Result != results[1].Result || results[0].Data != results[1].Data || code(results[0].Error) != code(results[1].Error) {
					t.Errorf("through Dispatch vs the SDK differ")
				}
			})
		}
	}
}

func code(e string) string { c, _, _ := strings.Cut(e, ":"); return c }

// passCallTimeout is passCall with a shorter timeout (the SDK waits for an
// answer it will never see until its context ends).
func passCallTimeout(t *testing.T, c *Client, tool string, sdk bool, d time.Duration) callSeen {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	rt, _ := json.Marshal(route{Primitive: PrimitiveTool, Name: tool})
	entry := plexus.Entry{ID: "mcp.web." + tool, Source: c.source, Route: rt}
	var r plexus.TransportResult
	if sdk {
		s, _ := c.current()
		r = c.viaSDK(ctx, s, route{Primitive: PrimitiveTool, Name: tool}, nil, nil, "tok", entry.ID)
	} else {
		r = c.dispatch(ctx, entry, nil, plexus.DispatchContext{})
	}
	seen := callSeen{OK: r.OK, Result: string(r.MCPResult)}
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

// TestRevOversized: a result is taken up to 16 MiB (maxCapture), the cap
// of the stdio pass-through and of the bridge, though the SDK's Streamable
// HTTP client has none (its MaxEventSize 0): a larger one fails its call
// alone, naming the limit (docs/mcp.md, Results), and the next call on the
// session goes on.
func TestRevOversized(t *testing.T) {
	const envelope = `{"jsonrpc":"2.0","id":%s,"result":{"content":[{"type":"text","text":"%s"}]}}`
	for _, mode := range []string{"SSE", "JSON"} {
		for _, tc := range []struct {
			name string
			text int // bytes of the result's text
			ok   bool
		}{
			{"AtTheCap", maxCapture - 1024, true},
			{"PastTheCap", maxCapture + 1024, false},
		} {
			t.Run(mode+"/"+tc.name, func(t *testing.T) {
				var calls atomic.Int64
				ss := &scriptedServer{tools: `{"name":"t"}`, script: func(_ *scriptedServer, w http.ResponseWriter, id string) {
					text := "small"
					if calls.Add(1) == 1 {
						text = strings.Repeat("x", tc.text)
					}
					body := fmt.Sprintf(envelope, id, text)
					if mode == "JSON" {
						w.Header().Set("Content-Type", "application/json")
						fmt.Fprint(w, body)
						return
					}
					fmt.Fprintf(w, "data: %s\n\n", body)
				}}
				c := startScripted(t, ss)
				seen := passCallTimeout(t, c, "t", false, 20*time.Second)
				if seen.OK != tc.ok || !tc.ok && (code(seen.Error) != "transport_error" || !strings.Contains(seen.Error, "maximum message size")) {
					t.Errorf("a %d-byte text: OK %v, error %q", tc.text, seen.OK, seen.Error)
				}
				if tc.ok && len(seen.Result) < tc.text {
					t.Errorf("a %d-byte text came as a %d-byte result", tc.text, len(seen.Result))
				}
				if next := passCallTimeout(t, c, "t", false, 20*time.Second); !next.OK {
					t.Errorf("the next call: %+v", next)
				}
			})
		}
	}
}

// TestRevResumedEmpty: a stream resumed with Last-Event-ID that ends with
// no event: the SDK fails the call at once ("request terminated without
// response", its processStream's lastEventID is per stream), and so does
// the pass-through: one resumption each.
func TestRevResumedEmpty(t *testing.T) {
	var results [2]callSeen
	var gets [2]int64
	for i, sdk := range []bool{false, true} {
		var n atomic.Int64
		ss := &scriptedServer{tools: `{"name":"t"}`,
			script: func(_ *scriptedServer, w http.ResponseWriter, _ string) {
				fmt.Fprint(w, "retry: 10\n")
				sse(w, "e1", `{"jsonrpc":"2.0","method":"notifications/message","params":{"level":"info","data":"x"}}`)
			},
			resume: func(w http.ResponseWriter, _ string) { n.Add(1) },
		}
		c := startScripted(t, ss)
		results[i] = passCallTimeout(t, c, "t", sdk, 20*time.Second)
		gets[i] = n.Load()
	}
	t.Logf("dispatch: %d GETs, %s", gets[0], results[0].Error)
	t.Logf("sdk:      %d GETs, %s", gets[1], results[1].Error)
	if gets[0] != gets[1] {
		t.Errorf("resumptions: dispatch %d, sdk %d", gets[0], gets[1])
	}
}

// TestRevTagsTaken: the tee tags each server request of a call's stream
// for the call's relay (relays.tags); the SDK's handlers take the tag, and
// so does the pass-through's (relayOf): none is left when the call ends,
// though another call of the same relay (held here) keeps the relay's
// entry (the tags of a relay no call holds are dropped anyway).
func TestRevTagsTaken(t *testing.T) {
	for _, sdk := range []bool{false, true} {
		ss := &scriptedServer{tools: `{"name":"t"}`, script: func(ss *scriptedServer, w http.ResponseWriter, id string) {
			for i := range 20 {
				sse(w, "", fmt.Sprintf(`{"jsonrpc":"2.0","id":"r%d","method":"roots/list"}`, i))
			}
			ss.await(20)
			sse(w, "", fmt.Sprintf(revAnswer, id))
		}}
		c := startScripted(t, ss)
		rec := &recordingRelay{}
		s, _ := c.current()
		held := s.c.r.calling(rec) // another call of the same host, in flight
		ctx, cancel := context.WithTimeout(plexus.WithRelay(context.Background(), rec), 20*time.Second)
		rt, _ := json.Marshal(route{Primitive: PrimitiveTool, Name: "t"})
		entry := plexus.Entry{ID: "mcp.web.t", Source: c.source, Route: rt}
		var r plexus.TransportResult
		if sdk {
			end := s.c.r.calling(rec)
			r = c.viaSDK(ctx, s, route{Primitive: PrimitiveTool, Name: "t"}, nil, nil, "tok", entry.ID)
			end()
		} else {
			r = c.dispatch(ctx, entry, nil, plexus.DispatchContext{})
		}
		cancel()
		s.c.r.mu.Lock()
		n := len(s.c.r.tags)
		s.c.r.mu.Unlock()
		held()
		t.Logf("sdk=%v: ok=%v, %d tags left", sdk, r.OK, n)
		if n != 0 {
			t.Errorf("sdk=%v: %d tags left behind by one call", sdk, n)
		}
	}
}

// TestRevCancelNoticeOwned: the notifications/cancelled of a cancelled
// call runs on a goroutine the session owns (its background, as the stdio
// connection's), which ends with Run even when the server never answers
// the notice.
func TestRevCancelNoticeOwned(t *testing.T) {
	streaming := make(chan struct{})
	arrived := make(chan struct{})
	release := make(chan struct{})
	var once sync.Once
	ss := &scriptedServer{tools: `{"name":"t"}`, script: func(_ *scriptedServer, w http.ResponseWriter, _ string) {
		sse(w, "", `{"jsonrpc":"2.0","method":"notifications/message","params":{"level":"info","data":"x"}}`)
		close(streaming)
		select {
		case <-release:
		case <-time.After(30 * time.Second):
		}
	}}
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost {
			body, _ := io.ReadAll(r.Body)
			if bytes.Contains(body, []byte("notifications/cancelled")) {
				once.Do(func() { close(arrived) })
				select { // a server that does not answer the notice
				case <-release:
				case <-time.After(30 * time.Second):
				}
				return
			}
			r.Body = io.NopCloser(bytes.NewReader(body))
		}
		ss.ServeHTTP(w, r)
	})
	ts := httptest.NewServer(h)
	t.Cleanup(ts.Close)
	t.Cleanup(func() { close(release) })
	c, err := New("web", ServerConfig{URL: ts.URL}, Options{MinBackoff: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	runCtx, stopRun := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- c.Run(runCtx) }()
	<-c.Ready()
	ctx, cancel := context.WithCancel(context.Background())
	rt, _ := json.Marshal(route{Primitive: PrimitiveTool, Name: "t"})
	res := make(chan plexus.TransportResult, 1)
	go func() {
		res <- c.dispatch(ctx, plexus.Entry{ID: "mcp.web.t", Source: c.source, Route: rt}, nil, plexus.DispatchContext{})
	}()
	<-streaming
	cancel()
	<-res
	<-arrived
	stopRun()
	if err := <-done; err != nil {
		t.Error(err)
	}
	buf := make([]byte, 1<<20)
	for _, g := range strings.Split(string(buf[:runtime.Stack(buf, true)]), "\n\n") {
		if strings.Contains(g, "tellCancelled") {
			t.Errorf("a goroutine of the client outlives its Run:\n%s", g)
		}
	}
}
