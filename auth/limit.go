package auth

import (
	"errors"
	"sync"
	"sync/atomic"
	"time"
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
// accumulate while they come less than FailureWindow apart; from the
// MaxFailures-th on, each failure blocks the key for a backoff that doubles
// from BaseBackoff up to MaxBackoff. A success clears the key.
//
// The exported fields are settings; zero means the default, and they must
// not change once the Throttle is in use. Methods are safe for concurrent
// use. Memory is bounded by MaxKeys: when full, idle keys are dropped first,
// then unblocked ones, and only when every key is blocked the least recently
// failed one. So only a caller holding more than MaxKeys blocked keys at
// once can shorten a block, which costs nothing a valid key holds.
type Throttle struct {
	MaxFailures   int
	FailureWindow time.Duration
	BaseBackoff   time.Duration
	MaxBackoff    time.Duration
	MaxKeys       int

	now func() time.Time

	mu   sync.Mutex // guards keys
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
	return &Throttle{now: now, keys: make(map[string]*throttleState)}
}

// Allow reports whether key may attempt a credential now, and if not, how
// long until it may.
func (t *Throttle) Allow(key string) (ok bool, retryAfter time.Duration) {
	now := t.now()
	t.mu.Lock()
	defer t.mu.Unlock()
	st := t.keys[key]
	if st == nil || !now.Before(st.blockedUntil) {
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

// backoff is BaseBackoff doubled n times, capped at MaxBackoff.
func (t *Throttle) backoff(n int) time.Duration {
	d, ceiling := t.base(), t.maxBackoff()
	for ; n > 0 && d < ceiling; n-- {
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

func (t *Throttle) maxFailures() int      { return orDefault(t.MaxFailures, DefaultMaxFailures) }
func (t *Throttle) window() time.Duration { return orDefault(t.FailureWindow, DefaultFailureWindow) }
func (t *Throttle) base() time.Duration   { return orDefault(t.BaseBackoff, DefaultBaseBackoff) }
func (t *Throttle) maxKeys() int          { return orDefault(t.MaxKeys, DefaultMaxKeys) }
func (t *Throttle) maxBackoff() time.Duration {
	return max(orDefault(t.MaxBackoff, DefaultMaxBackoff), t.base())
}

func orDefault[T int | time.Duration](v, def T) T {
	if v <= 0 {
		return def
	}
	return v
}

// RateLimiter is a token bucket per agent: each agent may make Burst calls
// at once and Rate calls per second sustained. Buckets refill lazily on use,
// so no goroutine runs. Safe for concurrent use; memory is bounded by
// MaxKeys (zero means DefaultMaxKeys), dropping full (idle) buckets first,
// which loses nothing since a new bucket starts full. Only when every bucket
// is in use is the least recently used one dropped, which hands that agent a
// fresh burst: keep MaxKeys above the number of enrolled agents.
type RateLimiter struct {
	// MaxKeys must not change once the limiter is in use.
	MaxKeys int

	rate  float64
	burst float64
	now   func() time.Time

	mu      sync.Mutex // guards buckets
	buckets map[string]*bucket
	// refused counts the calls Allow refused, for /metrics.
	refused atomic.Uint64
}

type bucket struct {
	tokens float64
	last   time.Time
}

// NewRateLimiter returns a limiter allowing rate calls per second with bursts
// of burst, reading the clock now (nil means time.Now).
func NewRateLimiter(rate float64, burst int, now func() time.Time) (*RateLimiter, error) {
	if !(rate > 0) || burst < 1 {
		return nil, errors.New("rate limiter needs a positive rate and a burst of at least 1")
	}
	if now == nil {
		now = time.Now
	}
	return &RateLimiter{rate: rate, burst: float64(burst), now: now, buckets: make(map[string]*bucket)}, nil
}

// Allow takes one token from agentID's bucket and reports whether there was
// one.
func (r *RateLimiter) Allow(agentID string) bool {
	now := r.now()
	r.mu.Lock()
	defer r.mu.Unlock()
	b := r.buckets[agentID]
	if b == nil {
		if len(r.buckets) >= orDefault(r.MaxKeys, DefaultMaxKeys) {
			r.evict(now)
		}
		b = &bucket{tokens: r.burst, last: now}
		r.buckets[agentID] = b
	}
	r.refill(b, now)
	if b.tokens < 1 {
		r.refused.Add(1)
		return false
	}
	b.tokens--
	return true
}

// Refused counts the calls Allow refused since the limiter was made.
func (r *RateLimiter) Refused() uint64 { return r.refused.Load() }

func (r *RateLimiter) refill(b *bucket, now time.Time) {
	if el := now.Sub(b.last); el > 0 {
		b.tokens = min(r.burst, b.tokens+el.Seconds()*r.rate)
		b.last = now
	}
}

// evict makes room for one bucket; the caller holds r.mu.
func (r *RateLimiter) evict(now time.Time) {
	var (
		oldest   string
		oldestAt time.Time
		found    bool
	)
	for k, b := range r.buckets {
		r.refill(b, now)
		if b.tokens >= r.burst {
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
