package ipc_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/plexus-gw/plexus"
	"github.com/plexus-gw/plexus/platform"
	"github.com/plexus-gw/plexus/transports/ipc"
)

// testBins is the platform seam for tests: PATH lookup and the test's
// environment without PLEXUS_* and IPC_TEST_* (as platform.Services drops
// PLEXUS_*), so a child gets only what its config says.
type testBins struct{ *platform.Services }

func (testBins) Resolve(name string) (string, error) { return exec.LookPath(name) }

func (testBins) Env() []string {
	var env []string
	for _, kv := range os.Environ() {
		if strings.HasPrefix(kv, "PLEXUS_") || strings.HasPrefix(kv, "IPC_TEST_") {
			continue
		}
		env = append(env, kv)
	}
	return env
}

// noteRow is one journaled observation of the hub.
type noteRow struct {
	Action, Target, Trace string
	Payload               map[string]any
}

// recorder keeps what the hub journals, the health it pushes and the
// registrations it reports, as the daemon's wiring would.
type recorder struct {
	mu     sync.Mutex
	notes  []noteRow
	health map[string][]plexus.Health
	tools  map[string]int
}

func (r *recorder) note(action, target, trace string, payload map[string]any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.notes = append(r.notes, noteRow{action, target, trace, payload})
}

func (r *recorder) onHealth(id string, h plexus.Health) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.health[id] = append(r.health[id], h)
}

func (r *recorder) onTools(id string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.tools[id]++
}

func (r *recorder) rows(action string) []noteRow {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []noteRow
	for _, n := range r.notes {
		if n.Action == action {
			out = append(out, n)
		}
	}
	return out
}

func (r *recorder) toolChanges(id string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.tools[id]
}

func (r *recorder) lastHealth(id string) plexus.Health {
	r.mu.Lock()
	defer r.mu.Unlock()
	hs := r.health[id]
	if len(hs) == 0 {
		return plexus.Health{}
	}
	return hs[len(hs)-1]
}

// waitNote waits (bounded) for a row of action that match accepts.
func (r *recorder) waitNote(tb testing.TB, action string, match func(noteRow) bool) noteRow {
	tb.Helper()
	var got noteRow
	waitUntil(tb, 10*time.Second, "a "+action+" row", func() bool {
		for _, n := range r.rows(action) {
			if match == nil || match(n) {
				got = n
				return true
			}
		}
		return false
	})
	return got
}

