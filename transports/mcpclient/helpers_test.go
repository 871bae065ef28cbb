package mcpclient_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/plexus-gw/plexus"
	"github.com/plexus-gw/plexus/platform"
	"github.com/plexus-gw/plexus/transports/mcpclient"
)

// helperEnv makes the test binary a test MCP server (see TestMain).
const helperEnv = "MCPCLIENT_TEST_SERVER"

func TestMain(m *testing.M) {
	switch os.Getenv(helperEnv) {
	case "":
		os.Exit(m.Run())
	case "raw":
		rawServer(os.Stdin, os.Stdout, os.Getenv("MCPCLIENT_EVENTS"))
		os.Exit(0)
	case "greet-http":
		if err := greetHTTPServer(os.Stdin, os.Stdout); err != nil {
			os.Stderr.WriteString(err.Error() + "\n")
			os.Exit(1)
		}
		os.Exit(0)
	case "sdk-say":
		if err := runSayServer(); err != nil {
			os.Stderr.WriteString(err.Error() + "\n")
			os.Exit(1)
		}
		os.Exit(0)
	case "sdk-asks-in-rounds":
		if err := runRootsServer(); err != nil {
			os.Stderr.WriteString(err.Error() + "\n")
			os.Exit(1)
		}
		os.Exit(0)
	case "sdk-0728":
		if err := runOnlyServer(); err != nil {
			os.Stderr.WriteString(err.Error() + "\n")
			os.Exit(1)
		}
		os.Exit(0)
	default:
		os.Stderr.WriteString("unknown " + helperEnv + "\n")
		os.Exit(2)
	}
}

// repoRoot is the directory of go.mod above the test's working directory.
func repoRoot(tb testing.TB) string {
	tb.Helper()
	dir, err := os.Getwd()
	if err != nil {
		tb.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			tb.Fatal("no go.mod above the test's working directory")
		}
		dir = parent
	}
}

// npmServer is the path of an MCP server installed by
// `npm ci --prefix examples/mcp`; the test fails (it does not skip) when it
// is missing.
func npmServer(tb testing.TB, bin string) string {
	tb.Helper()
	p := filepath.Join(repoRoot(tb), "examples", "mcp", "node_modules", ".bin", bin)
	if _, err := os.Stat(p); err != nil {
		tb.Fatalf("the MCP server %s is not installed at %s: run make test, which runs npm ci --prefix examples/mcp", bin, p)
	}
	return p
}

func everythingConfig(tb testing.TB) mcpclient.ServerConfig {
	return mcpclient.ServerConfig{Command: npmServer(tb, "mcp-server-everything"), Args: []string{"stdio"}}
}

// rawConfig runs the test binary as the hand-written server, appending
// what it observes to events.
func rawConfig(tb testing.TB, events string) mcpclient.ServerConfig {
	tb.Helper()
	exe, err := os.Executable()
	if err != nil {
		tb.Fatal(err)
	}
	return mcpclient.ServerConfig{Command: exe, Env: map[string]string{helperEnv: "raw", "MCPCLIENT_EVENTS": events}}
}

// harness runs a client and records its callbacks.
type harness struct {
	c    *mcpclient.Client
	tr   *mcpclient.Transport
	logs *logBuf

	mu      sync.Mutex
	changes int
	healths []plexus.Health

	stop func() // cancels Run and waits for it
}

// startClient runs a client of cfg until the test ends; opts.OnChange,
// OnHealth, Logger, Env and small backoffs are filled in. Tests call
// failOnLeakedGoroutines first.
func startClient(tb testing.TB, name string, cfg mcpclient.ServerConfig, opts mcpclient.Options) *harness {
	tb.Helper()
	h := &harness{logs: &logBuf{}, tr: mcpclient.NewTransport()}
	opts.Logger = slog.New(slog.NewTextHandler(h.logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	if opts.Env == nil {
		opts.Env = os.Environ()
	}
	if opts.Processes == nil {
		opts.Processes = platform.New(platform.Options{Home: tb.TempDir(), Env: opts.Env})
	}
	if opts.MinBackoff == 0 {
		opts.MinBackoff = 20 * time.Millisecond
	}
	if opts.MaxBackoff == 0 {
		opts.MaxBackoff = 200 * time.Millisecond
	}
	if opts.StopGrace == 0 {
		opts.StopGrace = 500 * time.Millisecond
	}
	opts.OnChange = func() {
		h.mu.Lock()
		h.changes++
		h.mu.Unlock()
	}
	opts.OnHealth = func(hl plexus.Health) {
		h.mu.Lock()
		h.healths = append(h.healths, hl)
		h.mu.Unlock()
	}
	c, err := mcpclient.New(name, cfg, opts)
	if err != nil {
		tb.Fatal(err)
	}
	h.c = c
	h.tr.Attach(c)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- c.Run(ctx) }()
	var once sync.Once
	h.stop = func() {
		once.Do(func() {
			cancel()
			select {
			case err := <-done:
				if err != nil {
					tb.Errorf("Run returned %v, want nil", err)
				}
			case <-time.After(20 * time.Second):
				tb.Errorf("Run did not return after its context ended")
			}
		})
	}
	tb.Cleanup(h.stop)
	return h
}

// waitReady fails the test unless the first listing is done in time.
func (h *harness) waitReady(tb testing.TB) {
	tb.Helper()
	select {
	case <-h.c.Ready():
	case <-time.After(30 * time.Second):
		tb.Fatalf("not ready after 30s; health %+v; log:\n%s", h.c.Health(context.Background()), h.logs)
	}
}

func (h *harness) changeCount() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.changes
}

