// Command planexe serves the PlanExe MCP interface (v1.0) with the
// deterministic stand-in planner of package planexe: over stdio by default,
// or over Streamable HTTP on a loopback address.
//
//	planexe [--root DIR] [--delay 75ms] [--http 127.0.0.1:8765] [--redact-prompts] [--require-identity]
//
// --root defaults to $PLANEXE_ROOT; without either, sessions live in a fresh
// temporary folder that is removed on exit. Logs go to stderr (stdout is
// the MCP stream in stdio mode). SIGINT or SIGTERM, or stdin closing in
// stdio mode, stops every run (resumable after a restart on the same root)
// and exits.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/plexus-gw/plexus/examples/planexe"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:], os.Getenv("PLANEXE_ROOT"), os.Stderr)
	stop()
	if err != nil && !errors.Is(err, flag.ErrHelp) {
		fmt.Fprintln(os.Stderr, "planexe:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, args []string, envRoot string, stderr io.Writer) error {
	fs := flag.NewFlagSet("planexe", flag.ContinueOnError)
	fs.SetOutput(stderr)
	root := fs.String("root", envRoot, "folder holding the sessions (default $PLANEXE_ROOT, else a temporary folder removed on exit)")
	delay := fs.Duration("delay", planexe.DefaultTaskDelay, "how long each planner task takes (0 for none)")
	httpAddr := fs.String("http", "", "serve Streamable HTTP at http://ADDR/mcp on this loopback address instead of stdio (port 0 picks one)")
	redact := fs.Bool("redact-prompts", false, "keep the idea out of the event stream")
	requireID := fs.Bool("require-identity", false, "refuse callers that assert no _meta[\"planexe/user_id\"]")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	logger := slog.New(slog.NewTextHandler(stderr, nil))

	if *root == "" {
		tmp, err := os.MkdirTemp("", "planexe-")
		if err != nil {
			return fmt.Errorf("temporary root: %w", err)
		}
		defer os.RemoveAll(tmp)
		*root = tmp
		logger.Info("sessions live in a temporary folder, removed on exit", "root", tmp)
	}
	taskDelay := *delay
	if taskDelay == 0 {
		taskDelay = -1 // the flag's 0 means none; Options' zero means the default
	}
	eng, err := planexe.NewEngine(*root, planexe.Options{TaskDelay: taskDelay, Logger: logger,
		RedactPrompts: *redact, RequireIdentity: *requireID})
	if err != nil {
		return err
	}
	srv := planexe.NewServer(eng)
	if *httpAddr == "" {
		err = serveStdio(ctx, srv)
	} else {
		err = serveHTTP(ctx, srv, *httpAddr, logger, stderr)
	}
	return errors.Join(err, eng.Close())
}

func serveStdio(ctx context.Context, srv *mcp.Server) error {
	err := srv.Run(ctx, &mcp.StdioTransport{})
	if err != nil && ctx.Err() != nil {
		return nil // a signal asked us to stop
	}
	return err
}

// serveHTTP binds addr synchronously, prints the endpoint, and serves until
// ctx ends. Only loopback addresses are accepted: the server has no
// authentication of its own.
func serveHTTP(ctx context.Context, srv *mcp.Server, addr string, logger *slog.Logger, stderr io.Writer) error {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("--http %q: %w", addr, err)
	}
	if ip := net.ParseIP(host); host != "localhost" && (ip == nil || !ip.IsLoopback()) {
		return fmt.Errorf("--http %q: only loopback addresses are served", addr)
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("listen: %w", err)
	}
	mux := http.NewServeMux()
	// The SDK's handler refuses a non-loopback Host on a loopback
	// connection (DNS rebinding) unless told otherwise; we keep that.
	mux.Handle("/mcp", mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv },
		&mcp.StreamableHTTPOptions{Logger: logger}))
	hs := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	// Tests and scripts read this line to learn the port.
	fmt.Fprintf(stderr, "planexe: serving MCP at http://%s/mcp\n", ln.Addr())
	served := make(chan error, 1)
	go func() { served <- hs.Serve(ln) }()
	select {
	case err := <-served:
		return fmt.Errorf("serve: %w", err)
	case <-ctx.Done():
	}
	shutdownCtx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if err := hs.Shutdown(shutdownCtx); err != nil {
		// Open SSE streams never go idle; cut them.
		hs.Close()
	}
	<-served
	return nil
}
