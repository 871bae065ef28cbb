package mcpserver_test

import (
	"context"
	"io"
	"net"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/plexus-gw/plexus"
	"github.com/plexus-gw/plexus/mcpserver"
)

// bridged runs [mcpserver.Bridge] for a host speaking MCP over real pipes
// (as over a launched command's stdin and stdout) and answers the host's
// session.
func bridged(t *testing.T, o mcpserver.BridgeOptions, host string, opts *mcp.ClientOptions) *mcp.ClientSession {
	t.Helper()
	return bridgedVersion(t, o, host, "", opts)
}

// bridgedVersion is bridged with the host asking for version ("" the
// newest).
func bridgedVersion(t *testing.T, o mcpserver.BridgeOptions, host, version string, opts *mcp.ClientOptions) *mcp.ClientSession {
	t.Helper()
	return bridgedTee(t, o, host, version, opts, io.Discard)
}

// bridgedTee is bridgedVersion with a copy of all the host reads written
// to tee.
func bridgedTee(t *testing.T, o mcpserver.BridgeOptions, host, version string, opts *mcp.ClientOptions, tee io.Writer) *mcp.ClientSession {
	t.Helper()
	hostR, bridgeW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	bridgeR, hostW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- mcpserver.Bridge(ctx, &mcp.IOTransport{Reader: bridgeR, Writer: bridgeW}, o)
	}()
	c := mcp.NewClient(&mcp.Implementation{Name: host, Version: "9.9"}, opts)
	read := struct {
		io.Reader
		io.Closer
	}{io.TeeReader(hostR, tee), hostR}
	cs, err := c.Connect(context.Background(), &mcp.IOTransport{Reader: read, Writer: hostW}, &mcp.ClientSessionOptions{ProtocolVersion: version})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := cs.Close(); err != nil {
			t.Logf("close host session: %v", err)
		}
		cancel()
		if err := <-done; err != nil && ctx.Err() == nil && err != io.EOF {
			t.Logf("bridge: %v", err)
		}
	})
	return cs
}

// TestBridge: a host speaking stdio reaches the agent's tools through the
// daemon's front door: the same tools, a call, the call's progress under
// the host's own token, and the host's name in the session's row.
func TestBridge(t *testing.T) {
	// A host of 2025-11-25 has its calls pumped (bridgepump.go), a
	// 2026-07-28 host's go through the SDK's sessions.
	for _, version := range []string{"2025-11-25", ""} {
		t.Run("version "+version, func(t *testing.T) { testBridge(t, version) })
	}
}

