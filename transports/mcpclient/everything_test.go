//lint:file-ignore SA1019 sampling, elicitation, roots and logging, deprecated from 2026-07-28 but served through its deprecation window, are what Plexus relays

package mcpclient_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/plexus-gw/plexus"
	"github.com/plexus-gw/plexus/platform"
	"github.com/plexus-gw/plexus/transports/mcpclient"
)

// TestEverything runs the reference server-everything over stdio.
func TestEverything(t *testing.T) {
	failOnLeakedGoroutines(t)
	cfg := everythingConfig(t)
	cfg.Env = map[string]string{"MCP_TEST_CANARY": "canary-8c1e5f"}
	// The base environment is the platform's, built from a daemon
	// environment that holds the gateway's variables and a shell token.
	plat := platform.New(platform.Options{Home: t.TempDir(),
		Env: append(os.Environ(), "PLEXUS_HOME=/must/not/leak", "GITHUB_TOKEN=ghp_canary-must-not-leak")})
	h := startClient(t, "everything", cfg, mcpclient.Options{Env: plat.Env(), Processes: plat})
	h.waitReady(t)

	t.Run("ListedEverything", func(t *testing.T) {
		// What the SDK lists on a session of its own is what the server has.
		want := sdkListing(t, cfg)
		got := map[string][]string{}
		for _, d := range h.c.Definitions() {
			got[d.Primitive] = append(got[d.Primitive], d.Name)
		}
		for k := range got {
			slices.Sort(got[k])
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("definitions (-SDK's listing +client's):\n%s", diff)
		}
		for _, name := range []string{"echo", "get-sum", "trigger-long-running-operation", "gzip-file-as-resource"} {
			if !slices.Contains(got["tool"], name) {
				t.Errorf("no tool %s in %v", name, got["tool"])
			}
		}
		if len(got["resource"]) < 5 || len(got["prompt"]) != 4 || len(got["resourceTemplate"]) != 2 {
			t.Errorf("resources %v, templates %v, prompts %v", got["resource"], got["resourceTemplate"], got["prompt"])
		}
		if n := len(h.entries(t)); n != len(h.c.Definitions()) {
			t.Errorf("Scan has %d entries, Definitions %d", n, len(h.c.Definitions()))
		}
		e := h.entry(t, "mcp.everything.echo")
		if e.MCP.ProtocolVersion == "" || e.MCP.ServerID != "everything" || e.Label != "Echo Tool" {
			t.Errorf("echo entry %+v mcp %+v", e, e.MCP)
		}
	})

	t.Run("Verbs", func(t *testing.T) {
		m := h.entries(t)
		for id, want := range map[string]plexus.Verb{
			"mcp.everything.echo":                               plexus.VerbRead,    // readOnlyHint
			"mcp.everything.gzip-file-as-resource":              plexus.VerbExecute, // openWorldHint
			"mcp.everything.toggle-simulated-logging":           plexus.VerbWrite,   // all hints false
			"mcp.everything.prompt.args-prompt":                 plexus.VerbRead,
			"mcp.everything.resource.features.md":               plexus.VerbRead,
			"mcp.everything.template.Dynamic~20Text~20Resource": plexus.VerbRead,
		} {
			if got := m[id].Grants; len(got) != 1 || got[0] != want {
				t.Errorf("%s grants %v, want [%s]", id, got, want)
			}
		}
	})

	t.Run("CallIsVerbatim", func(t *testing.T) {
		r := h.call(t, context.Background(), "mcp.everything.echo", map[string]any{"message": "hello"}, nil)
		if !r.OK {
			t.Fatal(r.Error)
		}
		if want := directCall(t, cfg, "echo", `{"message":"hello"}`); string(r.MCPResult) != want {
			t.Errorf("mcpResult\n got %s\nwant %s (the server's bytes)", r.MCPResult, want)
		}
		res := h.ok(t, "mcp.everything.get-sum", map[string]any{"a": 2.0, "b": 3.0})
		if text := firstText(t, res); !strings.Contains(text, "5") {
			t.Errorf("get-sum said %q", text)
		}
	})

	t.Run("StructuredContent", func(t *testing.T) {
		r := h.call(t, context.Background(), "mcp.everything.get-structured-content", map[string]any{"location": "New York"}, nil)
		if !r.OK {
			t.Fatal(r.Error)
		}
		sc, _ := r.Data.(json.RawMessage)
		if !strings.Contains(string(sc), "temperature") || !strings.Contains(string(r.MCPResult), string(sc)) {
			t.Errorf("data %s, want the structuredContent of %s", sc, r.MCPResult)
		}
	})

	t.Run("IsError", func(t *testing.T) {
		r := h.call(t, context.Background(), "mcp.everything.echo", map[string]any{"message": 5.0}, nil)
		wantErr(t, r, plexus.CodeMCPToolError, "validation")
		if res := decode(t, r.MCPResult); res["isError"] != true || !strings.Contains(firstText(t, res), "validation") {
			t.Errorf("mcpResult %s", r.MCPResult)
		}
	})

	t.Run("ResourceRead", func(t *testing.T) {
		res := h.ok(t, "mcp.everything.resource.features.md", nil)
		c := res["contents"].([]any)[0].(map[string]any)
		if c["uri"] != "demo://resource/static/document/features.md" || !strings.Contains(c["text"].(string), "# Everything Server - Features") {
			t.Errorf("contents %v", c["uri"])
		}
	})

	t.Run("TemplateRead", func(t *testing.T) {
		id := "mcp.everything.template.Dynamic~20Text~20Resource"
		res := h.ok(t, id, map[string]any{"resourceId": "3"})
		if text := res["contents"].([]any)[0].(map[string]any)["text"].(string); !strings.HasPrefix(text, "Resource 3:") {
			t.Errorf("text %q", text)
		}
		// The server refuses id 0 with a JSON-RPC error.
		wantErr(t, h.call(t, context.Background(), id, map[string]any{"resourceId": "0"}, nil), plexus.CodeTransportError, "Unknown resource")
	})

	t.Run("PromptGet", func(t *testing.T) {
		res := h.ok(t, "mcp.everything.prompt.args-prompt", map[string]any{"city": "Paris"})
		text := res["messages"].([]any)[0].(map[string]any)["content"].(map[string]any)["text"]
		if text != "What's weather in Paris?" {
			t.Errorf("prompt text %v", text)
		}
		e := h.entry(t, "mcp.everything.prompt.args-prompt")
		var schema struct {
			Required []string `json:"required"`
		}
		if err := json.Unmarshal(e.IO.Input, &schema); err != nil || !slices.Equal(schema.Required, []string{"city"}) {
			t.Errorf("prompt input %s", e.IO.Input)
		}
	})

	t.Run("Progress", func(t *testing.T) {
		var pl progressLog
		r := h.call(t, context.Background(), "mcp.everything.trigger-long-running-operation", map[string]any{"duration": 0.3, "steps": 3.0}, &pl)
		if !r.OK {
			t.Fatal(r.Error)
		}
		var got []string
		for _, p := range pl.all() {
			got = append(got, fmt.Sprintf("%s %v/%v", p.Channel, *p.Progress, *p.Total))
		}
		if diff := cmp.Diff([]string{"progress 1/3", "progress 2/3", "progress 3/3"}, got); diff != "" {
			t.Errorf("progress (-want +got):\n%s", diff)
		}
	})

	t.Run("Cancelled", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		var pl progressLog
		done := make(chan plexus.TransportResult, 1)
		start := time.Now()
		go func() {
			done <- h.call(t, ctx, "mcp.everything.trigger-long-running-operation", map[string]any{"duration": 10.0, "steps": 20.0}, &pl)
		}()
		eventually(t, 10*time.Second, "the first progress", func() bool { return len(pl.all()) > 0 })
		cancel()
		wantErr(t, <-done, plexus.CodeTransportError, "cancelled")
		if el := time.Since(start); el > 5*time.Second {
			t.Errorf("the cancelled call took %s", el)
		}
		h.ok(t, "mcp.everything.echo", map[string]any{"message": "still here"})
	})

	t.Run("EnvReachesTheServerNotTheLog", func(t *testing.T) {
		r := h.call(t, context.Background(), "mcp.everything.get-env", nil, nil)
		if !r.OK {
			t.Fatal(r.Error)
		}
		if !strings.Contains(string(r.MCPResult), "canary-8c1e5f") {
			t.Error("the configured env did not reach the server")
		}
		if strings.Contains(string(r.MCPResult), "/must/not/leak") {
			t.Error("a PLEXUS_* variable reached the server")
		}
		if strings.Contains(string(r.MCPResult), "ghp_canary-must-not-leak") {
			t.Error("a token of the daemon's environment reached the server")
		}
	})

	t.Run("ListChanged", func(t *testing.T) {
		before := h.changeCount()
		res := h.ok(t, "mcp.everything.gzip-file-as-resource", map[string]any{"name": "hello.gz", "data": "data:text/plain;base64,aGVsbG8=", "outputType": "resourceLink"})
		_ = res
		eventually(t, 10*time.Second, "the session resource is listed", func() bool {
			for _, e := range h.entries(t) {
				if e.MCP.OriginName == "demo://resource/session/hello.gz" {
					return true
				}
			}
			return false
		})
		if h.changeCount() <= before {
			t.Error("OnChange was not called")
		}
		r := h.call(t, context.Background(), "mcp.everything.resource.hello.gz", nil, nil)
		if !r.OK || !strings.Contains(string(r.MCPResult), "application/gzip") {
			t.Errorf("reading the new resource: ok %v %v %.200s", r.OK, r.Error, r.MCPResult)
		}
	})

	h.stop()
	if strings.Contains(h.logs.String(), "canary-8c1e5f") {
		t.Errorf("the log holds an env value:\n%s", h.logs)
	}
	if hl := h.c.Health(context.Background()); hl.Status != plexus.HealthUnavailable || hl.Detail != "stopped" {
		t.Errorf("health after Run %+v", hl)
	}
}

