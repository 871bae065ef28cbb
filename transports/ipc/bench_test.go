package ipc_test

import (
	"context"
	"encoding/json"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/plexus-gw/plexus"
)

// echoWork is the Go example provider's echo done in-process: the same
// decoding of the input, building of {"echo": input} and encoding of the
// output, without the socket, the frames, the envelopes and the scheduling
// a call through the ipc transport adds.
func echoWork(input map[string]any) (any, error) {
	in, err := json.Marshal(input)
	if err != nil {
		return nil, err
	}
	var decoded map[string]any
	if err := json.Unmarshal(in, &decoded); err != nil {
		return nil, err
	}
	out, err := json.Marshal(map[string]any{"echo": decoded})
	if err != nil {
		return nil, err
	}
	var res any
	err = json.Unmarshal(out, &res)
	return res, err
}

// BenchmarkIPCCall measures a call through the ipc transport (Dispatch →
// core.tool.call over the unix socket → the Go example provider's echo →
// agent.tool.result) against the same work done in-process: the p50 and
// p99 latency of sequential calls, and the throughput of 8 concurrent
// callers, each as a ratio. The two run in alternating rounds, so that
// drift on a shared machine hits both alike. It times itself, so
// -benchtime 1x suffices.
func BenchmarkIPCCall(b *testing.B) {
	const (
		rounds, perRound = 10, 200 // 2000 sequential calls each way
		callers          = 8
		loadFor          = 500 * time.Millisecond // per round, each way
		loadRounds       = 4
	)
	input := map[string]any{"path": "notes/a.md", "limit": 20.0}
	th := startHub(b, nil)
	th.add(b, "bench", plexus.ProviderConfig{Command: buildGoProvider(b)})
	e := th.entry(b, "bench", "echo")
	viaIPC := func() error {
		r := th.Dispatch(context.Background(), e, input, plexus.DispatchContext{})
		if !r.OK {
			return r.Error
		}
		return nil
	}
	inProcess := func() error {
		_, err := echoWork(input)
		return err
	}
	waitUntil(b, 10*time.Second, "the provider to serve", func() bool { return viaIPC() == nil })

	for b.Loop() {
		var lat [2][]time.Duration
		for range rounds {
			for i, f := range []func() error{inProcess, viaIPC} {
				for range perRound {
					start := time.Now()
					if err := f(); err != nil {
						b.Fatal(err)
					}
					lat[i] = append(lat[i], time.Since(start))
				}
			}
		}
		var calls [2]int64
		for range loadRounds {
			for i, f := range []func() error{inProcess, viaIPC} {
				n, err := load(callers, loadFor, f)
				if err != nil {
					b.Fatal(err)
				}
				calls[i] += n
			}
		}
		p50, p99 := [2]time.Duration{}, [2]time.Duration{}
		for i := range lat {
			slices.Sort(lat[i])
			p50[i], p99[i] = lat[i][len(lat[i])/2], lat[i][len(lat[i])*99/100]
		}
		secs := (loadFor * loadRounds).Seconds()
		tput := [2]float64{float64(calls[0]) / secs, float64(calls[1]) / secs}
		b.ReportMetric(float64(p50[1].Nanoseconds()), "ipc-p50-ns")
		b.ReportMetric(float64(p50[0].Nanoseconds()), "inproc-p50-ns")
		b.ReportMetric(float64(p50[1])/float64(p50[0]), "x-p50")
		b.ReportMetric(tput[1], "ipc-calls/s")
		b.ReportMetric(tput[1]/tput[0], "x-throughput")
		b.Logf("ipc call vs the same work in-process, %d sequential calls each: p50 %s vs %s (%.1f×), p99 %s vs %s (%.1f×); ipc overhead at p50 %s",
			rounds*perRound, p50[1], p50[0], float64(p50[1])/float64(p50[0]), p99[1], p99[0], float64(p99[1])/float64(p99[0]), p50[1]-p50[0])
		b.Logf("throughput with %d concurrent callers: ipc %.0f calls/s vs in-process %.0f calls/s (%.3f×)",
			callers, tput[1], tput[0], tput[1]/tput[0])
	}
}

// load runs f from callers goroutines for d and returns how many calls
// completed.
func load(callers int, d time.Duration, f func() error) (int64, error) {
	var n atomic.Int64
	var first error
	var once sync.Once
	stop := time.Now().Add(d)
	var wg sync.WaitGroup
	for range callers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for time.Now().Before(stop) {
				if err := f(); err != nil {
					once.Do(func() { first = err })
					return
				}
				n.Add(1)
			}
		}()
	}
	wg.Wait()
	return n.Load(), first
}
