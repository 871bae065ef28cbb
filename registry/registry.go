// Package registry turns sources into entries. It is the one place where
// sources are aggregated and the only kind→transport mapping: it scans each
// [plexus.Source], validates and merges its entries under the collision rule
// (first claimant wins), stamps provenance, sensitivity and the recommended
// trust window, keeps a monotonic revision with added/removed/updated diffs,
// and caches per-source health that is stamped onto entries when they are
// read.
//
// The registry must never branch on a source id, a transport kind or an
// entry kind beyond validating the entry model, never import the auth
// package (trust policy arrives as injected funcs), never serialize or log an
// entry's Route, and never block a reader on a slow health probe.
package registry

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/plexus-gw/plexus"
)

// ErrUnknownSource is returned for an id that names no registered source.
var ErrUnknownSource = errors.New("unknown source")

// ErrDuplicateSource is returned by [Registry.Add] for a source id that is
// already registered.
var ErrDuplicateSource = errors.New("source already registered")

// DefaultHealthTTL is how long a source's health probe is trusted when
// [Options.HealthTTL] is zero.
const DefaultHealthTTL = 5 * time.Second

// Options configures a [Registry]. The zero value is usable.
type Options struct {
	// HealthTTL is how long a health probe stays fresh, and the period of
	// the refresh loop in [Registry.Run]. Zero means [DefaultHealthTTL].
	HealthTTL time.Duration
	// Clock returns the current time; nil means time.Now. Only health
	// freshness and CheckedAt stamps read it.
	Clock func() time.Time
	// Logger receives skipped entries and probe results; nil discards.
	Logger *slog.Logger
	// OnChange is called after every change to the entry set, with the new
	// revision and the sorted ids that were added, removed or updated.
	// Calls are serialized and in revision order. It runs on the goroutine
	// that made the change, after the registry's locks are released: it may
	// read the registry but must not call Add, Remove or Refresh.
	OnChange func(rev int64, added, removed, updated []string)
	// OnSourceStatus is called when a source's health moves between ok and
	// not ok. The first probe of a source is compared with ok, so a source
	// that comes up unhealthy is reported once and a healthy one is silent.
	// It runs on the goroutine that probed (Add's caller or Run's probe
	// goroutines) with no registry lock held; calls for one source never
	// overlap.
	OnSourceStatus func(source string, h plexus.Health)
	// Sensitivity derives an entry's sensitivity (cmd injects the auth
	// package's table). Nil leaves Entry.Sensitivity empty.
	Sensitivity func(prov plexus.Provenance, t plexus.TransportKind, verbs []plexus.Verb) plexus.Sensitivity
	// DefaultWindow derives an entry's recommended trust window. Nil leaves
	// Entry.RecommendedTrustWindow nil.
	DefaultWindow func(prov plexus.Provenance, verbs []plexus.Verb) plexus.TrustWindow
}

// Skip is one scanned entry that the registry did not take, and why.
type Skip struct {
	ID     string `json:"id"`
	Source string `json:"source"`
	Reason string `json:"reason"`
	// ClaimedBy names the source that holds the id when the skip is a
	// collision; it is empty for an invalid entry.
	ClaimedBy string `json:"claimedBy,omitempty"`
}

// AddResult reports what [Registry.Add] merged: the ids the source now
// contributes (sorted) and the scanned entries it skipped.
type AddResult struct {
	Entries []string
	Skipped []Skip
}

// Registry aggregates sources into entries and maps transport kinds to
// transports. It is safe for concurrent use.
//
// Locking: wmu serializes mutations (Add, Remove, Refresh, SetRevision) and
// their OnChange calls so that revisions are delivered in order; mu guards
// the fields below it and is only held briefly. Lock order: wmu, then mu,
// then the health cache's own mutex. Source scans and health probes run
// with no lock held.
type Registry struct {
	opts Options
	log  *slog.Logger
	now  func() time.Time
	ttl  time.Duration

	wmu sync.Mutex

	mu         sync.RWMutex
	transports map[plexus.TransportKind]plexus.Transport
	sources    map[string]*sourceState
	order      []*sourceState // add order: decides who claims an id first
	nextSeq    int64
	revision   int64
	snap       *snapshot

	health *healthCache
}

// sourceState is one registered source and its last scan. The scanned slice
// is replaced, never mutated, so a build may read it under mu's read lock.
type sourceState struct {
	src     plexus.Source
	seq     int64
	scanned []plexus.Entry
	skipped []Skip
}

