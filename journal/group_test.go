package journal

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/plexus-gw/plexus"
)

// waitFor polls cond until it holds; a deadline only turns a regression into
// a failure instead of a hang.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

func queued(db *DB) int {
	db.group.mu.Lock()
	defer db.group.mu.Unlock()
	return len(db.group.queue)
}

// holdWriter starts a non-durable Update that records one row and then
// blocks inside its fn, so that the Updates started meanwhile queue up and
// form the next batch, in the order they were started. release lets it
// commit and returns its error.
func holdWriter(t *testing.T, db *DB) (release func() error) {
	t.Helper()
	entered, rel, done := make(chan struct{}), make(chan struct{}), make(chan error, 1)
	go func() {
		done <- db.Update(context.Background(), false, func(tx plexus.StateTx) error {
			if err := tx.Record(&plexus.Activity{Actor: plexus.ActorSystem, ActionType: "hold"}); err != nil {
				return err
			}
			close(entered)
			<-rel
			return nil
		})
	}()
	<-entered
	return func() error { close(rel); return <-done }
}

// enqueue starts a non-durable Update behind a held writer and returns once
// it is queued.
func enqueue(t *testing.T, db *DB, ctx context.Context, fn func(plexus.StateTx) error) <-chan error {
	t.Helper()
	n := queued(db)
	done := make(chan error, 1)
	go func() { done <- db.Update(ctx, false, fn) }()
	waitFor(t, "the update to queue", func() bool { return queued(db) == n+1 })
	return done
}

// checkJournal verifies the chain, that it holds want rows, and that the
// mirror holds exactly the committed rows, in id order.
func checkJournal(t *testing.T, td *testDB, want int) []plexus.Activity {
	t.Helper()
	ctx := context.Background()
	rep, err := td.Verify(ctx, td.vopts())
	if err != nil {
		t.Fatal(err)
	}
	if !rep.OK || rep.Rows != want {
		t.Fatalf("Verify = %+v, want OK with %d rows", rep, want)
	}
	rows, err := td.Activity(ctx, Filter{})
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != want {
		t.Fatalf("activity rows = %d, want %d", len(rows), want)
	}
	mirrored := mirrorLines(t, td.audit, "2025-03-14")
	if len(mirrored) != len(rows) {
		t.Fatalf("mirror holds %d rows, journal %d", len(mirrored), len(rows))
	}
	for i, m := range mirrored {
		if i > 0 && m.ID <= mirrored[i-1].ID {
			t.Errorf("mirror line %d: id %d after %d", i, m.ID, mirrored[i-1].ID)
		}
		if r := rows[i]; m.ID != r.ID || m.Hash != r.Hash || m.PrevHash != r.PrevHash {
			t.Errorf("mirror line %d = (%d %s), journal row (%d %s)", i, m.ID, m.Hash, r.ID, r.Hash)
		}
	}
	return rows
}

func TestGroupCommitConcurrent(t *testing.T) {
	td := mustOpen(t)
	const n = 200
	var (
		wg    sync.WaitGroup
		start = make(chan struct{})
		acts  = make([]plexus.Activity, n)
		errs  = make([]error, n)
	)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			acts[i] = plexus.Activity{Actor: plexus.ActorSystem, ActionType: "invoke.ok", TraceID: fmt.Sprintf("tr%03d", i)}
			if i%2 == 1 {
				// Appends share the batches (without savepoints).
				errs[i] = td.Append(context.Background(), &acts[i])
				return
			}
			errs[i] = td.Update(context.Background(), false, func(tx plexus.StateTx) error {
				if err := tx.SetMeta(fmt.Sprintf("k%03d", i), "v"); err != nil {
					return err
				}
				return tx.Record(&acts[i])
			})
		}()
	}
	close(start)
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("Update %d: %v", i, err)
		}
	}
	rows := checkJournal(t, td, n)
	byID := map[int64]plexus.Activity{}
	for _, r := range rows {
		byID[r.ID] = r
	}
	for i, a := range acts {
		if r, ok := byID[a.ID]; !ok || r.TraceID != a.TraceID || r.Hash != a.Hash {
			t.Errorf("caller %d was told id %d hash %s; the journal has %+v", i, a.ID, a.Hash, r)
		}
	}
	mustView(t, td.DB, func(tx plexus.StateTx) error {
		for i := 0; i < n; i += 2 {
			if v, err := tx.Meta(fmt.Sprintf("k%03d", i)); err != nil || v != "v" {
				t.Errorf("Meta(k%03d) = %q, %v", i, v, err)
			}
		}
		return nil
	})
	t.Logf("%d updates in %d batches, %d savepoints", td.group.callers.Load(), td.group.batches.Load(), td.group.savepoints.Load())
}

