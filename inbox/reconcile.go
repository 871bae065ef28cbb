package inbox

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
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
	// line each time a new decision's file is put up. It must not block.
	Notify func(line string)
	// WithdrawGrace is how long a file must stay gone from inbox/ (or
	// active/) before its absence counts as the owner's delete: some
	// editors save by moving the old file away before writing the new one.
	// Default 1s.
	WithdrawGrace time.Duration
	// Interval is the period of the full reconcile that runs without any
	// hint (a standing grant's window ends with no file event). Default 30s.
	Interval time.Duration
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
}

// seenFile is what a path held when a pass last looked at it, so that a
// later pass can skip an unchanged file in a folder that only gets arrivals.
type seenFile struct {
	info os.FileInfo
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
	return &Reconciler{cfg: cfg, store: store, dec: dec, log: cfg.Logger, now: func() time.Time { return cfg.Clock().UTC() },
		wake: make(chan struct{}, 1), touched: map[string]bool{}, dirs: map[string]bool{},
		records: map[string]plexus.DecisionFile{}, seen: map[string]seenFile{}, missing: map[string]time.Time{},
		recheck:  map[string]time.Time{},
		reported: map[string]string{}}, nil
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
// be writing one right now.
func (r *Reconciler) cleanScratch() {
	for _, f := range folders {
		dir := r.dir(f)
		entries, err := os.ReadDir(dir)
		if err != nil {
			continue
		}
		for _, e := range entries {
			n := e.Name()
			if !strings.HasPrefix(n, "."+IDPrefix) || !strings.Contains(n, Ext+".tmp") {
				continue
			}
			if fi, err := e.Info(); err == nil && time.Since(fi.ModTime()) > time.Minute {
				_ = os.Remove(filepath.Join(dir, n))
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
	for id := range r.missing {
		ids[id] = true
	}
	for id, t := range r.recheck {
		if !time.Now().Before(t) {
			delete(r.recheck, id)
			ids[id] = true
		}
	}
	for _, f := range folders {
		if !full && !dirs[f] {
			continue
		}
		entries, err := os.ReadDir(r.dir(f))
		if err != nil {
			r.log.Warn("inbox: cannot read a decision folder", "folder", f, "err", err)
			continue
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
	if full {
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
	list := make([]string, 0, len(ids))
	for id := range ids {
		list = append(list, id)
	}
	slices.Sort(list)
	for _, id := range list {
		if ctx.Err() != nil {
			return
		}
		if err := r.one(ctx, id); err != nil && ctx.Err() == nil {
			r.log.Error("inbox: reconcile a decision file", "id", id, "err", err)
		}
	}
}

// changed reports whether path differs from when a pass last looked at it.
func (r *Reconciler) changed(path string) bool {
	fi, err := os.Lstat(path)
	if err != nil {
		return true
	}
	prev, ok := r.seen[path]
	return !ok || !os.SameFile(prev.info, fi) || prev.info.Size() != fi.Size() || !prev.info.ModTime().Equal(fi.ModTime())
}

// copyOf is one file named after a decision, in one folder.
type copyOf struct {
	folder, path string
	b            []byte
	sum          string
}

// locate reads every file named after id in the four folders. blind is true
// when a folder could not be read: absence then proves nothing.
func (r *Reconciler) locate(id string) (here []*copyOf, blind bool) {
	name := FileName(id)
	for _, f := range folders {
		path := filepath.Join(r.dir(f), name)
		fi, err := os.Lstat(path)
		if errors.Is(err, os.ErrNotExist) {
			delete(r.seen, path)
			continue
		}
		if err != nil {
			blind = true
			continue
		}
		if !fi.Mode().IsRegular() {
			// A symlink or a folder under a decision's name: never followed.
			r.report(id, "not-regular:"+path, "inbox.ignored", plexus.Activity{Target: id,
				Payload: map[string]any{"folder": f, "problem": "not a regular file (a symlink or a folder); it is ignored"}})
			blind = true
			continue
		}
		b, err := readLimited(path)
		if err != nil {
			if !errors.Is(err, os.ErrNotExist) {
				blind = true
			}
			continue
		}
		r.seen[path] = seenFile{info: fi}
		here = append(here, &copyOf{folder: f, path: path, b: b, sum: Sum(b)})
	}
	for _, f := range folders {
		if _, err := os.Stat(r.dir(f)); err != nil {
			blind = true // a folder replaced or removed: its files may be anywhere
		}
	}
	return here, blind
}

// readLimited reads at most MaxFileSize+1 bytes: Parse refuses anything
// longer, and a huge file must not be read whole.
func readLimited(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var b bytes.Buffer
	_, err = b.ReadFrom(io.LimitReader(f, MaxFileSize+1))
	return b.Bytes(), err
}

// state is what the journal holds for one decision.
type state struct {
	p      *plexus.Pending
	rec    *plexus.DecisionFile
	grants map[string]*plexus.Grant // capability → the agent's grant row, for an approved decision
}

func (r *Reconciler) read(ctx context.Context, id string) (state, error) {
	var s state
	err := r.store.View(ctx, func(tx plexus.StateTx) error {
		s = state{}
		p, err := tx.Pending(id)
		if errors.Is(err, plexus.ErrNotFound) {
			return nil
		} else if err != nil {
			return err
		}
		s.p = p
		rec, err := tx.DecisionFile(id)
		if err == nil {
			s.rec = rec
		} else if !errors.Is(err, plexus.ErrNotFound) {
			return err
		}
		if p.State != plexus.StateApproved {
			return nil
		}
		s.grants = map[string]*plexus.Grant{}
		for _, it := range p.Items {
			g, err := tx.Grant(p.AgentID, it.CapabilityID)
			if errors.Is(err, plexus.ErrNotFound) {
				continue
			} else if err != nil {
				return err
			}
			s.grants[it.CapabilityID] = g
		}
		return nil
	})
	return s, err
}

// one brings decision id's file in line with the journal.
func (r *Reconciler) one(ctx context.Context, id string) error {
	s, err := r.read(ctx, id)
	if err != nil {
		return err
	}
	here, blind := r.locate(id)
	if len(here) > 1 {
		// A move made while locate looked (a file read in inbox/, then
		// found again in active/) shows one file in two folders: a copy
		// gone since is not one.
		here = slices.DeleteFunc(here, func(c *copyOf) bool {
			_, err := os.Lstat(c.path)
			return errors.Is(err, os.ErrNotExist)
		})
	}
	if s.p == nil {
		delete(r.missing, id)
		return r.unknown(ctx, id, here)
	}
	// Copies the daemon's last write replaced and was about to remove when
	// a crash stopped it are its own leftovers, whatever else is there.
	var stale []*copyOf
	if s.rec != nil && len(s.rec.Prev) > 0 {
		here = slices.DeleteFunc(here, func(c *copyOf) bool {
			if slices.Contains(s.rec.Prev, plexus.FilePlace{Folder: c.folder, Sum: c.sum}) {
				stale = append(stale, c)
				return true
			}
			return false
		})
		if len(stale) == 0 {
			// All removed, as planned: forget them, so that the same bytes
			// put back by hand later are the owner's.
			rec := *s.rec
			rec.Prev = nil
			if err := r.record(ctx, rec); err != nil {
				return err
			}
			s.rec = &rec
		}
	}
	// The daemon's own unchanged file left behind while a copy sits in
	// another folder (a copy made by hand, or a crash between writing a
	// file's new place and removing its old one) is not a decision: the
	// other copy is. It is removed once that one is dealt with.
	if len(here) > 1 && s.rec != nil {
		here = slices.DeleteFunc(here, func(c *copyOf) bool {
			if c.folder == s.rec.Folder && c.sum == s.rec.Sum {
				stale = append(stale, c)
				return true
			}
			return false
		})
	}
	if len(here) > 1 {
		where := make([]string, len(here))
		for i, c := range here {
			where[i] = c.folder + "/"
		}
		r.report(id, "conflict:"+strings.Join(where, ","), "inbox.conflict", plexus.Activity{TraceID: s.p.TraceID, AgentID: s.p.AgentID, Target: id,
			Payload: map[string]any{"folders": where, "problem": "the decision's file is in more than one folder; keep one"}})
		return nil
	}
	var c *copyOf
	if len(here) == 1 {
		c = here[0]
	}
	if c == nil && blind {
		return nil // a folder could not be read: absence proves nothing
	}
	if c != nil {
		delete(r.missing, id)
	}
	if s.p.State == plexus.StatePending {
		err = r.pending(ctx, s, c, stale)
	} else {
		err = r.decided(ctx, s, c, stale)
	}
	if err != nil {
		return err
	}
	return r.drop(stale) // whatever path was taken, leftovers go (removeIf checks each)
}

// gone reports whether id's file has stayed missing for the grace period,
// starting the clock the first time it is seen missing.
func (r *Reconciler) gone(id string) bool {
	since, ok := r.missing[id]
	if !ok {
		r.missing[id] = time.Now()
		return false
	}
	if time.Since(since) < r.cfg.WithdrawGrace {
		return false
	}
	delete(r.missing, id)
	return true
}

// pending handles a decision still waiting for the owner.
func (r *Reconciler) pending(ctx context.Context, s state, c *copyOf, stale []*copyOf) error {
	p := s.p
	switch {
	case c == nil && s.rec == nil:
		// Never written (just put up, or a crash before the write).
		b, err := r.render(*p, "", "", Notes{})
		if err != nil {
			return err
		}
		if err := r.put(ctx, p.ID, plexus.FolderInbox, b, nil); err != nil {
			return err
		}
		r.notify(*p)
		return nil
	case c == nil:
		if !r.gone(p.ID) {
			return nil
		}
		return r.settle(ctx, s, nil, stale, plexus.Decision{PendingID: p.ID, Withdraw: true, DecidedBy: r.cfg.Owner(), Via: plexus.ViaFile,
			Reason: "its file was deleted from inbox/"})
	}
	switch c.folder {
	case plexus.FolderInbox:
		if s.rec == nil {
			// Written before a crash kept the record from being made; if
			// the bytes differ, the owner has edited it since.
			b, err := r.render(*p, "", "", Notes{})
			if err != nil {
				return err
			}
			return r.record(ctx, plexus.DecisionFile{PendingID: p.ID, Folder: plexus.FolderInbox, Sum: Sum(b)})
		}
		if c.sum != s.rec.Sum {
			return r.annotateBroken(p, c)
		}
		delete(r.recheck, p.ID)
		return nil
	case plexus.FolderActive:
		return r.approve(ctx, s, c, stale)
	case plexus.FolderRejected:
		f, _ := Parse(c.b)
		d := plexus.Decision{PendingID: p.ID}
		if f != nil {
			d.Reason = f.Reason
		}
		d.DecidedBy, d.Via = r.who(f)
		return r.settle(ctx, s, c, stale, d)
	default: // archive: put away undecided
		f, _ := Parse(c.b)
		d := plexus.Decision{PendingID: p.ID, Withdraw: true, Reason: "its file was moved to archive/"}
		d.DecidedBy, d.Via = r.who(f)
		return r.settle(ctx, s, c, stale, d)
	}
}

// annotateBroken writes the problem into an owner-edited inbox file that no
// longer reads as a decision file, so the owner sees it before moving it.
// The owner's text is kept; the write is not recorded as the daemon's, so
// the file stays the owner's. Only a file that has stayed unchanged for the
// grace period is touched (an editor that writes in place may be half-way
// through, and replacing the file then would lose the rest of the save),
// and only while it still holds what was read.
func (r *Reconciler) annotateBroken(p *plexus.Pending, c *copyOf) error {
	_, err := Parse(c.b)
	if err == nil {
		delete(r.recheck, p.ID)
		return nil
	}
	if r.settling(p.ID, c) {
		return nil
	}
	note := "this file cannot be read as it stands, so moving it would approve nothing: " + err.Error()
	b := Annotate(c.b, note)
	if bytes.Equal(b, c.b) {
		return nil
	}
	if cur, rerr := readLimited(c.path); rerr != nil || Sum(cur) != c.sum {
		return nil // changed again meanwhile: the next look sees the new text
	}
	if err := WriteAtomic(filepath.Dir(c.path), filepath.Base(c.path), b); err != nil {
		return err
	}
	r.report(p.ID, "unreadable:"+err.Error(), "inbox.unreadable", plexus.Activity{TraceID: p.TraceID, AgentID: p.AgentID,
		Target: p.ID, Payload: map[string]any{"folder": c.folder, "problem": note}})
	return nil
}

// settling reports whether c changed less than the grace period ago, and if
// so arranges for another look once it has been quiet that long: a file that
// does not parse may be one still being written.
func (r *Reconciler) settling(id string, c *copyOf) bool {
	fi, err := os.Lstat(c.path)
	if err != nil {
		return false
	}
	if quiet := fi.ModTime().Add(r.cfg.WithdrawGrace); time.Now().Before(quiet) {
		r.recheck[id] = quiet
		return true
	}
	delete(r.recheck, id)
	return false
}

// who says who decided by moving f: `plexus approve|reject` write
// `decided_by` and `via: cli` before their move; a move by hand is the
// owner's, via file.
func (r *Reconciler) who(f *File) (by, via string) {
	if f != nil && f.Via == plexus.ViaCLI {
		if by := oneLine(f.DecidedBy); by != "" {
			return capRunes(by, 120), plexus.ViaCLI
		}
	}
	return r.cfg.Owner(), plexus.ViaFile
}

// approve applies a file moved into active/.
func (r *Reconciler) approve(ctx context.Context, s state, c *copyOf, stale []*copyOf) error {
	p := s.p
	f, err := Parse(c.b)
	if err != nil && r.settling(p.ID, c) {
		return nil // perhaps still being written (cp, an editor saving in place)
	}
	if err != nil {
		// Broken: nothing is approved, and the owner's text is kept, with
		// the problem written into it, back in inbox/.
		note := "this file could not be read, so nothing was approved: " + err.Error()
		return r.refuse(ctx, s, c, stale, Annotate(c.b, note), note)
	}
	n, err := Changes(*p, f)
	var we *WideningError
	switch {
	case errors.As(err, &we) && we.Forged():
		// A file that claims another decision is evidence of tampering:
		// the decision it was put up as is denied, fail closed, and the
		// file is kept as it was, with the reason, in rejected/.
		note := we.Note()
		if _, err := r.dec.Decide(ctx, plexus.Decision{PendingID: p.ID, DecidedBy: plexus.ActorSystem, Via: plexus.ViaSystem,
			Reason: "its decision file was altered to claim another decision"}); err != nil {
			return r.decideFailed(ctx, s, c, stale, err)
		}
		return r.put(ctx, p.ID, plexus.FolderRejected, Annotate(c.b, note), append(stale, c),
			&plexus.Activity{TraceID: p.TraceID, AgentID: p.AgentID, ActionType: "inbox.forged", Target: p.ID,
				Payload: map[string]any{"folder": c.folder, "problem": note}})
	case err != nil:
		note := err.Error()
		if we != nil {
			note = we.Note()
		}
		b, rerr := r.render(*p, note, "", f.Notes)
		if rerr != nil {
			return rerr
		}
		return r.refuse(ctx, s, c, stale, b, note)
	}
	d := plexus.Decision{PendingID: p.ID, Approve: true, Reason: n.Reason}
	d.DecidedBy, d.Via = r.who(f)
	if n.Narrowed() {
		for _, it := range n.Items {
			w := it.TrustWindow
			d.Items = append(d.Items, plexus.ItemDecision{CapabilityID: it.CapabilityID, Verbs: it.Verbs, TrustWindow: &w, Constraint: it.Constraint})
		}
	}
	return r.settle(ctx, s, c, stale, d)
}

// settle applies d through the gateway and puts the decided file where it
// now belongs.
func (r *Reconciler) settle(ctx context.Context, s state, c *copyOf, stale []*copyOf, d plexus.Decision) error {
	if _, err := r.dec.Decide(ctx, d); err != nil {
		return r.decideFailed(ctx, s, c, stale, err)
	}
	// Decide touched the decision; place its file now rather than on the
	// next pass, so that a move is answered at once.
	return r.one(ctx, s.p.ID)
}

// decideFailed handles a decision the gateway refused. Decided meanwhile
// through another channel: the next look places the file. Refused (the
// request expired, a capability is gone, the narrowing was not one): the
// file goes back to inbox/ saying why. Anything else is retried.
func (r *Reconciler) decideFailed(ctx context.Context, s state, c *copyOf, stale []*copyOf, err error) error {
	var pe *plexus.Error
	if !errors.As(err, &pe) || (pe.Code != plexus.CodeConflict && pe.Code != plexus.CodeInvalidRequest) {
		return err
	}
	now, rerr := r.read(ctx, s.p.ID)
	if rerr != nil {
		return rerr
	}
	if now.p == nil || now.p.State != plexus.StatePending {
		return r.one(ctx, s.p.ID)
	}
	if c == nil {
		// A withdrawal the gateway refused: the request expired a moment
		// ago and the sweep will close it.
		r.log.Debug("inbox: withdrawal not applied", "id", s.p.ID, "err", err)
		return nil
	}
	note := "this decision could not be applied, so nothing changed: " + pe.Message
	b := Annotate(c.b, note) // the owner's text, when it is not this decision's file
	if f, perr := Parse(c.b); perr == nil && f.ID == now.p.ID {
		if b, rerr = r.render(*now.p, note, "", f.Notes); rerr != nil {
			return rerr
		}
	}
	return r.refuse(ctx, now, c, stale, b, note)
}

// refuse puts b (the problem written into it) back in inbox/ in place of c,
// and journals why.
func (r *Reconciler) refuse(ctx context.Context, s state, c *copyOf, stale []*copyOf, b []byte, note string) error {
	return r.put(ctx, s.p.ID, plexus.FolderInbox, b, append(stale, c),
		&plexus.Activity{TraceID: s.p.TraceID, AgentID: s.p.AgentID, ActionType: "inbox.refused", Target: s.p.ID,
			Payload: map[string]any{"folder": c.folder, "problem": note}})
}

// decided handles a decision that is no longer pending: its file belongs
// in active/ while what it granted stands, in rejected/ when denied, and in
// archive/ otherwise. The owner removing an approved file from active/
// revokes it; any other move of a decided file is undone, with a note.
func (r *Reconciler) decided(ctx context.Context, s state, c *copyOf, stale []*copyOf) error {
	p, rec := s.p, s.rec
	want, ended := r.desired(s)
	if c == nil && rec != nil && rec.Folder == plexus.FolderActive && want == plexus.FolderActive {
		if !r.gone(p.ID) {
			return nil
		}
		return r.revoke(ctx, s, nil, stale, "its file was deleted from active/")
	}
	delete(r.missing, p.ID) // whatever was missing is settled below
	if c == nil {
		switch {
		case rec == nil || rec.Folder == plexus.FolderInbox:
			// Never written, or decided elsewhere while its file was away.
			b, err := r.render(*p, "", ended, Notes{})
			if err != nil {
				return err
			}
			return r.put(ctx, p.ID, want, b, stale)
		case rec.Folder != "":
			// The owner deleted a decided file: it stays deleted.
			return r.record(ctx, plexus.DecisionFile{PendingID: p.ID, Folder: "", Sum: rec.Sum})
		}
		return nil
	}
	ours := rec != nil && rec.Folder == c.folder // the daemon put it there
	// The file whose move into active/ approved this decision, not filed
	// yet, belongs wherever the decision now does: its grant may have ended
	// before it was filed (a crash between the decision and the filing,
	// then a later approval of the same capability; a once grant used at
	// once). It is not the owner moving a decided file.
	approvedBy := p.State == plexus.StateApproved && c.folder == plexus.FolderActive &&
		(rec == nil || rec.Folder == plexus.FolderInbox)
	switch {
	case c.folder == want && ours:
		// Settled. If the sum differs, the owner edited a decided file:
		// theirs to keep.
		return r.drop(stale)
	case c.folder == want, approvedBy:
		// The daemon's file, or the file whose move made this decision
		// (placed before a crash could record it): written as decided.
		b, err := r.redecided(s, c, ended)
		if err != nil {
			return err
		}
		return r.put(ctx, p.ID, want, b, append(stale, c))
	case p.State == plexus.StateApproved && want == plexus.FolderActive && !ours &&
		(c.folder == plexus.FolderArchive || c.folder == plexus.FolderRejected):
		return r.revoke(ctx, s, c, stale, "its file was moved from active/ to "+c.folder+"/")
	case ours:
		// The state changed through another channel (decided by the CLI or
		// the admin API, expired, used, revoked, its window ended): the
		// daemon moves its file.
		var b []byte
		var err error
		if c.sum == rec.Sum {
			b, err = r.render(*p, "", ended, Notes{})
		} else {
			b = Annotate(c.b, "this decision is now "+describeState(*p, ended)+"; your edits of this file were not applied")
		}
		if err != nil {
			return err
		}
		return r.put(ctx, p.ID, want, b, append(stale, c),
			&plexus.Activity{TraceID: p.TraceID, AgentID: p.AgentID, ActionType: "inbox.moved", Target: p.ID,
				Payload: map[string]any{"from": c.folder, "to": want, "why": describeState(*p, ended)}})
	default:
		// The owner moved a decided file somewhere it does not belong: a
		// decision is made once; moving its file again changes nothing.
		note := "this decision was already " + describeState(*p, ended) + "; moving its file to " + c.folder +
			"/ changes nothing (to grant it again, the agent asks again)"
		return r.put(ctx, p.ID, want, Annotate(c.b, note), append(stale, c),
			&plexus.Activity{TraceID: p.TraceID, AgentID: p.AgentID, ActionType: "inbox.refused", Target: p.ID,
				Payload: map[string]any{"folder": c.folder, "problem": note}})
	}
}

// redecided is the file of a decided decision that reached its folder: the
// rendering, unless the file cannot be read as this decision, in which case
// the owner's text is kept and annotated.
func (r *Reconciler) redecided(s state, c *copyOf, ended string) ([]byte, error) {
	if f, err := Parse(c.b); err == nil && f.ID == s.p.ID {
		return r.render(*s.p, "", ended, f.Notes)
	} else if err == nil {
		return Annotate(c.b, "this file claims decision "+f.ID+"; decision "+s.p.ID+" was "+describeState(*s.p, ended)), nil
	} else {
		return Annotate(c.b, "decision "+s.p.ID+" was "+describeState(*s.p, ended)+"; this file could not be read: "+err.Error()), nil
	}
}

// revoke revokes what an approved decision granted, because its file left
// active/: c is where the owner moved it (nil: deleted). A moved file is
// rewritten in archive/ saying so; a deleted one stays deleted.
func (r *Reconciler) revoke(ctx context.Context, s state, c *copyOf, stale []*copyOf, why string) error {
	if _, err := r.dec.RevokeDecision(ctx, s.p.ID, r.cfg.Owner(), plexus.ViaFile, "revoked by the owner: "+why); err != nil {
		var pe *plexus.Error
		if !errors.As(err, &pe) || pe.Code != plexus.CodeConflict {
			return err
		}
	}
	now, err := r.read(ctx, s.p.ID)
	if err != nil {
		return err
	}
	want, ended := r.desired(now)
	if want == plexus.FolderActive {
		return fmt.Errorf("revoke %s: a grant still stands", s.p.ID)
	}
	if c == nil {
		if err := r.drop(stale); err != nil {
			return err
		}
		return r.record(ctx, plexus.DecisionFile{PendingID: s.p.ID, Folder: "", Sum: s.rec.Sum})
	}
	b, err := r.redecided(now, c, ended)
	if err != nil {
		return err
	}
	return r.put(ctx, s.p.ID, want, b, append(stale, c))
}

// desired says which folder a decided decision's file belongs in, and for
// an approval that no longer grants anything, why.
func (r *Reconciler) desired(s state) (folder, ended string) {
	switch s.p.State {
	case plexus.StateApproved:
	case plexus.StateDenied:
		return plexus.FolderRejected, ""
	default:
		return plexus.FolderArchive, ""
	}
	now := r.now()
	var why []string
	for _, it := range s.p.Items {
		g := s.grants[it.CapabilityID]
		var w string
		switch {
		case g == nil || g.PendingID != s.p.ID:
			w = "replaced by a later decision"
		case g.RevokedAt != nil:
			w = "revoked"
		case g.UsedAt != nil:
			w = "used"
		case !g.Live(now):
			w = "its window ended"
		default:
			return plexus.FolderActive, ""
		}
		why = append(why, it.CapabilityID+" "+w)
	}
	return plexus.FolderArchive, strings.Join(why, ", ")
}

// describeState says what became of p, for notes.
func describeState(p plexus.Pending, ended string) string {
	s := p.State
	if p.Via != "" {
		s += " via " + p.Via
	}
	if p.DecidedAt != nil {
		s += " at " + p.DecidedAt.UTC().Format(humanTime)
	}
	if ended != "" {
		s += " (" + ended + ")"
	}
	return s
}

// unknown handles files named after a decision the gateway never put up:
// each is moved to rejected/ (kept as written, with the reason) so that
// nothing is ever approved from it.
func (r *Reconciler) unknown(ctx context.Context, id string, here []*copyOf) error {
	for _, c := range here {
		note := "Plexus never put up a decision " + id + ", so this file decides nothing"
		b := Annotate(c.b, note)
		if c.folder == plexus.FolderRejected {
			if bytes.Equal(b, c.b) {
				continue
			}
			if err := WriteAtomic(r.dir(c.folder), filepath.Base(c.path), b); err != nil {
				return err
			}
			continue
		}
		name, err := r.freeName(plexus.FolderRejected, id)
		if err != nil {
			return err
		}
		if err := WriteAtomic(r.dir(plexus.FolderRejected), name, b); err != nil {
			return err
		}
		if err := r.journal(ctx, &plexus.Activity{ActionType: "inbox.unknown", Target: id,
			Payload: map[string]any{"folder": c.folder, "movedTo": plexus.FolderRejected + "/" + name}}); err != nil {
			return err
		}
		if err := removeIf(c); err != nil {
			return err
		}
	}
	return nil
}

// freeName is id's file name in folder, or, when that is taken, a name
// that is no decision file's ("<id>.2.md"), so the copy decides nothing.
func (r *Reconciler) freeName(folder, id string) (string, error) {
	for i := 1; i < 1000; i++ {
		name := FileName(id)
		if i > 1 {
			name = fmt.Sprintf("%s.%d%s", id, i, Ext)
		}
		if _, err := os.Lstat(filepath.Join(r.dir(folder), name)); errors.Is(err, os.ErrNotExist) {
			return name, nil
		}
	}
	return "", fmt.Errorf("no free name for %s in %s/", id, folder)
}

// render is p's file, with a note, why it ended, and the owner's notes of
// the file it replaces.
func (r *Reconciler) render(p plexus.Pending, note, ended string, notes Notes) ([]byte, error) {
	return Render(p, RenderOptions{SameUser: p.SameUser, Note: note, Ended: ended, Notes: notes})
}

// put writes b as folder/<id>.md (unless it holds b already), records it
// together with rows, then removes the copies in drop that still hold what
// they held when looked at. The order (write, record, remove) means a crash
// at any point leaves a file the next pass recognizes.
func (r *Reconciler) put(ctx context.Context, id, folder string, b []byte, drop []*copyOf, rows ...*plexus.Activity) error {
	dir, name := r.dir(folder), FileName(id)
	path := filepath.Join(dir, name)
	if cur, err := readLimited(path); err != nil || !bytes.Equal(cur, b) {
		if err := WriteAtomic(dir, name, b); err != nil {
			return err
		}
	}
	rec := plexus.DecisionFile{PendingID: id, Folder: folder, Sum: Sum(b)}
	for _, c := range drop {
		if c.path != path {
			rec.Prev = append(rec.Prev, plexus.FilePlace{Folder: c.folder, Sum: c.sum})
		}
	}
	if err := r.record(ctx, rec, rows...); err != nil {
		return err
	}
	if fi, err := os.Lstat(path); err == nil {
		r.seen[path] = seenFile{info: fi}
	}
	for _, c := range drop {
		if c.path == path {
			continue
		}
		if err := removeIf(c); err != nil {
			return err
		}
	}
	return nil
}

// drop removes stale copies.
func (r *Reconciler) drop(stale []*copyOf) error {
	for _, c := range stale {
		if err := removeIf(c); err != nil {
			return err
		}
	}
	return nil
}

// removeIf removes c's file if it still holds what it held when read: an
// edit saved since is the owner's and stays.
func removeIf(c *copyOf) error {
	b, err := readLimited(c.path)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	} else if err != nil {
		return err
	}
	if Sum(b) != c.sum {
		return nil
	}
	if err := os.Remove(c.path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	return syncDir(filepath.Dir(c.path))
}

// record stores rec (and rows, in the same transaction) and mirrors it in
// memory.
func (r *Reconciler) record(ctx context.Context, rec plexus.DecisionFile, rows ...*plexus.Activity) error {
	rec.WrittenAt = r.now()
	err := r.store.Update(ctx, false, func(tx plexus.StateTx) error {
		if err := tx.PutDecisionFile(&rec); err != nil {
			return err
		}
		for _, a := range rows {
			a.Actor = plexus.ActorSystem
			if err := tx.Record(a); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("record %s in %s/: %w", rec.PendingID, rec.Folder, err)
	}
	if rec.Folder == plexus.FolderInbox || rec.Folder == plexus.FolderActive {
		r.records[rec.PendingID] = rec
	} else {
		delete(r.records, rec.PendingID)
	}
	return nil
}

// journal writes one row of the reconciler's own.
func (r *Reconciler) journal(ctx context.Context, a *plexus.Activity) error {
	a.Actor = plexus.ActorSystem
	return r.store.Update(ctx, false, func(tx plexus.StateTx) error { return tx.Record(a) })
}

// report journals a problem the owner must fix by hand, once for as long
// as it stays the same problem.
func (r *Reconciler) report(id, key, action string, a plexus.Activity) {
	if r.reported[id] == key {
		return
	}
	r.reported[id] = key
	a.ActionType = action
	r.log.Warn("inbox: "+action, "id", id, "detail", a.Payload)
	if err := r.journal(context.Background(), &a); err != nil {
		r.log.Error("inbox: journal a problem", "id", id, "err", err)
	}
}

// notify tells the owner a decision was put up, in the gateway's words.
func (r *Reconciler) notify(p plexus.Pending) {
	if r.cfg.Notify == nil {
		return
	}
	var lines []string
	for _, n := range p.Narration {
		l := n.NotificationLine
		if l == "" {
			l = n.Summary
		}
		if l = oneLine(l); l != "" {
			lines = append(lines, l)
		}
	}
	if len(lines) == 0 {
		lines = []string{oneLine(title(p))}
	}
	r.cfg.Notify(capRunes(strings.Join(lines, " · ")+" ("+p.ID+")", 500))
}
