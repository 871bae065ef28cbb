package ipc_test

import (
	"context"
	"encoding/json"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/plexus-gw/plexus"
	"github.com/plexus-gw/plexus/transports/ipc"
)

// TestHubHandshake launches real provider processes that connect over the
// real socket: a good one is welcomed and its tools become entries; a wrong
// token, an expired one and no common version are refused with the spec's
// codes, as the provider sees it and as the journal holds it — never with
// the token.
func TestHubHandshake(t *testing.T) {
	t.Run("OK", func(t *testing.T) {
		th := startHub(t, nil)
		cfg, out := testProvider(t, "good", nil)
		th.add(t, "good", cfg)
		w := waitObserved(t, out, "welcome", nil)
		st := th.waitState(t, "good", plexus.ProviderConnected)
		if st.PID == 0 || st.AgentVersion != "0.0.1-test" || st.Source != "ipc:good" {
			t.Errorf("status = %+v", st)
		}
		e := th.entry(t, "good", "echo")
		if e.Transport != plexus.TransportIPC || e.Provenance != plexus.ProvenanceManaged || e.Source != "ipc:good" {
			t.Errorf("entry = %+v", e)
		}
		c := th.rec.waitNote(t, "provider.connected", nil)
		if c.Target != "good" || c.Payload["session_id"] != w.Session {
			t.Errorf("provider.connected = %+v, want session %s", c, w.Session)
		}
		waitUntil(t, 5*time.Second, "health ok", func() bool { return th.rec.lastHealth("good").Status == plexus.HealthOK })
	})

	refusals := []struct {
		name, mode, code, reason string
		env                      map[string]string
		edit                     func(*ipc.HubOptions)
	}{
		{"ErrBadToken", "badtoken", ipc.CodeUnauthorized, ipc.RefusedUnauthorized, nil, nil},
		{"ErrExpiredToken", "late", ipc.CodeUnauthorized, ipc.RefusedUnauthorized, map[string]string{"IPC_TEST_DELAY_MS": "400"},
			func(o *ipc.HubOptions) { o.TokenTTL = 100 * time.Millisecond; o.HelloTimeout = 2 * time.Second }},
		{"ErrNoCommonVersion", "v2", ipc.CodeUnsupportedVersion, ipc.RefusedVersion, nil, nil},
	}
	for _, tt := range refusals {
		t.Run(tt.name, func(t *testing.T) {
			th := startHub(t, func(o *ipc.HubOptions) {
				o.MinBackoff = time.Hour // one launch is enough to look at
				if tt.edit != nil {
					tt.edit(o)
				}
			})
			cfg, out := testProvider(t, tt.mode, tt.env)
			th.add(t, "p1", cfg)
			got := waitObserved(t, out, "refused", nil)
			if got.Code != tt.code {
				t.Errorf("the provider saw %s, want %s", got.Code, tt.code)
			}
			waitObserved(t, out, "closed", nil)
			row := th.rec.waitNote(t, "ipc.refused", nil)
			if row.Payload["reason"] != tt.reason {
				t.Errorf("ipc.refused = %+v, want reason %s", row, tt.reason)
			}
			if st := th.status(t, "p1"); st.State == plexus.ProviderConnected {
				t.Errorf("state %s after a refused hello", st.State)
			}
			if th.Hub.SocketPath() == "" {
				t.Fatal("no socket")
			}
			th.stop(t)
			checkNoToken(t, th, out)
		})
	}
}

// checkNoToken: the tokens the provider was launched with appear in no
// journal row and no log line.
func checkNoToken(t *testing.T, th *testHub, out string) {
	t.Helper()
	var tokens []string
	for _, o := range observed(t, out) {
		if o.Token != "" {
			tokens = append(tokens, o.Token)
		}
	}
	th.rec.mu.Lock()
	b, _ := json.Marshal(th.rec.notes)
	th.rec.mu.Unlock()
	all := string(b) + th.logs.String()
	for _, tok := range tokens {
		if strings.Contains(all, tok) {
			t.Errorf("a session token leaked into the journal or the log")
		}
	}
}