// TestGroupCommitClose: once Close returns, every row committed before it
// is in the audit mirror and anchored, in commit order, so a journal
// reopened (or verified) after a clean stop shows no gap.
func TestGroupCommitClose(t *testing.T) {
	dir := t.TempDir()
	td := &testDB{path: filepath.Join(dir, "journal.db"), audit: filepath.Join(dir, "audit"),
		anchor: filepath.Join(dir, "journal.anchor"), clock: newClock(t0)}
	opts := Options{AuditDir: td.audit, AnchorPath: td.anchor, Clock: td.clock.Now, ChainKey: testKey}
	db, err := Open(context.Background(), td.path, opts)
	if err != nil {
		t.Fatal(err)
	}
	const n = 50
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := db.Append(context.Background(), &plexus.Activity{Actor: plexus.ActorSystem, ActionType: "invoke.ok", Target: fmt.Sprint(i)}); err != nil {
				t.Errorf("Append %d: %v", i, err)
			}
		}()
	}
	wg.Wait()
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	a, err := readAnchor(td.anchor)
	if err != nil || a.ID != n {
		t.Fatalf("anchor after Close = %+v, %v; want row %d", a, err, n)
	}
	td.DB = mustOpenAt(t, td.path, opts)
	checkJournal(t, td, n)
}

// TestGroupCommitPartialFailure: in one batch, the fns that fail (by error
// or panic) leave nothing behind, the others commit, and the chain, the
// event ids and the mirror stay exact.
func TestGroupCommitPartialFailure(t *testing.T) {
	td := mustOpen(t)
	release := holdWriter(t, td.DB)
	batchesBefore := td.group.batches.Load()

	type caller struct {
		fail, panics bool
		acts         [2]plexus.Activity
		ev           plexus.Event
		done         <-chan error
		panicVal     any
	}
	callers := []*caller{
		{panics: true}, {}, {fail: true}, {}, {fail: true}, {panics: true}, {},
	}
	for i, c := range callers {
		agent := fmt.Sprintf("agent%d", i)
		fn := func(tx plexus.StateTx) error {
			if err := tx.PutAgent(&plexus.Agent{ID: agent, CreatedAt: t0}); err != nil {
				return err
			}
			for j := range c.acts {
				c.acts[j] = plexus.Activity{Actor: plexus.ActorSystem, ActionType: "agent.connected", AgentID: agent}
				if err := tx.Record(&c.acts[j]); err != nil {
					return err
				}
			}
			c.ev = plexus.Event{Type: "agent.connected"}
			if err := tx.Publish(&c.ev); err != nil {
				return err
			}
			switch {
			case c.panics:
				panic("boom " + agent)
			case c.fail:
				return fmt.Errorf("%s: %w", agent, errBoom)
			}
			return nil
		}
		done := make(chan error, 1)
		c.done = done
		n := queued(td.DB)
		go func() {
			defer func() {
				if v := recover(); v != nil {
					c.panicVal = v
					done <- nil
				}
			}()
			done <- td.Update(context.Background(), false, fn)
		}()
		waitFor(t, "the update to queue", func() bool { return queued(td.DB) == n+1 })
	}
	if err := release(); err != nil {
		t.Fatal(err)
	}
	committed := 1 // the held writer's row
	for i, c := range callers {
		err := <-c.done
		switch {
		case c.panics:
			if want := fmt.Sprintf("boom agent%d", i); c.panicVal != want {
				t.Errorf("caller %d: panic %v, want %q re-raised in its goroutine", i, c.panicVal, want)
			}
		case c.fail:
			if !errors.Is(err, errBoom) {
				t.Errorf("caller %d: err = %v, want its own errBoom", i, err)
			}
		default:
			if err != nil {
				t.Errorf("caller %d: err = %v, want nil", i, err)
			}
			committed += len(c.acts)
		}
		if c.fail || c.panics {
			for j, a := range c.acts {
				if a.ID != 0 || a.Hash != "" || a.PrevHash != "" {
					t.Errorf("caller %d activity %d keeps id %d hash %q after rollback", i, j, a.ID, a.Hash)
				}
			}
			if c.ev.ID != 0 {
				t.Errorf("caller %d keeps event id %d after rollback", i, c.ev.ID)
			}
		}
	}
	if got := td.group.batches.Load() - batchesBefore; got != 1 {
		t.Errorf("the %d queued updates ran in %d batches, want 1", len(callers), got)
	}

	rows := checkJournal(t, td, committed)
	byID := map[int64]plexus.Activity{}
	for _, r := range rows {
		byID[r.ID] = r
	}
	events, err := td.EventsSince(context.Background(), 0, "", "", 0)
	if err != nil {
		t.Fatal(err)
	}
	eventIDs := map[int64]bool{}
	for _, e := range events {
		eventIDs[e.ID] = true
	}
	mustView(t, td.DB, func(tx plexus.StateTx) error {
		for i, c := range callers {
			ok := !c.fail && !c.panics
			_, err := tx.Agent(fmt.Sprintf("agent%d", i))
			if ok != (err == nil) {
				t.Errorf("caller %d (committed %v): Agent err = %v", i, ok, err)
			}
			if !ok {
				continue
			}
			for _, a := range c.acts {
				if r := byID[a.ID]; r.Hash != a.Hash || r.AgentID != a.AgentID {
					t.Errorf("caller %d: told id %d hash %s, journal has %+v", i, a.ID, a.Hash, r)
				}
			}
			if !eventIDs[c.ev.ID] {
				t.Errorf("caller %d: event id %d not persisted (have %v)", i, c.ev.ID, eventIDs)
			}
		}
		return nil
	})
	if len(events) != 3 {
		t.Errorf("persisted events = %d, want 3 (the committed callers')", len(events))
	}

	// The chain head is right after the batch, too.
	mustUpdate(t, td.DB, func(tx plexus.StateTx) error {
		return tx.Record(&plexus.Activity{Actor: plexus.ActorSystem, ActionType: "after"})
	})
	checkJournal(t, td, committed+1)
}

