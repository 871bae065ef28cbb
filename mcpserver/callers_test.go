package mcpserver_test

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/plexus-gw/plexus"
	"github.com/plexus-gw/plexus/mcpserver"
)

// goneWait is how long a caller's call waits for the owner in these tests:
// far longer than a test runs, so that only the caller's going ends it.
const goneWait = 10 * time.Minute

// TestCallEndsWithCaller: a call waiting for the owner ends with its caller,
// however the caller goes: the owner's approval afterwards grants (a later
// call runs without asking) but runs nothing for the call that went.
func TestCallEndsWithCaller(t *testing.T) {
	for _, c := range []struct {
		name string
		// start makes the call that waits; leave makes its caller go.
		start func(t *testing.T, f *fixture, pat string) (leave func())
	}{
		{"session ended", startSessionCall},
		{"POST dropped", startPostCall},
		{"sessionless POST dropped", startSessionlessCall},
		{"bridge ended pumped", bridgeCall("2025-11-25", endBridge)},
		{"bridge ended sessions", bridgeCall("2026-07-28", endBridge)},
		{"bridge stdin closed pumped", bridgeCall("2025-11-25", closeStdin)},
		{"bridge stdin closed sessions", bridgeCall("2026-07-28", closeStdin)},
	} {
		t.Run(c.name, func(t *testing.T) {
			f := newFixture(t, mcpserver.Options{ApprovalWait: goneWait})
			pat := f.agent("desk")
			leave := c.start(t, f, pat)
			id := f.awaitPending()
			leave()
			gone := f.awaitRow("invoke.failed")
			wantAbandoned(t, gone, id, f.rows("grant.requested"))
			f.decide(id, true, "")
			// A later call of the agent's runs on the grant the owner
			// approved, without asking: once it has, the call that went
			// would have run too.
			cs := f.connect(pat, "desk", nil)
			if res := call(t, cs, "portal__docs__write", map[string]any{"path": "later.txt", "content": "later"}); res.IsError {
				t.Fatalf("the later call = %q, want it to run on the approved grant", text(res))
			}
			f.wantFile("later.txt", "later")
			f.wantNoFile("gone.txt")
			if ids := f.pendingIDs(); len(ids) != 0 {
				t.Errorf("pending = %v, want none (the grant stands)", ids)
			}
			if got := len(f.rows("invoke.started")); got != 1 {
				t.Errorf("invoke.started rows = %d, want 1 (the later call's): %s", got, jsonOf(t, f.rows("invoke.started")))
			}
			if got := len(f.rows("grant.approved")); got != 1 {
				t.Errorf("grant.approved rows = %d, want 1", got)
			}
			if got := f.rows("invoke.failed"); len(got) != 1 {
				t.Errorf("invoke.failed rows = %s, want the call that went's alone", jsonOf(t, got))
			}
		})
	}
}

// awaitRow is the first journal row of action, waited for within a
// generous bound (a hang, not a speed check).
func (f *fixture) awaitRow(action string) plexus.Activity {
	f.t.Helper()
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		if rows := f.rows(action); len(rows) > 0 {
			return rows[0]
		}
	}
	f.t.Fatalf("no %s row was journaled; log:\n%s", action, f.logs.String())
	return plexus.Activity{}
}

// wantAbandoned checks the row of a call whose caller went while it waited
// on decision pendingID: invoke.failed by the agent, for the capability,
// transport_error with the reason, in the story of its grant.requested,
// and no token or dispatch named (none was presented, nothing ran).
func wantAbandoned(t *testing.T, row plexus.Activity, pendingID string, requested []plexus.Activity) {
	t.Helper()
	if len(requested) != 1 {
		t.Fatalf("grant.requested rows = %s, want 1", jsonOf(t, requested))
	}
	p := row.Payload
	if row.Target != "portal.docs.write" || row.Actor != "desk" || row.AgentID != "desk" ||
		p["errorCode"] != string(plexus.CodeTransportError) || p["pendingId"] != pendingID ||
		p["sessionId"] == nil || p["sessionId"] != requested[0].Payload["sessionId"] ||
		!strings.Contains(fmt.Sprint(p["reason"]), "did not run") {
		t.Errorf("the abandoned call's row = %s", jsonOf(t, row))
	}
	if row.TraceID == "" || row.TraceID != requested[0].TraceID {
		t.Errorf("the abandoned call's trace %q, want its grant.requested's %q", row.TraceID, requested[0].TraceID)
	}
	for _, k := range []string{"jti", "startedId", "inputHash"} {
		if _, ok := p[k]; ok {
			t.Errorf("the abandoned call's row carries %s: %s", k, jsonOf(t, row))
		}
	}
}

// goneArgs are the arguments of the call whose caller goes.
var goneArgs = map[string]any{"path": "gone.txt", "content": "for no one"}

