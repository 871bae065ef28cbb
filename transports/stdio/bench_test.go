package stdio_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"testing"
	"time"

	"github.com/plexus-gw/plexus"
	"github.com/plexus-gw/plexus/transports/stdio"
)

// BenchmarkDispatchOverhead measures the per-call latency of Dispatch
// against the same NDJSON round trip made directly over the pipes of the
// same fake tool, sequentially, and reports their ratio. The two run in
// alternating rounds, so that drift on a shared machine hits both alike.
// It times itself (a fixed number of calls), so -benchtime 1x suffices.
func BenchmarkDispatchOverhead(b *testing.B) {
	const rounds, perRound = 10, 100 // 1000 calls each way
	input := map[string]any{"path": "notes/a.md", "limit": 20.0}

	f := newTransport(b, nil, stdio.Options{})
	e := entry(b, "notes.tool.call", tool("echo"))
	dispatch := func() {
		if r := f.t.Dispatch(context.Background(), e, input, plexus.DispatchContext{}); !r.OK {
			b.Fatal(r.Error)
		}
	}
	direct := startDirect(b)

	for b.Loop() {
		dispatch() // start the process and warm both paths up
		direct.call(b, input)
		var viaPlexus, viaPipes time.Duration
		for range rounds {
			start := time.Now()
			for range perRound {
				direct.call(b, input)
			}
			viaPipes += time.Since(start)
			start = time.Now()
			for range perRound {
				dispatch()
			}
			viaPlexus += time.Since(start)
		}
		n := time.Duration(rounds * perRound)
		ratio := float64(viaPlexus) / float64(viaPipes)
		b.ReportMetric(float64(viaPipes/n), "direct-ns/call")
		b.ReportMetric(float64(viaPlexus/n), "dispatch-ns/call")
		b.ReportMetric(ratio, "x-direct")
		b.Logf("stdio per call, %d sequential calls: direct %s, Dispatch %s, ratio %.2f×, overhead %s",
			rounds*perRound, viaPipes/n, viaPlexus/n, ratio, (viaPlexus-viaPipes)/n)
	}
}

// directTool is the fake tool driven by hand: what a caller without Plexus
// would write.
type directTool struct {
	in  io.WriteCloser
	out *bufio.Reader
	seq int
}

func startDirect(tb testing.TB) *directTool {
	tb.Helper()
	exe, err := os.Executable()
	if err != nil {
		tb.Fatal(err)
	}
	cmd := exec.Command(exe)
	cmd.Env = append(os.Environ(), toolEnv+"=tool")
	in, err := cmd.StdinPipe()
	if err != nil {
		tb.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		tb.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() {
		in.Close()
		_ = cmd.Wait()
	})
	return &directTool{in: in, out: bufio.NewReaderSize(out, 64<<10)}
}

// call makes one round trip: encode, write, read a line, decode.
func (d *directTool) call(tb testing.TB, input map[string]any) any {
	d.seq++
	line, err := json.Marshal(map[string]any{"id": fmt.Sprint(d.seq), "method": "echo", "params": input})
	if err != nil {
		tb.Fatal(err)
	}
	if _, err := d.in.Write(append(line, '\n')); err != nil {
		tb.Fatal(err)
	}
	resp, err := d.out.ReadBytes('\n')
	if err != nil {
		tb.Fatal(err)
	}
	var r struct {
		Result any `json:"result"`
	}
	if err := json.Unmarshal(resp, &r); err != nil {
		tb.Fatal(err)
	}
	return r.Result
}