// TestGroupCommitCommitFails: a fn that leaves a deferred foreign key
// violated makes the batch's COMMIT fail, and then every caller of the batch
// fails and nothing of it persists.
func TestGroupCommitCommitFails(t *testing.T) {
	td := mustOpen(t)
	release := holdWriter(t, td.DB)
	acts := make([]plexus.Activity, 3)
	var dones []<-chan error
	for i := range acts {
		dones = append(dones, enqueue(t, td.DB, context.Background(), func(tx plexus.StateTx) error {
			if i == 1 {
				// enroll_codes.agent_id references agents DEFERRABLE
				// INITIALLY DEFERRED: the insert succeeds, COMMIT fails.
				err := tx.PutEnrollCode(&plexus.EnrollCode{Hash: []byte("h"), AgentID: "ghost", CreatedAt: t0, ExpiresAt: t0})
				if err != nil {
					return err
				}
			}
			acts[i] = plexus.Activity{Actor: plexus.ActorSystem, ActionType: "invoke.ok", Target: fmt.Sprint(i)}
			return tx.Record(&acts[i])
		}))
	}
	if err := release(); err != nil {
		t.Fatal(err)
	}
	for i, done := range dones {
		err := <-done
		if err == nil || !strings.Contains(err.Error(), "commit") {
			t.Errorf("caller %d: err = %v, want the commit failure", i, err)
		}
		if acts[i].ID != 0 || acts[i].Hash != "" {
			t.Errorf("caller %d keeps id %d after the failed commit", i, acts[i].ID)
		}
	}
	checkJournal(t, td, 1)
	mustView(t, td.DB, func(tx plexus.StateTx) error {
		if _, err := tx.EnrollCode([]byte("h")); !errors.Is(err, plexus.ErrNotFound) {
			t.Errorf("EnrollCode after failed commit: err = %v, want ErrNotFound", err)
		}
		return nil
	})
	mustUpdate(t, td.DB, func(tx plexus.StateTx) error {
		return tx.Record(&plexus.Activity{Actor: plexus.ActorSystem, ActionType: "after"})
	})
	checkJournal(t, td, 2)
}

