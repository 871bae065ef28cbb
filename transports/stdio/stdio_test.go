package stdio_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/plexus-gw/plexus"
	"github.com/plexus-gw/plexus/transports/stdio"
)

func TestDispatch(t *testing.T) {
	t.Run("OK", func(t *testing.T) {
		f := newTransport(t, nil, stdio.Options{})
		got := f.ok(t, tool("echo"), map[string]any{"path": "a.md", "n": 2.0, "tags": []any{"x"}})
		want := map[string]any{"method": "echo", "params": map[string]any{"path": "a.md", "n": 2.0, "tags": []any{"x"}}}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("result (-want +got):\n%s", diff)
		}
		if h := f.t.Health("notes"); h.Status != plexus.HealthOK {
			t.Errorf("health %+v, want ok", h)
		}
	})
	t.Run("MethodDefaultsToEntryID", func(t *testing.T) {
		f := newTransport(t, nil, stdio.Options{})
		r := f.t.Dispatch(context.Background(), entry(t, "notes.echo", decl{"bin": "faketool"}), nil, plexus.DispatchContext{})
		if !r.OK {
			t.Fatal(r.Error)
		}
		want := map[string]any{"method": "notes.echo", "params": map[string]any{}}
		if diff := cmp.Diff(want, r.Data); diff != "" {
			t.Errorf("result (-want +got):\n%s", diff)
		}
	})
	t.Run("OneProcessPerCommand", func(t *testing.T) {
		f := newTransport(t, nil, stdio.Options{})
		a, b := f.pid(t), f.pid(t)
		empty := f.ok(t, decl{"bin": "faketool", "args": []string{}, "method": "pid"}, nil)
		other := f.ok(t, decl{"bin": "faketool", "args": []string{"--other"}, "method": "pid"}, nil)
		if a != b || int(empty.(float64)) != a {
			t.Errorf("calls of one command ran on processes %d, %d and %v, want one", a, b, empty)
		}
		if int(other.(float64)) == a {
			t.Errorf("different args share process %d", a)
		}
	})
}

// TestConcurrent sends 50 calls at once; the tool answers the slowest
// first-sent last, so responses arrive out of order and must still meet
// their calls.
func TestConcurrent(t *testing.T) {
	f := newTransport(t, nil, stdio.Options{})
	pid := f.pid(t)
	const n = 50
	var wg sync.WaitGroup
	errs := make(chan string, n)
	for i := range n {
		wg.Go(func() {
			ms := float64((n - i) * 3)
			r := f.call(t, tool("sleep"), map[string]any{"ms": ms})
			if !r.OK {
				errs <- fmt.Sprintf("call %d: %v", i, r.Error)
				return
			}
			if got := r.Data.(map[string]any)["slept"]; got != ms {
				errs <- fmt.Sprintf("call %d got the answer for %v ms, want %v", i, got, ms)
			}
		})
	}
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Error(e)
	}
	if got := f.pid(t); got != pid {
		t.Errorf("pid %d after the calls, want %d (one process)", got, pid)
	}
}

func TestErrorResponse(t *testing.T) {
	f := newTransport(t, nil, stdio.Options{})
	tests := []struct {
		name       string
		input      map[string]any
		wantMsg    string
		wantDetail any
	}{
		{"WithCode", map[string]any{"message": "no such note", "code": "not_found"}, "faketool fail: no such note", map[string]any{"code": "not_found"}},
		{"NoCode", map[string]any{"message": "broken"}, "faketool fail: broken", nil},
		{"BareString", map[string]any{"raw": `"just a string"`}, "faketool fail: just a string", nil},
		{"EmptyObject", map[string]any{"raw": `{}`}, "the tool answered with an error", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := f.call(t, tool("fail"), tt.input)
			wantErr(t, r, plexus.CodeTransportError, tt.wantMsg)
			if diff := cmp.Diff(tt.wantDetail, r.Error.Detail); diff != "" {
				t.Errorf("detail (-want +got):\n%s", diff)
			}
			if r.Error.CapabilityID != "notes.tool.call" {
				t.Errorf("capability id %q", r.Error.CapabilityID)
			}
		})
	}
	// An error response is not a death: the process is still the first.
	if h := f.t.Health("notes"); h.Status != plexus.HealthOK {
		t.Errorf("health %+v, want ok", h)
	}
}