// New returns an empty registry.
func New(opts Options) *Registry {
	if opts.HealthTTL <= 0 {
		opts.HealthTTL = DefaultHealthTTL
	}
	if opts.Clock == nil {
		opts.Clock = time.Now
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	r := &Registry{
		opts:       opts,
		log:        opts.Logger,
		now:        opts.Clock,
		ttl:        opts.HealthTTL,
		transports: make(map[plexus.TransportKind]plexus.Transport),
		sources:    make(map[string]*sourceState),
		snap:       emptySnapshot(),
	}
	r.health = newHealthCache(r)
	return r
}

// AddTransport registers t for its kind. Registering nil or a second
// transport of the same kind is a wiring mistake and panics.
func (r *Registry) AddTransport(t plexus.Transport) {
	if t == nil {
		panic("registry: AddTransport(nil)")
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, ok := r.transports[t.Kind()]; ok {
		panic(fmt.Sprintf("registry: transport %q registered twice", t.Kind()))
	}
	r.transports[t.Kind()] = t
}

// Transport returns the transport registered for kind.
func (r *Registry) Transport(kind plexus.TransportKind) (plexus.Transport, bool) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	t, ok := r.transports[kind]
	return t, ok
}

// Revision is the current revision of the entry set. It only grows.
func (r *Registry) Revision() int64 {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return r.revision
}

// SetRevision seeds the revision (cmd persists it across restarts). It never
// lowers the revision, so it cannot make a revision repeat.
func (r *Registry) SetRevision(n int64) {
	r.wmu.Lock()
	defer r.wmu.Unlock()
	r.mu.Lock()
	defer r.mu.Unlock()
	if n > r.revision {
		r.revision = n
	}
}

// Add scans src and merges its entries. The source is not registered when
// the scan fails. Entries that are invalid, or whose id another source
// already claims, are skipped and listed in the result (and logged).
func (r *Registry) Add(ctx context.Context, src plexus.Source) (AddResult, error) {
	id := src.ID()
	if id == "" {
		return AddResult{}, errors.New("add source: empty source id")
	}
	if _, ok := r.Source(id); ok {
		return AddResult{}, fmt.Errorf("add source %s: %w", id, ErrDuplicateSource)
	}
	scanned, err := src.Scan(ctx)
	if err != nil {
		return AddResult{}, fmt.Errorf("scan source %s: %w", id, err)
	}
	// The first probe runs before the source is visible, so no reader ever
	// sees its entries without a health value.
	h := r.health.probe(ctx, src)

	r.wmu.Lock()
	r.mu.Lock()
	if _, ok := r.sources[id]; ok {
		r.mu.Unlock()
		r.wmu.Unlock()
		return AddResult{}, fmt.Errorf("add source %s: %w", id, ErrDuplicateSource)
	}
	st := &sourceState{src: src, seq: r.nextSeq, scanned: scanned}
	r.nextSeq++
	r.sources[id] = st
	r.order = append(r.order, st)
	return r.publish(st, h), nil
}

// Replace swaps the registered source with src's id for src in one step:
// one rebuild, one revision, one change listing what was added, removed and
// updated (spec §10: re-registering a source replaces its module). The old
// source keeps its place in the claim order, so a collision it won stays
// won. It fails, changing nothing, when no source has that id or src's scan
// fails.
func (r *Registry) Replace(ctx context.Context, src plexus.Source) (AddResult, error) {
	id := src.ID()
	scanned, err := src.Scan(ctx)
	if err != nil {
		return AddResult{}, fmt.Errorf("scan source %s: %w", id, err)
	}
	h := r.health.probe(ctx, src)

	r.wmu.Lock()
	r.mu.Lock()
	old, ok := r.sources[id]
	if !ok {
		r.mu.Unlock()
		r.wmu.Unlock()
		return AddResult{}, fmt.Errorf("replace source %s: %w", id, ErrUnknownSource)
	}
	st := &sourceState{src: src, seq: old.seq, scanned: scanned}
	r.sources[id] = st
	r.order[slices.Index(r.order, old)] = st
	return r.publish(st, h), nil
}

// publish ends an Add or Replace that has put st in place, holding wmu and
// mu: it sets the source's probed health, rebuilds, releases mu and then
// wmu around telling the listeners, and reports the health last, outside
// both locks.
func (r *Registry) publish(st *sourceState, h *plexus.Health) AddResult {
	id := st.src.ID()
	r.health.set(id, st.src, h)
	ch := r.rebuildLocked()
	res := AddResult{Entries: r.snap.bySource[id], Skipped: slices.Clone(st.skipped)}
	r.mu.Unlock()
	r.notify(ch)
	r.wmu.Unlock()

	r.health.report(id)
	return res
}

// Remove unregisters a source and drops its entries. Entries of other
// sources that were skipped only because of it (a collision it won, a
// workflow member it held) are re-evaluated.
func (r *Registry) Remove(ctx context.Context, id string) error {
	r.wmu.Lock()
	defer r.wmu.Unlock()
	r.mu.Lock()
	st, ok := r.sources[id]
	if !ok {
		r.mu.Unlock()
		return fmt.Errorf("remove source %s: %w", id, ErrUnknownSource)
	}
	delete(r.sources, id)
	r.order = slices.DeleteFunc(r.order, func(s *sourceState) bool { return s == st })
	r.health.drop(id)
	ch := r.rebuildLocked()
	r.mu.Unlock()
	r.notify(ch)
	return nil
}

// Refresh rescans a source and applies the difference. When the scan fails
// the source keeps its previous entries and the error is returned. Skips of
// the new scan are logged and readable through [Registry.Skipped].
func (r *Registry) Refresh(ctx context.Context, id string) error {
	src, ok := r.Source(id)
	if !ok {
		return fmt.Errorf("refresh source %s: %w", id, ErrUnknownSource)
	}
	scanned, err := src.Scan(ctx)
	if err != nil {
		return fmt.Errorf("scan source %s: %w", id, err)
	}
	r.wmu.Lock()
	defer r.wmu.Unlock()
	r.mu.Lock()
	st, ok := r.sources[id]
	if !ok || st.src != src {
		// Removed (or replaced) while we scanned: the scan is stale.
		r.mu.Unlock()
		return fmt.Errorf("refresh source %s: %w", id, ErrUnknownSource)
	}
	st.scanned = scanned
	ch := r.rebuildLocked()
	r.mu.Unlock()
	r.notify(ch)
	return nil
}

// Skipped returns the scanned entries of source id that are currently not in
// the entry set, with reasons.
func (r *Registry) Skipped(id string) []Skip {
	r.mu.RLock()
	defer r.mu.RUnlock()
	if st, ok := r.sources[id]; ok {
		return slices.Clone(st.skipped)
	}
	return nil
}

// Source returns the registered source with id.
func (r *Registry) Source(id string) (plexus.Source, bool) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	st, ok := r.sources[id]
	if !ok {
		return nil, false
	}
	return st.src, true
}

