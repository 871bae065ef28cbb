package planexe_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/plexus-gw/plexus/examples/planexe"
	"github.com/plexus-gw/plexus/examples/planexe/contract"
)

// testDelay keeps runs short (nine tasks, about 0.1 s) but long enough to be
// observed running and stopped half-way.
const testDelay = 10 * time.Millisecond

// connectInProcess serves a fresh engine over in-memory transports and
// returns a client session on it; everything is closed at cleanup.
func connectInProcess(t *testing.T, opts planexe.Options) (*planexe.Engine, *mcp.ClientSession) {
	t.Helper()
	eng, err := planexe.NewEngine(t.TempDir(), opts)
	if err != nil {
		t.Fatal(err)
	}
	srv := planexe.NewServer(eng)
	ct, st := mcp.NewInMemoryTransports()
	ctx := context.Background()
	ss, err := srv.Connect(ctx, st, nil)
	if err != nil {
		t.Fatal(err)
	}
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "0"}, nil).Connect(ctx, ct, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cs.Close()
		ss.Wait()
		if err := eng.Close(); err != nil {
			t.Errorf("close engine: %v", err)
		}
	})
	return eng, cs
}

// schemaChecked is a Caller that also validates every successful result
// against the output schema the server advertises for the tool.
type schemaChecked struct {
	contract.Caller
	schemas map[string]*jsonschema.Resolved
}

func (c schemaChecked) Call(ctx context.Context, tool string, args map[string]any) (contract.Result, error) {
	res, err := c.Caller.Call(ctx, tool, args)
	if err != nil || res.IsError {
		return res, err
	}
	var v any
	if err := json.Unmarshal(res.Structured, &v); err != nil {
		return res, fmt.Errorf("%s: structuredContent: %w", tool, err)
	}
	if err := c.schemas[tool].Validate(v); err != nil {
		return res, fmt.Errorf("%s: structuredContent does not match the advertised outputSchema: %w\n%s", tool, err, res.Structured)
	}
	return res, nil
}