// TestEverythingReconnect kills the server: the client reports it
// unavailable, starts it again, lists again, and calls work.
func TestEverythingReconnect(t *testing.T) {
	failOnLeakedGoroutines(t)
	h := startClient(t, "everything", everythingConfig(t), mcpclient.Options{})
	h.waitReady(t)
	pid := h.c.PID()
	if pid == 0 {
		t.Fatal("no pid")
	}
	before := len(h.entries(t))
	// A call in flight when the server dies fails with transport_error.
	var pl progressLog
	inflight := make(chan plexus.TransportResult, 1)
	go func() {
		inflight <- h.call(t, context.Background(), "mcp.everything.trigger-long-running-operation", map[string]any{"duration": 10.0, "steps": 20.0}, &pl)
	}()
	eventually(t, 10*time.Second, "the call is running", func() bool { return len(pl.all()) > 0 })
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	wantErr(t, <-inflight, plexus.CodeTransportError, "ended during the call")
	eventually(t, 10*time.Second, "health goes unavailable", func() bool {
		return slices.ContainsFunc(h.healthLog(), func(hl plexus.Health) bool { return hl.Status == plexus.HealthUnavailable })
	})
	eventually(t, 20*time.Second, "a new server process", func() bool { p := h.c.PID(); return p != 0 && p != pid })
	eventually(t, 20*time.Second, "health ok again", func() bool {
		return h.c.Health(context.Background()).Status == plexus.HealthOK
	})
	if !processGone(pid) {
		t.Errorf("the killed server %d was not reaped", pid)
	}
	if n := len(h.entries(t)); n != before {
		t.Errorf("%d entries after reconnecting, want %d", n, before)
	}
	if text := firstText(t, h.ok(t, "mcp.everything.echo", map[string]any{"message": "back"})); text != "Echo: back" {
		t.Errorf("echo said %q", text)
	}
	var statuses []plexus.HealthStatus
	for _, hl := range h.healthLog() {
		statuses = append(statuses, hl.Status)
	}
	if diff := cmp.Diff([]plexus.HealthStatus{plexus.HealthOK, plexus.HealthUnavailable, plexus.HealthOK}, statuses); diff != "" {
		t.Errorf("OnHealth (-want +got):\n%s", diff)
	}
	for _, hl := range h.healthLog() {
		if hl.Status == plexus.HealthUnavailable && !strings.Contains(hl.Detail, "session lost") {
			t.Errorf("unavailable detail %q", hl.Detail)
		}
	}
	newPID := h.c.PID()
	h.stop()
	eventually(t, 10*time.Second, "the server stops with Run", func() bool { return processGone(newPID) })
}

