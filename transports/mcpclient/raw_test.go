package mcpclient_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/plexus-gw/plexus"
	"github.com/plexus-gw/plexus/transports/mcpclient"
)

// rawFixture is a client of the hand-written server and the file where the
// server notes what it observes.
type rawFixture struct {
	*harness
	events string
}

func startRaw(t *testing.T, opts mcpclient.Options) *rawFixture {
	t.Helper()
	events := filepath.Join(t.TempDir(), "events")
	h := startClient(t, "raw", rawConfig(t, events), opts)
	h.waitReady(t)
	return &rawFixture{harness: h, events: events}
}

func (f *rawFixture) observed() string {
	b, _ := os.ReadFile(f.events)
	return string(b)
}

func (f *rawFixture) waitObserved(t *testing.T, what string) {
	t.Helper()
	eventually(t, 10*time.Second, "the server observes "+what, func() bool { return strings.Contains(f.observed(), what) })
}

func TestRawServer(t *testing.T) {
	failOnLeakedGoroutines(t)
	f := startRaw(t, mcpclient.Options{})

	t.Run("PagedToExhaustion", func(t *testing.T) {
		counts := map[string]int{}
		for _, d := range f.c.Definitions() {
			counts[d.Primitive]++
		}
		// One of the two templates is beyond RFC 6570 level 1 and is not projected.
		want := map[string]int{"tool": 25, "resource": 23, "resourceTemplate": 1, "prompt": 12}
		if diff := cmp.Diff(want, counts); diff != "" {
			t.Errorf("definitions per primitive (-want +got):\n%s", diff)
		}
		if n := len(f.entries(t)); n != 25+23+1+12 {
			t.Errorf("Scan returned %d entries, want %d", n, 25+23+1+12)
		}
		for _, page := range []string{`tools/list ""`, `tools/list "p10"`, `tools/list "p20"`, `resources/list "p20"`, `prompts/list "p10"`} {
			if !strings.Contains(f.observed(), page) {
				t.Errorf("the server never saw %s:\n%s", page, f.observed())
			}
		}
	})

	t.Run("RawIsByteFaithful", func(t *testing.T) {
		e := f.entry(t, "mcp.raw.weird")
		if got, want := string(e.MCP.Raw), fmt.Sprintf(weirdTool, 1); got != want {
			t.Errorf("mcp.raw\n got %s\nwant %s", got, want)
		}
		if got, want := string(e.IO.Input), `{"type":"object","properties":{"q":{"type":"string","esc":"\u00fc\/"}}}`; got != want {
			t.Errorf("io.input\n got %s\nwant %s", got, want)
		}
		want := plexus.MCPPassthrough{ServerID: "raw", ProtocolVersion: "2025-06-18", Primitive: "tool", OriginName: "weird", Raw: e.MCP.Raw}
		if diff := cmp.Diff(want, *e.MCP); diff != "" {
			t.Errorf("mcp (-want +got):\n%s", diff)
		}
		if e.Source != "mcp:raw" || e.Kind != plexus.KindCapability || e.Transport != plexus.TransportMCP || e.Label != "weird" || e.Describe != "Weird tool v1" {
			t.Errorf("entry %+v", e)
		}
		if diff := cmp.Diff([]plexus.Verb{plexus.VerbWrite}, e.Grants); diff != "" {
			t.Errorf("an unannotated tool's grants (-want +got):\n%s", diff)
		}
		if len(e.Route) == 0 {
			t.Error("no route")
		}
	})

	t.Run("IDs", func(t *testing.T) {
		m := f.entries(t)
		for _, id := range []string{"mcp.raw.get~20weather", "mcp.raw.~C3~BC-tool", "mcp.raw.resource.r07", "mcp.raw.resource.dup",
			"mcp.raw.template.note", "mcp.raw.prompt.greet", "mcp.raw.prompt.p11"} {
			if _, ok := m[id]; !ok {
				t.Errorf("no entry %s", id)
			}
		}
		dups := 0
		for id, e := range m {
			if strings.HasPrefix(id, "mcp.raw.resource.dup") {
				dups++
				if e.MCP.Primitive != "resource" || !strings.HasPrefix(e.MCP.OriginName, "file:///dup/") {
					t.Errorf("%s: %+v", id, e.MCP)
				}
			}
		}
		if dups != 2 {
			t.Errorf("%d entries for the two resources named dup, want 2", dups)
		}
		if got := m["mcp.raw.echo"]; got.Label != "Echo" || got.Grants[0] != plexus.VerbRead {
			t.Errorf("echo: label %q grants %v", got.Label, got.Grants)
		}
		if got := m["mcp.raw.mutate"].Grants; got[0] != plexus.VerbExecute {
			t.Errorf("a destructive tool's grants %v, want execute", got)
		}
		greet := m["mcp.raw.prompt.greet"]
		wantIn := `{"additionalProperties":false,"properties":{"tone":{"description":"how","type":"string"},"who":{"type":"string"}},"required":["who"],"type":"object"}`
		if string(greet.IO.Input) != wantIn || greet.Grants[0] != plexus.VerbRead || greet.MCP.Primitive != "prompt" {
			t.Errorf("prompt entry: input %s grants %v", greet.IO.Input, greet.Grants)
		}
		note := m["mcp.raw.template.note"]
		if note.MCP.Primitive != "resource" || note.MCP.OriginName != "file:///notes/{name}.md" {
			t.Errorf("template entry mcp %+v", note.MCP)
		}
	})

	t.Run("CallIsVerbatim", func(t *testing.T) {
		r := f.call(t, context.Background(), "mcp.raw.echo", map[string]any{"msg": "hi"}, nil)
		if !r.OK {
			t.Fatal(r.Error)
		}
		want := `{"content":[{"type":"text","text":"{\"msg\":\"hi\"}","x-extra":1}],  "x-result-extra":{"a":[1, 2.50]}}`
		if string(r.MCPResult) != want {
			t.Errorf("mcpResult\n got %s\nwant %s", r.MCPResult, want)
		}
		if r.Data != nil {
			t.Errorf("data %v, want none (no structuredContent)", r.Data)
		}
	})

	t.Run("StructuredContent", func(t *testing.T) {
		r := f.call(t, context.Background(), "mcp.raw.structured", nil, nil)
		if !r.OK {
			t.Fatal(r.Error)
		}
		if got, _ := r.Data.(json.RawMessage); string(got) != `{"n":1}` {
			t.Errorf("data %v, want the structuredContent", r.Data)
		}
	})

	t.Run("IsError", func(t *testing.T) {
		r := f.call(t, context.Background(), "mcp.raw.fail", nil, nil)
		wantErr(t, r, plexus.CodeMCPToolError, "no such thing")
		if string(r.MCPResult) != `{"content":[{"type":"text","text":"no such thing"}],"isError":true}` {
			t.Errorf("mcpResult %s, want the server's result", r.MCPResult)
		}
		if r.Error.CapabilityID != "mcp.raw.fail" {
			t.Errorf("capability id %q", r.Error.CapabilityID)
		}
	})

	// What the SDK would refuse to decode is refused, though the result is
	// not decoded into its structs.
	t.Run("NotAToolResult", func(t *testing.T) {
		for _, id := range []string{"mcp.raw.oddcontent", "mcp.raw.notresult", "mcp.raw.badimage"} {
			r := f.call(t, context.Background(), id, nil, nil)
			wantErr(t, r, plexus.CodeTransportError, "tools/call")
			if len(r.MCPResult) != 0 {
				t.Errorf("%s: mcpResult %s on a refused result", id, r.MCPResult)
			}
		}
		if r := f.call(t, context.Background(), "mcp.raw.echo", nil, nil); !r.OK {
			t.Errorf("the session did not live on: %v", r.Error)
		}
	})

	// isError is read with its exact key, as the SDK and a host read it:
	// a look-alike key neither hides nor makes a tool error.
	t.Run("IsErrorExactKey", func(t *testing.T) {
		r := f.call(t, context.Background(), "mcp.raw.shadowerr", nil, nil)
		wantErr(t, r, plexus.CodeMCPToolError, "the transfer failed")
		if r := f.call(t, context.Background(), "mcp.raw.speltok", nil, nil); !r.OK {
			t.Errorf("IsError (not isError) made a tool error: %v", r.Error)
		}
	})

	t.Run("JSONRPCError", func(t *testing.T) {
		r := f.call(t, context.Background(), "mcp.raw.rpcerror", map[string]any{"secret-input": "do-not-echo"}, nil)
		wantErr(t, r, plexus.CodeTransportError, "backend exploded")
		if strings.Contains(r.Error.Message, "do-not-echo") {
			t.Errorf("the message echoes the input: %s", r.Error.Message)
		}
		if diff := cmp.Diff(map[string]any{"code": int64(-32000)}, r.Error.Detail); diff != "" {
			t.Errorf("detail (-want +got):\n%s", diff)
		}
		if len(r.MCPResult) != 0 {
			t.Errorf("mcpResult %s on a JSON-RPC error", r.MCPResult)
		}
	})

	t.Run("Progress", func(t *testing.T) {
		var pl progressLog
		r := f.call(t, context.Background(), "mcp.raw.progress", nil, &pl)
		if !r.OK {
			t.Fatal(r.Error)
		}
		one, two := 1.0, 2.0
		want := []plexus.InvokeProgress{
			{Channel: "progress", Progress: &one, Total: &two, Message: "half"},
			{Channel: "progress", Progress: &two},
		}
		if diff := cmp.Diff(want, pl.all()); diff != "" {
			t.Errorf("progress (-want +got):\n%s", diff)
		}
		if !strings.Contains(f.observed(), `progress token "plexus-`) {
			t.Errorf("the server saw no string progress token:\n%s", f.observed())
		}
	})

	t.Run("Cancelled", func(t *testing.T) {
		before := strings.Count(f.observed(), "slow ")
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan plexus.TransportResult, 1)
		go func() { done <- f.call(t, ctx, "mcp.raw.slow", nil, nil) }()
		eventually(t, 10*time.Second, "the slow call reaches the server", func() bool { return strings.Count(f.observed(), "slow ") > before })
		id := lastSlowID(f.observed())
		cancel()
		wantErr(t, <-done, plexus.CodeTransportError, "cancelled")
		f.waitObserved(t, "cancelled "+id+" context canceled")
	})

	t.Run("TimedOut", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
		defer cancel()
		wantErr(t, f.call(t, ctx, "mcp.raw.slow", nil, nil), plexus.CodeTransportError, "timed out")
		f.waitObserved(t, "cancelled "+lastSlowID(f.observed())+" context deadline exceeded")
	})

	t.Run("ResourceRead", func(t *testing.T) {
		r := f.call(t, context.Background(), "mcp.raw.resource.r03", nil, nil)
		if !r.OK {
			t.Fatal(r.Error)
		}
		if want := `{"contents":[{"uri":"file:///r/03","text":"content of file:///r/03", "x-extra":true}]}`; string(r.MCPResult) != want {
			t.Errorf("mcpResult\n got %s\nwant %s", r.MCPResult, want)
		}
	})

	t.Run("TemplateRead", func(t *testing.T) {
		res := f.ok(t, "mcp.raw.template.note", map[string]any{"name": "a b/ü"})
		uri := res["contents"].([]any)[0].(map[string]any)["uri"]
		if uri != "file:///notes/a%20b%2F%C3%BC.md" {
			t.Errorf("read %v, want the template expanded and percent-encoded", uri)
		}
		wantErr(t, f.call(t, context.Background(), "mcp.raw.template.note", map[string]any{"name": 3.0}, nil), plexus.CodeSchemaValidationFailed)
	})

	t.Run("PromptGet", func(t *testing.T) {
		res := f.ok(t, "mcp.raw.prompt.greet", map[string]any{"who": "Ada", "tone": "warm"})
		text := res["messages"].([]any)[0].(map[string]any)["content"].(map[string]any)["text"]
		if text != "hello Ada (warm)" {
			t.Errorf("prompt text %v", text)
		}
		wantErr(t, f.call(t, context.Background(), "mcp.raw.prompt.greet", map[string]any{"who": 1.0}, nil), plexus.CodeSchemaValidationFailed)
	})

	// Calls share the session and must each get their own result back.
	t.Run("Concurrent", func(t *testing.T) {
		var wg sync.WaitGroup
		for i := range 50 {
			wg.Go(func() {
				r := f.call(t, context.Background(), "mcp.raw.echo", map[string]any{"i": float64(i)}, nil)
				if !r.OK {
					t.Errorf("call %d: %v", i, r.Error)
					return
				}
				if want := fmt.Sprintf(`"{\"i\":%d}"`, i); !strings.Contains(string(r.MCPResult), want) {
					t.Errorf("call %d got %s", i, r.MCPResult)
				}
			})
		}
		wg.Wait()
	})

	if h := f.c.Health(context.Background()); h.Status != plexus.HealthOK {
		t.Errorf("health %+v, want ok", h)
	}
}