func TestTimeout(t *testing.T) {
	f := newTransport(t, nil, stdio.Options{})
	pid := f.pid(t)

	t.Run("Route", func(t *testing.T) {
		d := tool("sleep")
		d["timeoutMs"] = 100
		start := time.Now()
		r := f.call(t, d, map[string]any{"ms": 600.0})
		wantErr(t, r, plexus.CodeTransportError, "timed out after 100ms")
		if el := time.Since(start); el > 500*time.Millisecond {
			t.Errorf("the call took %s, want about 100ms", el)
		}
	})
	t.Run("Context", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
		defer cancel()
		r := f.t.Dispatch(ctx, entry(t, "notes.tool.call", tool("sleep")), map[string]any{"ms": 600.0}, plexus.DispatchContext{})
		wantErr(t, r, plexus.CodeTransportError)
	})
	t.Run("Cancelled", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		time.AfterFunc(50*time.Millisecond, cancel)
		r := f.t.Dispatch(ctx, entry(t, "notes.tool.call", tool("sleep")), map[string]any{"ms": 600.0}, plexus.DispatchContext{})
		wantErr(t, r, plexus.CodeTransportError, "cancelled")
	})

	// The late answers arrive, are dropped as unknown ids, and the process
	// keeps serving.
	time.Sleep(700 * time.Millisecond)
	if got := f.pid(t); got != pid {
		t.Errorf("pid %d after timeouts, want %d: a timeout must not restart the process", got, pid)
	}
	if !strings.Contains(f.logs.String(), "unknown id") {
		t.Errorf("no log of a dropped late response:\n%s", f.logs)
	}
}

// TestCrash kills the process in the middle of calls: the calls fail, the
// next call starts a new process.
func TestCrash(t *testing.T) {
	clk := newClock()
	f := newTransport(t, nil, stdio.Options{MinBackoff: 100 * time.Millisecond, Now: clk.Now})
	pid := f.pid(t)

	var wg sync.WaitGroup
	results := make([]plexus.TransportResult, 5)
	for i := range results {
		wg.Go(func() { results[i] = f.call(t, tool("sleep"), map[string]any{"ms": 5000.0}) })
	}
	time.Sleep(100 * time.Millisecond) // let them reach the tool
	wantErr(t, f.call(t, tool("crash"), nil), plexus.CodeTransportError, "the process exited: exit status 3")
	wg.Wait()
	for _, r := range results {
		wantErr(t, r, plexus.CodeTransportError, "the process exited: exit status 3")
	}
	waitGone(t, pid)

	if h := f.t.Health("notes"); h.Status != plexus.HealthDegraded || !strings.Contains(h.Detail, "exit status 3") {
		t.Errorf("health after the crash %+v, want degraded with the exit status", h)
	}
	wantErr(t, f.call(t, tool("pid"), nil), plexus.CodeSourceUnavailable, "restarting in 100ms")

	clk.Advance(100 * time.Millisecond)
	if got := f.pid(t); got == pid {
		t.Errorf("pid %d after the restart, want a new process", got)
	}
	if h := f.t.Health("notes"); h.Status != plexus.HealthOK {
		t.Errorf("health after the restart %+v, want ok", h)
	}
	if !strings.Contains(f.logs.String(), "crashing as asked") {
		t.Errorf("the log does not hold the tool's last stderr line:\n%s", f.logs)
	}
}

