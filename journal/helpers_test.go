package journal

import (
	"bytes"
	"context"
	"database/sql"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/plexus-gw/plexus"
)

// clock is a settable test clock, safe for concurrent use.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func newClock(t time.Time) *clock { return &clock{t: t} }

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *clock) Set(t time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = t
}

// t0 is a fixed instant with a non-zero fraction, so time formatting is
// exercised by every test.
var t0 = time.Date(2025, 3, 14, 15, 9, 26, 535897932, time.UTC)

// testKey is the chain key of the test journals.
var testKey = bytes.Repeat([]byte{0x5a}, MinChainKeyBytes)

// testDB is an open journal in a temp dir with its paths and clock.
type testDB struct {
	*DB
	path   string
	audit  string
	anchor string
	clock  *clock
}

// vopts are the verify options matching how td was opened.
func (td *testDB) vopts() VerifyOptions {
	return VerifyOptions{Key: testKey, AnchorPath: td.anchor, AuditDir: td.audit}
}

// mustOpen opens a fresh journal in t.TempDir() with an audit mirror and a
// fake clock at t0, closed at cleanup.
func mustOpen(tb testing.TB) *testDB {
	tb.Helper()
	dir := tb.TempDir()
	td := &testDB{
		path:   filepath.Join(dir, "journal.db"),
		audit:  filepath.Join(dir, "audit"),
		anchor: filepath.Join(dir, "journal.anchor"),
		clock:  newClock(t0),
	}
	td.DB = mustOpenAt(tb, td.path, Options{AuditDir: td.audit, AnchorPath: td.anchor, Clock: td.clock.Now})
	return td
}

func mustOpenAt(tb testing.TB, path string, opts Options) *DB {
	tb.Helper()
	if opts.ChainKey == nil {
		opts.ChainKey = testKey
	}
	db, err := Open(context.Background(), path, opts)
	if err != nil {
		tb.Fatalf("Open(%q): %v", path, err)
	}
	tb.Cleanup(func() {
		if err := db.Close(); err != nil {
			tb.Errorf("Close: %v", err)
		}
	})
	return db
}

// rawDB opens a separate plain connection to path, the way a script or an
// attacker with file access would, for tampering and inspection.
func rawDB(tb testing.TB, path string) *sql.DB {
	tb.Helper()
	db, err := sql.Open("sqlite3", "file:"+path+"?_busy_timeout=5000")
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { db.Close() })
	return db
}

func mustUpdate(tb testing.TB, db *DB, fn func(tx plexus.StateTx) error) {
	tb.Helper()
	if err := db.Update(context.Background(), false, fn); err != nil {
		tb.Fatalf("Update: %v", err)
	}
}

func mustView(tb testing.TB, db *DB, fn func(tx plexus.StateTx) error) {
	tb.Helper()
	if err := db.View(context.Background(), fn); err != nil {
		tb.Fatalf("View: %v", err)
	}
}

func ptr[T any](v T) *T { return &v }
