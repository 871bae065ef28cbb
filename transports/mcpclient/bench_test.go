package mcpclient_test

import (
	"context"
	"os/exec"
	"runtime"
	"sync"
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
	const rounds, perRound, callers = 10, 100, 8
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
		var viaPlexus, viaSDK, parPlexus, parSDK time.Duration
		var allocsPlexus, allocsSDK, bytesPlexus, bytesSDK uint64
		for range rounds {
			start, m0 := time.Now(), memStats()
			for range perRound {
				direct()
			}
			viaSDK += time.Since(start)
			m1 := memStats()
			allocsSDK, bytesSDK = allocsSDK+m1.Mallocs-m0.Mallocs, bytesSDK+m1.TotalAlloc-m0.TotalAlloc
			start = time.Now()
			for range perRound {
				dispatch()
			}
			viaPlexus += time.Since(start)
			m2 := memStats()
			allocsPlexus, bytesPlexus = allocsPlexus+m2.Mallocs-m1.Mallocs, bytesPlexus+m2.TotalAlloc-m1.TotalAlloc
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
		b.Logf("mcp tools/call per call, %d sequential calls: SDK directly %s, Dispatch %s, ratio %.2f×, overhead %s; "+
			"%d callers: throughput %.2f× the SDK's (%.0f vs %.0f calls/s)",
			rounds*perRound, viaSDK/n, viaPlexus/n, latency, (viaPlexus-viaSDK)/n,
			callers, throughput, float64(rounds*perRound*2)/parPlexus.Seconds(), float64(rounds*perRound*2)/parSDK.Seconds())
	}
}

// memStats reads the process's allocation counters (the sequential rounds
// run alone, so the difference across one is its calls').
func memStats() *runtime.MemStats {
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return &m
}
