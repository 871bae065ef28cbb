//lint:file-ignore SA1019 the oracle declares sampling, deprecated from 2026-07-28, as Plexus does (it relays it)

package e2e

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/plexus-gw/plexus"
	"github.com/plexus-gw/plexus/daemon"
	"github.com/plexus-gw/plexus/platform"
)

// npmMCPServer is the path of an MCP server from the npm registry, pinned
// by examples/mcp/package-lock.json and installed by make test (npm ci); a
// missing install fails the test rather than skipping it.
func npmMCPServer(t *testing.T, bin string) string {
	t.Helper()
	p, err := filepath.Abs(filepath.Join("..", "examples", "mcp", "node_modules", ".bin", bin))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(p); err != nil {
		t.Fatalf("the MCP server %s is not installed at %s: run make test, which runs npm ci --prefix examples/mcp", bin, p)
	}
	return p
}

// sdkNames lists what a server has, as the official SDK's own client sees
// it on a session of its own (every page).
func sdkNames(t *testing.T, command string, args ...string) (tools, resources, prompts []string) {
	t.Helper()
	ctx := t.Context()
	// With the capabilities Plexus declares to a server (it relays them to
	// the calling host): the server lists some tools only to clients with
	// roots, sampling or elicitation.
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "oracle", Version: "1"}, &mcp.ClientOptions{Capabilities: &mcp.ClientCapabilities{
		RootsV2: &mcp.RootCapabilities{}, Sampling: &mcp.SamplingCapabilities{},
		Elicitation: &mcp.ElicitationCapabilities{Form: &mcp.FormElicitationCapabilities{}}}}).
		Connect(ctx, &mcp.CommandTransport{Command: exec.Command(command, args...)}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	for tool, err := range cs.Tools(ctx, nil) {
		if err != nil {
			t.Fatal(err)
		}
		tools = append(tools, tool.Name)
	}
	for r, err := range cs.Resources(ctx, nil) {
		if err != nil {
			t.Fatal(err)
		}
		resources = append(resources, r.URI)
	}
	for p, err := range cs.Prompts(ctx, nil) {
		if err != nil {
			t.Fatal(err)
		}
		prompts = append(prompts, p.Name)
	}
	return tools, resources, prompts
}

