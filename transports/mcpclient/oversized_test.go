package mcpclient_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/plexus-gw/plexus"
	"github.com/plexus-gw/plexus/transports/mcpclient"
)

// overCap is a text that makes a message past the 16 MiB cap.
const overCap = 16<<20 + 1024

// runSayServer is the stdio server of TestMain's "sdk-say": the SDK's
// server with a tool and a prompt, each named say, answering its process id
// and then size bytes.
func runSayServer() error {
	srv := mcp.NewServer(&mcp.Implementation{Name: "say", Version: "1"}, nil)
	say := func(size string) string {
		n, err := strconv.Atoi(size)
		if err != nil {
			n = 0
		}
		return "pid=" + strconv.Itoa(os.Getpid()) + " " + strings.Repeat("x", n)
	}
	type in struct {
		Size string `json:"size"`
	}
	mcp.AddTool(srv, &mcp.Tool{Name: "say"}, func(_ context.Context, _ *mcp.CallToolRequest, i in) (*mcp.CallToolResult, any, error) {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: say(i.Size)}}}, nil, nil
	})
	srv.AddPrompt(&mcp.Prompt{Name: "say", Arguments: []*mcp.PromptArgument{{Name: "size"}}}, func(_ context.Context, req *mcp.GetPromptRequest) (*mcp.GetPromptResult, error) {
		return &mcp.GetPromptResult{Messages: []*mcp.PromptMessage{{Role: "user", Content: &mcp.TextContent{Text: say(req.Params.Arguments["size"])}}}}, nil
	})
	return srv.Run(context.Background(), &mcp.StdioTransport{})
}

// TestOversizedAnswerOverStdio: an answer past the 16 MiB cap from a stdio
// server fails its call alone, as over Streamable HTTP, and the next call
// on the same connection (the same server process) is answered: a
// tools/call Plexus sends itself and a prompts/get the SDK sends, to the
// SDK's server (which writes a response's id first), and a tools/call to
// the TypeScript SDK's server (which writes it last).
func TestOversizedAnswerOverStdio(t *testing.T) {
	t.Run("GoSDK", func(t *testing.T) {
		failOnLeakedGoroutines(t)
		exe, err := os.Executable()
		if err != nil {
			t.Fatal(err)
		}
		h := startClient(t, "say", mcpclient.ServerConfig{Command: exe, Env: map[string]string{helperEnv: "sdk-say"}}, mcpclient.Options{})
		h.waitReady(t)
		for _, id := range []string{"mcp.say.say", "mcp.say.prompt.say"} {
			pid := saidPID(t, h.call(t, t.Context(), id, map[string]any{"size": "0"}, nil))
			r := h.call(t, t.Context(), id, map[string]any{"size": strconv.Itoa(overCap)}, nil)
			wantErr(t, r, plexus.CodeTransportError, "exceeded the maximum message size")
			if again := saidPID(t, h.call(t, t.Context(), id, map[string]any{"size": "0"}, nil)); again != pid {
				t.Errorf("%s: answered by process %s after the large answer, want %s: the connection ended", id, again, pid)
			}
		}
		noneUnavailable(t, h)
	})
	t.Run("TypeScript", func(t *testing.T) {
		failOnLeakedGoroutines(t)
		h := startClient(t, "say", tsSayServer(t), mcpclient.Options{})
		h.waitReady(t)
		pid := saidPID(t, h.call(t, t.Context(), "mcp.say.say", map[string]any{"size": "0"}, nil))
		r := h.call(t, t.Context(), "mcp.say.say", map[string]any{"size": strconv.Itoa(overCap)}, nil)
		wantErr(t, r, plexus.CodeTransportError, "exceeded the maximum message size")
		if again := saidPID(t, h.call(t, t.Context(), "mcp.say.say", map[string]any{"size": "0"}, nil)); again != pid {
			t.Errorf("answered by process %s after the large answer, want %s: the connection ended", again, pid)
		}
		noneUnavailable(t, h)
	})
}

// tsSayServer is the say tool on the TypeScript SDK's server (the one
// server-everything is built on, from examples/mcp), over stdio.
func tsSayServer(t *testing.T) mcpclient.ServerConfig {
	t.Helper()
	npmServer(t, "mcp-server-everything") // the SDK comes with it
	sdk := filepath.Join(repoRoot(t), "examples", "mcp", "node_modules", "@modelcontextprotocol", "sdk", "dist", "esm")
	script := filepath.Join(t.TempDir(), "say.mjs")
	src := fmt.Sprintf(`import { Server } from %[1]q;
import { StdioServerTransport } from %[2]q;
import { ListToolsRequestSchema, CallToolRequestSchema } from %[3]q;
const server = new Server({ name: "say", version: "1" }, { capabilities: { tools: {} } });
server.setRequestHandler(ListToolsRequestSchema, async () => ({
  tools: [{ name: "say", inputSchema: { type: "object", properties: { size: { type: "string" } } } }],
}));
server.setRequestHandler(CallToolRequestSchema, async (req) => ({
  content: [{ type: "text", text: "pid=" + process.pid + " " + "x".repeat(Number(req.params.arguments?.size ?? 0)) }],
}));
await server.connect(new StdioServerTransport());
`, filepath.Join(sdk, "server", "index.js"), filepath.Join(sdk, "server", "stdio.js"), filepath.Join(sdk, "types.js"))
	if err := os.WriteFile(script, []byte(src), 0o600); err != nil {
		t.Fatal(err)
	}
	node, err := exec.LookPath("node")
	if err != nil {
		t.Fatalf("node: %v", err)
	}
	return mcpclient.ServerConfig{Command: node, Args: []string{script}}
}

// saidPID is the process id a say call answered.
func saidPID(t *testing.T, r plexus.TransportResult) string {
	t.Helper()
	if !r.OK {
		t.Fatalf("say: %v", r.Error)
	}
	var res struct {
		Content  []struct{ Text string } `json:"content"`
		Messages []struct {
			Content struct{ Text string } `json:"content"`
		} `json:"messages"`
	}
	if err := json.Unmarshal(r.MCPResult, &res); err != nil {
		t.Fatal(err)
	}
	text := ""
	if len(res.Content) > 0 {
		text = res.Content[0].Text
	} else if len(res.Messages) > 0 {
		text = res.Messages[0].Content.Text
	}
	pid, _, ok := strings.Cut(strings.TrimPrefix(text, "pid="), " ")
	if !ok || !strings.HasPrefix(text, "pid=") {
		t.Fatalf("say answered %q", text)
	}
	return pid
}

// noneUnavailable fails the test if the source was ever unavailable.
func noneUnavailable(t *testing.T, h *harness) {
	t.Helper()
	for _, hl := range h.healthLog() {
		if hl.Status == plexus.HealthUnavailable {
			t.Errorf("health %+v: the connection ended", hl)
		}
	}
}
