package journal

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/plexus-gw/plexus"
)

// Group commit of non-durable updates.
//
// Every /invoke ends with one non-durable Update recording its audit row, so
// under load most of the writer's time went to per-call transaction overhead
// (BEGIN IMMEDIATE, the chain-head read, COMMIT, a mirror write) while the
// other callers queued for the one writer connection. Non-durable Updates are
// therefore batched: callers queue in [group]; whichever caller finds no
// batch running becomes the leader, takes the writer connection, then takes
// up to maxBatch queued callers (itself first) and runs their fns one after
// another in ONE write transaction, each inside its own SAVEPOINT, followed by
// one COMMIT and one mirror append. There is no timer and no background
// goroutine: a lone caller leads a batch of one at once (and then needs no
// savepoint), and a batch holds whoever queued while the previous one was
// committing. When its batch is done the leader hands leadership to the
// oldest caller still queued, which runs the next batch on its own goroutine,
// so no caller leads more than one batch.
//
// Guarantees, each kept per caller as if it had its own transaction:
//   - a fn that returns an error (or panics) is rolled back to its savepoint
//     (ROLLBACK TO + RELEASE): its rows, events and state changes are gone,
//     the in-memory chain head is restored to what it was before the fn, the
//     ids Record and Publish set in its values are cleared ([tx.forget]), and
//     only its caller gets the error (a panic is re-raised in its caller's
//     goroutine); the other fns' work stays;
//   - every caller returns only after the COMMIT of its batch, and if the
//     COMMIT (or any savepoint statement) fails every caller whose fn ran gets
//     the error and nothing of the batch persists: an audit row that cannot be
//     committed still fails its call closed;
//   - a caller whose ctx is done before its fn starts gets ctx.Err() and its
//     fn never runs; once its fn has started it runs to completion without
//     interruption (its statements use context.WithoutCancel: an interrupted
//     statement would make SQLite roll back the whole batch) and the caller
//     waits for the commit result;
//   - activity rows reach the mirror after the commit, in id order, rolled-back
//     fns' rows never.
//
// Durable Updates do not join batches: they keep their own synchronous=FULL
// transaction and are serialized with batches by the writer pool's single
// connection, which a leader holds from before it takes its batch until after
// the mirror append.

// maxBatch caps the fns sharing one transaction: enough to amortize a commit
// across a burst of callers, few enough that no caller waits behind a long
// train of others' fns.
const maxBatch = 64

// errAbandoned is what the other callers of a batch get when a fn exits its
// goroutine (runtime.Goexit, as testing's FailNow does) instead of returning:
// the transaction is rolled back and nothing of the batch persists.
var errAbandoned = errors.New("journal update: batch abandoned: a callback exited its goroutine")

// errPanicked stands for a panicking fn's error while its batch finishes; its
// caller sees the panic, not this.
var errPanicked = errors.New("journal update: callback panicked")

// group is the queue of non-durable Updates waiting for a batch.
type group struct {
	mu      sync.Mutex
	leading bool      // a leader is between taking the lead and handing it off
	queue   []*waiter // callers waiting for a batch, oldest first

	// batches run, callers they held and savepoints taken for them, for
	// tests and benchmarks
	batches, callers, savepoints atomic.Int64
}

type waitState uint8

const (
	waitQueued   waitState = iota // in group.queue
	waitTaken                     // in a running batch; its result follows
	waitPromoted                  // made leader of the next batch
)

// waiter is one non-durable Update. Its fields other than state are written
// only by the goroutine running its batch, and read by its caller after ready
// is closed.
type waiter struct {
	ctx   context.Context
	fn    func(plexus.StateTx) error
	act   *plexus.Activity // instead of fn: an Append of this row
	ready chan struct{}    // closed once the result is set or the waiter promoted
	state waitState        // guarded by group.mu

	t        *tx // the fn's view of the transaction while its work stands
	err      error
	panicVal any
	settled  bool // err (or the panic) is final
	panicked bool // the bools last: the waiter stays in the 96-byte size class
}