func testBridge(t *testing.T, version string) {
	f := newFixture(t, mcpserver.Options{})
	prog := &progressLog{}
	cs := bridgedVersion(t, mcpserver.BridgeOptions{Endpoint: f.url, PAT: f.agent("desk")}, "claude-desktop", version,
		&mcp.ClientOptions{ProgressNotificationHandler: prog.handle})
	tools, err := cs.ListTools(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tool := range tools.Tools {
		names = append(names, tool.Name)
	}
	if !strings.Contains(strings.Join(names, " "), "portal__docs__read") {
		t.Fatalf("tools = %v", names)
	}
	if res := call(t, cs, "portal__docs__read", map[string]any{"path": "hello.txt"}); res.IsError || !strings.Contains(text(res), "hello from the portal") {
		t.Fatalf("read = %q", text(res))
	}
	done := make(chan *mcp.CallToolResult, 1)
	go func() {
		done <- callWithProgress(t, cs, "mcp__up__count", map[string]any{"n": 2, "hold": true}, "host-token")
	}()
	prog.await(t, 2) // while the call runs (see TestProgressRelayed)
	f.upstream.releaseHeld()
	if res := <-done; res.IsError {
		t.Fatalf("count = %q", text(res))
	}
	for _, p := range prog.all() {
		if p.ProgressToken != "host-token" {
			t.Errorf("progress token %v, want the host's own", p.ProgressToken)
		}
	}
	if opened := f.rows("session.opened"); len(opened) != 1 || opened[0].Payload["client"] != "claude-desktop" {
		t.Errorf("session.opened = %s, want the host's name", jsonOf(t, opened))
	}
}

// TestBridgeDaemonDown: with no daemon listening, the host is told plainly
// that Plexus is not running and how to start it.
func TestBridgeDaemonDown(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	if err := ln.Close(); err != nil {
		t.Fatal(err)
	}
	cs := bridged(t, mcpserver.BridgeOptions{Endpoint: "http://" + addr + "/mcp", PAT: "plx_agent_x",
		StartHint: "start it with: plexus serve"}, "cursor", nil)
	_, err = cs.ListTools(context.Background(), nil)
	if err == nil || !strings.Contains(err.Error(), "not running at http://"+addr) || !strings.Contains(err.Error(), "plexus serve") {
		t.Fatalf("list with the daemon down: %v, want it to say Plexus is not running and how to start it", err)
	}
}

// TestBridgeRefusedPAT: a PAT the daemon refuses is said so, without the
// PAT.
func TestBridgeRefusedPAT(t *testing.T) {
	f := newFixture(t, mcpserver.Options{})
	const pat = "plx_agent_0123456789abcdef0123456789abcdef"
	cs := bridged(t, mcpserver.BridgeOptions{Endpoint: f.url, PAT: pat}, "cursor", nil)
	_, err := cs.ListTools(context.Background(), nil)
	if err == nil || !strings.Contains(err.Error(), "refused this agent's credential") || strings.Contains(err.Error(), pat) {
		t.Fatalf("list with a refused PAT: %v", err)
	}
}

// TestBridgePrimitives: over stdio the host sees the agent's resources,
// templates and prompts as over HTTP, reads and gets them through the
// daemon, and is told list_changed when the daemon's catalog changes.
func TestBridgePrimitives(t *testing.T) {
	f := newFixture(t, mcpserver.Options{})
	lib, s := newLibrary("lib")
	f.addMCP("lib", s)
	changed := make(chan struct{}, 16)
	pat := f.agent("desk", standing(libResource, plexus.VerbRead), standing(libTemplate, plexus.VerbRead), standing(libPrompt, plexus.VerbRead))
	cs := bridged(t, mcpserver.BridgeOptions{Endpoint: f.url, PAT: pat}, "claude-desktop",
		&mcp.ClientOptions{ToolListChangedHandler: func(context.Context, *mcp.ToolListChangedRequest) { changed <- struct{}{} }})
	ctx := context.Background()
	rl, err := cs.ListResources(ctx, nil)
	if err != nil || len(rl.Resources) != 1 || rl.Resources[0].URI != "file:///lib/readme.md" {
		t.Fatalf("resources = %s, %v", jsonOf(t, rl), err)
	}
	tl, err := cs.ListResourceTemplates(ctx, nil)
	if err != nil || len(tl.ResourceTemplates) != 1 {
		t.Fatalf("templates = %s, %v", jsonOf(t, tl), err)
	}
	if rr, err := cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: "notes://stdio"}); err != nil || rr.Contents[0].Text != "lib note about stdio" {
		t.Fatalf("read = %s, %v", jsonOf(t, rr), err)
	}
	pl, err := cs.ListPrompts(ctx, nil)
	if err != nil || len(pl.Prompts) != 1 {
		t.Fatalf("prompts = %s, %v", jsonOf(t, pl), err)
	}
	gp, err := cs.GetPrompt(ctx, &mcp.GetPromptParams{Name: pl.Prompts[0].Name, Arguments: map[string]string{"name": "Cy"}})
	if err != nil || gp.Messages[0].Content.(*mcp.TextContent).Text != "lib says hello, Cy" {
		t.Fatalf("get = %s, %v", jsonOf(t, gp), err)
	}
	if lib.count("notes://stdio") != 1 || lib.count("greet") != 1 {
		t.Errorf("upstream hits = %v", lib.hits)
	}
	_, late := newLibrary("late")
	f.addMCP("late", late)
	awaitSignal(t, changed, "tools/list_changed relayed by the bridge")
	if got := toolNames(t, cs); !slices.Contains(got, "mcp__late__lookup") {
		t.Errorf("tools after list_changed = %v", got)
	}
}

// TestBridgeLoopbackOnly: the bridge sends the agent's PAT only to the
// gateway's loopback address: any other endpoint is refused before a
// connection is made.
func TestBridgeLoopbackOnly(t *testing.T) {
	for _, ep := range []string{
		"https://evil.example/mcp", "http://evil.example:7077/mcp", "http://127.0.0.2:7077/mcp",
		"http://user@127.0.0.1:7077/mcp", "http://127.0.0.1/mcp", "ftp://127.0.0.1:7077/mcp", "http://localhost.:7077/mcp",
	} {
		t.Run(ep, func(t *testing.T) {
			hostSide, _ := mcp.NewInMemoryTransports()
			err := mcpserver.Bridge(context.Background(), hostSide, mcpserver.BridgeOptions{Endpoint: ep, PAT: "plx_agent_secret"})
			if err == nil || !strings.Contains(err.Error(), "loopback") || strings.Contains(err.Error(), "plx_agent_secret") {
				t.Errorf("Bridge(%s) = %v, want a refusal naming the loopback rule", ep, err)
			}
		})
	}
}