// TestGroupCommitRollbackFails: a lone fn that fails after its transaction
// was ended under the batch (here by a COMMIT of its own) makes the batch's
// ROLLBACK fail; the caller still gets its own error, and the writer is
// neither left inside a transaction nor lost: the next Updates, grouped and
// durable, commit.
func TestGroupCommitRollbackFails(t *testing.T) {
	td := mustOpen(t)
	errOwn := errors.New("own failure")
	err := td.Update(context.Background(), false, func(stx plexus.StateTx) error {
		if _, err := stx.(*tx).exec("COMMIT"); err != nil {
			return err
		}
		return errOwn
	})
	if !errors.Is(err, errOwn) {
		t.Fatalf("err = %v, want the fn's own error", err)
	}
	mustUpdate(t, td.DB, func(tx plexus.StateTx) error {
		return tx.Record(&plexus.Activity{Actor: plexus.ActorSystem, ActionType: "after"})
	})
	err = td.Update(context.Background(), true, func(tx plexus.StateTx) error {
		return tx.Record(&plexus.Activity{Actor: plexus.ActorSystem, ActionType: "durable"})
	})
	if err != nil {
		t.Fatalf("durable Update after the failed rollback: %v", err)
	}
	checkJournal(t, td, 2)
}

// TestGroupCommitDurableInterleaved mixes durable Updates (own transaction,
// synchronous=FULL) with group-committed ones.
func TestGroupCommitDurableInterleaved(t *testing.T) {
	td := mustOpen(t)
	const n = 120
	var wg sync.WaitGroup
	errs := make([]error, n)
	start := make(chan struct{})
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			durable := i%3 == 0
			errs[i] = td.Update(context.Background(), durable, func(stx plexus.StateTx) error {
				var sync int
				if err := stx.(*tx).queryRow("PRAGMA synchronous").Scan(&sync); err != nil {
					return err
				}
				if want := map[bool]int{true: 2, false: 1}[durable]; sync != want {
					return fmt.Errorf("synchronous = %d in a durable=%v update, want %d", sync, durable, want)
				}
				if err := stx.SetMeta(fmt.Sprint("k", i), "v"); err != nil {
					return err
				}
				return stx.Record(&plexus.Activity{Actor: plexus.ActorSystem, ActionType: "x", Target: fmt.Sprint(durable)})
			})
		}()
	}
	close(start)
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Errorf("Update %d: %v", i, err)
		}
	}
	checkJournal(t, td, n)
}

