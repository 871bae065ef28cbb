package inbox

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/plexus-gw/plexus"
)

// Decider is the slice of the gateway a [Reconciler] applies the owner's
// moves through: the single decision function, and the revocation of what a
// decision granted. *gateway.Gateway implements it. Both must be safe for
// concurrent use; each commits its state change and journal row together.
type Decider interface {
	Decide(ctx context.Context, d plexus.Decision) (plexus.Pending, error)
	RevokeDecision(ctx context.Context, pendingID, decidedBy, via, reason string) (int, error)
}

// Defaults for the zero values of [Config].
const (
	DefaultWithdrawGrace = time.Second
	DefaultInterval      = 30 * time.Second
)

// Config configures a [Reconciler].
type Config struct {
	// Home is PLEXUS_HOME: the folders are Home/inbox, Home/active,
	// Home/rejected and Home/archive. Required.
	Home string
	// Owner names who decides when a file is moved by hand (cmd passes
	// `git config user.email`, else $USER). It is called when a decision
	// is first made by a move, and may cache. Nil means "human".
	Owner func() string
	// Clock stamps the records of written files; nil means time.Now.
	Clock func() time.Time
	// Logger receives what the reconciler repairs and what fails; nil
	// discards.
	Logger *slog.Logger
	// Notify, when set, is called with the gateway-authored notification
	// each time a new decision's file is put up. It must not block.
	Notify func(Notification)
	// WithdrawGrace is how long a file must stay gone from inbox/ (or
	// active/) before its absence counts as the owner's delete: some
	// editors save by moving the old file away before writing the new one.
	// Default 1s.
	WithdrawGrace time.Duration
	// Interval is the period of the full reconcile that runs without any
	// hint (a standing grant's window ends with no file event). Default 30s.
	Interval time.Duration
	// JournalFailed, when set, is told of a journal row the reconciler
	// could not write where it went on without it (a problem reported to
	// the owner); it logs and counts the failure for `plexus status`. Nil
	// means the failure is only logged.
	JournalFailed func(what string, err error)
	// Installed reports whether a source is registered: an approved
	// extension's file stands in active/ while its source is. Nil means
	// none is.
	Installed func(source string) bool
}

// folders are the four decision folders, in the order a pass looks at them.
var folders = []string{plexus.FolderInbox, plexus.FolderActive, plexus.FolderRejected, plexus.FolderArchive}

// Reconciler keeps the decision folders and the journal in step. It is
// level-triggered: a hint (a file event, a decision made through another
// channel, a tick) only says where to look; each look compares what the
// folders hold with what the journal holds and applies the difference, so a
// lost, duplicated or mis-paired event, or a move made while the daemon was
// down, can neither lose a decision nor apply one twice. Decisions go
// through the [Decider] (the gateway's one decision function); the journal
// is the truth and files are its projection, except where the owner moved or
// edited one, which is what the owner asks for.
//
// Create it with [New], run it with [Reconciler.Run]. Touch, Hint, Rescan
// and Sync are safe to call from any goroutine and never block on a pass
// (Sync waits for one, by design).
type Reconciler struct {
	cfg   Config
	store plexus.Store
	dec   Decider
	log   *slog.Logger
	now   func() time.Time

	wake    chan struct{} // capacity 1: "there is something to look at"
	started atomic.Bool

	mu      sync.Mutex // guards the pending work below
	touched map[string]bool
	dirs    map[string]bool // folder names hinted
	full    bool
	waiters []chan struct{}

	// Owned by the Run goroutine.
	records  map[string]plexus.DecisionFile // records of files in inbox/ and active/
	seen     map[string]seenFile            // path → what it held when last looked at
	missing  map[string]time.Time           // decision id → when its file was first seen gone
	recheck  map[string]time.Time           // decision id → when to look at its broken, still-changing file again
	reported map[string]string              // decision id → the problem last journaled for it
	odd      map[string]string              // path → the kind of the non-regular file journaled there
}

