package journal

import (
	"context"
	"sync"
	"testing"

	"github.com/plexus-gw/plexus"
)

// TestOpenWhileAnotherProcessWrites: a second writer opening the journal
// (`plexus journal prune` while the daemon runs) while the first commits
// and re-anchors without pause never takes the first's progress for rows
// deleted from the end: no journal.anchor_mismatch row is recorded, and
// verify passes.
func TestOpenWhileAnotherProcessWrites(t *testing.T) {
	td := mustOpen(t)
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for ctx.Err() == nil {
			err := td.Update(ctx, false, func(tx plexus.StateTx) error {
				return tx.Record(&plexus.Activity{Actor: "a", ActionType: "invoke.ok", Target: "x"})
			})
			if err != nil && ctx.Err() == nil {
				t.Errorf("the daemon's write: %v", err)
				return
			}
		}
	}()
	for range 60 {
		db, err := Open(context.Background(), td.path, Options{ChainKey: testKey, AuditDir: td.audit, AnchorPath: td.anchor, Clock: td.clock.Now})
		if err != nil {
			t.Error(err)
			break
		}
		if err := db.Close(); err != nil {
			t.Error(err)
		}
	}
	cancel()
	wg.Wait()
	rows, err := td.Activity(context.Background(), Filter{Type: ActionAnchorMismatch})
	if err != nil || len(rows) != 0 {
		t.Fatalf("%s rows recorded while the journal was only written (%v): %+v", ActionAnchorMismatch, err, rows)
	}
	if rep := mustVerify(t, td.DB, td.vopts()); !rep.OK {
		t.Fatalf("verify: %s", rep)
	}
}