// TestDispatchWhileDown: with no server to reach, Dispatch says
// source_unavailable at once, and Health says why.
func TestDispatchWhileDown(t *testing.T) {
	failOnLeakedGoroutines(t)
	h := startClient(t, "gone", mcpclient.ServerConfig{Command: "/nonexistent/mcp-server"}, mcpclient.Options{})
	eventually(t, 10*time.Second, "unavailable", func() bool {
		return h.c.Health(context.Background()).Status == plexus.HealthUnavailable
	})
	e := plexus.Entry{ID: "mcp.gone.x", Source: "mcp:gone", Transport: plexus.TransportMCP, Route: json.RawMessage(`{"primitive":"tool","name":"x"}`)}
	r := h.tr.Dispatch(context.Background(), e, map[string]any{}, plexus.DispatchContext{})
	wantErr(t, r, plexus.CodeSourceUnavailable, "not connected", "/nonexistent/mcp-server")
	h.tr.Detach("mcp:gone")
	wantErr(t, h.tr.Dispatch(context.Background(), e, map[string]any{}, plexus.DispatchContext{}), plexus.CodeSourceUnavailable, "no MCP server is attached")
	if es, _ := h.c.Scan(context.Background()); len(es) != 0 {
		t.Errorf("Scan %v before any listing", es)
	}
}