// handoff launches a provider in handoff mode and speaks for it: it
// connects with the launch's token and is welcomed.
func handoff(t *testing.T, th *testHub, id string) (net.Conn, ipc.Welcome, string) {
	t.Helper()
	cfg, out := testProvider(t, "handoff", nil)
	th.add(t, id, cfg)
	o := waitObserved(t, out, "handoff", nil)
	c := dial(t, o.Socket)
	c.SetDeadline(time.Now().Add(30 * time.Second))
	send(t, c, ipc.TypeAgentHello, hello(o.Token, id, 1))
	env := recv(t, c)
	if env.Type != ipc.TypeCoreWelcome || env.Error != nil {
		t.Fatalf("got %s error %+v, want core.welcome", env.Type, env.Error)
	}
	w, err := ipc.DecodePayload[ipc.Welcome](env)
	if err != nil {
		t.Fatal(err)
	}
	return c, w, o.Token
}

func TestHubTokenSingleUse(t *testing.T) {
	th := startHub(t, nil)
	c, _, tok := handoff(t, th, "once")
	_ = c
	// The same token a second time: refused, even though the first
	// session is alive.
	c2 := dial(t, th.SocketPath())
	send(t, c2, ipc.TypeAgentHello, hello(tok, "once", 1))
	if env := recv(t, c2); env.Error == nil || env.Error.Code != ipc.CodeUnauthorized {
		t.Fatalf("second hello with a used token: %s %+v", env.Type, env.Error)
	}
	expectClosed(t, c2)
}

func tool(id, name, schema string) ipc.Tool {
	return ipc.Tool{ToolID: id, Name: name, InputSchema: json.RawMessage(schema)}
}