// Sources returns the registered source ids, sorted.
func (r *Registry) Sources() []string {
	r.mu.RLock()
	defer r.mu.RUnlock()
	ids := make([]string, 0, len(r.sources))
	for id := range r.sources {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	return ids
}

// SourceEntries returns how many entries source id contributes now.
func (r *Registry) SourceEntries(id string) int {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return len(r.snap.bySource[id])
}

// Entry returns the entry with id, its Health stamped from the health cache
// now. The returned value shares its slices with the registry: treat it as
// read-only.
func (r *Registry) Entry(id string) (plexus.Entry, bool) {
	r.mu.RLock()
	s := r.snap
	r.mu.RUnlock()
	i, ok := s.index[id]
	if !ok {
		return plexus.Entry{}, false
	}
	e := s.sorted[i]
	e.Health = r.health.stamp(e.Source)
	return e, true
}

// Entries returns every entry sorted by id, each with Health stamped from the
// health cache at call time (a stale value is returned as is and refreshed by
// [Registry.Run]; no caller waits for a probe). The slice is the caller's;
// the entries' inner slices and Health pointers are shared and read-only.
func (r *Registry) Entries() []plexus.Entry {
	out := make([]plexus.Entry, 0, r.Len())
	for e := range r.All() {
		out = append(out, *e)
	}
	return out
}

// All yields the entries Entries returns, in the same order, from one
// snapshot, without copying the set: a manifest streamed to an agent then
// holds one entry at a time. Each is the step's own copy (the caller may
// stamp it), valid until the next step.
func (r *Registry) All() iter.Seq[*plexus.Entry] {
	return func(yield func(*plexus.Entry) bool) {
		r.mu.RLock()
		s := r.snap
		r.mu.RUnlock()
		hs := r.health.stampAll(s.sourceIDs)
		var e plexus.Entry
		for i := range s.sorted {
			e = s.sorted[i]
			e.Health = hs[e.Source]
			if !yield(&e) {
				return
			}
		}
	}
}

// Len returns the number of entries.
func (r *Registry) Len() int {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return len(r.snap.sorted)
}

// change is one rebuild's diff, delivered to OnChange after the locks drop.
type change struct {
	rev                     int64
	added, removed, updated []string
}

func (c *change) empty() bool {
	return len(c.added) == 0 && len(c.removed) == 0 && len(c.updated) == 0
}

// notify calls OnChange. The caller holds wmu (so calls are in order) and
// not mu.
func (r *Registry) notify(ch change) {
	if ch.empty() || r.opts.OnChange == nil {
		return
	}
	r.opts.OnChange(ch.rev, ch.added, ch.removed, ch.updated)
}