// waitUntil polls cond until it holds, failing after limit (a liveness
// bound, not a timing assertion).
func waitUntil(tb testing.TB, limit time.Duration, what string, cond func() bool) {
	tb.Helper()
	deadline := time.Now().Add(limit)
	for !cond() {
		if time.Now().After(deadline) {
			tb.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// syncBuffer is a log sink safe for concurrent writes.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

type testHub struct {
	*ipc.Hub
	rec     *recorder
	logs    *syncBuffer
	sources map[string]plexus.Source
	cancel  context.CancelFunc
	done    chan error
}

// startHub runs a hub on a short socket path until the test ends, then
// checks that it stopped cleanly and left no goroutine behind.
func startHub(tb testing.TB, edit func(*ipc.HubOptions)) *testHub {
	tb.Helper()
	before := runtime.NumGoroutine()
	rec := &recorder{health: map[string][]plexus.Health{}, tools: map[string]int{}}
	logs := &syncBuffer{}
	opts := ipc.HubOptions{
		SocketPath:        filepath.Join(shortDir(tb), "run", "ipc.sock"),
		HeartbeatInterval: time.Second, // generous: only the heartbeat test wants it short
		MinBackoff:        20 * time.Millisecond,
		MaxBackoff:        100 * time.Millisecond,
		StopGrace:         500 * time.Millisecond,
		Logger:            slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
		Note:              rec.note,
		OnHealth:          rec.onHealth,
		OnTools:           rec.onTools,
		CoreVersion:       "test",
	}
	if edit != nil {
		edit(&opts)
	}
	h, err := ipc.NewHub(testBins{platform.New(platform.Options{Home: tb.TempDir()})}, opts)
	if err != nil {
		tb.Fatal(err)
	}
	if err := h.Listen(); err != nil {
		tb.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	th := &testHub{Hub: h, rec: rec, logs: logs, sources: map[string]plexus.Source{}, cancel: cancel, done: make(chan error, 1)}
	go func() { th.done <- h.Run(ctx) }()
	tb.Cleanup(func() {
		th.stop(tb)
		deadline := time.Now().Add(5 * time.Second)
		for runtime.NumGoroutine() > before {
			if time.Now().After(deadline) {
				buf := make([]byte, 1<<16)
				tb.Errorf("goroutines: %d before, %d after\n%s", before, runtime.NumGoroutine(), buf[:runtime.Stack(buf, true)])
				return
			}
			time.Sleep(10 * time.Millisecond)
		}
	})
	return th
}

func (th *testHub) stop(tb testing.TB) {
	tb.Helper()
	if th.cancel == nil {
		return
	}
	th.cancel()
	th.cancel = nil
	select {
	case err := <-th.done:
		if err != nil {
			tb.Errorf("Run = %v", err)
		}
	case <-time.After(15 * time.Second):
		tb.Fatal("Run did not return")
	}
}

// add declares provider id and keeps its source.
func (th *testHub) add(tb testing.TB, id string, cfg plexus.ProviderConfig) {
	tb.Helper()
	src, err := th.Add(id, cfg)
	if err != nil {
		tb.Fatal(err)
	}
	th.sources[id] = src
}

// entry waits until provider id's source lists the entry of tool.
func (th *testHub) entry(tb testing.TB, id, tool string) plexus.Entry {
	tb.Helper()
	var e plexus.Entry
	waitUntil(tb, 10*time.Second, "entry "+ipc.EntryID(id, tool), func() bool {
		es, _ := th.sources[id].Scan(context.Background())
		for _, x := range es {
			if x.ID == ipc.EntryID(id, tool) {
				e = x
				return true
			}
		}
		return false
	})
	return e
}

// status returns provider id's status.
func (th *testHub) status(tb testing.TB, id string) plexus.ProviderStatus {
	tb.Helper()
	for _, s := range th.Status() {
		if s.ID == id {
			return s
		}
	}
	tb.Fatalf("no provider %s in Status", id)
	return plexus.ProviderStatus{}
}

// waitConnected waits until provider id is connected and has registered
// (its health is ok and it is routable).
func (th *testHub) waitState(tb testing.TB, id, state string) plexus.ProviderStatus {
	tb.Helper()
	var st plexus.ProviderStatus
	waitUntil(tb, 10*time.Second, id+" "+state, func() bool {
		st = th.status(tb, id)
		return st.State == state
	})
	return st
}

// testProvider is the config launching this test binary in mode, and the
// file its observations go to.
func testProvider(tb testing.TB, mode string, env map[string]string) (plexus.ProviderConfig, string) {
	tb.Helper()
	exe, err := os.Executable()
	if err != nil {
		tb.Fatal(err)
	}
	out := filepath.Join(tb.TempDir(), "observed.jsonl")
	e := map[string]string{"IPC_TEST_MODE": mode, "IPC_TEST_OUT": out}
	for k, v := range env {
		e[k] = v
	}
	return plexus.ProviderConfig{Command: exe, Env: e}, out
}

// observed reads the provider's observations.
func observed(tb testing.TB, path string) []observation {
	tb.Helper()
	f, err := os.Open(path)
	if os.IsNotExist(err) {
		return nil
	}
	if err != nil {
		tb.Fatal(err)
	}
	defer f.Close()
	var out []observation
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var o observation
		if err := json.Unmarshal(sc.Bytes(), &o); err == nil {
			out = append(out, o)
		}
	}
	return out
}

// waitObserved waits for the provider to observe event (match may be nil).
func waitObserved(tb testing.TB, path, event string, match func(observation) bool) observation {
	tb.Helper()
	var got observation
	waitUntil(tb, 10*time.Second, "the provider to observe "+event, func() bool {
		for _, o := range observed(tb, path) {
			if o.Event == event && (match == nil || match(o)) {
				got = o
				return true
			}
		}
		return false
	})
	return got
}

// buildGoProvider builds examples/ipc/goprovider into a temp folder.
func buildGoProvider(tb testing.TB) string {
	tb.Helper()
	out := filepath.Join(tb.TempDir(), "goprovider")
	cmd := exec.Command("go", "build", "-o", out, "./examples/ipc/goprovider")
	cmd.Dir = filepath.Join("..", "..")
	if b, err := cmd.CombinedOutput(); err != nil {
		tb.Fatalf("build examples/ipc/goprovider: %v\n%s", err, b)
	}
	return out
}