// TestBackoff crashes the tool again and again: the wait before a restart
// doubles up to the maximum, and resets after a long enough run.
func TestBackoff(t *testing.T) {
	clk := newClock()
	f := newTransport(t, nil, stdio.Options{MinBackoff: 100 * time.Millisecond, MaxBackoff: 400 * time.Millisecond, ResetAfter: time.Minute, Now: clk.Now})
	crash := func(want time.Duration) {
		t.Helper()
		f.pid(t)
		wantErr(t, f.call(t, tool("crash"), nil), plexus.CodeTransportError, "exited")
		r := f.call(t, tool("pid"), nil)
		wantErr(t, r, plexus.CodeSourceUnavailable, fmt.Sprintf("restarting in %s", want))
		clk.Advance(want - time.Millisecond)
		wantErr(t, f.call(t, tool("pid"), nil), plexus.CodeSourceUnavailable, "restarting in 1ms")
		clk.Advance(time.Millisecond)
	}
	for _, want := range []time.Duration{100, 200, 400, 400} {
		crash(want * time.Millisecond)
	}
	// A process that ran longer than ResetAfter starts the count again.
	f.pid(t)
	clk.Advance(time.Minute)
	crash(100 * time.Millisecond)
}

// TestIgnoredLines: lines that are not responses, or answer no call, are
// skipped and logged without their content.
func TestIgnoredLines(t *testing.T) {
	f := newTransport(t, nil, stdio.Options{})
	pid := f.pid(t)
	if got := f.ok(t, tool("junk"), nil); got != "after junk" {
		t.Errorf("result %v, want \"after junk\"", got)
	}
	if got := f.pid(t); got != pid {
		t.Errorf("pid %d, want %d: junk must not restart the process", got, pid)
	}
	logs := f.logs.String()
	for _, want := range []string{"not a response", "unknown id"} {
		if !strings.Contains(logs, want) {
			t.Errorf("the log does not say %q:\n%s", want, logs)
		}
	}
	for _, never := range []string{"not json", "stray", "nobody-waits"} {
		if strings.Contains(logs, never) {
			t.Errorf("the log holds the line's content %q:\n%s", never, logs)
		}
	}
}

// TestOversize: a response line over MaxLine kills the process and fails
// every call in flight; the next call gets a new process.
func TestOversize(t *testing.T) {
	f := newTransport(t, nil, stdio.Options{MaxLine: 1024})
	pid := f.pid(t)
	if got := f.ok(t, tool("big"), map[string]any{"n": 900.0}); len(got.(string)) != 900 {
		t.Fatalf("a line under the limit: got %d bytes", len(got.(string)))
	}

	slow := make(chan plexus.TransportResult)
	go func() { slow <- f.call(t, tool("sleep"), map[string]any{"ms": 5000.0}) }()
	time.Sleep(100 * time.Millisecond)
	wantErr(t, f.call(t, tool("big"), map[string]any{"n": 2000.0}), plexus.CodeTransportError, "over the 1 KiB limit")
	wantErr(t, <-slow, plexus.CodeTransportError, "over the 1 KiB limit")
	waitGone(t, pid)

	var got int
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		if r := f.call(t, tool("pid"), nil); r.OK {
			got = int(r.Data.(float64))
			break
		}
	}
	if got == 0 || got == pid {
		t.Errorf("pid %d after the oversize line, want a new process (old %d)", got, pid)
	}
}

