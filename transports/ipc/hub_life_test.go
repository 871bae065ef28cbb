package ipc_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/plexus-gw/plexus"
	"github.com/plexus-gw/plexus/transports/ipc"
)

func dispatch(th *testHub, e plexus.Entry, input map[string]any) plexus.TransportResult {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	return th.Dispatch(ctx, e, input, plexus.DispatchContext{Invoke: plexus.InvokeContext{TraceID: "t-life"}})
}

// TestHubHeartbeatsMissed: a provider that stops heartbeating is marked
// unavailable (pushed at once), calls to it are refused with
// source_unavailable, it is told goodbye and stopped, and its restart
// policy relaunches it; the relaunch heartbeats and serves again.
func TestHubHeartbeatsMissed(t *testing.T) {
	th := startHub(t, func(o *ipc.HubOptions) {
		o.HeartbeatInterval = 100 * time.Millisecond
		// A backoff long enough to look at the provider while it is down.
		o.MinBackoff, o.MaxBackoff = 1500*time.Millisecond, 1500*time.Millisecond
	})
	cfg, out := testProvider(t, "good", map[string]string{"IPC_TEST_MUTE_FIRST": "1", "IPC_TEST_STATE": t.TempDir()})
	th.add(t, "mute", cfg)
	e := th.entry(t, "mute", "echo")
	waitObserved(t, out, "muted", nil)

	missed := th.rec.waitNote(t, "provider.heartbeat_missed", nil)
	if ms, _ := missed.Payload["silent_ms"].(int64); ms < 300 {
		t.Errorf("heartbeat_missed after %dms of silence, want ≥ 3 intervals (300ms)", ms)
	}
	if r := dispatch(th, e, nil); r.OK || r.Error.Code != plexus.CodeSourceUnavailable {
		t.Errorf("call while heartbeats are missed: %+v, want source_unavailable", r)
	}
	if h, _ := th.sources["mute"].(interface {
		Health(context.Context) plexus.Health
	}); h != nil {
		if got := h.Health(context.Background()); got.Status != plexus.HealthUnavailable {
			t.Errorf("source health = %+v, want unavailable", got)
		}
	}
	if g := waitObserved(t, out, "goodbye", nil); g.Reason != "unhealthy" {
		t.Errorf("goodbye reason = %q", g.Reason)
	}
	exited := th.rec.waitNote(t, "provider.exited", nil)
	if exited.Payload["stopped_for"] != "heartbeats missed" {
		t.Errorf("provider.exited = %+v", exited)
	}
	th.rec.waitNote(t, "provider.restarting", nil)

	// The relaunch (launch 2) heartbeats: back to ok, and callable.
	waitObserved(t, out, "welcome", func(o observation) bool { return o.Launch == 2 })
	waitUntil(t, 10*time.Second, "a call to succeed after the restart", func() bool { return dispatch(th, e, nil).OK })
	if h := th.rec.lastHealth("mute"); h.Status != plexus.HealthOK {
		t.Errorf("health after restart = %+v", h)
	}
	var sawMissed bool
	th.rec.mu.Lock()
	for _, h := range th.rec.health["mute"] {
		sawMissed = sawMissed || (h.Status == plexus.HealthUnavailable && h.Detail == "heartbeats missed")
	}
	th.rec.mu.Unlock()
	if !sawMissed {
		t.Error("no unavailable/heartbeats missed health was pushed")
	}
	if st := th.status(t, "mute"); st.Restarts != 1 || !strings.Contains(st.LastExit, "heartbeats missed") {
		t.Errorf("status = %+v", st)
	}
}

