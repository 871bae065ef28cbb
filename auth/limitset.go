package auth

import (
	"fmt"
	"math"
	"strconv"

	"github.com/plexus-gw/plexus"
)

// LimitError is a limit setting that cannot be applied: which setting, the
// value given, and why. Nothing is changed by a setting that fails.
type LimitError struct {
	Setting string // as auth-config.json names it, e.g. `rateLimit.agents."bench".burst`
	Value   any
	Reason  string
}

func (e *LimitError) Error() string {
	return fmt.Sprintf("%s is %v: %s", e.Setting, e.Value, e.Reason)
}

// maxBurst keeps a derived burst (4 × a huge rate) a sane integer.
const maxBurst = math.MaxInt32

// resolveRate checks one rate limit and fills in its burst; who names it in
// errors ("the default", `agent "bench"`).
func resolveRate(who string, r plexus.RateLimit) (plexus.RateLimit, error) {
	c := r.CallsPerSecond
	switch {
	case math.IsNaN(c) || math.IsInf(c, 0) || c < 0:
		return r, &LimitError{Setting: "callsPerSecond of " + who, Value: c, Reason: "must be a number of calls per second, 0 to turn the limit off"}
	case r.Burst < 0:
		return r, &LimitError{Setting: "burst of " + who, Value: r.Burst, Reason: "must be at least 1 call (absent or 0: 4 × the rate)"}
	case c == 0:
		return plexus.RateLimit{}, nil
	case r.Burst == 0:
		r.Burst = int(math.Ceil(min(c*DefaultBurstFactor, maxBurst)))
	}
	return r, nil
}

// resolveThrottle checks the failed-credential throttle's settings and fills
// in the defaults of the zero durations.
func resolveThrottle(c plexus.CredentialThrottle) (plexus.CredentialThrottle, error) {
	bad := func(setting string, v any, reason string) (plexus.CredentialThrottle, error) {
		return c, &LimitError{Setting: "failedCredentials." + setting, Value: v, Reason: reason}
	}
	if c.MaxFailures < 0 {
		return bad("maxFailures", c.MaxFailures, "must be a number of failures, 0 to turn the throttle off")
	}
	for _, d := range []struct {
		name, def string
		ms        int64
	}{{"windowMs", "15 minutes", c.WindowMs}, {"backoffMs", "1 second", c.BackoffMs}, {"maxBackoffMs", "60 seconds", c.MaxBackoffMs}} {
		if d.ms < 0 || d.ms > plexus.MaxThrottleMs {
			return bad(d.name, d.ms, fmt.Sprintf("must be a positive number of milliseconds up to %d (30 days); absent or 0: %s", plexus.MaxThrottleMs, d.def))
		}
	}
	d := DefaultCredentialThrottle()
	c.WindowMs = orDefault(c.WindowMs, d.WindowMs)
	c.BackoffMs = orDefault(c.BackoffMs, d.BackoffMs)
	c.MaxBackoffMs = orDefault(c.MaxBackoffMs, max(d.MaxBackoffMs, c.BackoffMs))
	if c.MaxBackoffMs < c.BackoffMs {
		return bad("maxBackoffMs", c.MaxBackoffMs, fmt.Sprintf("must not be below backoffMs (%d)", c.BackoffMs))
	}
	return c, nil
}

// CheckLimits reports the first setting of l that [RateLimiter.Set] or
// [Throttle.Set] would refuse, so that both can be applied or neither.
func CheckLimits(l plexus.Limits) error {
	if _, err := resolveRate("the default", l.Rate); err != nil {
		return err
	}
	for id, a := range l.Agents {
		if _, err := resolveRate("agent "+strconv.Quote(id), a); err != nil {
			return err
		}
	}
	_, err := resolveThrottle(l.FailedCredentials)
	return err
}