func TestSecret(t *testing.T) {
	const value = "s3cr3t-Value-42"
	declared := plexus.ExtensionSecretRef{Name: "tool-token", Attach: "env", As: "TOOL_TOKEN"}
	f := newTransport(t, secrets{"tool-token": value}, stdio.Options{})
	call := func(d decl, input map[string]any) plexus.TransportResult {
		return f.t.Dispatch(context.Background(), entry(t, "notes.tool.call", d, declared), input, plexus.DispatchContext{})
	}

	t.Run("ByEnvAndRedacted", func(t *testing.T) {
		d := tool("env")
		d["secret"] = map[string]any{"name": "tool-token"} // attach and as from the manifest
		r := call(d, map[string]any{"name": "TOOL_TOKEN"})
		if !r.OK {
			t.Fatal(r.Error)
		}
		if got := r.Data.(map[string]any)["value"]; got != "[redacted]" {
			t.Errorf("the tool saw %q in TOOL_TOKEN; want the secret, redacted on the way back", got)
		}
		// Echoed back through params too, and into an error message.
		d["method"] = "echo"
		if r := call(d, map[string]any{"k": "x" + value}); strings.Contains(fmt.Sprint(r.Data), value) {
			t.Errorf("the secret is in the result: %v", r.Data)
		}
		d["method"] = "fail"
		if r := call(d, map[string]any{"message": "bad token " + value, "code": value}); strings.Contains(fmt.Sprint(r.Error, r.Error.Detail), value) {
			t.Errorf("the secret is in the error: %v %v", r.Error, r.Error.Detail)
		}
	})
	t.Run("NotOnOtherProcesses", func(t *testing.T) {
		r := call(tool("env"), map[string]any{"name": "TOOL_TOKEN"})
		if !r.OK || r.Data.(map[string]any)["value"] != "" {
			t.Errorf("a route without the secret got %v %v", r.Data, r.Error)
		}
	})
	t.Run("NotSet", func(t *testing.T) {
		d := tool("env")
		d["secret"] = map[string]any{"name": "other", "attach": "env", "as": "OTHER"}
		r := f.t.Dispatch(context.Background(), entry(t, "notes.tool.call", d, plexus.ExtensionSecretRef{Name: "other"}), nil, plexus.DispatchContext{})
		wantErr(t, r, plexus.CodeTransportError, `secret "other" is not set`)
	})
	if logs := f.logs.String(); strings.Contains(logs, value) {
		t.Errorf("the secret is in the log:\n%s", logs)
	}
}

func TestRoute(t *testing.T) {
	f := newTransport(t, secrets{"tok": "v"}, stdio.Options{})
	declared := plexus.ExtensionSecretRef{Name: "tok", Attach: "env", As: "TOK"}
	tests := []struct {
		name string
		d    decl
		want string
	}{
		{"NoBin", decl{"method": "x"}, "route.bin is missing"},
		{"BinNotString", decl{"bin": 3}, "not a valid route object"},
		{"ZeroTimeout", decl{"bin": "faketool", "timeoutMs": 0}, "route.timeoutMs must be a positive"},
		{"SecretNotDeclared", decl{"bin": "faketool", "secret": map[string]any{"name": "nope"}}, "not declared"},
		{"SecretBearer", decl{"bin": "faketool", "secret": map[string]any{"name": "tok", "attach": "bearer"}}, "only env"},
		{"SecretBadName", decl{"bin": "faketool", "secret": map[string]any{"name": "tok", "as": "A-B"}}, "must name the environment variable"},
		{"SecretPath", decl{"bin": "faketool", "secret": map[string]any{"name": "tok", "as": "PATH"}}, "reserved"},
		{"SecretPlexus", decl{"bin": "faketool", "secret": map[string]any{"name": "tok", "as": "plexus_home"}}, "reserved"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := f.t.Dispatch(context.Background(), entry(t, "notes.x", tt.d, declared), nil, plexus.DispatchContext{})
			wantErr(t, r, plexus.CodeTransportError, tt.want)
		})
	}
	t.Run("NoRoute", func(t *testing.T) {
		r := f.t.Dispatch(context.Background(), plexus.Entry{ID: "notes.x", Source: "notes"}, nil, plexus.DispatchContext{})
		wantErr(t, r, plexus.CodeTransportError, "no route")
	})
	if h := f.t.Health("notes"); h.Status != plexus.HealthUnknown {
		t.Errorf("health %+v after bad routes only, want unknown (nothing started)", h)
	}
}