func TestGroupCommitCancel(t *testing.T) {
	t.Run("WhileQueued", func(t *testing.T) {
		td := mustOpen(t)
		release := holdWriter(t, td.DB)
		ctx, cancel := context.WithCancel(context.Background())
		called := false
		done := enqueue(t, td.DB, ctx, func(tx plexus.StateTx) error { called = true; return nil })
		cancel()
		select { // returns while the writer is still held
		case err := <-done:
			if !errors.Is(err, context.Canceled) {
				t.Errorf("err = %v, want context.Canceled", err)
			}
		case <-time.After(10 * time.Second):
			t.Fatal("a cancelled queued update did not return while the writer was held")
		}
		if n := queued(td.DB); n != 0 {
			t.Errorf("queue holds %d after the cancellation, want 0", n)
		}
		if err := release(); err != nil {
			t.Fatal(err)
		}
		if called {
			t.Error("a cancelled update's fn ran")
		}
	})

	t.Run("InBatchBeforeFn", func(t *testing.T) {
		td := mustOpen(t)
		release := holdWriter(t, td.DB)
		ctx1, cancel1 := context.WithCancel(context.Background())
		defer cancel1()
		called := false
		first := enqueue(t, td.DB, context.Background(), func(tx plexus.StateTx) error {
			cancel1() // the second caller's fn has not started yet
			return tx.Record(&plexus.Activity{Actor: plexus.ActorSystem, ActionType: "first"})
		})
		second := enqueue(t, td.DB, ctx1, func(tx plexus.StateTx) error { called = true; return nil })
		if err := release(); err != nil {
			t.Fatal(err)
		}
		if err := <-first; err != nil {
			t.Errorf("first: %v", err)
		}
		if err := <-second; !errors.Is(err, context.Canceled) || called {
			t.Errorf("second: err = %v, fn called = %v; want context.Canceled and no call", err, called)
		}
		checkJournal(t, td, 2)
	})

	t.Run("AfterFnRan", func(t *testing.T) {
		td := mustOpen(t)
		release := holdWriter(t, td.DB)
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		var dones []<-chan error
		for i := range 2 {
			dones = append(dones, enqueue(t, td.DB, ctx, func(tx plexus.StateTx) error {
				if err := tx.Record(&plexus.Activity{Actor: plexus.ActorSystem, ActionType: fmt.Sprint("r", i)}); err != nil {
					return err
				}
				if i == 1 {
					cancel() // fn has run: the caller waits for the commit
				}
				return tx.SetMeta(fmt.Sprint("k", i), "v")
			}))
		}
		if err := release(); err != nil {
			t.Fatal(err)
		}
		for i, done := range dones {
			if err := <-done; err != nil {
				t.Errorf("caller %d: %v, want nil (its fn ran before the cancellation)", i, err)
			}
		}
		checkJournal(t, td, 3)
	})

	// The oldest queued caller is cancelled just as the leader hands off to
	// it: whether it leaves the queue first or is promoted first, it returns
	// its ctx error without running fn, and the others still commit.
	t.Run("PromotedWhileCancelled", func(t *testing.T) {
		td := mustOpen(t)
		for round := range 20 {
			entered, rel := make(chan struct{}), make(chan struct{})
			ctx0, cancel0 := context.WithCancel(context.Background())
			held := make(chan error, 1)
			go func() {
				held <- td.Update(context.Background(), false, func(tx plexus.StateTx) error {
					close(entered)
					<-rel
					cancel0()
					return nil
				})
			}()
			<-entered
			called := false
			first := enqueue(t, td.DB, ctx0, func(tx plexus.StateTx) error { called = true; return nil })
			second := enqueue(t, td.DB, context.Background(), func(tx plexus.StateTx) error {
				return tx.Record(&plexus.Activity{Actor: plexus.ActorSystem, ActionType: "second"})
			})
			close(rel)
			if err := <-held; err != nil {
				t.Fatal(err)
			}
			if err := <-first; !errors.Is(err, context.Canceled) || called {
				t.Errorf("round %d: first: err = %v, fn called = %v", round, err, called)
			}
			if err := <-second; err != nil {
				t.Errorf("round %d: second: %v", round, err)
			}
		}
		checkJournal(t, td, 20)
	})
}

// TestGroupCommitGoexit: a fn that exits its goroutine (t.FailNow misused
// in a callback) takes the leader's goroutine with it, but the rest of the
// batch fails cleanly and the writer is free again.
func TestGroupCommitGoexit(t *testing.T) {
	td := mustOpen(t)
	release := holdWriter(t, td.DB)
	leaderExited := make(chan bool, 1)
	go func() {
		returned := false
		defer func() { leaderExited <- returned }()
		_ = td.Update(context.Background(), false, func(tx plexus.StateTx) error {
			return tx.Record(&plexus.Activity{Actor: plexus.ActorSystem, ActionType: "leader"})
		})
		returned = true
	}()
	waitFor(t, "the update to queue", func() bool { return queued(td.DB) == 1 })
	exiting := enqueue(t, td.DB, context.Background(), func(tx plexus.StateTx) error {
		if err := tx.Record(&plexus.Activity{Actor: plexus.ActorSystem, ActionType: "goexit"}); err != nil {
			return err
		}
		runtime.Goexit()
		return nil
	})
	after := enqueue(t, td.DB, context.Background(), func(tx plexus.StateTx) error {
		return tx.Record(&plexus.Activity{Actor: plexus.ActorSystem, ActionType: "after"})
	})
	if err := release(); err != nil {
		t.Fatal(err)
	}
	if returned := <-leaderExited; returned {
		t.Error("the leader's Update returned although a fn it ran called Goexit")
	}
	for _, done := range []<-chan error{exiting, after} {
		if err := <-done; !errors.Is(err, errAbandoned) {
			t.Errorf("err = %v, want errAbandoned", err)
		}
	}
	checkJournal(t, td, 1)
	mustUpdate(t, td.DB, func(tx plexus.StateTx) error {
		return tx.Record(&plexus.Activity{Actor: plexus.ActorSystem, ActionType: "later"})
	})
	checkJournal(t, td, 2)
}

