package auth

import (
	"errors"
	"fmt"
	"math"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/plexus-gw/plexus"
	"github.com/plexus-gw/plexus/internal/plexustest"
)

func TestRateLimiterSet(t *testing.T) {
	clk := plexustest.NewClock(t0)
	rl, err := NewRateLimiter(1, 2, clk.Now)
	if err != nil {
		t.Fatal(err)
	}
	take := func(agent string, n int) (allowed int) {
		t.Helper()
		for range n {
			if rl.Allow(agent) {
				allowed++
			}
		}
		return allowed
	}
	t.Run("OverrideAndOff", func(t *testing.T) {
		err := rl.Set(plexus.RateLimit{CallsPerSecond: 1, Burst: 2}, map[string]plexus.RateLimit{
			"fast": {CallsPerSecond: 10}, "free": {}})
		if err != nil {
			t.Fatal(err)
		}
		if got := take("slow", 10); got != 2 {
			t.Errorf("default agent: %d of 10 allowed, want the burst of 2", got)
		}
		if got := take("fast", 100); got != 40 {
			t.Errorf("override of 10/s: %d of 100 allowed, want its derived burst of 40", got)
		}
		if got := take("free", 10_000); got != 10_000 {
			t.Errorf("agent with its limit off: %d of 10000 allowed", got)
		}
	})
	t.Run("TurnOnWhileRunning", func(t *testing.T) {
		if err := rl.Set(plexus.RateLimit{CallsPerSecond: 1, Burst: 2}, map[string]plexus.RateLimit{"free": {CallsPerSecond: 1, Burst: 3}}); err != nil {
			t.Fatal(err)
		}
		if got := take("free", 10); got != 3 {
			t.Errorf("after turning the limit on: %d of 10 allowed, want the burst of 3", got)
		}
		if got := take("slow", 1); got != 0 {
			t.Errorf("an agent whose limit did not change got a fresh burst (%d allowed)", got)
		}
	})
	t.Run("ChangedLimitStartsFull", func(t *testing.T) {
		if err := rl.Set(plexus.RateLimit{CallsPerSecond: 1, Burst: 1}, nil); err != nil {
			t.Fatal(err)
		}
		if got := take("slow", 10); got != 1 {
			t.Errorf("after changing the default to burst 1: %d of 10 allowed, want 1", got)
		}
	})
	t.Run("DefaultOff", func(t *testing.T) {
		if err := rl.Set(plexus.RateLimit{}, map[string]plexus.RateLimit{"capped": {CallsPerSecond: 1, Burst: 1}}); err != nil {
			t.Fatal(err)
		}
		if got := take("anyone", 1000); got != 1000 {
			t.Errorf("default off: %d of 1000 allowed", got)
		}
		if got := take("capped", 5); got != 1 {
			t.Errorf("override on while the default is off: %d of 5 allowed, want 1", got)
		}
		def, agents := rl.Limits()
		want := map[string]plexus.RateLimit{"capped": {CallsPerSecond: 1, Burst: 1}}
		if !def.Off() || !cmp.Equal(agents, want) {
			t.Errorf("Limits() = %+v, %+v; want off and %+v", def, agents, want)
		}
	})
}

