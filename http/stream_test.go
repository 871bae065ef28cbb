package http

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/plexus-gw/plexus"
	"github.com/plexus-gw/plexus/gateway"
)

func TestInvokeStream(t *testing.T) {
	one := 1.0
	progress := []plexus.InvokeProgressEvent{
		{Type: plexus.EventInvokeProgress, ID: "x.tool", Seq: 1, InvokeProgress: plexus.InvokeProgress{Channel: "stdout", Data: map[string]any{"text": "line\nwith break"}}},
		{Type: plexus.EventInvokeProgress, ID: "x.tool", Seq: 2, InvokeProgress: plexus.InvokeProgress{Channel: "progress", Progress: &one}},
	}
	ok := plexus.InvokeResponse{ID: "x.tool", OK: true, Output: "done", AuditID: "a1"}
	denied := plexus.InvokeResponse{ID: "x.tool", Error: &plexus.ErrorBody{Code: plexus.CodeGrantRequired, Message: "no"}, AuditID: "a2"}
	tests := []struct {
		name       string
		path       string
		accept     string
		progress   []plexus.InvokeProgressEvent
		resp       plexus.InvokeResponse
		wantCall   string
		wantStatus int
		wantSSE    bool
	}{
		{"accept header, progress", "/invoke", "text/event-stream", progress, ok, "InvokeStream", 200, true},
		{"query, progress", "/invoke?stream=true", "", progress, ok, "InvokeStream", 200, true},
		{"accept list with params", "/invoke", "application/json, text/event-stream;q=0.9", progress, ok, "InvokeStream", 200, true},
		{"streamed but nothing relayed: plain JSON", "/invoke", "text/event-stream", nil, ok, "InvokeStream", 200, false},
		{"streamed denial before dispatch: its status", "/invoke", "text/event-stream", nil, denied, "InvokeStream", 401, false},
		{"not asked: plain Invoke", "/invoke", "application/json", progress, ok, "Invoke", 200, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			api := &stubAPI{InvokeResp: tc.resp, Progress: tc.progress}
			ts := mustServe(t, Backend{Invoke: stubInvoke{api}}, Options{})
			hdr := map[string]string{"Content-Type": "application/json", "Authorization": "Bearer t"}
			if tc.accept != "" {
				hdr["Accept"] = tc.accept
			}
			r := ts.do(t, "POST", tc.path, hdr, `{"id":"x.tool","input":{}}`)
			if r.Status != tc.wantStatus {
				t.Fatalf("status %d, want %d: %s", r.Status, tc.wantStatus, r.Body)
			}
			if calls := api.calls; len(calls) != 1 || calls[0] != tc.wantCall {
				t.Fatalf("calls %v, want [%s]", calls, tc.wantCall)
			}
			if !tc.wantSSE {
				if ct := r.Header.Get("Content-Type"); !strings.HasPrefix(ct, "application/json") {
					t.Fatalf("Content-Type %q, want JSON", ct)
				}
				got := invokeOf(t, r)
				if got.OK != tc.resp.OK || got.AuditID != tc.resp.AuditID {
					t.Fatalf("response %+v, want %+v", got, tc.resp)
				}
				return
			}
			if ct := r.Header.Get("Content-Type"); ct != "text/event-stream" {
				t.Fatalf("Content-Type %q, want text/event-stream", ct)
			}
			frames := strings.Split(strings.TrimSuffix(string(r.Body), "\n\n"), "\n\n")
			if len(frames) != len(tc.progress)+1 {
				t.Fatalf("%d frames, want %d progress and a result:\n%s", len(frames), len(tc.progress), r.Body)
			}
			for i, f := range frames {
				lines := strings.Split(f, "\n")
				if len(lines) != 2 || !strings.HasPrefix(lines[1], "data: ") {
					t.Fatalf("frame %d is not one event and one data line: %q", i, f)
				}
				data := strings.TrimPrefix(lines[1], "data: ")
				if i < len(tc.progress) {
					if lines[0] != "event: invoke_progress" {
						t.Fatalf("frame %d event %q", i, lines[0])
					}
					var ev plexus.InvokeProgressEvent
					if err := json.Unmarshal([]byte(data), &ev); err != nil || ev.Seq != tc.progress[i].Seq || ev.Channel != tc.progress[i].Channel {
						t.Fatalf("frame %d = %s (%v), want %+v", i, data, err, tc.progress[i])
					}
					continue
				}
				if lines[0] != "event: result" {
					t.Fatalf("last frame event %q, want result", lines[0])
				}
				var got plexus.InvokeResponse
				if err := json.Unmarshal([]byte(data), &got); err != nil || !got.OK || got.Output != "done" || got.AuditID != "a1" {
					t.Fatalf("result %s (%v)", data, err)
				}
			}
		})
	}
}

// stubInvoke is the InvokeAPI of a stubAPI.
type stubInvoke struct{ *stubAPI }

func (s stubInvoke) Invoke(_ context.Context, c gateway.Credentials, req plexus.InvokeRequest) plexus.InvokeResponse {
	s.record("Invoke", c, req)
	return s.InvokeResp
}

func (s stubInvoke) InvokeStream(_ context.Context, c gateway.Credentials, req plexus.InvokeRequest, sink func(plexus.InvokeProgressEvent)) plexus.InvokeResponse {
	s.record("InvokeStream", c, req)
	for _, ev := range s.Progress {
		sink(ev)
	}
	return s.InvokeResp
}

// TestInvokeMCPResultVerbatim: an MCP result reaches the caller with the
// very bytes its server wrote, '<', '>' and '&' included (HTML escaping
// would turn them into \u003c…), answered plainly or as the result event
// of a stream.
func TestInvokeMCPResultVerbatim(t *testing.T) {
	result := `{"content":[{"type":"text","text":"a <b> & c \u2028 d"}],"isError":false}`
	progress := []plexus.InvokeProgressEvent{{Type: plexus.EventInvokeProgress, ID: "mcp:x.tool", Seq: 1,
		InvokeProgress: plexus.InvokeProgress{Channel: "progress", Data: map[string]any{"note": "<&>"}}}}
	for _, tc := range []struct {
		name     string
		accept   string
		progress []plexus.InvokeProgressEvent
	}{
		{"plain", "application/json", nil},
		{"streamed", "text/event-stream", progress},
	} {
		t.Run(tc.name, func(t *testing.T) {
			api := &stubAPI{InvokeResp: plexus.InvokeResponse{ID: "mcp:x.tool", OK: true, MCPResult: json.RawMessage(result), AuditID: "a1"},
				Progress: tc.progress}
			ts := mustServe(t, Backend{Invoke: stubInvoke{api}}, Options{})
			r := ts.do(t, "POST", "/invoke", map[string]string{"Content-Type": "application/json", "Authorization": "Bearer t",
				"Accept": tc.accept}, `{"id":"mcp:x.tool","input":{}}`)
			if r.Status != 200 {
				t.Fatalf("status %d: %s", r.Status, r.Body)
			}
			if want := `"mcpResult":` + result + `,`; !strings.Contains(string(r.Body), want) {
				t.Fatalf("body does not carry the result verbatim:\n got %s\nwant %s", r.Body, want)
			}
		})
	}
}