// TestHubCrash: a provider that crashes during a call fails that call with
// source_unavailable, is journaled with its exit status and relaunched;
// with restart "never" it stays down, and a clean exit stays down under
// on-failure.
func TestHubCrash(t *testing.T) {
	t.Run("Restarted", func(t *testing.T) {
		th := startHub(t, nil)
		cfg, out := testProvider(t, "good", nil)
		th.add(t, "crashy", cfg)
		crash := th.entry(t, "crashy", "crash")
		echo := th.entry(t, "crashy", "echo")
		th.waitState(t, "crashy", plexus.ProviderConnected)
		r := dispatch(th, crash, nil)
		if r.OK || r.Error.Code != plexus.CodeSourceUnavailable {
			t.Fatalf("the crashing call: %+v, want source_unavailable", r)
		}
		exited := th.rec.waitNote(t, "provider.exited", nil)
		if exited.Payload["exit"] != "exit status 3" {
			t.Errorf("provider.exited = %+v", exited)
		}
		th.rec.waitNote(t, "provider.restarting", nil)
		waitUntil(t, 10*time.Second, "the relaunch to serve", func() bool { return dispatch(th, echo, nil).OK })
		st := th.status(t, "crashy")
		if st.Restarts != 1 || st.LastExit != "exit status 3" {
			t.Errorf("status = %+v", st)
		}
		n := 0
		for _, o := range observed(t, out) {
			if o.Event == "welcome" {
				n++
			}
		}
		if n != 2 {
			t.Errorf("%d sessions, want 2", n)
		}
	})
	policies := []struct {
		name, restart string
		env           map[string]string
		crash         bool
		wantExit      string
	}{
		{"Never", plexus.RestartNever, nil, true, "exit status 3"},
		{"OnFailureCleanExit", plexus.RestartOnFailure, map[string]string{"IPC_TEST_EXIT_AFTER_REGISTER": "0"}, false, "exit status 0"},
	}
	for _, tt := range policies {
		t.Run(tt.name, func(t *testing.T) {
			th := startHub(t, nil)
			cfg, _ := testProvider(t, "good", tt.env)
			cfg.Restart = tt.restart
			th.add(t, "down", cfg)
			if tt.crash {
				dispatch(th, th.entry(t, "down", "crash"), nil)
			}
			st := th.waitState(t, "down", plexus.ProviderExited)
			if st.LastExit != tt.wantExit || st.Restarts != 0 {
				t.Errorf("status = %+v, want last exit %q and no restart", st, tt.wantExit)
			}
			if rows := th.rec.rows("provider.restarting"); len(rows) != 0 {
				t.Errorf("restarting rows: %+v", rows)
			}
			if h := th.rec.lastHealth("down"); h.Status != plexus.HealthUnavailable || !strings.Contains(h.Detail, tt.wantExit) {
				t.Errorf("health = %+v", h)
			}
		})
	}
	t.Run("CannotStart", func(t *testing.T) {
		th := startHub(t, nil)
		th.add(t, "missing", plexus.ProviderConfig{Command: "plexus-no-such-provider-binary", Restart: plexus.RestartNever})
		st := th.waitState(t, "missing", plexus.ProviderExited)
		if !strings.Contains(st.LastExit, "cannot start") {
			t.Errorf("status = %+v", st)
		}
		th.rec.waitNote(t, "provider.start_failed", nil)
	})
}