func outputSchemas(t *testing.T, cs *mcp.ClientSession) map[string]*jsonschema.Resolved {
	t.Helper()
	tools, err := cs.ListTools(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	out := make(map[string]*jsonschema.Resolved)
	for _, tool := range tools.Tools {
		raw, err := json.Marshal(tool.OutputSchema)
		if err != nil {
			t.Fatal(err)
		}
		var sc jsonschema.Schema
		if err := json.Unmarshal(raw, &sc); err != nil {
			t.Fatalf("%s: outputSchema: %v", tool.Name, err)
		}
		if out[tool.Name], err = sc.Resolve(nil); err != nil {
			t.Fatalf("%s: outputSchema does not resolve: %v", tool.Name, err)
		}
	}
	return out
}

// TestContractInProcess runs the contract suite against the engine in this
// process (so the race detector sees the engine), checking every result
// against the advertised output schemas.
func TestContractInProcess(t *testing.T) {
	t.Parallel()
	_, cs := connectInProcess(t, planexe.Options{TaskDelay: testDelay})
	contract.Run(t, schemaChecked{Caller: contract.SessionCaller{Session: cs}, schemas: outputSchemas(t, cs)})
}

func TestTools(t *testing.T) {
	_, cs := connectInProcess(t, planexe.Options{TaskDelay: testDelay})
	init := cs.InitializeResult()
	if init.ServerInfo.Version != planexe.SpecVersion {
		t.Errorf("serverInfo.version = %q, want %q", init.ServerInfo.Version, planexe.SpecVersion)
	}
	if got := fmt.Sprint(init.Capabilities.Experimental["planexe"]); got != "map[version:1.0]" {
		t.Errorf("capabilities.experimental.planexe = %s, want version 1.0", got)
	}
	tools, err := cs.ListTools(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tool := range tools.Tools {
		names = append(names, tool.Name)
		in, _ := tool.InputSchema.(map[string]any)
		if in["type"] != "object" || tool.OutputSchema == nil || tool.Description == "" {
			t.Errorf("%s: input schema %v, output schema %v, description %q", tool.Name, in["type"], tool.OutputSchema != nil, tool.Description)
		}
	}
	want := []string{"planexe.artifact.list", "planexe.artifact.read", "planexe.artifact.write", "planexe.session.create",
		"planexe.session.events", "planexe.session.resume", "planexe.session.start", "planexe.session.status", "planexe.session.stop"}
	slices.Sort(names)
	if !slices.Equal(names, want) {
		t.Errorf("tools = %v, want %v", names, want)
	}
	// The schemas advertise what the spec names, with the targets enumerated.
	for _, tool := range tools.Tools {
		if tool.Name != planexe.ToolSessionStart {
			continue
		}
		raw, _ := json.Marshal(tool.InputSchema)
		for _, s := range []string{`"session_id"`, `"target"`, `"seed_artifacts"`, `"build_plan_and_validate"`} {
			if !strings.Contains(string(raw), s) {
				t.Errorf("start input schema lacks %s: %s", s, raw)
			}
		}
	}
}

// TestArgumentsOfTheWrongType checks that a malformed call is a tool error
// with a code, not a protocol error.
func TestArgumentsOfTheWrongType(t *testing.T) {
	_, cs := connectInProcess(t, planexe.Options{TaskDelay: testDelay})
	res, err := contract.SessionCaller{Session: cs}.Call(context.Background(), planexe.ToolSessionStatus, map[string]any{"session_id": 42})
	if err != nil {
		t.Fatal(err)
	}
	if !res.IsError || !strings.Contains(string(res.Structured), `"INVALID_ARGUMENT"`) {
		t.Errorf("got %s, want an INVALID_ARGUMENT tool error", res.Structured)
	}
}

// buildBinary builds cmd/planexe. It is built without the race detector
// even under -race: TestContractInProcess runs the same suite against the
// same engine inside the race-checked test process, and a second
// instrumented copy would only double the CPU the suite needs.
func buildBinary(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "planexe")
	cmd := exec.Command("go", "build", "-o", bin, "github.com/plexus-gw/plexus/examples/planexe/cmd/planexe")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

// syncBuffer collects a child's stderr, written by exec's copying goroutine.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

// TestContractBinary runs the contract suite against the built binary, as a
// client would launch it: over stdio, and over Streamable HTTP.
func TestContractBinary(t *testing.T) {
	t.Parallel()
	bin := buildBinary(t)
	client := mcp.NewClient(&mcp.Implementation{Name: "contract", Version: "0"}, nil)

	t.Run("Stdio", func(t *testing.T) {
		t.Parallel()
		cmd := exec.Command(bin, "--root", t.TempDir(), "--delay", testDelay.String())
		var stderr syncBuffer
		cmd.Stderr = &stderr
		cs, err := client.Connect(context.Background(), &mcp.CommandTransport{Command: cmd}, nil)
		if err != nil {
			t.Fatal(err)
		}
		contract.Run(t, contract.SessionCaller{Session: cs})
		// Closing stdin must end the process cleanly.
		if err := cs.Close(); err != nil {
			t.Errorf("server exit: %v\n%s", err, stderr.String())
		}
	})

	t.Run("StreamableHTTP", func(t *testing.T) {
		t.Parallel()
		cmd := exec.Command(bin, "--root", t.TempDir(), "--delay", testDelay.String(), "--http", "127.0.0.1:0")
		stderrPipe, err := cmd.StderrPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		var stderr syncBuffer
		endpoint := make(chan string, 1)
		drained := make(chan struct{})
		go func() {
			defer close(drained)
			sc := bufio.NewScanner(stderrPipe)
			for sc.Scan() {
				line := sc.Text()
				stderr.Write([]byte(line + "\n"))
				if u, ok := strings.CutPrefix(line, "planexe: serving MCP at "); ok {
					endpoint <- u
				}
			}
			io.Copy(io.Discard, stderrPipe)
		}()
		var url string
		select {
		case url = <-endpoint:
		case <-time.After(10 * time.Second):
			cmd.Process.Kill()
			cmd.Wait()
			t.Fatalf("no endpoint announced:\n%s", stderr.String())
		}
		cs, err := client.Connect(context.Background(), &mcp.StreamableClientTransport{Endpoint: url}, nil)
		if err != nil {
			cmd.Process.Kill()
			cmd.Wait()
			t.Fatal(err)
		}
		contract.Run(t, contract.SessionCaller{Session: cs})
		cs.Close()
		// SIGTERM must stop the server cleanly.
		if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
			t.Fatal(err)
		}
		<-drained
		if err := cmd.Wait(); err != nil {
			t.Errorf("server exit after SIGTERM: %v\n%s", err, stderr.String())
		}
	})
}
