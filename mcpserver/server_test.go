package mcpserver_test

import (
	"context"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/plexus-gw/plexus"
	"github.com/plexus-gw/plexus/gateway"
	"github.com/plexus-gw/plexus/journal"
	"github.com/plexus-gw/plexus/mcpserver"
)

var toolNameRE = regexp.MustCompile(`^[a-zA-Z0-9_-]{1,64}$`)

// TestListTools: tools/list shows the agent's manifest as tools, named by
// the rule, with the capability id in _meta, schemas verbatim and hints
// from the verbs; the MCP client's name and version are recorded at the
// session's opening.
func TestListTools(t *testing.T) {
	f := newFixture(t, mcpserver.Options{})
	cs := f.connect(f.agent("claude"), "claude-code", nil)
	res, err := cs.ListTools(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	tools := map[string]*mcp.Tool{}
	for _, tool := range res.Tools {
		if !toolNameRE.MatchString(tool.Name) {
			t.Errorf("tool name %q does not match %s", tool.Name, toolNameRE)
		}
		id, _ := tool.Meta[mcpserver.MetaCapability].(string)
		if got := mcpserver.ToolName(id); got != tool.Name {
			t.Errorf("tool %q: _meta capability %q names %q", tool.Name, id, got)
		}
		tools[tool.Name] = tool
	}
	for name, wantRO := range map[string]bool{"portal__docs__read": true, "portal__docs__write": false,
		"mcp__up__count": true, "mcp__up__wipe": false} {
		tool, ok := tools[name]
		if !ok {
			t.Fatalf("tools/list lacks %s; it has %v", name, keys(tools))
		}
		if tool.Annotations == nil || tool.Annotations.ReadOnlyHint != wantRO ||
			tool.Annotations.DestructiveHint == nil || *tool.Annotations.DestructiveHint == wantRO {
			t.Errorf("%s annotations = %+v, want readOnlyHint %v and destructiveHint %v", name, tool.Annotations, wantRO, !wantRO)
		}
	}
	// The ingested tool's schema, verbatim as the upstream server listed it.
	in, err := json.Marshal(tools["mcp__up__count"].InputSchema)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(in), `"n"`) || !strings.Contains(string(in), `"integer"`) {
		t.Errorf("mcp__up__count input schema = %s, want the upstream's {n: integer}", in)
	}
	if tools["mcp__up__count"].OutputSchema == nil {
		t.Errorf("mcp__up__count has no output schema; the upstream declared one")
	}
	opened := f.rows("session.opened")
	if len(opened) != 1 || opened[0].Payload["client"] != "claude-code" || opened[0].Payload["clientVersion"] != "1.2.3" {
		t.Errorf("session.opened rows = %+v, want one recording client claude-code 1.2.3", opened)
	}
}

// TestCallAutoApproved: a read of a first-party capability is approved by
// policy; the call runs and answers the output.
func TestCallAutoApproved(t *testing.T) {
	f := newFixture(t, mcpserver.Options{})
	cs := f.connect(f.agent("claude"), "claude-code", nil)
	res := call(t, cs, "portal__docs__read", map[string]any{"path": "hello.txt"})
	if res.IsError || !strings.Contains(text(res), "hello from the portal") {
		t.Fatalf("read = %+v %q, want the file's content", res, text(res))
	}
	if n := len(f.rows("invoke.ok")); n != 1 {
		t.Errorf("invoke.ok rows = %d, want 1", n)
	}
}

func call(t *testing.T, cs *mcp.ClientSession, name string, args map[string]any) *mcp.CallToolResult {
	t.Helper()
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		t.Fatalf("call %s: %v", name, err)
	}
	return res
}

// text is the text of a result's content.
func text(res *mcp.CallToolResult) string {
	var b strings.Builder
	for _, c := range res.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			b.WriteString(tc.Text)
		}
	}
	return b.String()
}