// TestMCPEverythingThroughPlexus: the reference server from the npm
// registry, configured in mcp.json before start, seen and called by an
// agent only through Plexus: every tool, resource and prompt the SDK lists
// is an entry; a tool call, a resource read and a prompt get come back
// verbatim under grants; a tool's in-band error is mcp_tool_error with its
// content; the server killed → source_status unavailable, then back and
// answering; a tool that registers a resource makes the server announce a
// list change, which reaches the agent as manifest_changed.
func TestMCPEverythingThroughPlexus(t *testing.T) {
	bin := npmMCPServer(t, "mcp-server-everything")
	home := filepath.Join(t.TempDir(), "home")
	if err := os.MkdirAll(home, 0o700); err != nil {
		t.Fatal(err)
	}
	// A secret named in the entry reaches the server (its get-env shows
	// it) and nothing else.
	const secret = "plx-mcp-secret-0c4d9e"
	if err := platform.New(platform.Options{Home: home}).SetSecret("everything-key", []byte(secret)); err != nil {
		t.Fatal(err)
	}
	cfg := fmt.Sprintf(`{"mcpServers":{"everything":{"command":%q,"args":["stdio"],"env":{"EVERYTHING_KEY":"Bearer ${secret:everything-key}"}}}}`, bin)
	if err := os.WriteFile(filepath.Join(home, "mcp.json"), []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	const canary = "aws-canary-5f0e2b"
	td := startTestDaemon(t, daemon.Options{Home: home, Env: append(os.Environ(), "AWS_SECRET_ACCESS_KEY="+canary)})
	_, sid := enrolledAgent(t, td, "claude")
	events := td.openEvents(t, sid, "")

	tools, resources, prompts := sdkNames(t, bin, "stdio")
	waitFor(t, 20*time.Second, "the everything server's entries", holds(func() bool {
		_, ok := manifestEntry(t, td, sid, "mcp.everything.echo")
		return ok
	}))
	var man plexus.ManifestResponse
	td.call(t, http.MethodGet, "/manifest", session(sid), nil, &man)
	byPrimitive := map[string][]string{}
	for _, e := range man.Manifest.Entries {
		if e.Source == "mcp:everything" && e.MCP != nil && !strings.HasPrefix(e.ID, "mcp.everything.template.") {
			byPrimitive[e.MCP.Primitive] = append(byPrimitive[e.MCP.Primitive], e.MCP.OriginName)
		}
	}
	for prim, want := range map[string][]string{"tool": tools, "resource": resources, "prompt": prompts} {
		got := byPrimitive[prim]
		slices.Sort(got)
		slices.Sort(want)
		if !slices.Equal(got, want) || len(want) == 0 {
			t.Errorf("%s entries %v, want what the SDK lists: %v", prim, got, want)
		}
	}

	read := grantAllowed(t, td, sid, map[string]any{"mcp.everything.echo": "allow", "mcp.everything.get-resource-reference": "allow",
		"mcp.everything.trigger-long-running-operation": "allow", "mcp.everything.get-env": "allow",
		"mcp.everything.resource.features.md": "allow", "mcp.everything.prompt.args-prompt": "allow"})
	st, resp, raw := td.invoke(t, read, plexus.InvokeRequest{ID: "mcp.everything.echo", Input: map[string]any{"message": "hello"}})
	if st != http.StatusOK || !resp.OK || !strings.Contains(string(resp.MCPResult), "Echo: hello") {
		t.Fatalf("echo: %d %s", st, raw)
	}
	// The server's own get-env hands an agent its environment: the owner's
	// shell secrets are not in it, what it needs to run is.
	st, resp, raw = td.invoke(t, read, plexus.InvokeRequest{ID: "mcp.everything.get-env"})
	if !resp.OK || strings.Contains(string(raw), canary) || !strings.Contains(string(raw), `\"PATH\"`) ||
		!strings.Contains(string(raw), `\"EVERYTHING_KEY\": \"Bearer `+secret) {
		t.Fatalf("get-env: %d %s", st, raw)
	}
	// The server throws for id 0: its SDK answers isError with the message.
	st, resp, raw = td.invoke(t, read, plexus.InvokeRequest{ID: "mcp.everything.get-resource-reference", Input: map[string]any{"resourceId": 0}})
	if st != http.StatusOK || resp.OK || resp.Error == nil || resp.Error.Code != plexus.CodeMCPToolError ||
		!strings.Contains(string(resp.MCPResult), "Invalid resourceId") {
		t.Fatalf("isError: %d %s", st, raw)
	}
	st, resp, raw = td.invoke(t, read, plexus.InvokeRequest{ID: "mcp.everything.resource.features.md"})
	var contents struct {
		Contents []struct{ URI, Text string } `json:"contents"`
	}
	if st != http.StatusOK || !resp.OK || json.Unmarshal(resp.MCPResult, &contents) != nil || len(contents.Contents) != 1 ||
		!strings.Contains(contents.Contents[0].Text, "Everything Server") {
		t.Fatalf("resource read: %d %s", st, raw)
	}
	st, resp, raw = td.invoke(t, read, plexus.InvokeRequest{ID: "mcp.everything.prompt.args-prompt", Input: map[string]any{"city": "Paris"}})
	if st != http.StatusOK || !resp.OK || !strings.Contains(string(resp.MCPResult), `"messages"`) || !strings.Contains(string(resp.MCPResult), "Paris") {
		t.Fatalf("prompt get: %d %s", st, raw)
	}

	// The server's progress notifications reach a streamed /invoke as SSE
	// before the result, and the session's /events.
	req, _ := http.NewRequestWithContext(t.Context(), http.MethodPost, td.BaseURL()+"/invoke",
		strings.NewReader(`{"id":"mcp.everything.trigger-long-running-operation","input":{"duration":0.3,"steps":3}}`))
	req.Header.Set("Authorization", "Bearer "+read)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "text/event-stream")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	sse, _ := io.ReadAll(res.Body)
	res.Body.Close()
	frames := strings.Split(strings.TrimSpace(string(sse)), "\n\n")
	if res.Header.Get("Content-Type") != "text/event-stream" || len(frames) != 4 ||
		!strings.HasPrefix(frames[3], "event: result\ndata: ") || !strings.Contains(frames[3], `"ok":true`) {
		t.Fatalf("streamed invoke: %s\n%s", res.Header.Get("Content-Type"), sse)
	}
	for i, f := range frames[:3] {
		var ev plexus.InvokeProgressEvent
		data := strings.TrimPrefix(f, "event: invoke_progress\ndata: ")
		if err := json.Unmarshal([]byte(data), &ev); err != nil || ev.Seq != i+1 || ev.Channel != "progress" || ev.Progress == nil ||
			*ev.Progress != float64(i+1) || ev.Total == nil || *ev.Total != 3 || ev.ID != "mcp.everything.trigger-long-running-operation" {
			t.Fatalf("progress frame %d: %s (%v)", i, f, err)
		}
	}
	for want := 1; want <= 3; want++ {
		eventWhere(t, events, plexus.EventInvokeProgress, func(ev plexus.InvokeProgressEvent) bool {
			return ev.Progress != nil && *ev.Progress == float64(want)
		})
	}

	// Killed: unavailable, then reconnected with a new process.
	pid := childRunning(t, bin)
	if pid <= 0 {
		t.Fatalf("server pid %d", pid)
	}
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	eventWhere(t, events, plexus.EventSourceStatus, func(s plexus.SourceStatusEvent) bool { return s.Source == "mcp:everything" && !s.Available })
	eventWhere(t, events, plexus.EventSourceStatus, func(s plexus.SourceStatusEvent) bool { return s.Source == "mcp:everything" && s.Available })
	if st, resp, raw := td.invoke(t, read, plexus.InvokeRequest{ID: "mcp.everything.echo", Input: map[string]any{"message": "again"}}); !resp.OK {
		t.Fatalf("echo after the restart: %d %s", st, raw)
	}
	if rows := rowsOf(t, td, "source.status", "mcp:everything"); len(rows) < 2 {
		t.Errorf("source.status rows: %+v", rows)
	}

	// A tool that makes the server register a resource: list_changed →
	// manifest_changed naming the new entry.
	exec := grantAllowed(t, td, sid, map[string]any{"mcp.everything.gzip-file-as-resource": map[string]any{"decision": "allow", "verbs": []string{"execute"}}})
	st, resp, raw = td.invoke(t, exec, plexus.InvokeRequest{ID: "mcp.everything.gzip-file-as-resource",
		Input: map[string]any{"name": "hello.gz", "data": "data:text/plain;base64,aGVsbG8=", "outputType": "resourceLink"}})
	if !resp.OK {
		t.Fatalf("gzip: %d %s", st, raw)
	}
	changed := eventWhere(t, events, plexus.EventManifestChanged, func(m plexus.ManifestChangedEvent) bool {
		return m.Changed != nil && slices.ContainsFunc(m.Changed.Added, func(id string) bool { return strings.HasPrefix(id, "mcp.everything.resource.") })
	})
	if _, ok := manifestEntry(t, td, sid, changed.Changed.Added[0]); !ok {
		t.Errorf("the added resource %s is not in the manifest", changed.Changed.Added[0])
	}

	// The secret is in no file under PLEXUS_HOME but its own.
	td.stop()
	own := filepath.Join(home, "secrets", "everything-key")
	err = filepath.WalkDir(home, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || p == own {
			return err
		}
		if b, err := os.ReadFile(p); err == nil && strings.Contains(string(b), secret) {
			return fmt.Errorf("the secret is in %s", p)
		}
		return nil
	})
	if err != nil {
		t.Error(err)
	}
}

