package plexus

// Limits are the call-rate limit and the failed-credential throttle in
// force, as auth-config.json sets them (defaults filled in). `plexus
// status` shows them; the gateway applies them without a restart.
type Limits struct {
	// Rate is every agent's limit unless Agents names it.
	Rate RateLimit `json:"rate"`
	// Agents are the owner's per-agent overrides, by agent id.
	Agents map[string]RateLimit `json:"agents,omitempty"`
	// FailedCredentials throttles a credential that keeps failing.
	FailedCredentials CredentialThrottle `json:"failedCredentials"`
	// Error is set when the last edit of auth-config.json could not be
	// applied: the limits above are still the ones read before it.
	Error string `json:"error,omitempty"`
}

// RateLimit is a token bucket: Burst calls at once and CallsPerSecond
// sustained. CallsPerSecond 0 turns the limit off.
type RateLimit struct {
	CallsPerSecond float64 `json:"callsPerSecond"`
	Burst          int     `json:"burst,omitempty"`
}

// Off reports whether the limit is turned off.
func (r RateLimit) Off() bool { return r.CallsPerSecond == 0 }

// CredentialThrottle slows a credential value that fails: from the
// MaxFailures-th failure within WindowMs of each other, each failure blocks
// the value for a back-off that doubles from BackoffMs up to MaxBackoffMs.
// MaxFailures 0 turns the throttle off.
type CredentialThrottle struct {
	MaxFailures  int   `json:"maxFailures"`
	WindowMs     int64 `json:"windowMs,omitempty"`
	BackoffMs    int64 `json:"backoffMs,omitempty"`
	MaxBackoffMs int64 `json:"maxBackoffMs,omitempty"`
}

// MaxThrottleMs is the ceiling of each of a CredentialThrottle's durations:
// 30 days. Above it the milliseconds overflow a time.Duration (or come close
// enough that a doubling does), which would turn the throttle off unseen.
const MaxThrottleMs int64 = 30 * 24 * 60 * 60 * 1000

// Off reports whether the throttle is turned off.
func (c CredentialThrottle) Off() bool { return c.MaxFailures == 0 }