func keys[V any](m map[string]V) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// rowsAll is every row of the journal.
func (f *fixture) rowsAll() []plexus.Activity {
	f.t.Helper()
	all, err := f.db.Activity(context.Background(), journal.Filter{})
	if err != nil {
		f.t.Fatal(err)
	}
	return all
}

// rows are the journal's rows of one action type.
func (f *fixture) rows(action string) []plexus.Activity {
	f.t.Helper()
	all, err := f.db.Activity(context.Background(), journal.Filter{})
	if err != nil {
		f.t.Fatal(err)
	}
	var out []plexus.Activity
	for _, r := range all {
		if r.ActionType == action {
			out = append(out, r)
		}
	}
	return out
}

// TestCallStandingGrant: a write the owner pre-authorized runs at once:
// nothing is put up for the owner.
func TestCallStandingGrant(t *testing.T) {
	f := newFixture(t, mcpserver.Options{})
	cs := f.connect(f.agent("claude", standing("portal.docs.write", plexus.VerbWrite)), "claude-code", nil)
	res := call(t, cs, "portal__docs__write", map[string]any{"path": "new.txt", "content": "written"})
	if res.IsError {
		t.Fatalf("write = %q, want success", text(res))
	}
	f.wantFile("new.txt", "written")
	if ids := f.pendingIDs(); len(ids) != 0 {
		t.Errorf("pending decisions = %v, want none", ids)
	}
}

// TestCallApprovedWhileWaiting: a write without a grant asks the owner,
// tells the host it waits (progress), and completes when the owner
// approves meanwhile; the grant asked for names the host and the tool.
func TestCallApprovedWhileWaiting(t *testing.T) {
	f := newFixture(t, mcpserver.Options{ProgressInterval: 20 * time.Millisecond})
	prog := &progressLog{}
	cs := f.connect(f.agent("claude"), "claude-code", &mcp.ClientOptions{ProgressNotificationHandler: prog.handle})
	done := make(chan *mcp.CallToolResult, 1)
	go func() {
		done <- callWithProgress(t, cs, "portal__docs__write", map[string]any{"path": "a.txt", "content": "approved"}, "tok-1")
	}()
	id := f.awaitPending()
	prog.await(t, 1)
	f.decide(id, true, "")
	res := <-done
	if res.IsError {
		t.Fatalf("write = %q, want success after the approval", text(res))
	}
	f.wantFile("a.txt", "approved")
	if got := prog.messages(); !strings.Contains(strings.Join(got, "\n"), "plexus approve "+id) {
		t.Errorf("progress messages = %q, want one naming plexus approve %s", got, id)
	}
	req := f.rows("grant.requested")
	if len(req) != 1 || !strings.Contains(jsonOf(t, req[0].Payload), "claude-code calls the MCP tool portal__docs__write") {
		t.Errorf("grant.requested rows = %s, want the purpose naming the host and the tool", jsonOf(t, req))
	}
}