// TestMCPFilesystemThroughPlexus: the npm filesystem server on a folder,
// added with plexus mcp add: a write needs the verb its annotations give
// (destructive → execute, asked every time), the file is really written,
// and a read outside the folder is the server's in-band error.
func TestMCPFilesystemThroughPlexus(t *testing.T) {
	bin := npmMCPServer(t, "mcp-server-filesystem")
	dir := t.TempDir()
	td := startTestDaemon(t, daemon.Options{})
	e := &cliEnv{t: t, home: td.Home().Dir, addr: td.Addr(), agentHome: t.TempDir()}
	if r := e.ok("mcp", "add", "fs", "--", bin, dir); !strings.Contains(r.stdout, "entries of mcp:fs") {
		t.Errorf("mcp add said %q; want the entries it serves", r.stdout)
	}
	_, sid := enrolledAgent(t, td, "claude")
	write, ok := manifestEntry(t, td, sid, "mcp.fs.write_file")
	if !ok || !slices.Equal(write.Grants, []plexus.Verb{plexus.VerbExecute}) {
		t.Fatalf("write_file entry %+v: want it listed, requiring execute", write)
	}
	if read, _ := manifestEntry(t, td, sid, "mcp.fs.read_text_file"); !slices.Equal(read.Grants, []plexus.Verb{plexus.VerbRead}) {
		t.Fatalf("read_text_file grants %v, want read", read.Grants)
	}
	p := filepath.Join(dir, "note.md")
	tok := grantAllowed(t, td, sid, map[string]any{"mcp.fs.write_file": map[string]any{"decision": "allow", "verbs": []string{"execute"}}})
	if st, resp, raw := td.invoke(t, tok, plexus.InvokeRequest{ID: "mcp.fs.write_file", Input: map[string]any{"path": p, "content": "from plexus\n"}}); !resp.OK {
		t.Fatalf("write_file: %d %s", st, raw)
	}
	if b, err := os.ReadFile(p); err != nil || string(b) != "from plexus\n" {
		t.Fatalf("the file holds %q (%v)", b, err)
	}
	// Execute is once: the same token cannot write again.
	if _, resp, _ := td.invoke(t, tok, plexus.InvokeRequest{ID: "mcp.fs.write_file", Input: map[string]any{"path": p, "content": "again"}}); resp.OK {
		t.Fatal("a once execute grant wrote twice")
	}
	read := grantAllowed(t, td, sid, map[string]any{"mcp.fs.read_text_file": "allow"})
	if _, resp, raw := td.invoke(t, read, plexus.InvokeRequest{ID: "mcp.fs.read_text_file", Input: map[string]any{"path": p}}); !resp.OK ||
		!strings.Contains(string(resp.MCPResult), "from plexus") {
		t.Fatalf("read_text_file: %s", raw)
	}
	st, resp, raw := td.invoke(t, read, plexus.InvokeRequest{ID: "mcp.fs.read_text_file", Input: map[string]any{"path": "/etc/hostname"}})
	if st != http.StatusOK || resp.OK || resp.Error == nil || resp.Error.Code != plexus.CodeMCPToolError || !strings.Contains(string(resp.MCPResult), "denied") {
		t.Fatalf("read outside the folder: %d %s", st, raw)
	}
}

