package mcpclient_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/plexus-gw/plexus"
	"github.com/plexus-gw/plexus/transports/mcpclient"
)

// BenchmarkDispatch measures a tools/call of server-everything's echo
// through Dispatch against the same call made with the SDK's
// ClientSession.CallTool on a second session of its own (a second server
// process: a stdio server has one client), and reports their ratios:
// per-call latency of sequential calls, and throughput with 8 concurrent
// callers. The two run in alternating rounds, so that drift on a shared
// machine hits both alike. It times itself (a fixed number of calls), so
// -benchtime 1x suffices.
func BenchmarkDispatch(b *testing.B) {
	cfg := everythingConfig(b)
	input := map[string]any{"message": "hello from the benchmark"}

	h := startClient(b, "everything", cfg, mcpclient.Options{})
	h.waitReady(b)
	e := h.entry(b, "mcp.everything.echo")
	dispatch := func() {
		if r := h.tr.Dispatch(context.Background(), e, input, plexus.DispatchContext{}); !r.OK {
			b.Fatal(r.Error)
		}
	}

	client := mcp.NewClient(&mcp.Implementation{Name: "direct", Version: "1"}, &mcp.ClientOptions{Capabilities: &mcp.ClientCapabilities{}})
	cs, err := client.Connect(context.Background(), &mcp.CommandTransport{Command: exec.Command(cfg.Command, cfg.Args...)}, nil)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { cs.Close() })
	direct := func() {
		r, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "echo", Arguments: input})
		if err != nil || r.IsError {
			b.Fatal(err, r)
		}
	}
	dispatchVersus(b, "mcp tools/call (stdio)", dispatch, direct)
}

// BenchmarkDispatchHTTP is BenchmarkDispatch over Streamable HTTP: a
// tools/call of the SDK's own server (greetHTTPServer, in a process of
// its own on a loopback port) through Dispatch, as the front door makes
// it (with the host's relay), against the SDK's client calling the same
// server on a session of its own.
func BenchmarkDispatchHTTP(b *testing.B) {
	url := startGreetHTTP(b)
	input := map[string]any{"name": "the benchmark"}

	h := startClient(b, "web", mcpclient.ServerConfig{URL: url}, mcpclient.Options{})
	h.waitReady(b)
	e := h.entry(b, "mcp.web.greet")
	// As the front door's calls: a relay for the host, which offers nothing.
	ctx := plexus.WithRelay(context.Background(), benchRelay{})
	dispatch := func() {
		if r := h.tr.Dispatch(ctx, e, input, plexus.DispatchContext{}); !r.OK {
			b.Fatal(r.Error)
		}
	}

	client := mcp.NewClient(&mcp.Implementation{Name: "direct", Version: "1"}, &mcp.ClientOptions{Capabilities: &mcp.ClientCapabilities{}})
	// As many idle connections as Plexus keeps (client.go): with net/http's
	// default two, 8 callers would open a connection for most calls.
	ht := http.DefaultTransport.(*http.Transport).Clone()
	ht.MaxIdleConnsPerHost = 64
	b.Cleanup(ht.CloseIdleConnections)
	cs, err := client.Connect(context.Background(), &mcp.StreamableClientTransport{Endpoint: url, HTTPClient: &http.Client{Transport: ht}}, nil)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { cs.Close() })
	direct := func() {
		r, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "greet", Arguments: input})
		if err != nil || r.IsError {
			b.Fatal(err, r)
		}
	}
	dispatchVersus(b, "mcp tools/call (Streamable HTTP)", dispatch, direct)
}