// TestCallWaitEndsUndecided: when the owner does not decide in time, the
// call answers a tool error saying exactly how to approve and to retry, and
// nothing runs; the retry waits on the same decision instead of asking
// again, and completes once it is approved.
func TestCallWaitEndsUndecided(t *testing.T) {
	f := newFixture(t, mcpserver.Options{ApprovalWait: 50 * time.Millisecond})
	cs := f.connect(f.agent("claude"), "claude-code", nil)
	res := call(t, cs, "portal__docs__write", map[string]any{"path": "late.txt", "content": "late"})
	ids := f.pendingIDs()
	if len(ids) != 1 {
		t.Fatalf("pending = %v, want one decision", ids)
	}
	id := ids[0]
	msg := text(res)
	file := filepath.Join(f.home.Inbox, id+".md")
	if !res.IsError || !strings.Contains(msg, "plexus approve "+id) || !strings.Contains(msg, file) || !strings.Contains(msg, "call this tool again") {
		t.Fatalf("undecided call = isError %v %q, want how to approve (plexus approve %s, %s) and to retry", res.IsError, msg, id, file)
	}
	if e := errorMeta(t, res); e["code"] != string(plexus.CodeGrantPendingUser) || e["pendingId"] != id {
		t.Errorf("_meta error = %v, want grant_pending_user with pendingId %s", e, id)
	}
	f.wantNoFile("late.txt")

	// Called again before the owner decided: it waits on the same decision.
	if res := call(t, cs, "portal__docs__write", map[string]any{"path": "late.txt", "content": "late"}); !res.IsError ||
		errorMeta(t, res)["pendingId"] != id {
		t.Fatalf("second undecided call = %q, want it to wait on %s again", text(res), id)
	}
	if ids := f.pendingIDs(); len(ids) != 1 || ids[0] != id {
		t.Fatalf("pending = %v, want only %s: the retry must not ask again", ids, id)
	}
	f.decide(id, true, "")
	res = call(t, cs, "portal__docs__write", map[string]any{"path": "late.txt", "content": "late"})
	if res.IsError {
		t.Fatalf("retry after approval = %q, want success", text(res))
	}
	f.wantFile("late.txt", "late")
	if n := len(f.rows("grant.requested")); n != 1 {
		t.Errorf("grant.requested rows = %d, want 1: the retry must not ask again", n)
	}
}

// TestCallDenied: the owner's denial answers a tool error with the owner's
// reason, and nothing runs.
func TestCallDenied(t *testing.T) {
	f := newFixture(t, mcpserver.Options{})
	cs := f.connect(f.agent("claude"), "claude-code", nil)
	done := make(chan *mcp.CallToolResult, 1)
	go func() { done <- call(t, cs, "portal__docs__write", map[string]any{"path": "no.txt", "content": "x"}) }()
	f.decide(f.awaitPending(), false, "not in my notes folder")
	res := <-done
	if !res.IsError || !strings.Contains(text(res), "not in my notes folder") {
		t.Fatalf("denied call = isError %v %q, want the owner's reason", res.IsError, text(res))
	}
	f.wantNoFile("no.txt")
}

// TestExecuteAsksEachCall: execute is never standing: each call of a
// destructive tool asks the owner anew.
func TestExecuteAsksEachCall(t *testing.T) {
	f := newFixture(t, mcpserver.Options{})
	cs := f.connect(f.agent("claude"), "claude-code", nil)
	var seen []string
	for i := range 2 {
		done := make(chan *mcp.CallToolResult, 1)
		go func() { done <- call(t, cs, "mcp__up__wipe", nil) }()
		id := f.awaitPending()
		if slices.Contains(seen, id) {
			t.Fatalf("call %d waited on decision %s again", i, id)
		}
		seen = append(seen, id)
		f.decide(id, true, "")
		if res := <-done; res.IsError || text(res) != "wiped" {
			t.Fatalf("call %d = %q, want the upstream's result", i, text(res))
		}
	}
	if n := f.upstream.count("wipe"); n != 2 {
		t.Errorf("upstream wipe calls = %d, want 2", n)
	}
}