func (h *harness) healthLog() []plexus.Health {
	h.mu.Lock()
	defer h.mu.Unlock()
	return slices.Clone(h.healths)
}

// entries is Scan, by id.
func (h *harness) entries(tb testing.TB) map[string]plexus.Entry {
	tb.Helper()
	es, err := h.c.Scan(context.Background())
	if err != nil {
		tb.Fatal(err)
	}
	m := make(map[string]plexus.Entry, len(es))
	for _, e := range es {
		if _, dup := m[e.ID]; dup {
			tb.Errorf("Scan returned %s twice", e.ID)
		}
		m[e.ID] = e
	}
	return m
}

// entry is the scanned entry id; the test fails when there is none.
func (h *harness) entry(tb testing.TB, id string) plexus.Entry {
	tb.Helper()
	e, ok := h.entries(tb)[id]
	if !ok {
		tb.Fatalf("no entry %s; have %v", id, ids(h.entries(tb)))
	}
	return e
}

func ids(m map[string]plexus.Entry) []string {
	var out []string
	for id := range m {
		out = append(out, id)
	}
	slices.Sort(out)
	return out
}

// progressLog collects what a call relays.
type progressLog struct {
	mu sync.Mutex
	ps []plexus.InvokeProgress
}

func (p *progressLog) report(ip plexus.InvokeProgress) {
	p.mu.Lock()
	p.ps = append(p.ps, ip)
	p.mu.Unlock()
}

func (p *progressLog) all() []plexus.InvokeProgress {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Clone(p.ps)
}

// call dispatches the entry id with input.
func (h *harness) call(tb testing.TB, ctx context.Context, id string, input map[string]any, pl *progressLog) plexus.TransportResult {
	tb.Helper()
	e := h.entry(tb, id)
	var dc plexus.DispatchContext
	if pl != nil {
		dc.Progress = pl.report
	}
	if input == nil {
		input = map[string]any{}
	}
	return h.tr.Dispatch(ctx, e, input, dc)
}

// ok calls and fails the test unless the call succeeded; it returns the
// MCP result decoded.
func (h *harness) ok(tb testing.TB, id string, input map[string]any) map[string]any {
	tb.Helper()
	r := h.call(tb, context.Background(), id, input, nil)
	if !r.OK {
		tb.Fatalf("call %s: %v", id, r.Error)
	}
	return decode(tb, r.MCPResult)
}

func decode(tb testing.TB, raw json.RawMessage) map[string]any {
	tb.Helper()
	var m map[string]any
	if err := json.Unmarshal(raw, &m); err != nil {
		tb.Fatalf("result %q: %v", raw, err)
	}
	return m
}

// firstText is the text of the first text block of a tool result.
func firstText(tb testing.TB, result map[string]any) string {
	tb.Helper()
	content, _ := result["content"].([]any)
	for _, b := range content {
		if m, _ := b.(map[string]any); m["type"] == "text" {
			s, _ := m["text"].(string)
			return s
		}
	}
	tb.Fatalf("no text block in %v", result)
	return ""
}

// wantErr fails the test unless r failed with code.
func wantErr(tb testing.TB, r plexus.TransportResult, code plexus.ErrorCode, parts ...string) {
	tb.Helper()
	if r.OK || r.Error == nil {
		tb.Fatalf("got OK %v, result %s; want %s", r.OK, r.MCPResult, code)
	}
	if r.Error.Code != code {
		tb.Fatalf("got code %s (%s), want %s", r.Error.Code, r.Error.Message, code)
	}
	for _, p := range parts {
		if !strings.Contains(r.Error.Message, p) {
			tb.Errorf("message %q does not hold %q", r.Error.Message, p)
		}
	}
}

// eventually polls cond until it holds or the time is up.
func eventually(tb testing.TB, d time.Duration, what string, cond func() bool) {
	tb.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			tb.Fatalf("%s: not within %s", what, d)
		}
		time.Sleep(10 * time.Millisecond)
	}
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

// failOnLeakedGoroutines fails the test if it leaves goroutines behind;
// call it first, so that its cleanup runs last.
func failOnLeakedGoroutines(tb testing.TB) {
	before := runtime.NumGoroutine()
	tb.Cleanup(func() {
		deadline := time.Now().Add(10 * time.Second)
		for runtime.NumGoroutine() > before && time.Now().Before(deadline) {
			time.Sleep(20 * time.Millisecond)
		}
		if n := runtime.NumGoroutine(); n > before {
			buf := make([]byte, 1<<20)
			tb.Errorf("%d goroutines leaked:\n%s", n-before, buf[:runtime.Stack(buf, true)])
		}
	})
}

// processGone reports whether pid no longer runs (a zombie counts as gone).
func processGone(pid int) bool {
	b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	if errors.Is(err, os.ErrNotExist) {
		return true
	}
	if err != nil {
		return false
	}
	s := string(b)
	if i := strings.LastIndexByte(s, ')'); i >= 0 && i+2 < len(s) {
		return s[i+2] == 'Z'
	}
	return false
}
