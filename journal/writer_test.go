package journal

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"sync"
	"testing"

	"github.com/plexus-gw/plexus"
)

// writerConnOf returns the writer pool's current driver connection.
func writerConnOf(t *testing.T, db *DB) *writerConn {
	t.Helper()
	conn, err := db.w.Conn(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	var wc *writerConn
	if err := conn.Raw(func(dc any) error {
		wc, _ = dc.(*writerConn)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if wc == nil {
		t.Fatal("the writer's connection is not a writerConn")
	}
	return wc
}

// TestWriterConnDiscarded checks that the control statements live and die
// with their connection: a connection the pool discards finalizes the ones
// it prepared, and the next, opened in its place, prepares its own, so
// group commits (lone and with savepoints) go on committing.
func TestWriterConnDiscarded(t *testing.T) {
	ctx := context.Background()
	td := mustOpen(t)
	record := func() error {
		return td.Update(ctx, false, func(tx plexus.StateTx) error {
			return tx.Record(&plexus.Activity{Actor: plexus.ActorSystem, ActionType: "test.row", Target: "x"})
		})
	}
	if err := record(); err != nil {
		t.Fatal(err)
	}
	old := writerConnOf(t, td.DB)
	if old.ctl[ctlBegin] == nil || old.ctl[ctlCommit] == nil {
		t.Fatal("a commit did not prepare BEGIN and COMMIT on its connection")
	}

	conn, err := td.w.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := conn.Raw(func(any) error { return driver.ErrBadConn }); !errors.Is(err, driver.ErrBadConn) {
		t.Fatalf("discarding the connection: %v", err)
	}
	if err := conn.Close(); err != nil && !errors.Is(err, sql.ErrConnDone) {
		t.Fatal(err)
	}
	for s, st := range old.ctl {
		if st != nil {
			t.Errorf("statement %q outlived its discarded connection", ctlStmt(s).sql())
		}
	}

	// A lone commit, then concurrent ones (sharing batches with savepoints
	// when they meet), on the connection opened in the discarded one's place.
	if err := record(); err != nil {
		t.Fatalf("commit after a discarded connection: %v", err)
	}
	var wg sync.WaitGroup
	errs := make(chan error, 16)
	for range 16 {
		wg.Go(func() { errs <- record() })
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	if now := writerConnOf(t, td.DB); now == old {
		t.Error("the pool kept the discarded connection")
	}
	rows, err := td.Activity(ctx, Filter{Type: "test.row"})
	if err != nil || len(rows) != 18 {
		t.Fatalf("Activity = %d rows, %v; want 18", len(rows), err)
	}
	rep, err := td.Verify(ctx, td.vopts())
	if err != nil || !rep.OK {
		t.Fatalf("Verify = %+v, %v", rep, err)
	}
}