// TestProgressRelayed: the upstream server's progress reaches the host as
// MCP progress notifications (growing, with the total), before the result,
// and the result's structured output passes through.
func TestProgressRelayed(t *testing.T) {
	f := newFixture(t, mcpserver.Options{})
	prog := &progressLog{}
	cs := f.connect(f.agent("claude"), "claude-code", &mcp.ClientOptions{ProgressNotificationHandler: prog.handle})
	done := make(chan *mcp.CallToolResult, 1)
	go func() {
		done <- callWithProgress(t, cs, "mcp__up__count", map[string]any{"n": 3, "hold": true}, "tok-count")
	}()
	// Seen while the call still runs: the Go SDK client hands notifications
	// to its handler on a goroutine of their own, so one that arrives just
	// before the result may be handled after the call returned.
	prog.await(t, 3)
	f.upstream.releaseHeld()
	res := <-done
	if res.IsError {
		t.Fatalf("count = %q", text(res))
	}
	got := prog.all()
	if len(got) != 3 {
		t.Fatalf("progress notifications = %+v, want 3", got)
	}
	for i, p := range got {
		if p.ProgressToken != "tok-count" || p.Progress != float64(i+1) || p.Total != 3 {
			t.Errorf("progress %d = %+v, want %d of 3 for tok-count", i, p, i+1)
		}
	}
	if out := jsonOf(t, res.StructuredContent); out != `{"counted":3}` {
		t.Errorf("structuredContent = %s, want {\"counted\":3}", out)
	}
}

// TestCancelCall: the host's cancellation reaches the running call: the
// upstream server's handler sees its context end.
func TestCancelCall(t *testing.T) {
	f := newFixture(t, mcpserver.Options{})
	cs := f.connect(f.agent("claude"), "claude-code", nil)
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() {
		_, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "mcp__up__block", Arguments: map[string]any{}})
		errc <- err
	}()
	for f.upstream.count("block") == 0 {
		time.Sleep(5 * time.Millisecond)
	}
	cancel()
	if err := <-errc; err == nil {
		t.Fatal("a cancelled call answered no error")
	}
	<-f.upstream.cancelled
}

// TestSessionlessProtocol: a 2026-07-28 client (no initialize, no session)
// lists and calls through the same front door.
func TestSessionlessProtocol(t *testing.T) {
	f := newFixture(t, mcpserver.Options{})
	cs := f.connectVersion(f.agent("claude"), "codex", "2026-07-28", nil)
	if v := cs.InitializeResult().ProtocolVersion; v != "2026-07-28" {
		t.Fatalf("negotiated %s, want 2026-07-28", v)
	}
	if _, err := cs.ListTools(context.Background(), nil); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if res := call(t, cs, "portal__docs__read", map[string]any{"path": "hello.txt"}); res.IsError {
			t.Fatalf("read = %q", text(res))
		}
	}
	if opened := f.rows("session.opened"); len(opened) != 1 || opened[0].Payload["client"] != "codex" {
		t.Errorf("session.opened rows = %s, want one for client codex", jsonOf(t, opened))
	}
}

func callWithProgress(t *testing.T, cs *mcp.ClientSession, name string, args map[string]any, token string) *mcp.CallToolResult {
	t.Helper()
	p := &mcp.CallToolParams{Name: name, Arguments: args}
	p.SetProgressToken(token)
	res, err := cs.CallTool(context.Background(), p)
	if err != nil {
		t.Errorf("call %s: %v", name, err)
		return &mcp.CallToolResult{IsError: true}
	}
	return res
}

// progressLog collects the progress notifications a client received.
type progressLog struct {
	mu  sync.Mutex
	got []mcp.ProgressNotificationParams
}

func (p *progressLog) handle(_ context.Context, req *mcp.ProgressNotificationClientRequest) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.got = append(p.got, *req.Params)
}

func (p *progressLog) all() []mcp.ProgressNotificationParams {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Clone(p.got)
}

func (p *progressLog) messages() []string {
	var out []string
	for _, n := range p.all() {
		out = append(out, n.Message)
	}
	return out
}