// New returns a Reconciler over cfg.Home that reads and records through
// store and decides through dec. Nothing happens until Run.
func New(cfg Config, store plexus.Store, dec Decider) (*Reconciler, error) {
	if cfg.Home == "" || store == nil || dec == nil {
		return nil, errors.New("inbox: New needs a home, a store and a decider")
	}
	if cfg.Owner == nil {
		cfg.Owner = func() string { return plexus.ActorHuman }
	}
	if cfg.Clock == nil {
		cfg.Clock = time.Now
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.WithdrawGrace == 0 {
		cfg.WithdrawGrace = DefaultWithdrawGrace
	}
	if cfg.Interval == 0 {
		cfg.Interval = DefaultInterval
	}
	if cfg.Installed == nil {
		cfg.Installed = func(string) bool { return false }
	}
	return &Reconciler{cfg: cfg, store: store, dec: dec, log: cfg.Logger, now: func() time.Time { return cfg.Clock().UTC() },
		wake: make(chan struct{}, 1), touched: map[string]bool{}, dirs: map[string]bool{},
		records: map[string]plexus.DecisionFile{}, seen: map[string]seenFile{}, missing: map[string]time.Time{},
		recheck:  map[string]time.Time{},
		reported: map[string]string{}, odd: map[string]string{}}, nil
}

// Touch asks for decision id's file to be looked at: it was put up,
// decided, or its grants ended.
func (r *Reconciler) Touch(id string) {
	r.mu.Lock()
	r.touched[id] = true
	r.mu.Unlock()
	r.signal()
}

// Hint asks for a look at the folders in dirs (paths or names; others are
// ignored), or at everything when full.
func (r *Reconciler) Hint(full bool, dirs []string) {
	r.mu.Lock()
	r.full = r.full || full
	for _, d := range dirs {
		if name := filepath.Base(d); slices.Contains(folders, name) {
			r.dirs[name] = true
		}
	}
	r.mu.Unlock()
	r.signal()
}

// Rescan asks for a look at everything.
func (r *Reconciler) Rescan() { r.Hint(true, nil) }

// Sync asks for a full look and waits until it is done (or ctx ends). A
// caller that changed the folders or the clock uses it to see the outcome.
func (r *Reconciler) Sync(ctx context.Context) error {
	ch := make(chan struct{})
	r.mu.Lock()
	r.full = true
	r.waiters = append(r.waiters, ch)
	r.mu.Unlock()
	r.signal()
	select {
	case <-ch:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (r *Reconciler) signal() {
	select {
	case r.wake <- struct{}{}:
	default:
	}
}

// Run reconciles at once (everything: whatever happened while the daemon
// was down is applied now), then on every hint and every Interval, until ctx
// ends. It returns nil when ctx ends, or an error if the records cannot be
// loaded at start.
func (r *Reconciler) Run(ctx context.Context) error {
	if !r.started.CompareAndSwap(false, true) {
		return errors.New("inbox: Run called more than once")
	}
	if err := r.load(ctx); err != nil {
		return err
	}
	r.cleanScratch()
	r.Rescan()
	tick := time.NewTicker(r.cfg.Interval)
	defer tick.Stop()
	retry := time.NewTimer(time.Hour)
	retry.Stop()
	defer retry.Stop()
	for {
		select {
		case <-ctx.Done():
			r.release()
			return nil
		case <-r.wake:
		case <-tick.C:
			r.Rescan()
			continue // the wake it sent runs the pass
		case <-retry.C:
		}
		r.pass(ctx)
		if next, ok := r.nextRetry(); ok {
			retry.Reset(max(time.Until(next), time.Millisecond))
		}
	}
}

// release lets every Sync waiter go when Run ends.
func (r *Reconciler) release() {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, ch := range r.waiters {
		close(ch)
	}
	r.waiters = nil
}

func (r *Reconciler) load(ctx context.Context) error {
	var recs []plexus.DecisionFile
	err := r.store.View(ctx, func(tx plexus.StateTx) error {
		var err error
		recs, err = tx.DecisionFiles(plexus.FolderInbox, plexus.FolderActive)
		return err
	})
	if err != nil {
		return fmt.Errorf("inbox: load decision files: %w", err)
	}
	for _, rec := range recs {
		r.records[rec.PendingID] = rec
	}
	return nil
}

// cleanScratch removes the temporary files a WriteAtomic interrupted by a
// crash left behind (".<id>.md.tmp…"). Only old ones: `plexus approve` may
// be writing one right now. Only regular files: anything else under such a
// name is not a file the daemon wrote.
func (r *Reconciler) cleanScratch() {
	for _, f := range folders {
		dir := r.dir(f)
		entries, err := os.ReadDir(dir)
		if err != nil {
			continue
		}
		for _, e := range entries {
			n := e.Name()
			if !e.Type().IsRegular() || !strings.HasPrefix(n, "."+IDPrefix) || !strings.Contains(n, Ext+".tmp") {
				continue
			}
			fi, err := e.Info()
			if err != nil || time.Since(fi.ModTime()) <= time.Minute {
				continue
			}
			if err := os.Remove(filepath.Join(dir, n)); err != nil && !errors.Is(err, os.ErrNotExist) {
				r.log.Warn("inbox: remove a left-over temporary file", "folder", f, "name", n, "err", err)
			}
		}
	}
}

func (r *Reconciler) nextRetry() (time.Time, bool) {
	var next time.Time
	for _, since := range r.missing {
		if t := since.Add(r.cfg.WithdrawGrace); next.IsZero() || t.Before(next) {
			next = t
		}
	}
	for _, t := range r.recheck {
		if next.IsZero() || t.Before(next) {
			next = t
		}
	}
	return next, !next.IsZero()
}

func (r *Reconciler) dir(folder string) string { return filepath.Join(r.cfg.Home, folder) }

// pass looks at everything the pending work names, and every decision whose
// file has gone missing.
func (r *Reconciler) pass(ctx context.Context) {
	r.mu.Lock()
	touched, dirs, full, waiters := r.touched, r.dirs, r.full, r.waiters
	r.touched, r.dirs, r.full, r.waiters = map[string]bool{}, map[string]bool{}, false, nil
	r.mu.Unlock()
	defer func() {
		for _, ch := range waiters {
			close(ch)
		}
	}()

	ids := touched
	r.addDue(ids)
	for _, f := range folders {
		if full || dirs[f] {
			r.addFolder(f, full, ids)
		}
	}
	if full {
		r.addOpen(ctx, ids)
	}
	for _, id := range slices.Sorted(maps.Keys(ids)) {
		if ctx.Err() != nil {
			return
		}
		if err := r.one(ctx, id); err != nil && ctx.Err() == nil {
			r.log.Error("inbox: reconcile a decision file", "id", id, "err", err)
		}
	}
}

// addDue adds to ids the decisions whose file is missing and those whose
// recheck time has come.
func (r *Reconciler) addDue(ids map[string]bool) {
	for id := range r.missing {
		ids[id] = true
	}
	for id, t := range r.recheck {
		if !time.Now().Before(t) {
			delete(r.recheck, id)
			ids[id] = true
		}
	}
}

// addFolder adds to ids the decisions whose file in folder f is to be read,
// and those whose file is gone from f, where the daemon put it.
func (r *Reconciler) addFolder(f string, full bool, ids map[string]bool) {
	entries, err := os.ReadDir(r.dir(f))
	if err != nil {
		r.log.Warn("inbox: cannot read a decision folder", "folder", f, "err", err)
		return
	}
	// A hinted look reads only the files that changed since they were
	// last read (and the records whose file is gone, below). A full
	// look reads every file in inbox/ and active/, where time alone
	// changes what a file should be; in rejected/ and archive/ only
	// arrivals matter, so unchanged files there are skipped even then.
	settles := !full || f == plexus.FolderRejected || f == plexus.FolderArchive
	present := map[string]bool{}
	for _, e := range entries {
		id, ok := IDFromName(e.Name())
		if !ok {
			continue
		}
		present[id] = true
		if !settles || r.changed(filepath.Join(r.dir(f), e.Name())) {
			ids[id] = true
		}
	}
	for id, rec := range r.records {
		if rec.Folder == f && !present[id] {
			ids[id] = true // gone from where the daemon put it
		}
	}
}

// addOpen adds to ids, for a full look, every pending decision and every
// decision with a file on record (an active grant's window may have ended).
func (r *Reconciler) addOpen(ctx context.Context, ids map[string]bool) {
	var pend []plexus.Pending
	err := r.store.View(ctx, func(tx plexus.StateTx) error {
		var err error
		pend, err = tx.PendingList(plexus.StatePending)
		return err
	})
	if err != nil {
		r.log.Error("inbox: list pending decisions", "err", err)
	}
	for _, p := range pend {
		ids[p.ID] = true
	}
	for id := range r.records {
		ids[id] = true // an active grant's window may have ended
	}
}
