package scaffold

import (
	"fmt"

	"github.com/plexus-gw/plexus"
)

// Rate-limit defaults, as auth-config.json documents them.
const (
	DefaultCallsPerSecond = 50
	DefaultMaxFailures    = 5
)

// RateLimitConfig is auth-config.json's "rateLimit": the calls per second
// and burst every agent may make, and per-agent overrides by agent id.
// Absent callsPerSecond is 50; 0 turns the limit off. Absent or 0 burst is
// 4 × the rate.
type RateLimitConfig struct {
	CallsPerSecond *float64                  `json:"callsPerSecond,omitempty"`
	Burst          int                       `json:"burst,omitempty"`
	Agents         map[string]AgentRateLimit `json:"agents,omitempty"`
}

// AgentRateLimit is one agent's override. Absent callsPerSecond is the
// default's; 0 turns the agent's limit off.
type AgentRateLimit struct {
	CallsPerSecond *float64 `json:"callsPerSecond,omitempty"`
	Burst          int      `json:"burst,omitempty"`
}

// ThrottleConfig is auth-config.json's "failedCredentials": after
// maxFailures failures of one credential value within windowMs, the value
// is refused with a back-off from backoffMs doubling to maxBackoffMs.
// Absent maxFailures is 5; 0 turns the throttle off. Absent or 0 durations
// take the defaults (15 minutes, 1 s, 60 s).
type ThrottleConfig struct {
	MaxFailures  *int  `json:"maxFailures,omitempty"`
	WindowMs     int64 `json:"windowMs,omitempty"`
	BackoffMs    int64 `json:"backoffMs,omitempty"`
	MaxBackoffMs int64 `json:"maxBackoffMs,omitempty"`
}

// Limits are the limits a's settings ask for. Bursts and durations left 0
// are filled in by whoever applies them (auth).
func (a AuthConfig) Limits() plexus.Limits {
	l := plexus.Limits{Rate: plexus.RateLimit{CallsPerSecond: DefaultCallsPerSecond},
		FailedCredentials: plexus.CredentialThrottle{MaxFailures: DefaultMaxFailures}}
	if r := a.RateLimit; r != nil {
		if r.CallsPerSecond != nil {
			l.Rate.CallsPerSecond = *r.CallsPerSecond
		}
		l.Rate.Burst = r.Burst
		for id, o := range r.Agents {
			if l.Agents == nil {
				l.Agents = make(map[string]plexus.RateLimit, len(r.Agents))
			}
			ov := plexus.RateLimit{CallsPerSecond: l.Rate.CallsPerSecond, Burst: o.Burst}
			if o.CallsPerSecond != nil {
				ov.CallsPerSecond = *o.CallsPerSecond
			} else if o.Burst == 0 {
				ov.Burst = l.Rate.Burst
			}
			l.Agents[id] = ov
		}
	}
	if f := a.FailedCredentials; f != nil {
		if f.MaxFailures != nil {
			l.FailedCredentials.MaxFailures = *f.MaxFailures
		}
		l.FailedCredentials.WindowMs, l.FailedCredentials.BackoffMs, l.FailedCredentials.MaxBackoffMs = f.WindowMs, f.BackoffMs, f.MaxBackoffMs
	}
	return l
}

// limits adds a problem for each limit setting out of range.
func (v *verifier) limits(path string, a AuthConfig) {
	bad := func(setting string, value any, fix string) {
		v.add(path, fmt.Sprintf("%s: %s is %v", FileAuthConfig, setting, value), fix)
	}
	const rateFix = "set it to a number of calls per second (0 turns the limit off), or remove it for the default (50)"
	const burstFix = "set it to at least 1 call, or remove it for 4 × the rate"
	if r := a.RateLimit; r != nil {
		if r.CallsPerSecond != nil && *r.CallsPerSecond < 0 {
			bad("rateLimit.callsPerSecond", *r.CallsPerSecond, rateFix)
		}
		if r.Burst < 0 {
			bad("rateLimit.burst", r.Burst, burstFix)
		}
		for id, o := range r.Agents {
			if o.CallsPerSecond != nil && *o.CallsPerSecond < 0 {
				bad(fmt.Sprintf("rateLimit.agents.%q.callsPerSecond", id), *o.CallsPerSecond, rateFix)
			}
			if o.Burst < 0 {
				bad(fmt.Sprintf("rateLimit.agents.%q.burst", id), o.Burst, burstFix)
			}
		}
	}
	f := a.FailedCredentials
	if f == nil {
		return
	}
	if f.MaxFailures != nil && *f.MaxFailures < 0 {
		bad("failedCredentials.maxFailures", *f.MaxFailures, "set it to a number of failures (0 turns the throttle off), or remove it for the default (5)")
	}
	for _, d := range []struct {
		name string
		ms   int64
	}{{"windowMs", f.WindowMs}, {"backoffMs", f.BackoffMs}, {"maxBackoffMs", f.MaxBackoffMs}} {
		if d.ms < 0 || d.ms > plexus.MaxThrottleMs {
			bad("failedCredentials."+d.name, d.ms, fmt.Sprintf("set it to a positive number of milliseconds up to %d (30 days), or remove it for the default", plexus.MaxThrottleMs))
		}
	}
	if f.MaxBackoffMs > 0 && f.MaxBackoffMs < f.BackoffMs {
		bad("failedCredentials.maxBackoffMs", f.MaxBackoffMs, fmt.Sprintf("set it to at least backoffMs (%d)", f.BackoffMs))
	}
}

// ReadAuthConfig reads and checks home's auth-config.json alone, for a
// daemon that applies its edits while running. A file that does not read
// or holds a bad value is a *LayoutError listing every problem.
func ReadAuthConfig(home string) (AuthConfig, error) {
	h := Layout(home)
	v := &verifier{home: home}
	var a AuthConfig
	if b, ok := v.file(h.AuthConfigFile, FileAuthConfig, false); ok {
		a = v.authConfig(h.AuthConfigFile, b)
	}
	return a, v.err()
}
