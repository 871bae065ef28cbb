package auth

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/plexus-gw/plexus"
	"github.com/plexus-gw/plexus/internal/plexustest"
)

func TestThrottle(t *testing.T) {
	clk := plexustest.NewClock(t0)
	th := NewThrottle(clk.Now)
	const ip = "127.0.0.1"

	allow := func(wantOK bool, wantRetry time.Duration) {
		t.Helper()
		ok, retry := th.Allow(ip)
		if ok != wantOK || retry != wantRetry {
			t.Fatalf("Allow = (%v, %v), want (%v, %v)", ok, retry, wantOK, wantRetry)
		}
	}

	t.Run("BelowThreshold", func(t *testing.T) {
		for range DefaultMaxFailures - 1 {
			th.Fail(ip)
			allow(true, 0)
		}
	})
	t.Run("BlocksAndBacksOff", func(t *testing.T) {
		th.Fail(ip) // the 5th
		allow(false, time.Second)
		clk.Advance(400 * time.Millisecond)
		allow(false, 600*time.Millisecond)
		if ok, _ := th.Allow("10.0.0.2"); !ok {
			t.Fatal("another key was blocked")
		}
		clk.Advance(600 * time.Millisecond)
		allow(true, 0)
		for _, want := range []time.Duration{2, 4, 8, 16, 32, 60, 60} {
			th.Fail(ip)
			allow(false, want*time.Second)
			clk.Advance(want * time.Second)
			allow(true, 0)
		}
	})
	t.Run("SucceedClears", func(t *testing.T) {
		th.Succeed(ip)
		th.Fail(ip)
		allow(true, 0)
	})
	t.Run("QuietWindowResets", func(t *testing.T) {
		th.Succeed(ip)
		for range DefaultMaxFailures - 1 {
			th.Fail(ip)
		}
		clk.Advance(DefaultFailureWindow)
		th.Fail(ip)
		allow(true, 0)
	})
}

func TestThrottleSettings(t *testing.T) {
	clk := plexustest.NewClock(t0)
	th := NewThrottle(clk.Now)
	if err := th.Set(plexus.CredentialThrottle{MaxFailures: 2, BackoffMs: 10, MaxBackoffMs: 25}); err != nil {
		t.Fatal(err)
	}
	th.Fail("k")
	th.Fail("k")
	if ok, retry := th.Allow("k"); ok || retry != 10*time.Millisecond {
		t.Fatalf("Allow = (%v, %v), want (false, 10ms)", ok, retry)
	}
	clk.Advance(10 * time.Millisecond)
	th.Fail("k")
	clk.Advance(20 * time.Millisecond)
	th.Fail("k")
	if _, retry := th.Allow("k"); retry != 25*time.Millisecond {
		t.Fatalf("retry = %v, want capped 25ms", retry)
	}
}

func TestThrottleBoundedMemory(t *testing.T) {
	clk := plexustest.NewClock(t0)
	th := NewThrottle(clk.Now)
	th.MaxKeys = 10
	for i := range 10 {
		th.Fail(fmt.Sprint("idle", i))
	}
	clk.Advance(DefaultFailureWindow)
	blocked := "attacker"
	for range DefaultMaxFailures {
		th.Fail(blocked)
	}
	if len(th.keys) != 1 {
		t.Fatalf("after idle sweep %d keys, want 1", len(th.keys))
	}
	for i := range 100 {
		th.Fail(fmt.Sprint("busy", i))
		clk.Advance(time.Millisecond)
		if len(th.keys) > 10 {
			t.Fatalf("%d keys, want <= 10", len(th.keys))
		}
	}
}

