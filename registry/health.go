package registry

// The health cache: per-source, fresh for HealthTTL, stale-while-revalidate.
//
// A source is probed once, synchronously, when it is added (before its
// entries become visible), so no reader ever waits for a probe. After that a
// reader that finds a stale value returns it as is and kicks Run, whose
// goroutines re-probe in the background. Without Run, values stay at their
// last probe.

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"github.com/plexus-gw/plexus"
)

// ErrRunning is returned by a second concurrent call to [Registry.Run].
var ErrRunning = errors.New("registry: Run already running")

// healthCache holds the last probe of every registered source. mu guards m
// and every healthState field; it is taken after Registry.mu when both are
// held. cbMu serializes OnSourceStatus calls and is never held together
// with mu across a callback.
type healthCache struct {
	r       *Registry
	mu      sync.Mutex
	m       map[string]*healthState
	cbMu    sync.Mutex
	kick    chan struct{}
	running atomic.Bool
}

type healthState struct {
	src     plexus.Source
	h       *plexus.Health // never mutated once stored: readers share it
	checked time.Time      // registry clock when h was probed
	probing bool
	// reportedOK is the ok-ness last reported through OnSourceStatus; it
	// starts true so that a healthy first probe is silent.
	reportedOK bool
}

func newHealthCache(r *Registry) *healthCache {
	return &healthCache{r: r, m: make(map[string]*healthState), kick: make(chan struct{}, 1)}
}

// probe asks src for its health, bounded by HealthTTL, and normalizes the
// answer into a fresh value that is never mutated afterwards.
func (c *healthCache) probe(ctx context.Context, src plexus.Source) *plexus.Health {
	pctx, cancel := context.WithTimeout(ctx, c.r.ttl)
	defer cancel()
	h := src.Health(pctx)
	if h.Status == "" {
		h.Status = plexus.HealthUnknown
		if pctx.Err() != nil {
			h.Status, h.Detail = plexus.HealthUnavailable, "health probe did not answer in time"
		}
	}
	if h.CheckedAt == nil {
		now := c.r.now()
		h.CheckedAt = &now
	} else {
		at := *h.CheckedAt
		h.CheckedAt = &at
	}
	return &h
}

// set records the first probe of a newly added source. The caller holds
// Registry.mu, so the source's entries and its health appear together.
func (c *healthCache) set(id string, src plexus.Source, h *plexus.Health) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.m[id] = &healthState{src: src, h: h, checked: c.r.now(), reportedOK: true}
}

// drop forgets a removed source. A probe in flight for it finds its state
// gone and discards its result.
func (c *healthCache) drop(id string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.m, id)
}

// report calls OnSourceStatus when source id's current health and the
// ok-ness last reported for it disagree. Reading the current state (rather
// than the caller's probe) keeps reports right whichever probe lands last.
func (c *healthCache) report(id string) {
	c.cbMu.Lock()
	defer c.cbMu.Unlock()
	c.mu.Lock()
	st, ok := c.m[id]
	if !ok {
		c.mu.Unlock()
		return
	}
	nowOK := st.h.Status == plexus.HealthOK
	if nowOK == st.reportedOK {
		c.mu.Unlock()
		return
	}
	st.reportedOK = nowOK
	h := *st.h
	c.mu.Unlock()
	c.r.log.Info("registry: source health changed", "source", id, "status", h.Status, "detail", h.Detail)
	if cb := c.r.opts.OnSourceStatus; cb != nil {
		cb(id, h)
	}
}

// stamp returns the health to stamp on an entry of source id, kicking Run
// when it is stale.
func (c *healthCache) stamp(id string) *plexus.Health {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.lookupLocked(id, c.r.now())
}

// stampAll is stamp for several sources under one lock.
func (c *healthCache) stampAll(ids []string) map[string]*plexus.Health {
	out := make(map[string]*plexus.Health, len(ids))
	now := c.r.now()
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, id := range ids {
		out[id] = c.lookupLocked(id, now)
	}
	return out
}

func (c *healthCache) lookupLocked(id string, now time.Time) *plexus.Health {
	st, ok := c.m[id]
	if !ok {
		return &plexus.Health{Status: plexus.HealthUnknown}
	}
	if !st.probing && now.Sub(st.checked) >= c.r.ttl {
		select {
		case c.kick <- struct{}{}:
		default: // a kick is already pending
		}
	}
	return st.h
}

// SourceHealth returns source id's cached health (unknown for an unknown
// source). Like [Registry.Entries] it never waits for a probe.
func (r *Registry) SourceHealth(id string) plexus.Health {
	return *r.health.stamp(id)
}

// Run keeps the health cache fresh: every HealthTTL, and whenever a reader
// found a stale value, it re-probes each stale source in its own goroutine
// (so one slow source delays no other). It returns nil once ctx is done and
// every probe it started has returned; a [plexus.Source] whose Health
// ignores its context therefore delays shutdown. Only one Run may be active.
func (r *Registry) Run(ctx context.Context) error {
	c := r.health
	if !c.running.CompareAndSwap(false, true) {
		return ErrRunning
	}
	defer c.running.Store(false)
	var wg sync.WaitGroup
	defer wg.Wait()
	t := time.NewTicker(r.ttl)
	defer t.Stop()
	for {
		c.probeStale(ctx, &wg)
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		case <-c.kick:
		}
	}
}

// probeStale starts a probe for every stale source not already being probed.
func (c *healthCache) probeStale(ctx context.Context, wg *sync.WaitGroup) {
	now := c.r.now()
	type job struct {
		id string
		st *healthState
	}
	var jobs []job
	c.mu.Lock()
	for id, st := range c.m {
		if !st.probing && now.Sub(st.checked) >= c.r.ttl {
			st.probing = true
			jobs = append(jobs, job{id, st})
		}
	}
	c.mu.Unlock()
	for _, j := range jobs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			h := c.probe(ctx, j.st.src)
			c.mu.Lock()
			j.st.probing = false
			// A probe cut short by shutdown says nothing about the source.
			current := c.m[j.id] == j.st && ctx.Err() == nil
			if current {
				j.st.h, j.st.checked = h, c.r.now()
			}
			c.mu.Unlock()
			if current {
				c.report(j.id)
			}
		}()
	}
}

// ReportHealth records the health a source observed itself (its connection
// lost, a heartbeat missed, its process back) at once, rather than at the
// next probe, and calls OnSourceStatus when its ok-ness changed. A report
// for a source that is not registered is ignored. It must not be called
// with the source's own Health in progress on the same goroutine.
func (r *Registry) ReportHealth(id string, h plexus.Health) {
	c := r.health
	now := r.now()
	if h.Status == "" {
		h.Status = plexus.HealthUnknown
	}
	if h.CheckedAt == nil {
		h.CheckedAt = &now
	} else {
		at := *h.CheckedAt
		h.CheckedAt = &at
	}
	c.mu.Lock()
	st, ok := c.m[id]
	if ok {
		st.h, st.checked = &h, now
	}
	c.mu.Unlock()
	if ok {
		c.report(id)
	}
}