func TestUnavailable(t *testing.T) {
	clk := newClock()
	f := newTransport(t, nil, stdio.Options{MinBackoff: time.Second, Now: clk.Now})
	d := decl{"bin": "notinstalled", "method": "x"}
	wantErr(t, f.call(t, d, nil), plexus.CodeSourceUnavailable, `binary "notinstalled" cannot be found`)
	if h := f.t.Health("notes"); h.Status != plexus.HealthUnavailable || !strings.Contains(h.Detail, "notinstalled") {
		t.Errorf("health %+v, want unavailable naming the binary", h)
	}
	wantErr(t, f.call(t, d, nil), plexus.CodeSourceUnavailable, "restarting in 1s")
	clk.Advance(time.Second)
	wantErr(t, f.call(t, d, nil), plexus.CodeSourceUnavailable, "cannot be found")
	if h := f.t.Health("elsewhere"); h.Status != plexus.HealthUnknown {
		t.Errorf("health of an unknown source %+v, want unknown", h)
	}
}

// TestClose: Close ends the tool and what it started (its process group),
// fails calls in flight, and refuses calls after it.
func TestClose(t *testing.T) {
	t.Run("Group", func(t *testing.T) {
		f := newTransport(t, nil, stdio.Options{})
		pid := f.pid(t)
		child := int(f.ok(t, tool("spawn"), nil).(float64))
		if !alive(child) {
			t.Fatalf("the tool's child %d is not running", child)
		}
		inflight := make(chan plexus.TransportResult)
		go func() { inflight <- f.call(t, tool("sleep"), map[string]any{"ms": 5000.0}) }()
		time.Sleep(100 * time.Millisecond)
		f.t.Close()
		wantErr(t, <-inflight, plexus.CodeTransportError, "closed")
		waitGone(t, pid)
		waitGone(t, child)
		wantErr(t, f.call(t, tool("pid"), nil), plexus.CodeSourceUnavailable, "closed")
		if h := f.t.Health("notes"); h.Status != plexus.HealthUnavailable {
			t.Errorf("health after Close %+v, want unavailable", h)
		}
	})
	t.Run("Stubborn", func(t *testing.T) {
		// The tool ignores end-of-file and SIGTERM: SIGKILL ends it.
		f := newTransport(t, nil, stdio.Options{StopGrace: 100 * time.Millisecond})
		pid := int(f.ok(t, decl{"bin": "faketool", "args": []string{"--stubborn"}, "method": "pid"}, nil).(float64))
		start := time.Now()
		f.t.Close()
		if el := time.Since(start); el < 200*time.Millisecond || el > 3*time.Second {
			t.Errorf("Close took %s, want two graces (200ms) and a kill", el)
		}
		waitGone(t, pid)
	})
}

// TestRunsPinned: a process is started only from the file the program
// resolved to when its entry was materialized (route "runs"): when the
// program now resolves elsewhere, the call is refused as source_unavailable
// naming both files, and no process starts.
func TestRunsPinned(t *testing.T) {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	runs, err := filepath.EvalSymlinks(exe)
	if err != nil {
		t.Fatal(err)
	}
	pinned := func(runs string) plexus.Entry {
		e := entry(t, "notes.tool.call", tool("pid"))
		var xr plexus.ExtensionRoute
		if err := json.Unmarshal(e.Route, &xr); err != nil {
			t.Fatal(err)
		}
		xr.Runs = runs
		if e.Route, err = json.Marshal(xr); err != nil {
			t.Fatal(err)
		}
		return e
	}
	f := newTransport(t, nil, stdio.Options{})
	other := filepath.Join(t.TempDir(), "approved-tool")
	r := f.t.Dispatch(context.Background(), pinned(other), nil, plexus.DispatchContext{})
	wantErr(t, r, plexus.CodeSourceUnavailable, "faketool now resolves to "+runs, "not to "+other)
	if strings.Contains(f.logs.String(), "process started") {
		t.Errorf("a process started:\n%s", f.logs.String())
	}
	// A fresh transport: the refusal above holds its command in backoff.
	g := newTransport(t, nil, stdio.Options{})
	if r := g.t.Dispatch(context.Background(), pinned(runs), nil, plexus.DispatchContext{}); !r.OK {
		t.Fatalf("the pinned file: %v", r.Error)
	}
}
