package registry_test

import (
	"context"
	"errors"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/plexus-gw/plexus"
	"github.com/plexus-gw/plexus/internal/plexustest"
	"github.com/plexus-gw/plexus/registry"
)

func newClock() *plexustest.Clock {
	return plexustest.NewClock(time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC))
}

// statusLog records OnSourceStatus calls.
type statusLog struct {
	mu    sync.Mutex
	calls []string
}

func (l *statusLog) record(source string, h plexus.Health) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.calls = append(l.calls, source+":"+string(h.Status))
}

func (l *statusLog) get() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]string(nil), l.calls...)
}

// waitFor polls cond; the registry refreshes in the background, so a test
// can only observe the outcome.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

// startRun runs r.Run until the test ends and fails the test if Run does not
// return once cancelled.
func startRun(t *testing.T, r *registry.Registry) (stop func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- r.Run(ctx) }()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			select {
			case err := <-done:
				if err != nil {
					t.Errorf("Run returned %v, want nil", err)
				}
			case <-time.After(5 * time.Second):
				t.Fatal("Run did not return after cancel")
			}
		})
	}
	t.Cleanup(stop)
	return stop
}

func TestHealthTTL(t *testing.T) {
	ctx := context.Background()
	clk := newClock()
	var status statusLog
	r := registry.New(registry.Options{HealthTTL: 5 * time.Second, Clock: clk.Now, OnSourceStatus: status.record})
	src := newSource("s", plexus.ProvenanceManaged, capability("s", "s.a", read...), capability("s", "s.b", read...))
	if _, err := r.Add(ctx, src); err != nil {
		t.Fatal(err)
	}
	start := clk.Now()

	es := r.Entries()
	for _, e := range es {
		if e.Health == nil || e.Health.Status != plexus.HealthOK || !e.Health.CheckedAt.Equal(start) {
			t.Fatalf("%s: health %+v, want ok checked at %v", e.ID, e.Health, start)
		}
	}
	if got := src.probeCount(); got != 1 {
		t.Errorf("probes after Add = %d, want 1", got)
	}

	startRun(t, r)
	src.setHealth(plexus.Health{Status: plexus.HealthUnavailable, Detail: "down"})

	t.Run("FreshValueIsCached", func(t *testing.T) {
		clk.Advance(4 * time.Second)
		if h := r.SourceHealth("s"); h.Status != plexus.HealthOK {
			t.Errorf("within TTL: status %q, want cached ok", h.Status)
		}
		time.Sleep(10 * time.Millisecond)
		if got := src.probeCount(); got != 1 {
			t.Errorf("probes within TTL = %d, want 1", got)
		}
	})

	t.Run("StaleWhileRevalidate", func(t *testing.T) {
		clk.Advance(time.Second)
		// The first read after expiry answers at once with the stale value.
		if e, _ := r.Entry("s.a"); e.Health.Status != plexus.HealthOK {
			t.Errorf("stale read: status %q, want the stale ok", e.Health.Status)
		}
		waitFor(t, "the background probe", func() bool { return r.SourceHealth("s").Status == plexus.HealthUnavailable })
		e, _ := r.Entry("s.b")
		if e.Health.Detail != "down" || !e.Health.CheckedAt.Equal(clk.Now()) {
			t.Errorf("refreshed health = %+v, want down at %v", e.Health, clk.Now())
		}
	})

	t.Run("StatusFiresOnChangeOnly", func(t *testing.T) {
		clk.Advance(5 * time.Second)
		r.Entries()
		waitFor(t, "a third probe", func() bool { return r.SourceHealth("s").CheckedAt.Equal(clk.Now()) })
		src.setHealth(plexus.Health{Status: plexus.HealthOK})
		clk.Advance(5 * time.Second)
		r.Entries()
		waitFor(t, "recovery", func() bool { return r.SourceHealth("s").Status == plexus.HealthOK })
		if diff := cmp.Diff([]string{"s:unavailable", "s:ok"}, status.get()); diff != "" {
			t.Errorf("OnSourceStatus calls (-want +got):\n%s", diff)
		}
	})
}