// result returns the caller's error, or re-raises its fn's panic.
func (w *waiter) result() error {
	if w.panicked {
		panic(w.panicVal)
	}
	return w.err
}

// updateGrouped is Update for durable == false (fn), and Append (act).
func (db *DB) updateGrouped(ctx context.Context, fn func(plexus.StateTx) error, act *plexus.Activity) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("journal update: %w", err)
	}
	w := &waiter{ctx: ctx, fn: fn, act: act}
	g := &db.group
	g.mu.Lock()
	if !g.leading {
		g.leading = true
		g.mu.Unlock()
		return db.lead(w)
	}
	w.ready = make(chan struct{})
	g.queue = append(g.queue, w)
	g.mu.Unlock()

	select {
	case <-w.ready:
	case <-ctx.Done():
		g.mu.Lock()
		if w.state == waitQueued {
			g.remove(w)
			g.mu.Unlock()
			return fmt.Errorf("journal update: %w", ctx.Err())
		}
		g.mu.Unlock()
		// Taken into a batch (its fn may already have run: wait for the
		// commit) or promoted (lead sees the done ctx and passes the lead on).
		<-w.ready
	}
	if w.state == waitPromoted {
		return db.lead(w)
	}
	return w.result()
}

// remove drops a cancelled waiter from the queue. g.mu must be held.
func (g *group) remove(w *waiter) {
	for i, q := range g.queue {
		if q == w {
			last := len(g.queue) - 1
			copy(g.queue[i:], g.queue[i+1:])
			g.queue[last] = nil
			g.queue = g.queue[:last]
			return
		}
	}
}

// take moves up to maxBatch-1 queued waiters behind the leader into a batch,
// appended to dst (empty; a lone leader fits in its own array).
func (g *group) take(leader *waiter, dst []*waiter) []*waiter {
	g.mu.Lock()
	defer g.mu.Unlock()
	n := min(len(g.queue), maxBatch-1)
	batch := slices.Grow(dst, n+1)
	batch = append(batch, leader)
	for _, w := range g.queue[:n] {
		w.state = waitTaken
		batch = append(batch, w)
	}
	rest := copy(g.queue, g.queue[n:])
	clear(g.queue[rest:])
	g.queue = g.queue[:rest]
	g.batches.Add(1)
	g.callers.Add(int64(len(batch)))
	return batch
}

// handOff ends the current leader's turn: the oldest queued waiter leads the
// next batch, or, with nobody queued, the next caller will.
func (g *group) handOff() {
	g.mu.Lock()
	if len(g.queue) == 0 {
		g.leading = false
		g.mu.Unlock()
		return
	}
	next := g.queue[0]
	rest := copy(g.queue, g.queue[1:])
	g.queue[rest] = nil
	g.queue = g.queue[:rest]
	next.state = waitPromoted
	g.mu.Unlock()
	close(next.ready)
}

// lead runs one batch with self first, on the caller's goroutine, then hands
// the lead on and returns self's result.
func (db *DB) lead(self *waiter) error {
	// The writer connection is taken before the batch: callers queued while
	// a durable Update (or another process's write) holds it join this batch,
	// and can still give up while they wait.
	conn, err := db.w.Conn(self.ctx)
	if err != nil {
		db.group.handOff()
		return fmt.Errorf("journal update: %w", err)
	}
	// Yield once before taking the batch: the handlers that are runnable
	// (a burst of /invoke calls finishing their dispatch) reach the queue
	// and share this commit instead of each waiting for one of their own.
	// Measured at 32 connections on 2 cores: 3 callers a batch without the
	// yield, 10 with it, and a third less CPU per call; a lone caller finds
	// nothing else runnable and goes on at once.
	runtime.Gosched()
	b := &batch{db: db}
	b.ws = db.group.take(self, b.lone[:0])
	finished := false
	defer func() {
		if !finished {
			// A fn called runtime.Goexit (or the leader's own code
			// panicked): the goroutine is lost, but the transaction and
			// the other callers must not be left hanging. Callers already
			// settled (after a commit) keep their result.
			b.fail(errAbandoned)
		}
		conn.Close() // back to the pool before the next leader asks for it
		db.group.handOff()
		for _, w := range b.ws[1:] {
			close(w.ready)
		}
	}()
	b.run(conn)
	finished = true
	return self.result()
}

