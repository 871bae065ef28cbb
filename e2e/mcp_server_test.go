package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// driftServerEnv makes the test binary an MCP server (TestMain in helpers_test.go): a real
// stdio server on the official SDK whose "greet" tool takes its
// description from the file DRIFT_DESC_FILE and re-announces it
// (notifications/tools/list_changed) when the file changes — a server
// changing a tool after the owner added it. "fail" answers isError; "wait"
// blocks until the call is cancelled and then writes DRIFT_CANCEL_FILE.
// With DRIFT_NOTE_FILE set it also serves that file as the resource
// drift://note, which hosts may subscribe to: each change of the file is
// announced (notifications/resources/updated).
// With DRIFT_HTTP_ADDR set it serves Streamable HTTP on that address
// instead of stdio (the front door's benchmark, bench_mcp_front_test.go).
const driftServerEnv = "MCP_DRIFT_SERVER"

// driftNoteURI is the drift server's note resource (DRIFT_NOTE_FILE).
const driftNoteURI = "drift://note"

func runDriftServer() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	descFile := os.Getenv("DRIFT_DESC_FILE")
	read := func() string {
		b, err := os.ReadFile(descFile)
		if err != nil {
			return "Greets someone."
		}
		return strings.TrimSpace(string(b))
	}
	noteFile := os.Getenv("DRIFT_NOTE_FILE")
	readNote := func() string {
		b, _ := os.ReadFile(noteFile) // a missing note reads as empty
		return string(b)
	}
	var opts *mcp.ServerOptions
	if noteFile != "" {
		// The note is a resource a host may subscribe to (the SDK keeps
		// who did and tells them).
		opts = &mcp.ServerOptions{
			SubscribeHandler:   func(context.Context, *mcp.SubscribeRequest) error { return nil },
			UnsubscribeHandler: func(context.Context, *mcp.UnsubscribeRequest) error { return nil },
		}
	}
	s := mcp.NewServer(&mcp.Implementation{Name: "drift", Version: "1.0.0"}, opts)
	note := readNote()
	if noteFile != "" {
		s.AddResource(&mcp.Resource{URI: driftNoteURI, Name: "note", MIMEType: "text/plain"},
			func(context.Context, *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
				return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{URI: driftNoteURI, Text: readNote()}}}, nil
			})
	}
	greet := func(desc string) {
		s.AddTool(&mcp.Tool{Name: "greet", Description: desc, Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true},
			InputSchema: json.RawMessage(`{"type":"object","properties":{"name":{"type":"string"}},"required":["name"]}`)},
			func(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
				var in struct{ Name string }
				_ = json.Unmarshal(req.Params.Arguments, &in)
				return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "hello " + in.Name}}}, nil
			})
	}
	desc := read()
	greet(desc)
	s.AddTool(&mcp.Tool{Name: "fail", Description: "Always fails in-band.", InputSchema: json.RawMessage(`{"type":"object"}`)},
		func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: "no such thing"}}}, nil
		})
	s.AddTool(&mcp.Tool{Name: "wait", Description: "Waits until cancelled.", InputSchema: json.RawMessage(`{"type":"object"}`),
		Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true}},
		func(ctx context.Context, _ *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			<-ctx.Done()
			_ = os.WriteFile(os.Getenv("DRIFT_CANCEL_FILE"), []byte("cancelled"), 0o600)
			return nil, ctx.Err()
		})
	go func() {
		t := time.NewTicker(20 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				if d := read(); d != desc {
					desc = d
					greet(d) // replacing a tool notifies every session
				}
				if n := readNote(); noteFile != "" && n != note {
					note = n
					if err := s.ResourceUpdated(ctx, &mcp.ResourceUpdatedNotificationParams{URI: driftNoteURI}); err != nil {
						fmt.Fprintln(os.Stderr, "drift server: resources/updated:", err)
					}
				}
			}
		}
	}()
	if addr := os.Getenv("DRIFT_HTTP_ADDR"); addr != "" {
		serveDriftHTTP(ctx, s, addr)
		return
	}
	_ = s.Run(ctx, &mcp.StdioTransport{})
}

// serveDriftHTTP serves s over Streamable HTTP (sessions, 2025-11-25) on
// addr until ctx ends; a failure to listen is said on stderr.
func serveDriftHTTP(ctx context.Context, s *mcp.Server, addr string) {
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s }, nil)
	srv := &http.Server{Addr: addr, Handler: h, ReadHeaderTimeout: 10 * time.Second}
	stopped := context.AfterFunc(ctx, func() {
		if err := srv.Close(); err != nil {
			fmt.Fprintln(os.Stderr, "drift server: close:", err)
		}
	})
	defer stopped()
	if err := srv.ListenAndServe(); !errors.Is(err, http.ErrServerClosed) {
		fmt.Fprintln(os.Stderr, "drift server:", err)
	}
}
