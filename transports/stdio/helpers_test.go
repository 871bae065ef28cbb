package stdio_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/plexus-gw/plexus"
	"github.com/plexus-gw/plexus/internal/plexustest"
	"github.com/plexus-gw/plexus/platform"
	"github.com/plexus-gw/plexus/transports/stdio"
)

// bins resolves "faketool" to the test binary, run as the fake tool; any
// other name is not found.
type bins struct {
	*platform.Services
	exe string
}

func (b bins) Resolve(name string) (string, error) {
	if name == "faketool" {
		return b.exe, nil
	}
	return "", fmt.Errorf("resolve %q: %w on the PATH /nowhere", name, plexus.ErrNotFound)
}

func (b bins) Env() []string { return append(os.Environ(), toolEnv+"=tool") }

// secrets is a fixed secret store.
type secrets map[string]string

func (s secrets) Secret(name string) (string, error) {
	v, ok := s[name]
	if !ok {
		return "", fmt.Errorf("secret %q: %w", name, plexus.ErrNotFound)
	}
	return v, nil
}

// newClock is a settable clock for backoffs and health.
func newClock() *plexustest.Clock {
	return plexustest.NewClock(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))
}

// logBuf collects log output safely across goroutines.
type logBuf struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *logBuf) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *logBuf) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// fixture is a transport over the fake tool, closed at the end of the test,
// after which no goroutine of the test may be left.
type fixture struct {
	t    *stdio.Transport
	logs *logBuf
}

// newTransport returns a transport over the fake tool with small backoffs
// and grace (opts override them); it checks for leaked goroutines and
// closes the transport when the test ends.
func newTransport(tb testing.TB, sec secrets, opts stdio.Options) *fixture {
	tb.Helper()
	failOnLeakedGoroutines(tb)
	exe, err := os.Executable()
	if err != nil {
		tb.Fatal(err)
	}
	logs := &logBuf{}
	if opts.MinBackoff == 0 {
		opts.MinBackoff = time.Millisecond
	}
	if opts.StopGrace == 0 {
		opts.StopGrace = 500 * time.Millisecond
	}
	opts.Logger = slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	if sec == nil {
		sec = secrets{}
	}
	tr := stdio.New(bins{Services: platform.New(platform.Options{Home: tb.TempDir()}), exe: exe}, sec, opts)
	tb.Cleanup(func() { tr.Close() })
	return &fixture{t: tr, logs: logs}
}

// failOnLeakedGoroutines fails the test if it leaves goroutines behind;
// call it first, so that its cleanup runs last.
func failOnLeakedGoroutines(tb testing.TB) {
	before := runtime.NumGoroutine()
	tb.Cleanup(func() {
		deadline := time.Now().Add(5 * time.Second)
		for runtime.NumGoroutine() > before && time.Now().Before(deadline) {
			time.Sleep(20 * time.Millisecond)
		}
		if n := runtime.NumGoroutine(); n > before {
			buf := make([]byte, 1<<20)
			tb.Errorf("%d goroutines leaked:\n%s", n-before, buf[:runtime.Stack(buf, true)])
		}
	})
}

// decl is a route declaration.
type decl map[string]any

// entry is an entry of source "notes" whose route is d; declared are the
// manifest's secrets.
func entry(tb testing.TB, id string, d decl, declared ...plexus.ExtensionSecretRef) plexus.Entry {
	tb.Helper()
	raw, err := json.Marshal(d)
	if err != nil {
		tb.Fatal(err)
	}
	route, err := json.Marshal(plexus.ExtensionRoute{Decl: raw, Secrets: declared})
	if err != nil {
		tb.Fatal(err)
	}
	return plexus.Entry{ID: id, Source: "notes", Transport: plexus.TransportStdio, Route: route}
}

// tool is the route of the fake tool calling method.
func tool(method string) decl { return decl{"bin": "faketool", "method": method} }

func (f *fixture) call(tb testing.TB, d decl, input map[string]any) plexus.TransportResult {
	tb.Helper()
	return f.t.Dispatch(context.Background(), entry(tb, "notes.tool.call", d), input, plexus.DispatchContext{})
}

// ok calls and fails the test unless the call succeeded.
func (f *fixture) ok(tb testing.TB, d decl, input map[string]any) any {
	tb.Helper()
	r := f.call(tb, d, input)
	if !r.OK {
		tb.Fatalf("call %v: %v", d["method"], r.Error)
	}
	return r.Data
}

// pid is the pid of the tool's current process (starting it if need be).
func (f *fixture) pid(tb testing.TB) int {
	tb.Helper()
	return int(f.ok(tb, tool("pid"), nil).(float64))
}

// wantErr fails the test unless r failed with code and a message holding
// every part.
func wantErr(tb testing.TB, r plexus.TransportResult, code plexus.ErrorCode, parts ...string) {
	tb.Helper()
	if r.OK || r.Error == nil {
		tb.Fatalf("got OK %v, data %v; want %s", r.OK, r.Data, code)
	}
	if r.Error.Code != code {
		tb.Fatalf("got code %s (%s), want %s", r.Error.Code, r.Error.Message, code)
	}
	for _, p := range parts {
		if !strings.Contains(r.Error.Message, p) {
			tb.Errorf("got message %q, want it to hold %q", r.Error.Message, p)
		}
	}
}

// alive reports whether pid is a live process (a zombie is not).
func alive(pid int) bool {
	if err := syscall.Kill(pid, 0); err != nil {
		return false
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		_, noProc := os.Stat("/proc/self")
		return noProc != nil // no procfs (macOS): trust kill
	}
	// The state follows the parenthesised command name.
	s := string(b)
	if i := strings.LastIndexByte(s, ')'); i >= 0 && i+2 < len(s) {
		return s[i+2] != 'Z'
	}
	return true
}

// waitGone fails the test unless pid is gone within a few seconds.
func waitGone(tb testing.TB, pid int) {
	tb.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for alive(pid) {
		if time.Now().After(deadline) {
			tb.Fatalf("process %d is still running", pid)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