func TestRateLimiterSetInvalid(t *testing.T) {
	rl, err := NewRateLimiter(7, 9, nil)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name    string
		def     plexus.RateLimit
		agents  map[string]plexus.RateLimit
		setting string
	}{
		{"NegativeRate", plexus.RateLimit{CallsPerSecond: -1}, nil, "callsPerSecond of the default"},
		{"NaNRate", plexus.RateLimit{CallsPerSecond: math.NaN()}, nil, "callsPerSecond of the default"},
		{"InfiniteRate", plexus.RateLimit{CallsPerSecond: math.Inf(1)}, nil, "callsPerSecond of the default"},
		{"NegativeBurst", plexus.RateLimit{CallsPerSecond: 1, Burst: -2}, nil, "burst of the default"},
		{"BadOverride", plexus.RateLimit{CallsPerSecond: 1}, map[string]plexus.RateLimit{"ok": {CallsPerSecond: 2}, "bad": {CallsPerSecond: -5}}, `callsPerSecond of agent "bad"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := rl.Set(tt.def, tt.agents)
			var le *LimitError
			if !errors.As(err, &le) || le.Setting != tt.setting {
				t.Fatalf("Set = %v, want a *LimitError for %s", err, tt.setting)
			}
			def, agents := rl.Limits()
			if def != (plexus.RateLimit{CallsPerSecond: 7, Burst: 9}) || len(agents) != 0 {
				t.Errorf("after a refused Set, limits are %+v %+v; want the old 7/s burst 9", def, agents)
			}
		})
	}
}

func TestThrottleSet(t *testing.T) {
	clk := plexustest.NewClock(t0)
	th := NewThrottle(clk.Now)
	t.Run("Off", func(t *testing.T) {
		if err := th.Set(plexus.CredentialThrottle{}); err != nil {
			t.Fatal(err)
		}
		for range 3 * DefaultMaxFailures {
			th.Fail("k")
		}
		if ok, _ := th.Allow("k"); !ok {
			t.Error("a key was blocked with the throttle off")
		}
	})
	t.Run("OnAgain", func(t *testing.T) {
		if err := th.Set(plexus.CredentialThrottle{MaxFailures: 1}); err != nil {
			t.Fatal(err)
		}
		th.Fail("k")
		if ok, retry := th.Allow("k"); ok || retry != DefaultBaseBackoff {
			t.Errorf("Allow = (%v, %v), want blocked for the default %v", ok, retry, DefaultBaseBackoff)
		}
		want := plexus.CredentialThrottle{MaxFailures: 1, WindowMs: 900_000, BackoffMs: 1000, MaxBackoffMs: 60_000}
		if got := th.Settings(); got != want {
			t.Errorf("Settings() = %+v, want the defaults filled in: %+v", got, want)
		}
	})
	t.Run("BackoffAboveDefaultMax", func(t *testing.T) {
		if err := th.Set(plexus.CredentialThrottle{MaxFailures: 3, BackoffMs: 120_000}); err != nil {
			t.Fatal(err)
		}
		if got := th.Settings().MaxBackoffMs; got != 120_000 {
			t.Errorf("maxBackoffMs = %d, want raised to backoffMs", got)
		}
	})
	invalid := []struct {
		name    string
		set     plexus.CredentialThrottle
		setting string
	}{
		{"NegativeFailures", plexus.CredentialThrottle{MaxFailures: -1}, "failedCredentials.maxFailures"},
		{"NegativeWindow", plexus.CredentialThrottle{MaxFailures: 5, WindowMs: -1}, "failedCredentials.windowMs"},
		{"NegativeBackoff", plexus.CredentialThrottle{MaxFailures: 5, BackoffMs: -1}, "failedCredentials.backoffMs"},
		{"MaxBelowBase", plexus.CredentialThrottle{MaxFailures: 5, BackoffMs: 5000, MaxBackoffMs: 1000}, "failedCredentials.maxBackoffMs"},
		// Above 30 days the milliseconds overflowed a time.Duration and the
		// throttle silently let every guess through.
		{"HugeMaxBackoff", plexus.CredentialThrottle{MaxFailures: 3, MaxBackoffMs: math.MaxInt64}, "failedCredentials.maxBackoffMs"},
		{"HugeWindow", plexus.CredentialThrottle{MaxFailures: 3, WindowMs: 10_000_000_000_000}, "failedCredentials.windowMs"},
		{"HugeBackoff", plexus.CredentialThrottle{MaxFailures: 3, BackoffMs: 10_000_000_000_000, MaxBackoffMs: 10_000_000_000_000}, "failedCredentials.backoffMs"},
		{"JustAboveCeiling", plexus.CredentialThrottle{MaxFailures: 3, WindowMs: plexus.MaxThrottleMs + 1}, "failedCredentials.windowMs"},
	}
	for _, tt := range invalid {
		t.Run(tt.name, func(t *testing.T) {
			before := th.Settings()
			err := th.Set(tt.set)
			var le *LimitError
			if !errors.As(err, &le) || le.Setting != tt.setting {
				t.Fatalf("Set = %v, want a *LimitError for %s", err, tt.setting)
			}
			if got := th.Settings(); got != before {
				t.Errorf("a refused Set changed the settings to %+v", got)
			}
			if err := CheckLimits(plexus.Limits{FailedCredentials: tt.set}); !errors.As(err, &le) || le.Setting != tt.setting {
				t.Errorf("CheckLimits = %v, want a *LimitError for %s", err, tt.setting)
			}
		})
	}
}

// The ceilings themselves are accepted and still throttle: with every
// duration at 30 days, guesses 1 ms apart are refused from the
// maxFailures-th on, the doubling capped without overflowing.
func TestThrottleAtCeiling(t *testing.T) {
	clk := plexustest.NewClock(t0)
	th := NewThrottle(clk.Now)
	top := plexus.MaxThrottleMs
	for _, c := range []plexus.CredentialThrottle{
		{MaxFailures: 3, MaxBackoffMs: top},
		{MaxFailures: 3, WindowMs: top},
		{MaxFailures: 3, BackoffMs: top, MaxBackoffMs: top},
		{MaxFailures: 3, BackoffMs: 1, MaxBackoffMs: top},
	} {
		if err := th.Set(c); err != nil {
			t.Fatalf("Set(%+v) = %v", c, err)
		}
		key := fmt.Sprint(c)
		refused := 0
		for range 100 {
			clk.Advance(time.Millisecond)
			if ok, _ := th.Allow(key); !ok {
				refused++
				continue
			}
			th.Fail(key)
		}
		if refused == 0 {
			t.Errorf("%+v: none of 100 wrong guesses refused", c)
		}
		if d := th.backoff(1 << 20); d != ms(th.Settings().MaxBackoffMs) {
			t.Errorf("%+v: backoff after 2^20 failures = %v, want the cap", c, d)
		}
	}
}