// TestAgentCallShowsProgress: plexus agent call streams the call and shows
// an MCP server's progress on stderr as it comes, the result on stdout;
// --json and --no-progress keep stderr quiet.
func TestAgentCallShowsProgress(t *testing.T) {
	bin := npmMCPServer(t, "mcp-server-everything")
	td := startTestDaemon(t, daemon.Options{})
	e := &cliEnv{t: t, home: td.Home().Dir, addr: td.Addr(), agentHome: t.TempDir()}
	e.ok("mcp", "add", "everything", "--", bin, "stdio")
	e.enroll("claude")
	args := []string{"agent", "call", "mcp.everything.trigger-long-running-operation", "duration=0.2", "steps=2"}
	r := e.ok(args...)
	if r.stderr != "progress 1/2\nprogress 2/2\n" || !strings.Contains(r.stdout, "Long running operation completed") {
		t.Errorf("stdout %q, stderr %q", r.stdout, r.stderr)
	}
	for _, flag := range []string{"--no-progress", "--json"} {
		if r := e.ok(append(args, flag)...); strings.Contains(r.stderr, "progress") || !strings.Contains(r.stdout, "Long running operation completed") {
			t.Errorf("%s: stdout %q, stderr %q", flag, r.stdout, r.stderr)
		}
	}
}

// childRunning returns the pid of the test process's child (the in-process
// daemon's) whose command line names prog, or 0 when there is none. It
// reads /proc, as ps would.
func childRunning(t *testing.T, prog string) int {
	t.Helper()
	dirs, err := os.ReadDir("/proc")
	if err != nil {
		t.Skipf("no /proc to find the server's process in: %v", err)
	}
	for _, d := range dirs {
		pid, err := strconv.Atoi(d.Name())
		if err != nil {
			continue
		}
		stat, err := os.ReadFile(filepath.Join("/proc", d.Name(), "stat"))
		if err != nil {
			continue // gone since the listing
		}
		// The fields after the command's ")" are: state, ppid, …
		fields := strings.Fields(string(stat[bytes.LastIndexByte(stat, ')')+1:]))
		if len(fields) < 2 || fields[1] != strconv.Itoa(os.Getpid()) {
			continue
		}
		cmdline, err := os.ReadFile(filepath.Join("/proc", d.Name(), "cmdline"))
		if err == nil && bytes.Contains(cmdline, []byte(prog)) {
			return pid
		}
	}
	return 0
}