// register sends agent.tools.register and returns core.tools.registered.
func register(t *testing.T, c net.Conn, replace bool, tools ...ipc.Tool) ipc.ToolsRegistered {
	t.Helper()
	m := send(t, c, ipc.TypeAgentToolsRegister, ipc.ToolsRegister{Tools: tools, Replace: replace})
	env := recv(t, c)
	if env.Type != ipc.TypeCoreToolsRegistered || env.InReplyTo != m.ID {
		t.Fatalf("got %s in reply to %q, want core.tools.registered to %s", env.Type, env.InReplyTo, m.ID)
	}
	r, err := ipc.DecodePayload[ipc.ToolsRegistered](env)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func entryIDs(t *testing.T, src plexus.Source) map[string][]plexus.Verb {
	t.Helper()
	es, err := src.Scan(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	out := map[string][]plexus.Verb{}
	for _, e := range es {
		out[e.ID] = e.Grants
	}
	return out
}

func rejections(r ipc.ToolsRegistered) map[string]string {
	out := map[string]string{}
	for _, x := range r.Rejected {
		out[x.ToolID] = x.Error.Code
	}
	return out
}

// TestHubRegister: agent.tools.register over the real socket, with the
// spec's rejections, replace and unregister; each accepted change refreshes
// the source (OnTools) and is journaled.
func TestHubRegister(t *testing.T) {
	th := startHub(t, nil)
	c, _, _ := handoff(t, th, "reg")
	obj := `{"type":"object"}`
	r := register(t, c, false,
		tool("reg/read", "read", obj),
		ipc.Tool{ToolID: "reg/write", InputSchema: json.RawMessage(obj), SideEffects: true},
		ipc.Tool{ToolID: "reg/launch", InputSchema: json.RawMessage(obj), SideEffects: true, RequiresDirective: true},
		tool("other/x", "x", obj),                      // another provider's namespace
		tool("noslash", "noslash", obj),                // not namespaced
		tool("reg/bad name", "bad name", obj),          // name rule
		tool("reg/mismatch", "other", obj),             // name is not tool_id's
		tool("reg/schema", "schema", `{"type":12}`),    // does not compile
		tool("reg/ref", "ref", `{"$ref":"http://x/"}`), // would fetch
		ipc.Tool{ToolID: "reg/noschema"},               // input_schema missing
		tool("reg/big", "big", `{"type":"object","description":"`+strings.Repeat("x", ipc.MaxSchemaBytes)+`"}`),
		tool("reg/read", "read", obj), // twice in one message
	)
	if diff := cmp.Diff([]string{"reg/read", "reg/write", "reg/launch"}, r.Registered); diff != "" {
		t.Errorf("registered (-want +got):\n%s", diff)
	}
	wantRej := map[string]string{
		"other/x": ipc.CodeToolInvalidID, "noslash": ipc.CodeToolInvalidID, "reg/bad name": ipc.CodeToolInvalidID,
		"reg/mismatch": ipc.CodeToolInvalidID, "reg/schema": ipc.CodeToolInvalidSchema, "reg/ref": ipc.CodeToolInvalidSchema,
		"reg/noschema": ipc.CodeToolInvalidSchema, "reg/big": ipc.CodeToolTooLarge, "reg/read": ipc.CodeToolDuplicate,
	}
	if diff := cmp.Diff(wantRej, rejections(r)); diff != "" {
		t.Errorf("rejected (-want +got):\n%s", diff)
	}
	for _, x := range r.Rejected {
		if x.Error.Message == "" {
			t.Errorf("rejection of %s has no reason", x.ToolID)
		}
	}
	wantEntries := map[string][]plexus.Verb{
		"ipc.reg.read":   {plexus.VerbRead},
		"ipc.reg.write":  {plexus.VerbWrite},
		"ipc.reg.launch": {plexus.VerbExecute},
	}
	if diff := cmp.Diff(wantEntries, entryIDs(t, th.sources["reg"])); diff != "" {
		t.Errorf("entries (-want +got):\n%s", diff)
	}
	if n := th.rec.toolChanges("reg"); n != 1 {
		t.Errorf("OnTools called %d times, want 1", n)
	}

	t.Run("ErrDuplicateWithoutReplace", func(t *testing.T) {
		r := register(t, c, false, tool("reg/read", "read", obj), tool("reg/extra", "extra", obj))
		if diff := cmp.Diff([]string{"reg/extra"}, r.Registered); diff != "" {
			t.Errorf("registered (-want +got):\n%s", diff)
		}
		if got := rejections(r)["reg/read"]; got != ipc.CodeToolDuplicate {
			t.Errorf("re-registering without replace: %q, want %s", got, ipc.CodeToolDuplicate)
		}
	})
	t.Run("Replace", func(t *testing.T) {
		before := th.rec.toolChanges("reg")
		r := register(t, c, true, tool("reg/only", "only", obj))
		if diff := cmp.Diff([]string{"reg/only"}, r.Registered); diff != "" {
			t.Errorf("registered (-want +got):\n%s", diff)
		}
		if diff := cmp.Diff(map[string][]plexus.Verb{"ipc.reg.only": {plexus.VerbRead}}, entryIDs(t, th.sources["reg"])); diff != "" {
			t.Errorf("entries after replace (-want +got):\n%s", diff)
		}
		// The same set again changes nothing: no refresh.
		register(t, c, true, tool("reg/only", "only", obj))
		if n := th.rec.toolChanges("reg") - before; n != 1 {
			t.Errorf("OnTools called %d times for a change and a no-op, want 1", n)
		}
	})
	t.Run("Unregister", func(t *testing.T) {
		register(t, c, false, tool("reg/two", "two", obj))
		m := send(t, c, ipc.TypeAgentToolsUnregister, ipc.ToolsUnregister{ToolIDs: []string{"reg/only", "reg/nope", "x/y"}})
		env := recv(t, c)
		if env.Type != ipc.TypeCoreToolsUnregistered || env.InReplyTo != m.ID {
			t.Fatalf("got %s, want core.tools.unregistered", env.Type)
		}
		u, _ := ipc.DecodePayload[ipc.ToolsUnregistered](env)
		if diff := cmp.Diff([]string{"reg/only"}, u.Unregistered); diff != "" {
			t.Errorf("unregistered (-want +got):\n%s", diff)
		}
		wantRej := map[string]string{"reg/nope": ipc.CodeToolUnknown, "x/y": ipc.CodeToolInvalidID}
		got := map[string]string{}
		for _, x := range u.Rejected {
			got[x.ToolID] = x.Error.Code
		}
		if diff := cmp.Diff(wantRej, got); diff != "" {
			t.Errorf("rejected (-want +got):\n%s", diff)
		}
		if diff := cmp.Diff(map[string][]plexus.Verb{"ipc.reg.two": {plexus.VerbRead}}, entryIDs(t, th.sources["reg"])); diff != "" {
			t.Errorf("entries after unregister (-want +got):\n%s", diff)
		}
		th.rec.waitNote(t, "provider.tools_unregistered", nil)
	})
	t.Run("UnknownType", func(t *testing.T) {
		m := send(t, c, "agent.frobnicate", map[string]any{})
		if env := recv(t, c); env.Error == nil || env.Error.Code != ipc.CodeUnknownType || env.InReplyTo != m.ID {
			t.Errorf("unknown type: %s %+v", env.Type, env.Error)
		}
	})
	rows := th.rec.rows("provider.tools_registered")
	if len(rows) == 0 || rows[0].Target != "reg" || rows[0].Payload["changed"] != true {
		t.Errorf("provider.tools_registered rows = %+v", rows)
	}
}

// callOnce reads the next core.tool.call the hub sends on c.
func readCall(t *testing.T, c net.Conn) (ipc.Envelope, ipc.ToolCall) {
	t.Helper()
	for {
		env := recv(t, c)
		if env.Type != ipc.TypeCoreToolCall {
			continue
		}
		call, err := ipc.DecodePayload[ipc.ToolCall](env)
		if err != nil {
			t.Fatal(err)
		}
		return env, call
	}
}

func answer(t *testing.T, c net.Conn, call ipc.ToolCall, status string, output any) {
	t.Helper()
	res := ipc.ToolResult{CallID: call.CallID, Status: status}
	if output != nil {
		res.Output, _ = json.Marshal(output)
	}
	send(t, c, ipc.TypeAgentToolResult, res)
}

// TestHubCallWire: what core.tool.call carries (call_id, request_id,
// correlation_id = the trace, timeout_ms from the deadline, the caller's
// idempotency key), how streams are relayed, and that a second result for
// a call is ignored and journaled.
func TestHubCallWire(t *testing.T) {
	th := startHub(t, nil)
	c, _, _ := handoff(t, th, "wire")
	register(t, c, false, tool("wire/t", "t", `{"type":"object"}`))
	e := th.entry(t, "wire", "t")

	type result struct {
		r        plexus.TransportResult
		progress []plexus.InvokeProgress
	}
	call := func(ctx context.Context, ic plexus.InvokeContext) <-chan result {
		ch := make(chan result, 1)
		go func() {
			var mu sync.Mutex
			var got []plexus.InvokeProgress
			r := th.Dispatch(ctx, e, map[string]any{"q": "x"}, plexus.DispatchContext{Invoke: ic, Progress: func(p plexus.InvokeProgress) {
				mu.Lock()
				got = append(got, p)
				mu.Unlock()
			}})
			mu.Lock()
			ch <- result{r, got}
			mu.Unlock()
		}()
		return ch
	}

	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	done := call(ctx, plexus.InvokeContext{AgentID: "claude", TraceID: "trace-1", IdempotencyKey: "idem-1"})
	env, tc := readCall(t, c)
	if env.RequestID == "" || env.CorrelationID != "trace-1" || tc.CallID == "" || tc.ToolID != "wire/t" ||
		tc.IdempotencyKey != "idem-1" || tc.Caller == nil || tc.Caller.ID != "claude" || tc.Caller.Type != ipc.ActorAgent {
		t.Errorf("core.tool.call = %+v / %+v", env, tc)
	}
	if tc.TimeoutMS <= 15000 || tc.TimeoutMS > 20000 {
		t.Errorf("timeout_ms = %d, want the caller's remaining ~20s", tc.TimeoutMS)
	}
	if string(tc.Input) != `{"q":"x"}` {
		t.Errorf("input = %s", tc.Input)
	}
	for i, text := range []string{"a", "b"} {
		send(t, c, ipc.TypeAgentToolStream, ipc.ToolStream{CallID: tc.CallID, Seq: int64(i + 1), Channel: ipc.ChannelStdout, Data: ipc.StreamData{Text: text}})
	}
	send(t, c, ipc.TypeAgentToolStream, ipc.ToolStream{CallID: tc.CallID, Seq: 1, Channel: ipc.ChannelStdout, Data: ipc.StreamData{Text: "replayed"}}) // out of order: dropped
	send(t, c, ipc.TypeAgentToolStream, ipc.ToolStream{CallID: tc.CallID, Seq: 3, Channel: ipc.ChannelPartialResult, Data: ipc.StreamData{JSON: json.RawMessage(`{"k":1}`)}, Done: true})
	answer(t, c, tc, ipc.StatusSucceeded, map[string]any{"ok": true})
	got := <-done
	if !got.r.OK || !cmp.Equal(got.r.Data, map[string]any{"ok": true}) {
		t.Fatalf("result = %+v", got.r)
	}
	wantProgress := []plexus.InvokeProgress{
		{Channel: "stdout", Data: ipc.StreamData{Text: "a"}},
		{Channel: "stdout", Data: ipc.StreamData{Text: "b"}},
		{Channel: "partial_result", Data: ipc.StreamData{JSON: json.RawMessage(`{"k":1}`)}, Done: true},
	}
	if diff := cmp.Diff(wantProgress, got.progress); diff != "" {
		t.Errorf("progress (-want +got):\n%s", diff)
	}

	t.Run("DuplicateResult", func(t *testing.T) {
		answer(t, c, tc, ipc.StatusSucceeded, map[string]any{"again": true})
		row := th.rec.waitNote(t, "ipc.result_duplicate", nil)
		if row.Trace != "trace-1" || row.Payload["call_id"] != tc.CallID || row.Target != "wire" {
			t.Errorf("ipc.result_duplicate = %+v", row)
		}
	})
	t.Run("FailedAndCanceled", func(t *testing.T) {
		for _, tt := range []struct {
			status, code string
			err          *ipc.Error
		}{
			{ipc.StatusFailed, "tool.boom", &ipc.Error{Code: "tool.boom", Message: "it broke"}},
			{ipc.StatusCanceled, ipc.CodeToolCanceled, nil},
		} {
			done := call(ctx, plexus.InvokeContext{TraceID: "trace-2"})
			_, tc := readCall(t, c)
			send(t, c, ipc.TypeAgentToolResult, ipc.ToolResult{CallID: tc.CallID, Status: tt.status, Error: tt.err})
			r := (<-done).r
			if r.OK || r.Error.Code != plexus.CodeTransportError || r.Error.CapabilityID != e.ID {
				t.Fatalf("%s: result %+v", tt.status, r)
			}
			if d, _ := r.Error.Detail.(map[string]any); d["code"] != tt.code {
				t.Errorf("%s: detail %+v, want code %s", tt.status, r.Error.Detail, tt.code)
			}
		}
	})
	t.Run("CallerGone", func(t *testing.T) {
		cctx, ccancel := context.WithCancel(context.Background())
		done := call(cctx, plexus.InvokeContext{TraceID: "trace-3"})
		_, tc := readCall(t, c)
		ccancel()
		r := (<-done).r
		if r.OK || r.Error.Code != plexus.CodeTransportError {
			t.Fatalf("result %+v", r)
		}
		env := recv(t, c)
		cancelMsg, _ := ipc.DecodePayload[ipc.ToolCancel](env)
		if env.Type != ipc.TypeCoreToolCancel || cancelMsg.CallID != tc.CallID || cancelMsg.Reason != "caller_gone" {
			t.Errorf("got %s %+v, want core.tool.cancel for %s", env.Type, cancelMsg, tc.CallID)
		}
		row := th.rec.waitNote(t, "ipc.call_canceled", func(n noteRow) bool { return n.Trace == "trace-3" })
		if row.Payload["reason"] != "caller_gone" {
			t.Errorf("ipc.call_canceled = %+v", row)
		}
		// The provider's late canceled result is the call's first: not a
		// duplicate.
		n := len(th.rec.rows("ipc.result_duplicate"))
		answer(t, c, tc, ipc.StatusCanceled, nil)
		send(t, c, "agent.frobnicate", map[string]any{})
		recv(t, c) // the error reply proves the result was handled
		if m := len(th.rec.rows("ipc.result_duplicate")); m != n {
			t.Errorf("a late result after cancel was journaled as a duplicate")
		}
	})
	t.Run("Timeout", func(t *testing.T) {
		tctx, tcancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
		defer tcancel()
		done := call(tctx, plexus.InvokeContext{TraceID: "trace-4"})
		readCall(t, c)
		r := (<-done).r
		if r.OK || r.Error.Code != plexus.CodeTransportError || !strings.Contains(r.Error.Message, "timed out") {
			t.Fatalf("result %+v", r)
		}
		th.rec.waitNote(t, "ipc.call_canceled", func(n noteRow) bool { return n.Trace == "trace-4" && n.Payload["reason"] == "timeout" })
	})
}

// TestHubInflightLimit: at most MaxInflight calls are in flight on one
// connection; the excess is refused with rate_limited at once, and the
// held calls all complete once answered.
func TestHubInflightLimit(t *testing.T) {
	const limit, extra = ipc.DefaultMaxInflight, 44
	th := startHub(t, nil)
	c, _, _ := handoff(t, th, "busy")
	register(t, c, false, tool("busy/t", "t", `{"type":"object"}`))
	e := th.entry(t, "busy", "t")
	results := make(chan plexus.TransportResult, limit+extra)
	for range limit + extra {
		go func() { results <- th.Dispatch(context.Background(), e, nil, plexus.DispatchContext{}) }()
	}
	var calls []ipc.ToolCall
	for range limit {
		_, tc := readCall(t, c)
		calls = append(calls, tc)
	}
	for range extra {
		r := <-results
		if r.OK || r.Error.Code != plexus.CodeRateLimited {
			t.Fatalf("excess call: %+v, want rate_limited", r)
		}
	}
	if st := th.status(t, "busy"); st.Inflight != limit {
		t.Errorf("inflight = %d, want %d", st.Inflight, limit)
	}
	for _, tc := range calls {
		answer(t, c, tc, ipc.StatusSucceeded, map[string]any{"id": tc.CallID})
	}
	for range limit {
		if r := <-results; !r.OK {
			t.Fatalf("held call: %+v", r)
		}
	}
	if st := th.status(t, "busy"); st.Inflight != 0 {
		t.Errorf("inflight after = %d", st.Inflight)
	}
}

// TestHubOversizeFrame: a provider frame over its max_frame_bytes closes
// the connection, is journaled without content, and the provider is
// stopped and relaunched (on-failure).
func TestHubOversizeFrame(t *testing.T) {
	th := startHub(t, nil)
	cfg, out := testProvider(t, "handoff", nil)
	cfg.MaxFrameBytes = 8 << 10
	th.add(t, "big", cfg)
	o := waitObserved(t, out, "handoff", nil)
	c := dial(t, o.Socket)
	send(t, c, ipc.TypeAgentHello, hello(o.Token, "big", 1))
	w, _ := ipc.DecodePayload[ipc.Welcome](recv(t, c))
	if w.MaxFrameBytes != 8<<10 {
		t.Errorf("welcome max_frame_bytes = %d, want the provider's 8192", w.MaxFrameBytes)
	}
	secret := strings.Repeat("Z", 9<<10)
	send(t, c, ipc.TypeAgentToolsRegister, map[string]any{"pad": secret})
	expectClosed(t, c)
	row := th.rec.waitNote(t, "ipc.refused", func(n noteRow) bool { return n.Payload["kind"] == "oversize" })
	if b, _ := json.Marshal(row); strings.Contains(string(b), "ZZZZ") {
		t.Errorf("the refusal holds payload content: %s", b)
	}
	th.rec.waitNote(t, "provider.restarting", nil)
	waitUntil(t, 10*time.Second, "a second launch", func() bool {
		n := 0
		for _, o := range observed(t, out) {
			if o.Event == "launched" {
				n++
			}
		}
		return n >= 2
	})
}

// TestHubRemove: removing a provider says core.goodbye, stops its process
// and drops it; its tokens are dead.
func TestHubRemove(t *testing.T) {
	th := startHub(t, nil)
	cfg, out := testProvider(t, "good", nil)
	th.add(t, "gone", cfg)
	th.waitState(t, "gone", plexus.ProviderConnected)
	pid := th.status(t, "gone").PID
	if err := th.Remove("gone"); err != nil {
		t.Fatal(err)
	}
	if g := waitObserved(t, out, "goodbye", nil); g.Reason != "provider_removed" {
		t.Errorf("goodbye reason %q", g.Reason)
	}
	if slices.Contains(th.IDs(), "gone") {
		t.Error("still declared")
	}
	if err := th.Remove("gone"); err == nil {
		t.Error("second Remove: no error")
	}
	if alive(pid) {
		t.Errorf("process %d still alive after Remove", pid)
	}
	exited := th.rec.waitNote(t, "provider.exited", nil)
	if exited.Payload["stopped_for"] != "removed" {
		t.Errorf("provider.exited = %+v", exited)
	}
}

// alive reports whether pid is a live, unreaped process.
func alive(pid int) bool {
	b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	if err != nil {
		return false
	}
	// The state follows the command in parentheses; Z is a zombie.
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	return i < 0 || i+2 >= len(s) || s[i+2] != 'Z'
}
