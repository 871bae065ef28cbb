package gateway

import (
	"context"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/plexus-gw/plexus"
	"github.com/plexus-gw/plexus/internal/plexustest"
)

// TestRunExpiresPending, on a real journal: Run's own ticker expires a
// request for the owner once its deadline passes, and only then: the state
// changes with its row and the asking session's grant_resolved event, and
// files as API is told to look at it. The ticker runs on the time of a
// testing/synctest bubble, so no test waits out the sweep interval.
func TestRunExpiresPending(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		home := plexustest.TempHome(t)
		db := plexustest.MustOpenHomeJournal(t, home, nil)
		var mu sync.Mutex
		var touched []string
		g := mustGateway(t, home, db, nil, func(d *Deps) {
			d.OnDecision = func(id string) { mu.Lock(); touched = append(touched, id); mu.Unlock() }
		})
		now := time.Now().UTC()
		p := &plexus.Pending{ID: "pend_1", Kind: plexus.PendingGrant, AgentID: "claude", SessionID: "sess_1", TraceID: "tr_1",
			State: plexus.StatePending, CreatedAt: now, ExpiresAt: now.Add(time.Minute),
			Items: []plexus.PendingItem{{CapabilityID: "fs.write"}}}
		mustUpdate(t, db, func(tx plexus.StateTx) error {
			if err := tx.PutAgent(&plexus.Agent{ID: "claude", CreatedAt: now}); err != nil {
				return err
			}
			return tx.PutPending(p)
		})
		runCtx, cancel := context.WithCancel(ctx)
		done := make(chan error, 1)
		go func() { done <- g.Run(runCtx) }()
		defer func() {
			cancel()
			if err := <-done; err != nil {
				t.Errorf("Run: %v", err)
			}
		}()
		state := func() string {
			var cur *plexus.Pending
			if err := db.View(ctx, func(tx plexus.StateTx) error {
				var err error
				cur, err = tx.Pending(p.ID)
				return err
			}); err != nil {
				t.Fatal(err)
			}
			return cur.State
		}

		time.Sleep(time.Minute - time.Second)
		synctest.Wait()
		if got := state(); got != plexus.StatePending {
			t.Fatalf("before its deadline: state %q, want pending", got)
		}

		time.Sleep(time.Second + sweepInterval)
		synctest.Wait()
		if got := state(); got != plexus.StateExpired {
			t.Fatalf("a sweep after its deadline: state %q, want expired", got)
		}
		if got, want := actions(t, db), []string{"grant.expired"}; !slices.Equal(got, want) {
			t.Errorf("rows = %v, want %v", got, want)
		}
		evs, err := db.EventsSince(ctx, 0, "claude", "sess_1", 0)
		if err != nil || len(evs) != 1 || evs[0].Type != plexus.EventGrantResolved {
			t.Errorf("events = %+v, %v; want one grant_resolved", evs, err)
		}
		mu.Lock()
		defer mu.Unlock()
		if !slices.Equal(touched, []string{p.ID}) {
			t.Errorf("OnDecision told %v, want [%s]", touched, p.ID)
		}
	})
}