func TestHealthOnAdd(t *testing.T) {
	t.Run("UnhealthySourceReportedOnce", func(t *testing.T) {
		var status statusLog
		r := registry.New(registry.Options{OnSourceStatus: status.record})
		src := newSource("s", plexus.ProvenanceManaged, capability("s", "s.a", read...))
		src.health = plexus.Health{Status: plexus.HealthDegraded}
		ok := newSource("t", plexus.ProvenanceManaged)
		for _, s := range []*testSource{src, ok} {
			if _, err := r.Add(context.Background(), s); err != nil {
				t.Fatal(err)
			}
		}
		if diff := cmp.Diff([]string{"s:degraded"}, status.get()); diff != "" {
			t.Errorf("OnSourceStatus calls (-want +got):\n%s", diff)
		}
	})

	t.Run("SlowProbeTimesOut", func(t *testing.T) {
		r := registry.New(registry.Options{HealthTTL: 20 * time.Millisecond})
		src := newSource("s", plexus.ProvenanceManaged, capability("s", "s.a", read...))
		src.health = plexus.Health{}
		src.block = true
		if _, err := r.Add(context.Background(), src); err != nil {
			t.Fatal(err)
		}
		if h := r.SourceHealth("s"); h.Status != plexus.HealthUnavailable || h.CheckedAt == nil {
			t.Errorf("health of a probe that never answered = %+v, want unavailable", h)
		}
	})

	t.Run("UnknownSource", func(t *testing.T) {
		r := registry.New(registry.Options{})
		if h := r.SourceHealth("nope"); h.Status != plexus.HealthUnknown {
			t.Errorf("SourceHealth(unknown) = %+v", h)
		}
	})
}

func TestRun(t *testing.T) {
	t.Run("ReadersNeverWaitAndCancelStops", func(t *testing.T) {
		base := runtime.NumGoroutine()
		clk := newClock()
		var status statusLog
		r := registry.New(registry.Options{HealthTTL: time.Hour, Clock: clk.Now, OnSourceStatus: status.record})
		src := newSource("s", plexus.ProvenanceManaged, capability("s", "s.a", read...))
		if _, err := r.Add(context.Background(), src); err != nil {
			t.Fatal(err)
		}
		src.mu.Lock()
		src.block = true // every later probe hangs until its context ends
		src.mu.Unlock()
		stop := startRun(t, r)
		clk.Advance(time.Hour)
		r.Entries()
		waitFor(t, "a hanging probe", func() bool { return src.probeCount() == 2 })
		for range 3 {
			if e, _ := r.Entry("s.a"); e.Health.Status != plexus.HealthOK {
				t.Errorf("read during a hanging probe: %q, want the stale ok", e.Health.Status)
			}
		}
		stop()
		if got := src.probeCount(); got != 2 {
			t.Errorf("probes = %d, want 2 (no second probe while one is in flight)", got)
		}
		if h := r.SourceHealth("s"); h.Status != plexus.HealthOK || len(status.get()) != 0 {
			t.Errorf("a probe cut short by shutdown was recorded: %+v, %v", h, status.get())
		}
		waitFor(t, "goroutines to exit", func() bool { return runtime.NumGoroutine() <= base })
	})

	t.Run("ErrRunning", func(t *testing.T) {
		r := registry.New(registry.Options{})
		// Until the long Run has claimed the registry, a probing Run may
		// claim it first (and, its context cancelled, return at once); the
		// long one is then refused and simply tries again.
		ctx, stop := context.WithCancel(context.Background())
		first := make(chan error, 1)
		go func() {
			for {
				if err := r.Run(ctx); !errors.Is(err, registry.ErrRunning) {
					first <- err
					return
				}
			}
		}()
		done, cancel := context.WithCancel(context.Background())
		cancel()
		waitFor(t, "Run to start", func() bool {
			return errors.Is(r.Run(done), registry.ErrRunning)
		})
		stop()
		if err := <-first; err != nil {
			t.Errorf("Run returned %v, want nil", err)
		}
	})
}

func TestReportHealth(t *testing.T) {
	clk := newClock()
	var status statusLog
	r := registry.New(registry.Options{HealthTTL: time.Hour, Clock: clk.Now, OnSourceStatus: status.record})
	src := newSource("s", plexus.ProvenanceManaged, capability("s", "s.a", read...))
	if _, err := r.Add(context.Background(), src); err != nil {
		t.Fatal(err)
	}
	clk.Advance(time.Second)
	r.ReportHealth("s", plexus.Health{Status: plexus.HealthUnavailable, Detail: "missed 3 heartbeats"})
	if e, _ := r.Entry("s.a"); e.Health.Status != plexus.HealthUnavailable || e.Health.Detail != "missed 3 heartbeats" || !e.Health.CheckedAt.Equal(clk.Now()) {
		t.Fatalf("entry health after a report = %+v, want it at once, stamped now", e.Health)
	}
	r.ReportHealth("s", plexus.Health{Status: plexus.HealthUnavailable, Detail: "still"})
	r.ReportHealth("s", plexus.Health{Status: plexus.HealthOK})
	r.ReportHealth("gone", plexus.Health{Status: plexus.HealthUnavailable}) // ignored
	if diff := cmp.Diff([]string{"s:unavailable", "s:ok"}, status.get()); diff != "" {
		t.Errorf("OnSourceStatus calls (-want +got):\n%s", diff)
	}
	if got := src.probeCount(); got != 1 {
		t.Errorf("probes = %d, want only Add's: a report is not a probe", got)
	}
}