// batch is one group-committed transaction.
//
// The batch opens and ends its transaction with its own statements on the
// writer connection rather than through database/sql's Tx, which starts a
// goroutine and a cancellable context for every transaction, to watch a
// context that here is never cancelled (about a tenth of a lone caller's
// allocations, and a goroutine switch per commit).
type batch struct {
	db   *DB
	ws   []*waiter // the leader first
	conn *sql.Conn
	open bool // a transaction is open on conn
	// head is the chain head the batch's fns share; lone holds ws for a
	// batch of one. Both live here to save a lone commit two allocations.
	head chainHead
	lone [1]*waiter
}

// run executes the batch's fns in one transaction and commits it. Every
// waiter is settled when it returns.
func (b *batch) run(conn *sql.Conn) {
	// The batch belongs to no single caller: no caller's cancellation may
	// interrupt its statements (ctl runs them with a background context).
	b.conn = conn
	if err := b.ctl(ctlBegin); err != nil {
		b.fail(fmt.Errorf("journal update: begin: %w", err))
		return
	}
	b.open = true
	shared := len(b.ws) > 1
	for _, w := range b.ws {
		if !b.runOne(w, &b.head, shared) {
			return
		}
	}
	if err := b.ctl(ctlCommit); err != nil {
		// A failed COMMIT (say, a deferred foreign key left violated) may
		// leave the transaction open: fail rolls it back, and nothing of
		// the batch persists.
		b.fail(fmt.Errorf("journal update: commit: %w", err))
		return
	}
	b.open = false
	b.db.commits.Add(1)
	b.settle()
}

// runOne runs w's fn inside the batch's transaction, under its own
// savepoint when the batch is shared and w needs one, and undoes only that
// fn when it fails. It returns false when the batch ended with it (failed or
// rolled back whole, every waiter settled).
//
// A lone fn needs no savepoint: if it fails the transaction is rolled back
// whole, as an ordinary Update's is. Nor does an Append once the batch's
// chain head is confirmed (read, or written by a row of this transaction):
// its only statement is then its INSERT, which SQLite undoes by itself when
// it fails. Before that, its row may need relinking after the INSERT
// (tx.relink), which only a savepoint can undo.
func (b *batch) runOne(w *waiter, head *chainHead, shared bool) bool {
	if err := w.ctx.Err(); err != nil {
		w.err, w.settled = fmt.Errorf("journal update: %w", err), true
		return true
	}
	bare := shared && w.act != nil && head.known && !head.remembered
	savepoints := shared && !bare
	if savepoints {
		b.db.group.savepoints.Add(1)
		if err := b.ctl(ctlSavepoint); err != nil {
			b.fail(fmt.Errorf("journal update: savepoint: %w", err))
			return false
		}
	}
	before := *head
	ctx := w.ctx
	if ctx.Done() != nil {
		ctx = context.WithoutCancel(ctx)
	}
	t := &tx{ctx: ctx, db: b.db, q: b.conn, head: head}
	t.recorded, t.handedActs = t.recordedOne[:0], t.handedOne[:0]
	fnErr := w.call(t)
	if fnErr == nil {
		w.t = t
		if savepoints {
			if err := b.ctl(ctlRelease); err != nil {
				b.fail(fmt.Errorf("journal update: release savepoint: %w", err))
				return false
			}
		}
		return true
	}
	// Undo this fn only: its rows, its events and its chain links.
	w.err, w.settled = fnErr, true
	t.forget()
	*head = before
	if bare {
		return b.afterFailedAppend(t, fnErr)
	}
	if !savepoints {
		b.rollback()
		return false
	}
	err := b.ctl(ctlRollbackTo)
	if err == nil {
		err = b.ctl(ctlRelease)
	}
	if err != nil {
		b.fail(fmt.Errorf("journal update: rollback to savepoint: %w", err))
		return false
	}
	return true
}

