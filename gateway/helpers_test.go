package gateway

import (
	"context"
	"testing"

	"github.com/plexus-gw/plexus"
	"github.com/plexus-gw/plexus/journal"
)

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