// TestThrottleDistinctFlood: a flood of distinct failing keys (a guesser
// presenting a fresh value each time) stays within MaxKeys and cannot push
// out a blocked key to unblock it.
func TestThrottleDistinctFlood(t *testing.T) {
	clk := plexustest.NewClock(t0)
	th := NewThrottle(clk.Now)
	th.MaxKeys = 100
	for range DefaultMaxFailures {
		th.Fail("stale")
	}
	for i := range 10_000 {
		th.Fail(fmt.Sprint("guess", i))
		if len(th.keys) > th.MaxKeys {
			t.Fatalf("%d keys, want <= %d", len(th.keys), th.MaxKeys)
		}
	}
	if ok, _ := th.Allow("stale"); ok {
		t.Error("the flood unblocked a blocked key")
	}
	// Only when every key is blocked does the oldest go.
	for i := range 200 {
		for range DefaultMaxFailures {
			th.Fail(fmt.Sprint("blocked", i))
		}
		clk.Advance(time.Millisecond)
	}
	if len(th.keys) > th.MaxKeys {
		t.Fatalf("%d keys, want <= %d", len(th.keys), th.MaxKeys)
	}
	if ok, _ := th.Allow("blocked199"); ok {
		t.Error("the newest blocked key was dropped")
	}
}

func TestRateLimiter(t *testing.T) {
	if _, err := NewRateLimiter(0, 1, nil); err == nil {
		t.Error("NewRateLimiter(rate 0) succeeded")
	}
	if _, err := NewRateLimiter(1, 0, nil); err == nil {
		t.Error("NewRateLimiter(burst 0) succeeded")
	}
	clk := plexustest.NewClock(t0)
	rl, err := NewRateLimiter(2, 3, clk.Now)
	if err != nil {
		t.Fatal(err)
	}
	take := func(agent string, want bool) {
		t.Helper()
		if got := rl.Allow(agent); got != want {
			t.Fatalf("Allow(%q) = %v, want %v", agent, got, want)
		}
	}
	for range 3 {
		take("a", true)
	}
	take("a", false)
	take("b", true) // buckets are per agent
	clk.Advance(250 * time.Millisecond)
	take("a", false) // half a token
	clk.Advance(250 * time.Millisecond)
	take("a", true)
	take("a", false)
	clk.Advance(time.Hour) // refill caps at burst
	for range 3 {
		take("a", true)
	}
	take("a", false)
	clk.Advance(-time.Minute) // a clock stepping back grants nothing
	take("a", false)
}

func TestRateLimiterBoundedMemory(t *testing.T) {
	clk := plexustest.NewClock(t0)
	rl, _ := NewRateLimiter(1, 2, clk.Now)
	rl.MaxKeys = 5
	for i := range 50 {
		rl.Allow(fmt.Sprint("agent", i))
		rl.Allow(fmt.Sprint("agent", i))
		clk.Advance(10 * time.Millisecond)
		if len(rl.buckets) > 5 {
			t.Fatalf("%d buckets, want <= 5", len(rl.buckets))
		}
	}
}

func TestLimitsConcurrent(t *testing.T) {
	clk := plexustest.NewClock(t0)
	th := NewThrottle(clk.Now)
	th.MaxKeys = 16
	rl, _ := NewRateLimiter(1000, 10, clk.Now)
	rl.MaxKeys = 64 // room for every key: an evicted bucket would start full
	var allowed sync.Map
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			n := 0
			for i := range 500 {
				key := fmt.Sprint(i % 40)
				th.Fail(key)
				th.Allow(key)
				if i%7 == 0 {
					th.Succeed(key)
				}
				if rl.Allow("shared") {
					n++
				}
				rl.Allow(key)
			}
			allowed.Store(g, n)
		})
	}
	wg.Wait()
	total := 0
	allowed.Range(func(_, v any) bool { total += v.(int); return true })
	if total != 10 {
		t.Errorf("shared agent got %d calls with a frozen clock, want the burst of 10", total)
	}
}

// TestRefusedCounts: the throttle and the rate limiter count what they
// refused (for /metrics), and nothing they allowed.
func TestRefusedCounts(t *testing.T) {
	clk := plexustest.NewClock(t0)
	th := NewThrottle(clk.Now)
	for range DefaultMaxFailures {
		th.Fail("k")
	}
	th.Allow("other")
	th.Allow("k")
	th.Allow("k")
	if got := th.Refused(); got != 2 {
		t.Errorf("throttle refused = %d, want 2", got)
	}
	rl, err := NewRateLimiter(1, 2, clk.Now)
	if err != nil {
		t.Fatal(err)
	}
	for range 5 {
		rl.Allow("a")
	}
	if got := rl.Refused(); got != 3 {
		t.Errorf("rate limiter refused = %d, want 3", got)
	}
}
