package gateway

import (
	"bytes"
	"context"
	"path/filepath"
	"testing"

	"github.com/plexus-gw/plexus"
	"github.com/plexus-gw/plexus/journal"
)

// mustJournal opens a real journal.db (with its audit mirror and anchor) in
// t.TempDir(), closed at cleanup.
func mustJournal(tb testing.TB) *journal.DB {
	tb.Helper()
	dir := tb.TempDir()
	db, err := journal.Open(context.Background(), filepath.Join(dir, "journal.db"), journal.Options{
		AuditDir: filepath.Join(dir, "audit"), AnchorPath: filepath.Join(dir, "journal.anchor"),
		ChainKey: bytes.Repeat([]byte{0x5a}, journal.MinChainKeyBytes)})
	if err != nil {
		tb.Fatalf("open journal: %v", err)
	}
	tb.Cleanup(func() {
		if err := db.Close(); err != nil {
			tb.Errorf("close journal: %v", err)
		}
	})
	return db
}

// mustUpdate runs fn in a journal transaction, failing the test on error.
func mustUpdate(tb testing.TB, db *journal.DB, fn func(tx plexus.StateTx) error) {
	tb.Helper()
	if err := db.Update(context.Background(), true, fn); err != nil {
		tb.Fatalf("update: %v", err)
	}
}

// actions lists the action types of the journal's rows, in order.
func actions(tb testing.TB, db *journal.DB) []string {
	tb.Helper()
	rows, err := db.Activity(context.Background(), journal.Filter{})
	if err != nil {
		tb.Fatal(err)
	}
	out := make([]string, len(rows))
	for i, r := range rows {
		out[i] = r.ActionType
	}
	return out
}