// TestGroupCommitBatchCap: 100 queued callers run as batches of at most
// maxBatch.
func TestGroupCommitBatchCap(t *testing.T) {
	td := mustOpen(t)
	release := holdWriter(t, td.DB)
	before := td.group.batches.Load()
	var dones []<-chan error
	for i := range 100 {
		dones = append(dones, enqueue(t, td.DB, context.Background(), func(tx plexus.StateTx) error {
			return tx.Record(&plexus.Activity{Actor: plexus.ActorSystem, ActionType: fmt.Sprint("r", i)})
		}))
	}
	if err := release(); err != nil {
		t.Fatal(err)
	}
	for i, done := range dones {
		if err := <-done; err != nil {
			t.Errorf("caller %d: %v", i, err)
		}
	}
	if got := td.group.batches.Load() - before; got != 2 {
		t.Errorf("100 queued updates ran in %d batches, want 2 (%d + %d)", got, maxBatch, 100-maxBatch)
	}
	checkJournal(t, td, 101)
}

// refuseTrigger makes every INSERT of an activity row whose target is
// "refuse" fail inside SQLite, after the row was written (AFTER INSERT), with
// RAISE(how): ABORT undoes that statement alone, ROLLBACK the whole
// transaction.
func refuseTrigger(t *testing.T, db *DB, how string) {
	t.Helper()
	_, err := db.w.ExecContext(context.Background(), `CREATE TRIGGER refuse_row AFTER INSERT ON activity
		WHEN NEW.target = 'refuse' BEGIN SELECT RAISE(`+how+`, 'refused by the test trigger'); END`)
	if err != nil {
		t.Fatal(err)
	}
}

// holdWriterBare is holdWriter with a fn that records nothing, so the batch
// after it starts from the remembered chain head.
func holdWriterBare(t *testing.T, db *DB) (release func() error) {
	t.Helper()
	entered, rel, done := make(chan struct{}), make(chan struct{}), make(chan error, 1)
	go func() {
		done <- db.Update(context.Background(), false, func(tx plexus.StateTx) error {
			close(entered)
			<-rel
			return nil
		})
	}()
	<-entered
	return func() error { close(rel); return <-done }
}

// enqueueAppend is enqueue for an Append.
func enqueueAppend(t *testing.T, db *DB, a *plexus.Activity) <-chan error {
	t.Helper()
	n := queued(db)
	done := make(chan error, 1)
	go func() { done <- db.Append(context.Background(), a) }()
	waitFor(t, "the append to queue", func() bool { return queued(db) == n+1 })
	return done
}

