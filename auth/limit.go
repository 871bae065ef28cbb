package auth

import (
	"errors"
	"maps"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/plexus-gw/plexus"
)

// Throttle defaults.
const (
	DefaultMaxFailures   = 5
	DefaultFailureWindow = 15 * time.Minute
	DefaultBaseBackoff   = time.Second
	DefaultMaxBackoff    = time.Minute
	DefaultMaxKeys       = 4096
)

// Throttle slows repeated failures of credentials (PATs, enrollment codes,
// the connection-key) per key. Callers key it by the credential presented
// (a keyed hash of it), never by the caller's address: every local process
// is 127.0.0.1, so an address key lets one process's failures lock every
// other caller out, the owner included. Failures
// accumulate while they come less than the window apart; from the
// MaxFailures-th on, each failure blocks the key for a backoff that doubles
// from the base backoff up to the maximum. A success clears the key.
//
// Its settings start at the defaults and change with [Throttle.Set], which
// the owner's auth-config.json drives; MaxFailures 0 turns it off. Methods
// are safe for concurrent use. Memory is bounded by MaxKeys: when full, idle
// keys are dropped first, then unblocked ones, and only when every key is
// blocked the least recently failed one. So only a caller holding more than
// MaxKeys blocked keys at once can shorten a block, which costs nothing a
// valid key holds.
type Throttle struct {
	// MaxKeys must not change once the Throttle is in use; zero means
	// DefaultMaxKeys.
	MaxKeys int

	now func() time.Time

	mu   sync.Mutex // guards set and keys
	set  plexus.CredentialThrottle
	keys map[string]*throttleState
	// refused counts the attempts Allow refused, for /metrics.
	refused atomic.Uint64
}

type throttleState struct {
	failures     int
	lastFailure  time.Time
	blockedUntil time.Time
}

// NewThrottle returns a Throttle with default settings reading the clock
// now (nil means time.Now).
func NewThrottle(now func() time.Time) *Throttle {
	if now == nil {
		now = time.Now
	}
	return &Throttle{now: now, set: DefaultCredentialThrottle(), keys: make(map[string]*throttleState)}
}

// DefaultCredentialThrottle is the throttle's setting when the owner sets
// none: 5 failures within 15 minutes, then 1 s doubling to 60 s.
func DefaultCredentialThrottle() plexus.CredentialThrottle {
	return plexus.CredentialThrottle{MaxFailures: DefaultMaxFailures, WindowMs: DefaultFailureWindow.Milliseconds(),
		BackoffMs: DefaultBaseBackoff.Milliseconds(), MaxBackoffMs: DefaultMaxBackoff.Milliseconds()}
}