// startSessionCall: a host on a session (2025-11-25) ends it (DELETE)
// while its call waits, the POST carrying the call still open.
func startSessionCall(t *testing.T, f *fixture, pat string) func() {
	hdr := rawSession(t, f, pat)
	done := rawCall(t, f, context.Background(), hdr)
	return func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		req, err := http.NewRequestWithContext(ctx, http.MethodDelete, f.url, nil)
		if err != nil {
			t.Fatal(err)
		}
		req.Header = hdr.Clone()
		resp, err := f.hosts.RoundTrip(req)
		if err != nil {
			t.Fatalf("end the session while its call waits: %v", err)
		}
		readAll(t, resp)
		if resp.StatusCode != http.StatusNoContent {
			t.Fatalf("DELETE = %s", resp.Status)
		}
		<-done // the session's end ends the call's POST
	}
}

// startPostCall: a host on a session (2025-11-25) whose POST carrying the
// call drops while the call waits; the session stays.
func startPostCall(t *testing.T, f *fixture, pat string) func() {
	hdr := rawSession(t, f, pat)
	ctx, cancel := context.WithCancel(context.Background())
	done := rawCall(t, f, ctx, hdr)
	return func() {
		cancel()
		<-done
	}
}

// rawSession opens a session (2025-11-25) as a host speaking HTTP itself,
// answering the headers of its requests.
func rawSession(t *testing.T, f *fixture, pat string) http.Header {
	hdr := http.Header{"Authorization": {"Bearer " + pat}, "Content-Type": {"application/json"},
		"Accept": {"application/json, text/event-stream"}, "Mcp-Protocol-Version": {"2025-11-25"}}
	resp := rawPost(t, context.Background(), f, hdr, `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"desk","version":"1"}}}`)
	readAll(t, resp)
	hdr.Set("Mcp-Session-Id", resp.Header.Get("Mcp-Session-Id"))
	readAll(t, rawPost(t, context.Background(), f, hdr, `{"jsonrpc":"2.0","method":"notifications/initialized"}`))
	return hdr
}

// rawCall posts the call whose caller goes, on a POST that lasts until ctx
// ends or the daemon ends it; done is closed then. No answer may come.
func rawCall(t *testing.T, f *fixture, ctx context.Context, hdr http.Header) (done <-chan struct{}) {
	ch := make(chan struct{})
	go func() {
		defer close(ch)
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, f.url,
			strings.NewReader(`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"portal__docs__write","arguments":{"path":"gone.txt","content":"for no one"}}}`))
		if err != nil {
			t.Error(err)
			return
		}
		req.Header = hdr.Clone()
		resp, err := f.hosts.RoundTrip(req)
		if err != nil {
			return // dropped before the answer's headers
		}
		defer resp.Body.Close()
		if body, err := io.ReadAll(resp.Body); err == nil && bytes.Contains(body, []byte(`"id":2`)) {
			t.Errorf("the call whose caller went was answered: %s", body)
		}
	}()
	return ch
}

// startSessionlessCall: a 2026-07-28 host's call, whose POST is the whole
// request, ends when the host drops it.
func startSessionlessCall(t *testing.T, f *fixture, pat string) func() {
	cs := f.connectVersion(pat, "desk", "2026-07-28", nil)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		if _, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "portal__docs__write", Arguments: goneArgs}); err == nil {
			t.Errorf("the dropped call answered no error")
		}
	}()
	return func() {
		cancel()
		<-done
	}
}

// endBridge ends the bridge as a signal does; closeStdin closes the host's
// side of the bridge's stdin.
func endBridge(cancel context.CancelFunc, _ io.Closer) { cancel() }

func closeStdin(_ context.CancelFunc, stdin io.Closer) {
	if err := stdin.Close(); err != nil {
		panic(err)
	}
}

// bridgeCall: a host speaking version over stdio to [mcpserver.Bridge]
// makes the call; the bridge then ends as end says, and must return
// before the call's wait would.
func bridgeCall(version string, end func(context.CancelFunc, io.Closer)) func(t *testing.T, f *fixture, pat string) func() {
	return func(t *testing.T, f *fixture, pat string) func() {
		hostR, bridgeW, err := os.Pipe()
		if err != nil {
			t.Fatal(err)
		}
		bridgeR, hostW, err := os.Pipe()
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			for _, p := range []*os.File{hostR, bridgeW, bridgeR, hostW} {
				if err := p.Close(); err != nil && !errors.Is(err, os.ErrClosed) {
					t.Logf("close a pipe: %v", err)
				}
			}
		})
		ctx, cancel := context.WithCancel(context.Background())
		t.Cleanup(cancel)
		done := make(chan error, 1)
		go func() {
			done <- mcpserver.Bridge(ctx, &mcp.IOTransport{Reader: bridgeR, Writer: bridgeW}, mcpserver.BridgeOptions{Endpoint: f.url, PAT: pat})
		}()
		cs, err := mcp.NewClient(&mcp.Implementation{Name: "desk", Version: "1"}, nil).Connect(context.Background(),
			&mcp.IOTransport{Reader: hostR, Writer: nopCloser{hostW}}, &mcp.ClientSessionOptions{ProtocolVersion: version})
		if err != nil {
			t.Fatal(err)
		}
		called := make(chan struct{})
		go func() {
			defer close(called)
			if _, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "portal__docs__write", Arguments: goneArgs}); err == nil {
				t.Errorf("the call through a bridge that ended answered no error")
			}
		}()
		return func() {
			end(cancel, hostW)
			select {
			case <-done:
			case <-time.After(time.Minute):
				t.Fatal("the bridge did not end while its call waited for the owner")
			}
			if err := bridgeW.Close(); err != nil && !errors.Is(err, os.ErrClosed) {
				t.Errorf("close the bridge's stdout: %v", err)
			}
			<-called
		}
	}
}