// lastSlowID is the JSON-RPC id of the last slow call the server noted.
func lastSlowID(observed string) string {
	i := strings.LastIndex(observed, "slow ")
	id, _, _ := strings.Cut(observed[i+len("slow "):], "\n")
	return id
}

// TestPinnedHoldsChangedDefinition pins every tool at its first scan, as
// the gateway's rug-pull defence does: when the server changes a tool's
// description and says so, the hash changes, the pin check is asked with
// the tools only, and the held entry leaves the pinned source's Scan (the
// registry never sees it). A failing check fails the scan.
func TestPinnedHoldsChangedDefinition(t *testing.T) {
	failOnLeakedGoroutines(t)
	var mu sync.Mutex
	pins := map[string]string{}
	asked := 0
	var failing error
	check := func(_ context.Context, source string, defs []mcpclient.Definition) (map[string]bool, error) {
		mu.Lock()
		defer mu.Unlock()
		asked++
		if failing != nil {
			return nil, failing
		}
		held := map[string]bool{}
		for _, d := range defs {
			if source != "mcp:raw" || d.Primitive != mcpclient.PrimitiveTool {
				t.Errorf("pin check asked for %s %s %s", source, d.Primitive, d.EntryID)
			}
			if pin, ok := pins[d.EntryID]; !ok {
				pins[d.EntryID] = d.Hash
			} else if pin != d.Hash {
				held[d.EntryID] = true
			}
		}
		return held, nil
	}
	f := startRaw(t, mcpclient.Options{})
	pinned := &mcpclient.Pinned{Client: f.c, Check: check}
	scan := func() map[string]bool {
		es, err := pinned.Scan(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		ids := map[string]bool{}
		for _, e := range es {
			ids[e.ID] = true
		}
		return ids
	}
	if !scan()["mcp.raw.weird"] {
		t.Fatal("weird is not served before any change")
	}
	first := hashOf(t, f.c.Definitions(), "mcp.raw.weird")
	changes := f.changeCount()

	f.ok(t, "mcp.raw.mutate", nil)
	eventually(t, 10*time.Second, "weird is held", func() bool { return !scan()["mcp.raw.weird"] })

	if second := hashOf(t, f.c.Definitions(), "mcp.raw.weird"); second == first {
		t.Errorf("the hash did not change with the description: %s", first)
	}
	for _, d := range f.c.Definitions() {
		if d.EntryID == "mcp.raw.weird" && string(d.Raw) != fmt.Sprintf(weirdTool, 2) {
			t.Errorf("Definitions raw %s", d.Raw)
		}
	}
	if f.changeCount() <= changes {
		t.Error("OnChange was not called")
	}
	if !scan()["mcp.raw.echo"] {
		t.Error("an unchanged tool was held too")
	}
	if _, ok := f.entries(t)["mcp.raw.weird"]; !ok {
		t.Error("the client itself holds: the pinned source is the one place that does")
	}
	mu.Lock()
	if asked < 2 {
		t.Errorf("pin check asked %d times, want at each scan", asked)
	}
	failing = errors.New("journal locked")
	mu.Unlock()
	if es, err := pinned.Scan(context.Background()); err == nil {
		t.Errorf("a failing pin check served %d unchecked entries", len(es))
	}
}

func hashOf(t *testing.T, defs []mcpclient.Definition, id string) string {
	t.Helper()
	for _, d := range defs {
		if d.EntryID == id {
			return d.Hash
		}
	}
	t.Fatalf("no definition for %s", id)
	return ""
}

// TestSecretsRedacted: a server that fails to start and prints its token on
// stderr gets its stderr logged with the token redacted, and the token is
// in no health detail.
func TestSecretsRedacted(t *testing.T) {
	failOnLeakedGoroutines(t)
	cfg := rawConfig(t, "")
	cfg.Env["MCPCLIENT_CRASH_WITH"] = "tok-9d8e7f6a"
	h := startClient(t, "raw", cfg, mcpclient.Options{})
	eventually(t, 10*time.Second, "the failure is logged", func() bool { return strings.Contains(h.logs.String(), "was refused") })
	eventually(t, 10*time.Second, "unavailable", func() bool {
		return h.c.Health(context.Background()).Status == plexus.HealthUnavailable
	})
	h.stop()
	if logs := h.logs.String(); strings.Contains(logs, "tok-9d8e7f6a") || !strings.Contains(logs, "the token [redacted] was refused") {
		t.Errorf("log:\n%s", logs)
	}
	for _, hl := range h.healthLog() {
		if strings.Contains(hl.Detail, "tok-9d8e7f6a") {
			t.Errorf("health detail %q", hl.Detail)
		}
	}
}