// TestHubCancelReachesProvider: a caller that goes away mid-stream gets
// its answer at once, and the provider receives core.tool.cancel for that
// call and stops.
func TestHubCancelReachesProvider(t *testing.T) {
	th := startHub(t, nil)
	cfg, out := testProvider(t, "good", nil)
	th.add(t, "c", cfg)
	e := th.entry(t, "c", "count")
	th.waitState(t, "c", plexus.ProviderConnected)
	ctx, cancel := context.WithCancel(context.Background())
	got := make(chan plexus.InvokeProgress, 10)
	done := make(chan plexus.TransportResult, 1)
	go func() {
		done <- th.Dispatch(ctx, e, map[string]any{"n": 1000.0, "interval_ms": 20.0}, plexus.DispatchContext{Progress: func(p plexus.InvokeProgress) {
			select {
			case got <- p:
			default:
			}
		}})
	}()
	<-got // streaming has started
	cancel()
	select {
	case r := <-done:
		if r.OK || r.Error.Code != plexus.CodeTransportError {
			t.Errorf("result = %+v", r)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the canceled call did not return")
	}
	call := waitObserved(t, out, "call", nil)
	if c := waitObserved(t, out, "cancel", nil); c.CallID != call.CallID || c.Reason != "caller_gone" {
		t.Errorf("cancel = %+v, want the call %s", c, call.CallID)
	}
	waitUntil(t, 5*time.Second, "no call in flight", func() bool { return th.status(t, "c").Inflight == 0 })
}

// TestHubOutputRedacted: what a provider writes to stderr reaches the
// debug log bounded and with its session token redacted.
func TestHubOutputRedacted(t *testing.T) {
	th := startHub(t, nil)
	dir := t.TempDir()
	script := filepath.Join(dir, "leak.sh")
	if err := os.WriteFile(script, []byte("#!/bin/sh\necho \"my token is $PLEXUS_SESSION_TOKEN\" >&2\necho \"$PLEXUS_SESSION_TOKEN\" > "+filepath.Join(dir, "tok")+"\nexit 1\n"), 0o700); err != nil {
		t.Fatal(err)
	}
	th.add(t, "leak", plexus.ProviderConfig{Command: script, Restart: plexus.RestartNever})
	th.waitState(t, "leak", plexus.ProviderExited)
	tok, err := os.ReadFile(filepath.Join(dir, "tok"))
	if err != nil || len(strings.TrimSpace(string(tok))) < 40 {
		t.Fatalf("token file: %q %v", tok, err)
	}
	logs := th.logs.String()
	if strings.Contains(logs, strings.TrimSpace(string(tok))) {
		t.Error("the session token is in the log")
	}
	if !strings.Contains(logs, "my token is [redacted]") {
		t.Errorf("the provider's stderr line is not in the log:\n%s", logs)
	}
}

// exampleProvider is one of the examples in examples/ipc, as a provider
// config.
type exampleProvider struct {
	name string
	cfg  func(t *testing.T) plexus.ProviderConfig
}

var exampleProviders = []exampleProvider{
	{"Go", func(t *testing.T) plexus.ProviderConfig {
		return plexus.ProviderConfig{Command: buildGoProvider(t)}
	}},
	{"Python", func(t *testing.T) plexus.ProviderConfig {
		py, err := exec.LookPath("python3")
		if err != nil {
			t.Skip("python3 is not installed")
		}
		script, err := filepath.Abs(filepath.Join("..", "..", "examples", "ipc", "pyprovider", "provider.py"))
		if err != nil {
			t.Fatal(err)
		}
		return plexus.ProviderConfig{Command: py, Args: []string{script}}
	}},
}

// TestHubExamples runs the example providers (examples/ipc) as real
// processes: their tools become entries with the right verbs, a streamed
// count arrives chunk by chunk in order, the side-effecting tool writes its
// file, a canceled count stops, and 256 concurrent calls all succeed.
func TestHubExamples(t *testing.T) {
	for _, ex := range exampleProviders {
		t.Run(ex.name, func(t *testing.T) {
			if testing.Short() {
				t.Skip("runs the example providers")
			}
			cfg := ex.cfg(t)
			notes := t.TempDir()
			cfg.Env = map[string]string{"NOTES_DIR": notes}
			th := startHub(t, nil)
			th.add(t, "demo", cfg)
			count := th.entry(t, "demo", "count")
			note := th.entry(t, "demo", "note.append")
			echo := th.entry(t, "demo", "echo")
			if diff := cmp.Diff([]plexus.Verb{plexus.VerbWrite}, note.Grants); diff != "" {
				t.Errorf("note.append verbs (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff([]plexus.Verb{plexus.VerbRead}, count.Grants); diff != "" {
				t.Errorf("count verbs (-want +got):\n%s", diff)
			}
			waitUntil(t, 10*time.Second, "the provider to serve", func() bool { return dispatch(th, echo, map[string]any{"a": 1.0}).OK })

			var mu sync.Mutex
			var chunks []plexus.InvokeProgress
			r := th.Dispatch(context.Background(), count, map[string]any{"n": 5.0, "interval_ms": 10.0}, plexus.DispatchContext{Progress: func(p plexus.InvokeProgress) {
				mu.Lock()
				chunks = append(chunks, p)
				mu.Unlock()
			}})
			if !r.OK || !cmp.Equal(r.Data, map[string]any{"count": 5.0}) {
				t.Fatalf("count: %+v", r)
			}
			mu.Lock()
			var want []plexus.InvokeProgress
			for i := 1; i <= 5; i++ {
				want = append(want, plexus.InvokeProgress{Channel: "stdout", Data: ipc.StreamData{Text: fmt.Sprintf("line %d", i)}, Done: i == 5})
			}
			if diff := cmp.Diff(want, chunks); diff != "" {
				t.Errorf("chunks (-want +got):\n%s", diff)
			}
			mu.Unlock()

			if r := dispatch(th, note, map[string]any{"text": "buy milk"}); !r.OK {
				t.Fatalf("note.append: %+v", r)
			}
			if b, _ := os.ReadFile(filepath.Join(notes, "notes.md")); string(b) != "buy milk\n" {
				t.Errorf("notes.md = %q", b)
			}

			// Cancel mid-stream: the call returns at once and the provider's
			// late "canceled" result is not a duplicate.
			ctx, cancel := context.WithCancel(context.Background())
			started := make(chan struct{}, 1)
			done := make(chan plexus.TransportResult, 1)
			go func() {
				done <- th.Dispatch(ctx, count, map[string]any{"n": 1000.0, "interval_ms": 20.0}, plexus.DispatchContext{Progress: func(plexus.InvokeProgress) {
					select {
					case started <- struct{}{}:
					default:
					}
				}})
			}()
			<-started
			cancel()
			if r := <-done; r.OK || r.Error.Code != plexus.CodeTransportError {
				t.Errorf("canceled count: %+v", r)
			}
			th.rec.waitNote(t, "ipc.call_canceled", nil)

			// 256 callers at once, the connection's whole budget.
			var wg sync.WaitGroup
			fails := make(chan plexus.TransportResult, ipc.DefaultMaxInflight)
			for i := range ipc.DefaultMaxInflight {
				wg.Add(1)
				go func() {
					defer wg.Done()
					r := dispatch(th, echo, map[string]any{"i": float64(i)})
					if !r.OK || !cmp.Equal(r.Data, map[string]any{"echo": map[string]any{"i": float64(i)}}) {
						fails <- r
					}
				}()
			}
			wg.Wait()
			close(fails)
			for r := range fails {
				t.Errorf("concurrent call: %+v", r)
			}
			if rows := th.rec.rows("ipc.result_duplicate"); len(rows) != 0 {
				t.Errorf("duplicates journaled: %+v", rows)
			}
			th.stop(t)
			if rows := th.rec.rows("provider.exited"); len(rows) != 1 || rows[0].Payload["stopped_for"] != "shutdown" {
				t.Errorf("provider.exited = %+v", rows)
			}
		})
	}
}