// dispatchVersus runs dispatch and direct, the same call through Plexus
// and through the SDK's client, in alternating rounds and reports their
// figures: per-call latency of sequential calls and their ratio,
// throughput with 8 concurrent callers, allocations and the CPU time of
// this process (the client's side) per call.
func dispatchVersus(b *testing.B, what string, dispatch, direct func()) {
	const rounds, perRound, callers = 10, 100, 8
	// parallel runs n calls of call spread over the callers and returns
	// the wall time.
	parallel := func(call func(), n int) time.Duration {
		var wg sync.WaitGroup
		start := time.Now()
		for range callers {
			wg.Go(func() {
				for range n / callers {
					call()
				}
			})
		}
		wg.Wait()
		return time.Since(start)
	}

	for b.Loop() {
		for range 20 { // start both paths and warm them up
			dispatch()
			direct()
		}
		var viaPlexus, viaSDK, parPlexus, parSDK, cpuPlexus, cpuSDK time.Duration
		var allocsPlexus, allocsSDK, bytesPlexus, bytesSDK uint64
		for range rounds {
			start, m0, c0 := time.Now(), memStats(), selfCPU(b)
			for range perRound {
				direct()
			}
			viaSDK += time.Since(start)
			m1, c1 := memStats(), selfCPU(b)
			allocsSDK, bytesSDK, cpuSDK = allocsSDK+m1.Mallocs-m0.Mallocs, bytesSDK+m1.TotalAlloc-m0.TotalAlloc, cpuSDK+c1-c0
			start = time.Now()
			for range perRound {
				dispatch()
			}
			viaPlexus += time.Since(start)
			m2, c2 := memStats(), selfCPU(b)
			allocsPlexus, bytesPlexus, cpuPlexus = allocsPlexus+m2.Mallocs-m1.Mallocs, bytesPlexus+m2.TotalAlloc-m1.TotalAlloc, cpuPlexus+c2-c1
			parSDK += parallel(direct, perRound*2)
			parPlexus += parallel(dispatch, perRound*2)
		}
		n := time.Duration(rounds * perRound)
		latency := float64(viaPlexus) / float64(viaSDK)
		throughput := float64(parSDK) / float64(parPlexus) // calls per second, Plexus over SDK
		b.ReportMetric(float64(viaSDK/n), "direct-ns/call")
		b.ReportMetric(float64(viaPlexus/n), "dispatch-ns/call")
		b.ReportMetric(latency, "x-direct-latency")
		b.ReportMetric(throughput, "x-direct-throughput-8")
		calls := float64(rounds * perRound)
		b.ReportMetric(float64(allocsSDK)/calls, "direct-allocs/call")
		b.ReportMetric(float64(allocsPlexus)/calls, "dispatch-allocs/call")
		b.ReportMetric(float64(bytesSDK)/calls, "direct-B/call")
		b.ReportMetric(float64(bytesPlexus)/calls, "dispatch-B/call")
		b.ReportMetric(float64(cpuSDK/n), "direct-cpu-ns/call")
		b.ReportMetric(float64(cpuPlexus/n), "dispatch-cpu-ns/call")
		b.Logf("%s per call, %d sequential calls: SDK directly %s, Dispatch %s, ratio %.2f×, overhead %s; "+
			"%d callers: throughput %.2f× the SDK's (%.0f vs %.0f calls/s)",
			what, rounds*perRound, viaSDK/n, viaPlexus/n, latency, (viaPlexus-viaSDK)/n,
			callers, throughput, float64(rounds*perRound*2)/parPlexus.Seconds(), float64(rounds*perRound*2)/parSDK.Seconds())
	}
}

// benchRelay is the relay of a host that offers nothing and hears no log.
type benchRelay struct{}

func (benchRelay) Request(context.Context, string, json.RawMessage) (json.RawMessage, error) {
	return nil, errors.New("the benchmark's host answers nothing")
}
func (benchRelay) Notify(context.Context, string, json.RawMessage) error { return nil }
func (benchRelay) Offers(string) bool                                    { return false }

// selfCPU is the CPU time this process has used (the servers run in
// processes of their own, so the difference across a sequential round is
// the client side of its calls, garbage collection included).
func selfCPU(tb testing.TB) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		tb.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// memStats reads the process's allocation counters (the sequential rounds
// run alone, so the difference across one is its calls').
func memStats() *runtime.MemStats {
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return &m
}

// startGreetHTTP runs the test binary as greetHTTPServer (TestMain's
// "greet-http") until the benchmark ends and returns its URL.
func startGreetHTTP(tb testing.TB) string {
	tb.Helper()
	exe, err := os.Executable()
	if err != nil {
		tb.Fatal(err)
	}
	cmd := exec.Command(exe)
	cmd.Env = append(os.Environ(), helperEnv+"=greet-http")
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		tb.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		tb.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() {
		if err := errors.Join(stdin.Close(), cmd.Wait()); err != nil {
			tb.Errorf("the greet server: %v", err)
		}
	})
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil {
		tb.Fatalf("the greet server's address: %v", err)
	}
	return "http://" + strings.TrimSpace(line) + "/mcp"
}

// greetHTTPServer serves the SDK's server with one tool, greet (a plain
// text result), over Streamable HTTP (sessions, SSE answers: the SDK's
// defaults) on a free loopback port, which it writes to stdout; it stops
// when stdin ends.
func greetHTTPServer(stdin io.Reader, stdout io.Writer) error {
	s := mcp.NewServer(&mcp.Implementation{Name: "greet-http", Version: "1"}, nil)
	s.AddTool(&mcp.Tool{Name: "greet", Description: "Greets someone.", Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true},
		InputSchema: json.RawMessage(`{"type":"object","properties":{"name":{"type":"string"}},"required":["name"]}`)},
		func(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			var in struct{ Name string }
			if err := json.Unmarshal(req.Params.Arguments, &in); err != nil {
				return nil, err
			}
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "hello " + in.Name}}}, nil
		})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	srv := &http.Server{Handler: mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s }, nil), ReadHeaderTimeout: 10 * time.Second}
	if _, err := fmt.Fprintln(stdout, ln.Addr().String()); err != nil {
		return err
	}
	done := make(chan error, 1)
	go func() {
		_, err := io.Copy(io.Discard, stdin) // until the benchmark closes it
		done <- errors.Join(err, srv.Close())
	}()
	if err := srv.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return <-done
}
