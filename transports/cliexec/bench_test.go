package cliexec_test

// The cli transport's per-call overhead (make bench): Dispatch against
// running the same process directly with os/exec (cmd.Output, same argv and
// environment), as a ratio measured in the same run. Calls alternate
// between the two, which of them goes first alternating too, so that drift
// on a shared machine hits both. The body measures a fixed number of calls
// once per test binary whatever b.N is, and reports with b.ReportMetric.

import (
	"context"
	"os/exec"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/plexus-gw/plexus"
	"github.com/plexus-gw/plexus/transports/cliexec"
)

const benchCalls = 200 // per side, per tool

var benchCache sync.Map // b.Name() → map[string]float64

func BenchmarkCLIOverhead(b *testing.B) {
	bs := testBins(b)
	for _, tc := range []struct {
		name, desc string
		bin        string // as the route names it
		args       []string
	}{
		// The smallest process there is: the overhead at its largest.
		{"True", "/bin/true, no output", "/bin/true", nil},
		// A Go tool printing a JSON object that the transport decodes.
		{"JSONTool", "fake tool printing its argv as JSON", "faketool", []string{"argv", "--name=plexus", "42"}},
	} {
		b.Run(tc.name, func(b *testing.B) {
			m, done := benchCache.Load(b.Name())
			if !done {
				m = measureOverhead(b, bs, tc.desc, tc.bin, tc.args)
				benchCache.Store(b.Name(), m)
			}
			for unit, v := range m.(map[string]float64) {
				b.ReportMetric(v, unit)
			}
			b.ReportMetric(0, "ns/op") // hidden: the figures are the custom metrics
		})
	}
}

func measureOverhead(b *testing.B, bs bins, desc, bin string, args []string) map[string]float64 {
	path := bin
	if p, ok := bs.paths[bin]; ok {
		path = p
	}
	if _, err := exec.LookPath(path); err != nil {
		b.Skipf("%s: %v", bin, err)
	}
	tr := cliexec.New(bs, nil, cliexec.Options{})
	e := entry(b, map[string]any{"bin": bin, "args": args})
	viaPlexus := func() error {
		if res := tr.Dispatch(context.Background(), e, nil, plexus.DispatchContext{}); !res.OK {
			return res.Error
		}
		return nil
	}
	direct := func() error {
		cmd := exec.Command(path, args...)
		cmd.Env = bs.Env()
		_, err := cmd.Output()
		return err
	}
	timed := func(do func() error) time.Duration {
		start := time.Now()
		if err := do(); err != nil {
			b.Fatal(err)
		}
		return time.Since(start)
	}
	for range 10 { // warm-up: page cache, the runtime's fork path
		timed(direct)
		timed(viaPlexus)
	}
	via, dir := make([]time.Duration, 0, benchCalls), make([]time.Duration, 0, benchCalls)
	for i := range benchCalls {
		if i%2 == 0 {
			dir = append(dir, timed(direct))
			via = append(via, timed(viaPlexus))
		} else {
			via = append(via, timed(viaPlexus))
			dir = append(dir, timed(direct))
		}
	}
	slices.Sort(via)
	slices.Sort(dir)
	us := func(d time.Duration) float64 { return float64(d) / float64(time.Microsecond) }
	mean := func(ds []time.Duration) float64 {
		var sum time.Duration
		for _, d := range ds {
			sum += d
		}
		return us(sum) / float64(len(ds))
	}
	vp50, dp50 := us(via[len(via)/2]), us(dir[len(dir)/2])
	m := map[string]float64{
		"ratio-p50":      vp50 / dp50,
		"ratio-mean":     mean(via) / mean(dir),
		"via-µs/call":    vp50,
		"direct-µs/call": dp50,
	}
	b.Logf("cli transport, %s, %d calls each: Dispatch p50 %.0f µs (mean %.0f), os/exec directly p50 %.0f µs (mean %.0f); ratio %.2f × at p50, %.2f × mean; overhead %+.0f µs per call",
		desc, benchCalls, vp50, mean(via), dp50, mean(dir), m["ratio-p50"], m["ratio-mean"], vp50-dp50)
	return m
}