// Set replaces the throttle's settings; zero durations take the defaults.
// Invalid settings are refused with a *LimitError and change nothing.
// Failures counted so far stay counted; blocks already imposed run out.
func (t *Throttle) Set(c plexus.CredentialThrottle) error {
	c, err := resolveThrottle(c)
	if err != nil {
		return err
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	t.set = c
	return nil
}

// Settings returns the settings in force, defaults filled in.
func (t *Throttle) Settings() plexus.CredentialThrottle {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.set
}

// Allow reports whether key may attempt a credential now, and if not, how
// long until it may.
func (t *Throttle) Allow(key string) (ok bool, retryAfter time.Duration) {
	now := t.now()
	t.mu.Lock()
	defer t.mu.Unlock()
	st := t.keys[key]
	if t.set.Off() || st == nil || !now.Before(st.blockedUntil) {
		return true, 0
	}
	t.refused.Add(1)
	return false, st.blockedUntil.Sub(now)
}

// Refused counts the attempts Allow refused since the Throttle was made.
func (t *Throttle) Refused() uint64 { return t.refused.Load() }

// Fail records a failed attempt by key.
func (t *Throttle) Fail(key string) {
	now := t.now()
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.set.Off() {
		return
	}
	st := t.keys[key]
	if st == nil {
		if len(t.keys) >= t.maxKeys() {
			t.evict(now)
		}
		st = &throttleState{}
		t.keys[key] = st
	} else if now.Sub(st.lastFailure) >= t.window() {
		st.failures = 0
	}
	st.failures++
	st.lastFailure = now
	if over := st.failures - t.maxFailures(); over >= 0 {
		st.blockedUntil = now.Add(t.backoff(over))
	}
}

// Succeed clears key's failures.
func (t *Throttle) Succeed(key string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	delete(t.keys, key)
}

// backoff is BaseBackoff doubled n times, capped at MaxBackoff. It stops
// doubling at half the cap, so no setting can overflow it.
func (t *Throttle) backoff(n int) time.Duration {
	d, ceiling := t.base(), t.maxBackoff()
	for ; n > 0 && d < ceiling; n-- {
		if d > ceiling/2 {
			return ceiling
		}
		d *= 2
	}
	return min(d, ceiling)
}

// evict makes room for new keys; the caller holds t.mu. It drops idle keys,
// then unblocked ones until the map is three quarters full, and only when
// every key is blocked the least recently failed. Freeing a quarter at a
// time keeps a flood of distinct keys (a guesser sending a fresh value each
// time) at amortized O(1) per key, and such a flood cannot push a blocked
// key out while unblocked ones remain.
func (t *Throttle) evict(now time.Time) {
	for k, st := range t.keys {
		if now.Sub(st.lastFailure) >= t.window() && !now.Before(st.blockedUntil) {
			delete(t.keys, k)
		}
	}
	target := t.maxKeys() * 3 / 4
	for k, st := range t.keys {
		if len(t.keys) <= target {
			return
		}
		if !now.Before(st.blockedUntil) {
			delete(t.keys, k)
		}
	}
	for len(t.keys) >= t.maxKeys() {
		var (
			oldest   string
			oldestAt time.Time
			found    bool
		)
		for k, st := range t.keys {
			if !found || st.lastFailure.Before(oldestAt) {
				oldest, oldestAt, found = k, st.lastFailure, true
			}
		}
		delete(t.keys, oldest)
	}
}

// The settings' accessors; the caller holds t.mu. Set filled in every
// default, so they only convert.
func (t *Throttle) maxFailures() int          { return t.set.MaxFailures }
func (t *Throttle) window() time.Duration     { return ms(t.set.WindowMs) }
func (t *Throttle) base() time.Duration       { return ms(t.set.BackoffMs) }
func (t *Throttle) maxBackoff() time.Duration { return ms(t.set.MaxBackoffMs) }
func (t *Throttle) maxKeys() int              { return orDefault(t.MaxKeys, DefaultMaxKeys) }

func ms(n int64) time.Duration { return time.Duration(n) * time.Millisecond }

func orDefault[T int | int64 | time.Duration](v, def T) T {
	if v <= 0 {
		return def
	}
	return v
}

// Rate-limit defaults: what an agent may call when auth-config.json sets
// no limit.
const (
	DefaultCallsPerSecond = 50
	DefaultBurstFactor    = 4 // burst = 4 × the rate when none is set
)

// RateLimiter is a token bucket per agent: each agent may make Burst calls
// at once and CallsPerSecond calls per second sustained, by the default
// limit or its own override; a limit of 0 calls per second is off, and such
// an agent's calls take no lock. Buckets refill lazily on use, so no
// goroutine runs. Limits change with [RateLimiter.Set] while calls run: an
// agent whose limit changed starts again with a full burst, the others keep
// their buckets. Safe for concurrent
// use; memory is bounded by MaxKeys (zero means DefaultMaxKeys), dropping
// full (idle) buckets first, which loses nothing since a new bucket starts
// full. Only when every bucket is in use is the least recently used one
// dropped, which hands that agent a fresh burst: keep MaxKeys above the
// number of enrolled agents.
type RateLimiter struct {
	// MaxKeys must not change once the limiter is in use.
	MaxKeys int

	now func() time.Time
	// limits is read on every call without a lock; Set swaps it whole.
	limits atomic.Pointer[rateLimits]

	mu      sync.Mutex // guards buckets
	buckets map[string]*bucket
	// refused counts the calls Allow refused, for /metrics.
	refused atomic.Uint64
}

type rateLimits struct {
	def    plexus.RateLimit
	agents map[string]plexus.RateLimit
}

func (l *rateLimits) of(agentID string) plexus.RateLimit {
	if r, ok := l.agents[agentID]; ok {
		return r
	}
	return l.def
}

type bucket struct {
	tokens float64
	last   time.Time
}

// NewRateLimiter returns a limiter allowing every agent rate calls per
// second with bursts of burst, reading the clock now (nil means time.Now).
func NewRateLimiter(rate float64, burst int, now func() time.Time) (*RateLimiter, error) {
	if !(rate > 0) || burst < 1 {
		return nil, errors.New("rate limiter needs a positive rate and a burst of at least 1")
	}
	if now == nil {
		now = time.Now
	}
	r := &RateLimiter{now: now, buckets: make(map[string]*bucket)}
	r.limits.Store(&rateLimits{def: plexus.RateLimit{CallsPerSecond: rate, Burst: burst}})
	return r, nil
}

// Set replaces the default limit and the per-agent overrides at once. A
// burst of 0 takes DefaultBurstFactor × the rate. Invalid limits are refused
// with a *LimitError and change nothing.
func (r *RateLimiter) Set(def plexus.RateLimit, agents map[string]plexus.RateLimit) error {
	def, err := resolveRate("the default", def)
	if err != nil {
		return err
	}
	l := &rateLimits{def: def, agents: make(map[string]plexus.RateLimit, len(agents))}
	for id, a := range agents {
		if l.agents[id], err = resolveRate("agent "+strconv.Quote(id), a); err != nil {
			return err
		}
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	old := r.limits.Swap(l)
	for id := range r.buckets {
		if l.of(id) != old.of(id) {
			delete(r.buckets, id)
		}
	}
	return nil
}

// Limits returns the default limit and a copy of the overrides in force.
func (r *RateLimiter) Limits() (def plexus.RateLimit, agents map[string]plexus.RateLimit) {
	l := r.limits.Load()
	return l.def, maps.Clone(l.agents)
}

// Allow takes one token from agentID's bucket and reports whether there was
// one. An agent whose limit is off is always allowed.
func (r *RateLimiter) Allow(agentID string) bool {
	lim := r.limits.Load().of(agentID)
	if lim.Off() {
		return true
	}
	now := r.now()
	r.mu.Lock()
	defer r.mu.Unlock()
	b := r.buckets[agentID]
	if b == nil {
		if len(r.buckets) >= orDefault(r.MaxKeys, DefaultMaxKeys) {
			r.evict(now)
		}
		b = &bucket{tokens: float64(lim.Burst), last: now}
		r.buckets[agentID] = b
	}
	refill(b, lim, now)
	if b.tokens < 1 {
		r.refused.Add(1)
		return false
	}
	b.tokens--
	return true
}

// Refused counts the calls Allow refused since the limiter was made.
func (r *RateLimiter) Refused() uint64 { return r.refused.Load() }

// refill adds what lim earned b since its last use, capped at the burst
// (which may have shrunk since).
func refill(b *bucket, lim plexus.RateLimit, now time.Time) {
	if el := now.Sub(b.last); el > 0 {
		b.tokens += el.Seconds() * lim.CallsPerSecond
		b.last = now
	}
	b.tokens = min(float64(lim.Burst), b.tokens)
}

// evict makes room for one bucket; the caller holds r.mu. A bucket whose
// agent's limit is now off is idle by definition.
func (r *RateLimiter) evict(now time.Time) {
	var (
		oldest   string
		oldestAt time.Time
		found    bool
	)
	limits := r.limits.Load()
	for k, b := range r.buckets {
		lim := limits.of(k)
		if !lim.Off() {
			refill(b, lim, now)
		}
		if lim.Off() || b.tokens >= float64(lim.Burst) {
			delete(r.buckets, k)
			continue
		}
		if !found || b.last.Before(oldestAt) {
			oldest, oldestAt, found = k, b.last, true
		}
	}
	if found && len(r.buckets) >= orDefault(r.MaxKeys, DefaultMaxKeys) {
		delete(r.buckets, oldest)
	}
}