// afterFailedAppend checks that an Append that failed without a savepoint
// left the batch's transaction as it was: its INSERT failed (or never
// ran) and SQLite did not end the transaction over it. Otherwise the
// batch cannot go on and every other caller gets the error.
func (b *batch) afterFailedAppend(t *tx, err error) bool {
	if t.inserted {
		b.fail(fmt.Errorf("journal update: an append failed after its insert: %w", err))
		return false
	}
	open, cerr := b.inTransaction()
	if cerr != nil || !open {
		if cerr == nil {
			b.open = false // SQLite rolled it back itself: nothing to end
		}
		b.fail(fmt.Errorf("journal update: the batch's transaction ended under a failed append: %w", errors.Join(err, cerr)))
		return false
	}
	return true
}

// inTransaction reports whether the batch's connection is still inside a
// transaction.
func (b *batch) inTransaction() (bool, error) {
	open := false
	err := b.conn.Raw(func(dc any) error {
		wc, ok := dc.(*writerConn)
		if !ok {
			return fmt.Errorf("writer connection is a %T", dc)
		}
		open = !wc.AutoCommit()
		return nil
	})
	return open, err
}

// settle runs once the batch committed: every caller is settled first, so
// that nothing after this point can report a rollback. Still holding the
// writer, the mirror lines are appended in commit order.
func (b *batch) settle() {
	var rows []mirrorRow
	for _, w := range b.ws {
		if w.t != nil {
			if rows == nil {
				rows = w.t.recorded // a lone caller's rows as they are
			} else {
				rows = append(rows, w.t.recorded...)
			}
			w.t = nil
		}
		if !w.settled {
			w.err, w.settled = nil, true
		}
	}
	b.db.committed(rows, false)
}

// call runs w's fn, turning a panic into errPanicked (the panic is kept for
// w's caller). A Goexit passes through: lead's deferred cleanup handles it.
func (w *waiter) call(t *tx) (err error) {
	returned := false
	defer func() {
		if returned {
			return
		}
		if v := recover(); v != nil {
			w.panicked, w.panicVal = true, v
			err = errPanicked
		}
	}()
	if w.act != nil {
		t.inserted, err = t.record(w.act)
	} else {
		err = w.fn(t)
	}
	returned = true
	return err
}

// rollback ends the transaction without committing, if it is still open.
// Should the ROLLBACK fail and leave the connection inside the
// transaction, the connection is discarded: the next writer must never
// find a transaction open.
func (b *batch) rollback() {
	if !b.open {
		return
	}
	b.open = false
	_, err := b.conn.ExecContext(context.Background(), "ROLLBACK")
	if err == nil {
		return
	}
	b.db.log.Error("journal rollback", "err", err)
	err = b.conn.Raw(func(dc any) error {
		if c, ok := dc.(*writerConn); ok && c.AutoCommit() {
			return nil // SQLite had already ended the transaction itself
		}
		return driver.ErrBadConn // discards the connection
	})
	if err != nil && !errors.Is(err, driver.ErrBadConn) {
		b.db.log.Error("journal rollback: discard the connection", "err", err)
	}
}

// fail rolls the batch back and gives err to every caller not yet settled
// by its own fn's error, clearing the ids its fn was handed.
func (b *batch) fail(err error) {
	b.rollback()
	for _, w := range b.ws {
		if w.t != nil {
			w.t.forget()
			w.t = nil
		}
		if !w.settled {
			w.err, w.settled = err, true
		}
	}
}

// ctl runs the control statement s on the batch's connection, prepared
// once per connection (writerConn).
func (b *batch) ctl(s ctlStmt) error {
	return b.conn.Raw(func(dc any) error {
		wc, ok := dc.(*writerConn)
		if !ok {
			return fmt.Errorf("writer connection is a %T", dc)
		}
		return wc.run(s)
	})
}