// TestGroupCommitAppend: Appends share batches with Updates, and one whose
// INSERT fails is undone alone although it ran without a savepoint; the
// batch's first append, whose row may need relinking after another
// process's, keeps one.
func TestGroupCommitAppend(t *testing.T) {
	td := mustOpen(t)
	ctx := context.Background()
	mustUpdate(t, td.DB, func(tx plexus.StateTx) error {
		return tx.Record(&plexus.Activity{Actor: plexus.ActorSystem, ActionType: "first"})
	})
	// Another process appends: the daemon's remembered head is stale, and
	// the batch's first row is relinked to the foreign one.
	cli := mustOpenAt(t, td.path, Options{AuditDir: td.audit, AnchorPath: td.anchor, Clock: td.clock.Now})
	if err := cli.Append(ctx, &plexus.Activity{Actor: plexus.ActorSystem, ActionType: "cli"}); err != nil {
		t.Fatal(err)
	}
	refuseTrigger(t, td.DB, "ABORT")

	release := holdWriterBare(t, td.DB)
	batchesBefore, savepointsBefore := td.group.batches.Load(), td.group.savepoints.Load()
	type caller struct {
		act    plexus.Activity
		update bool // an Update (SetMeta and Record) rather than an Append
		done   <-chan error
	}
	callers := []*caller{
		{act: plexus.Activity{Target: "ok0"}},
		{act: plexus.Activity{Target: "refuse"}},
		{act: plexus.Activity{Target: "ok2"}, update: true},
		{act: plexus.Activity{Target: "ok3"}},
		{act: plexus.Activity{Target: "refuse"}},
		{act: plexus.Activity{Target: "ok5"}},
	}
	for _, c := range callers {
		c.act.Actor, c.act.ActionType = plexus.ActorSystem, "invoke.ok"
		if c.update {
			c.done = enqueue(t, td.DB, ctx, func(tx plexus.StateTx) error {
				if err := tx.SetMeta("k", "v"); err != nil {
					return err
				}
				return tx.Record(&c.act)
			})
			continue
		}
		c.done = enqueueAppend(t, td.DB, &c.act)
	}
	if err := release(); err != nil {
		t.Fatal(err)
	}
	for i, c := range callers {
		err := <-c.done
		refused := c.act.Target == "refuse"
		if refused != (err != nil) || refused && !strings.Contains(err.Error(), "refused by the test trigger") {
			t.Errorf("caller %d (%s): err = %v", i, c.act.Target, err)
		}
		if refused && (c.act.ID != 0 || c.act.Hash != "") {
			t.Errorf("caller %d keeps id %d hash %q after its insert failed", i, c.act.ID, c.act.Hash)
		}
	}
	if got := td.group.batches.Load() - batchesBefore; got != 1 {
		t.Errorf("the %d queued callers ran in %d batches, want 1", len(callers), got)
	}
	// The first append (the head was remembered) and the Update took one;
	// the other appends none.
	if got := td.group.savepoints.Load() - savepointsBefore; got != 2 {
		t.Errorf("savepoints taken = %d, want 2", got)
	}

	rows := checkJournal(t, td, 6) // first, cli, and the four committed
	for i, r := range rows {
		if r.ID != int64(i+1) {
			t.Errorf("row %d has id %d: a failed insert left a gap or a row", i, r.ID)
		}
		if r.Target == "refuse" {
			t.Errorf("row %d is a refused row", r.ID)
		}
	}
	byID := map[int64]plexus.Activity{}
	for _, r := range rows {
		byID[r.ID] = r
	}
	for i, c := range callers {
		if r, ok := byID[c.act.ID]; c.act.ID != 0 && (!ok || r.Hash != c.act.Hash || r.Target != c.act.Target) {
			t.Errorf("caller %d was told id %d hash %s; the journal has %+v", i, c.act.ID, c.act.Hash, r)
		}
	}
	if err := td.Append(ctx, &plexus.Activity{Actor: plexus.ActorSystem, ActionType: "after"}); err != nil {
		t.Fatal(err)
	}
	checkJournal(t, td, 7)
}

// TestGroupCommitAppendEndsTransaction: an append whose failure made
// SQLite end the whole transaction (here a trigger's RAISE(ROLLBACK); in
// life an I/O error or a full disk) fails every caller of its batch, and
// nothing of the batch persists.
func TestGroupCommitAppendEndsTransaction(t *testing.T) {
	td := mustOpen(t)
	ctx := context.Background()
	refuseTrigger(t, td.DB, "ROLLBACK")
	release := holdWriter(t, td.DB)
	acts := []*plexus.Activity{{Target: "ok0"}, {Target: "ok1"}, {Target: "refuse"}, {Target: "ok3"}}
	var dones []<-chan error
	for _, a := range acts {
		a.Actor, a.ActionType = plexus.ActorSystem, "invoke.ok"
		dones = append(dones, enqueueAppend(t, td.DB, a))
	}
	if err := release(); err != nil {
		t.Fatal(err)
	}
	for i, done := range dones {
		if err := <-done; err == nil {
			t.Errorf("caller %d (%s): no error, but its batch was rolled back", i, acts[i].Target)
		}
		if acts[i].ID != 0 {
			t.Errorf("caller %d keeps id %d", i, acts[i].ID)
		}
	}
	checkJournal(t, td, 1) // the held writer's row
	if err := td.Append(ctx, &plexus.Activity{Actor: plexus.ActorSystem, ActionType: "after"}); err != nil {
		t.Fatal(err)
	}
	err := td.Update(ctx, true, func(tx plexus.StateTx) error {
		return tx.Record(&plexus.Activity{Actor: plexus.ActorSystem, ActionType: "durable"})
	})
	if err != nil {
		t.Fatal(err)
	}
	checkJournal(t, td, 3)
}