// sdkListing lists what the server has on a session of the SDK's own,
// with the same (empty) client capabilities: the oracle of the client's
// listing.
func sdkListing(t *testing.T, cfg mcpclient.ServerConfig) map[string][]string {
	t.Helper()
	ctx := context.Background()
	// The capabilities Plexus declares (it relays them to the calling
	// host): the server shows the tools that use them.
	client := mcp.NewClient(&mcp.Implementation{Name: "oracle", Version: "1"}, &mcp.ClientOptions{Capabilities: &mcp.ClientCapabilities{
		RootsV2: &mcp.RootCapabilities{}, Sampling: &mcp.SamplingCapabilities{},
		Elicitation: &mcp.ElicitationCapabilities{Form: &mcp.FormElicitationCapabilities{}}}})
	cs, err := client.Connect(ctx, &mcp.CommandTransport{Command: exec.Command(cfg.Command, cfg.Args...)}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	time.Sleep(200 * time.Millisecond) // let the tools registered after initialization land
	out := map[string][]string{}
	for tl, err := range cs.Tools(ctx, nil) {
		if err != nil {
			t.Fatal(err)
		}
		out["tool"] = append(out["tool"], tl.Name)
	}
	for r, err := range cs.Resources(ctx, nil) {
		if err != nil {
			t.Fatal(err)
		}
		out["resource"] = append(out["resource"], r.URI)
	}
	for r, err := range cs.ResourceTemplates(ctx, nil) {
		if err != nil {
			t.Fatal(err)
		}
		out["resourceTemplate"] = append(out["resourceTemplate"], r.URITemplate)
	}
	for p, err := range cs.Prompts(ctx, nil) {
		if err != nil {
			t.Fatal(err)
		}
		out["prompt"] = append(out["prompt"], p.Name)
	}
	for k := range out {
		slices.Sort(out[k])
	}
	return out
}

// directCall speaks NDJSON JSON-RPC to a fresh server process by hand and
// returns the bytes of the result of one tools/call: what the server sent.
func directCall(t *testing.T, cfg mcpclient.ServerConfig, tool, args string) string {
	t.Helper()
	cmd := exec.Command(cfg.Command, cfg.Args...)
	in, _ := cmd.StdinPipe()
	out, _ := cmd.StdoutPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		in.Close()
		_ = cmd.Wait()
	}()
	br := bufio.NewReader(out)
	send := func(s string) { io.WriteString(in, s+"\n") }
	await := func(id string) string {
		for {
			line, err := br.ReadBytes('\n')
			if err != nil {
				t.Fatal(err)
			}
			var m struct {
				ID     json.RawMessage `json:"id"`
				Result json.RawMessage `json:"result"`
			}
			if json.Unmarshal(line, &m) == nil && string(m.ID) == id && m.Result != nil {
				return string(m.Result)
			}
		}
	}
	send(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"direct","version":"1"}}}`)
	await("1")
	send(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	send(`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"` + tool + `","arguments":` + args + `}}`)
	return await("2")
}
