package plexustest

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/plexus-gw/plexus/journal"
	"github.com/plexus-gw/plexus/scaffold"
)

// TempHome scaffolds a fresh PLEXUS_HOME in tb.TempDir() as the daemon's
// first start does (scaffold.Init, then Verify and Load), with fresh keys,
// and returns its layout and keys.
func TempHome(tb testing.TB) *scaffold.Home {
	tb.Helper()
	dir := filepath.Join(tb.TempDir(), "home")
	if _, err := scaffold.Init(dir, scaffold.InitOptions{}); err != nil {
		tb.Fatalf("init home: %v", err)
	}
	if err := scaffold.Verify(dir); err != nil {
		tb.Fatalf("verify home: %v", err)
	}
	home, err := scaffold.Load(dir)
	if err != nil {
		tb.Fatalf("load home: %v", err)
	}
	return home
}

// MustOpenJournal opens a real journal.db in a fresh [TempHome] on the real
// clock, closed at cleanup.
func MustOpenJournal(tb testing.TB) *journal.DB {
	tb.Helper()
	return MustOpenHomeJournal(tb, TempHome(tb), nil)
}

// MustOpenHomeJournal opens home's journal.db with the options the daemon
// opens it with (its audit mirror, chain key and anchor), reading clock
// (nil: the real one), closed at cleanup.
func MustOpenHomeJournal(tb testing.TB, home *scaffold.Home, clock func() time.Time) *journal.DB {
	tb.Helper()
	db, err := journal.Open(context.Background(), home.Journal, journal.Options{AuditDir: home.Audit, Clock: clock,
		ChainKey: home.ChainKey, AnchorPath: home.Anchor})
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