// await waits until n notifications arrived.
func (p *progressLog) await(t *testing.T, n int) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for len(p.all()) < n {
		if time.Now().After(deadline) {
			t.Fatalf("got %d progress notifications, want %d", len(p.all()), n)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func (f *fixture) wantFile(name, content string) {
	f.t.Helper()
	b, err := os.ReadFile(filepath.Join(f.portalDir, name))
	if err != nil || string(b) != content {
		f.t.Errorf("portal file %s = %q, %v; want %q", name, b, err, content)
	}
}

func (f *fixture) wantNoFile(name string) {
	f.t.Helper()
	if _, err := os.Stat(filepath.Join(f.portalDir, name)); !os.IsNotExist(err) {
		f.t.Errorf("portal file %s exists (%v): the call ran", name, err)
	}
}

func errorMeta(t *testing.T, res *mcp.CallToolResult) map[string]any {
	t.Helper()
	e, _ := res.Meta[mcpserver.MetaError].(map[string]any)
	return e
}

func jsonOf(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestCallFailureIsToolError: a call the gateway refuses or that fails is
// a tool error naming the Plexus code, in the text and in _meta.
func TestCallFailureIsToolError(t *testing.T) {
	f := newFixture(t, mcpserver.Options{})
	cs := f.connect(f.agent("claude"), "claude-code", nil)
	for _, tc := range []struct {
		tool string
		args map[string]any
		code plexus.ErrorCode
	}{
		{"portal__docs__read", map[string]any{"path": "missing.txt"}, plexus.CodeTransportError},
		{"mcp__up__count", map[string]any{"n": "three"}, plexus.CodeSchemaValidationFailed},
	} {
		res := call(t, cs, tc.tool, tc.args)
		if !res.IsError || !strings.Contains(text(res), string(tc.code)) || errorMeta(t, res)["code"] != string(tc.code) {
			t.Errorf("%s(%v) = isError %v %q, _meta %v; want a tool error with %s", tc.tool, tc.args, res.IsError, text(res), res.Meta, tc.code)
		}
	}
}

// TestCancelWhileWaiting: the host's cancellation ends a call's wait for the
// owner: the wait gives back its event stream, and an approval that comes
// after runs nothing.
func TestCancelWhileWaiting(t *testing.T) {
	// One event stream per session: the wait's own subscription shows.
	f := newFixtureWith(t, mcpserver.Options{ProgressInterval: 20 * time.Millisecond}, gateway.StreamLimits{PerSession: 1})
	prog := &progressLog{}
	cs := f.connect(f.agent("claude"), "claude-code", &mcp.ClientOptions{ProgressNotificationHandler: prog.handle})
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() {
		p := &mcp.CallToolParams{Name: "mcp__up__wipe", Arguments: map[string]any{}}
		p.SetProgressToken("w")
		_, err := cs.CallTool(ctx, p)
		errc <- err
	}()
	id := f.awaitPending()
	prog.await(t, 1) // the call is in its wait
	sid := f.rows("session.opened")[0].Target
	if st := f.eventsStatus(sid); st != http.StatusTooManyRequests {
		t.Fatalf("GET /events while the call waits = %d, want 429: the wait holds the session's stream", st)
	}
	cancel()
	if err := <-errc; err == nil {
		t.Fatal("a cancelled call answered no error")
	}
	for deadline := time.Now().Add(30 * time.Second); f.eventsStatus(sid) != http.StatusOK; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the cancelled call's wait still holds the session's event stream")
		}
	}
	f.decide(id, true, "")
	if n := f.upstream.count("wipe"); n != 0 {
		t.Fatalf("upstream wipe calls = %d after a cancelled wait, want 0", n)
	}
	if n := len(f.rows("invoke.started")); n != 0 {
		t.Errorf("invoke.started rows = %d, want none", n)
	}
}

// eventsStatus opens the session's /events and closes it at once,
// answering the status.
func (f *fixture) eventsStatus(sessionID string) int {
	f.t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, f.base+"/events", nil)
	if err != nil {
		f.t.Fatal(err)
	}
	req.Header.Set(plexus.SessionHeader, sessionID)
	resp, err := (&http.Client{Transport: f.hosts}).Do(req)
	if err != nil {
		f.t.Fatal(err)
	}
	cancel()
	if err := resp.Body.Close(); err != nil {
		f.t.Logf("close /events: %v", err)
	}
	return resp.StatusCode
}