// nopCloser keeps the host's session from closing the pipe the test
// closes.
type nopCloser struct{ io.Writer }

func (nopCloser) Close() error { return nil }

func rawPost(t *testing.T, ctx context.Context, f *fixture, hdr http.Header, body string) *http.Response {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, f.url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header = hdr.Clone()
	resp, err := f.hosts.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode/100 != 2 {
		t.Fatalf("POST %s: %s", body, resp.Status)
	}
	return resp
}

func readAll(t *testing.T, resp *http.Response) []byte {
	t.Helper()
	defer resp.Body.Close()
	var buf bytes.Buffer
	if _, err := io.Copy(&buf, bufio.NewReader(resp.Body)); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// TestCallSurvivesForeignDelete: another agent presenting a session's id
// in a DELETE is refused (404) and cancels nothing: the session's call
// still waits, and runs when the owner approves.
func TestCallSurvivesForeignDelete(t *testing.T) {
	f := newFixture(t, mcpserver.Options{ApprovalWait: goneWait})
	hdr := rawSession(t, f, f.agent("desk"))
	answered := make(chan []byte, 1)
	go func() {
		req, err := http.NewRequest(http.MethodPost, f.url,
			strings.NewReader(`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"portal__docs__write","arguments":{"path":"kept.txt","content":"kept"}}}`))
		if err != nil {
			t.Error(err)
			answered <- nil
			return
		}
		req.Header = hdr.Clone()
		resp, err := f.hosts.RoundTrip(req)
		if err != nil {
			t.Error(err)
			answered <- nil
			return
		}
		answered <- readAll(t, resp)
	}()
	id := f.awaitPending()
	foreign := hdr.Clone()
	foreign.Set("Authorization", "Bearer "+f.agent("intruder"))
	req, err := http.NewRequest(http.MethodDelete, f.url, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header = foreign
	resp, err := f.hosts.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	readAll(t, resp)
	if resp.StatusCode != http.StatusNotFound {
		t.Fatalf("DELETE of another agent's session = %s, want 404", resp.Status)
	}
	f.decide(id, true, "")
	if body := <-answered; !bytes.Contains(body, []byte(`"id":2`)) || bytes.Contains(body, []byte(`"isError":true`)) {
		t.Fatalf("the call after a foreign DELETE answered %s, want its result", body)
	}
	f.wantFile("kept.txt", "kept")
}

// TestSessionEndEndsItsCallsOnly: a host ending its session ends that
// session's calls and no other's: a call of another session of the same
// agent, waiting for the owner as the first session ends, still runs when
// the owner approves.
func TestSessionEndEndsItsCallsOnly(t *testing.T) {
	f := newFixture(t, mcpserver.Options{ApprovalWait: goneWait})
	pat := f.agent("desk")
	kept := rawSession(t, f, pat)
	answered := make(chan []byte, 1)
	go func() {
		req, err := http.NewRequest(http.MethodPost, f.url,
			strings.NewReader(`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"portal__docs__write","arguments":{"path":"kept.txt","content":"kept"}}}`))
		if err != nil {
			t.Error(err)
			answered <- nil
			return
		}
		req.Header = kept.Clone()
		resp, err := f.hosts.RoundTrip(req)
		if err != nil {
			t.Error(err)
			answered <- nil
			return
		}
		answered <- readAll(t, resp)
	}()
	f.awaitPending() // the kept session's call waits for the owner
	leave := startSessionCall(t, f, pat)
	leave()
	for _, id := range f.pendingIDs() {
		f.decide(id, true, "")
	}
	if body := <-answered; !bytes.Contains(body, []byte(`"id":2`)) || !bytes.Contains(body, []byte(`"result"`)) ||
		bytes.Contains(body, []byte(`"isError":true`)) {
		t.Fatalf("the other session's call answered %s, want its result", body)
	}
	f.wantFile("kept.txt", "kept")
	f.wantNoFile("gone.txt")
}
