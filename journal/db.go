package journal

import (
	"cmp"
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net/url"
	"os"
	"runtime"
	"strings"
	"sync/atomic"
	"time"

	"github.com/plexus-gw/plexus"
)

// DefaultRetentionDays is how long daily audit mirror files are kept.
const DefaultRetentionDays = 90

// Options are the optional settings of [Open]; the zero value is usable.
type Options struct {
	// AuditDir is where the daily JSONL audit mirror is written; "" turns
	// the mirror off.
	AuditDir string
	// Clock stamps activity rows and events and drives mirror retention;
	// nil means time.Now.
	Clock func() time.Time
	// Logger receives failures that must not fail a committed transaction
	// (a mirror append); nil discards them.
	Logger *slog.Logger
	// RetentionDays is how many days of mirror files are kept; 0 means
	// [DefaultRetentionDays].
	RetentionDays int
	// ChainKey keys the activity chain (HMAC-SHA256) and MACs the anchor.
	// It is required, at least [MinChainKeyBytes] long, and must be kept
	// outside journal.db (cmd reads PLEXUS_HOME/chain-key): whoever holds
	// the database but not the key cannot rewrite the chain unnoticed.
	ChainKey []byte
	// AnchorPath is the file the chain's head is anchored in after every
	// commit (see anchor.go); "" turns the anchor off.
	AnchorPath string
	// CheckpointEvery is how often the WAL is checkpointed in the
	// background when something was committed since; 0 means
	// [DefaultCheckpointEvery].
	CheckpointEvery time.Duration
}

// Checkpoints. SQLite's automatic checkpoint runs inside the commit that
// crosses its threshold (1,000 pages), and in WAL mode with
// synchronous=NORMAL a checkpoint fsyncs the WAL and the database: about
// one ordinary commit in a hundred paid for it, 1–15 ms instead of 0.1 ms,
// which was the whole of /invoke's p99. The journal therefore checkpoints
// on a reader connection of its own goroutine (a PASSIVE checkpoint never
// blocks the writer, and the writer never waits for its fsyncs), and the
// writer's automatic checkpoint stays only as a backstop for a WAL that
// grows past walBackstopPages between two background runs.
const (
	DefaultCheckpointEvery = 100 * time.Millisecond
	walBackstopPages       = 10_000 // about 40 MB of WAL
)

// DB is an open journal.db. It is safe for concurrent use.
//
// All writes go through w, a pool of exactly one connection opened with
// BEGIN IMMEDIATE transactions, so writers queue in Go (cancellable by
// context) instead of spinning on SQLITE_BUSY, and the write lock is taken
// before the first read of a transaction, which rules out the deadlock of two
// deferred transactions upgrading at once. Non-durable writers queue in
// group first and are committed in batches (group.go); durable ones queue on
// w directly. Reads go through r, a separate query-only pool; in WAL mode
// they never wait for the writer.
type DB struct {
	w      *sql.DB
	r      *sql.DB
	clock  func() time.Time
	log    *slog.Logger
	mirror *mirror     // nil when Options.AuditDir is ""
	anchor *anchorFile // nil when Options.AnchorPath is ""
	// anchorPath is Options.AnchorPath, for the migration that keys the
	// chain (anchorLegacyHead), which runs before anchor is open.
	anchorPath string
	chain      *chainer // nil for OpenReader, which never writes a row
	group      group    // non-durable Updates waiting to be group-committed
	// lastRow is the newest activity row this DB committed: the chain head
	// the next transaction starts from, unless another process appended
	// since (see tx.chainHead). Only the holder of the writer connection
	// reads or writes it (and Open's migrations, before any other caller).
	lastRow chainHead
	// commits counts the transactions committed by w; the checkpointer
	// runs only when it moved. stopCheckpoints ends the checkpointer and
	// waits for it (nil for OpenReader).
	commits         atomic.Int64
	stopCheckpoints func()
}

var _ plexus.Store = (*DB)(nil)

// Open opens (creating if needed) the journal at path and brings its schema
// up to date. path must name a file: the database is shared with scripts and
// with other plexus processes (the CLI), which coordinate through SQLite's
// file locks.
func Open(ctx context.Context, path string, opts Options) (*DB, error) {
	if opts.Clock == nil {
		opts.Clock = time.Now
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.RetentionDays <= 0 {
		opts.RetentionDays = DefaultRetentionDays
	}
	chain, err := newChainer(opts.ChainKey)
	if err != nil {
		return nil, fmt.Errorf("open journal: %w", err)
	}
	if err := prepareFiles(path); err != nil {
		return nil, fmt.Errorf("open journal: %w", err)
	}
	db := &DB{clock: opts.Clock, log: opts.Logger, chain: chain, anchorPath: opts.AnchorPath}

	w := sql.OpenDB(newWriterConnector(dsn(path, url.Values{
		"_journal_mode":    {"WAL"},
		"_synchronous":     {"NORMAL"},
		"_busy_timeout":    {"5000"},
		"_foreign_keys":    {"1"},
		"_txlock":          {"immediate"},
		"_stmt_cache_size": {"64"},
	})))
	w.SetMaxOpenConns(1)
	w.SetMaxIdleConns(1)
	w.SetConnMaxLifetime(0)
	w.SetConnMaxIdleTime(0)
	db.w = w
	if err := db.checkWAL(ctx); err != nil {
		w.Close()
		return nil, fmt.Errorf("open journal: %w", err)
	}
	// The mirror is open before the migration, which may record a row.
	if opts.AuditDir != "" {
		m, err := openMirror(opts.AuditDir, opts.RetentionDays, opts.Clock, opts.Logger)
		if err != nil {
			db.Close()
			return nil, fmt.Errorf("open journal: %w", err)
		}
		db.mirror = m
	}
	if err := db.migrate(ctx); err != nil {
		db.Close()
		return nil, fmt.Errorf("open journal: %w", err)
	}
	if db.r, err = openReaders(ctx, path); err != nil {
		db.Close()
		return nil, fmt.Errorf("open journal: %w", err)
	}
	if opts.AnchorPath != "" {
		if err := db.openAnchor(ctx, opts.AnchorPath); err != nil {
			db.Close()
			return nil, fmt.Errorf("open journal: %w", err)
		}
	}
	db.startCheckpoints(cmp.Or(opts.CheckpointEvery, DefaultCheckpointEvery))
	return db, nil
}

// startCheckpoints runs the background checkpointer until Close: every
// interval, when something was committed since the last run, a PASSIVE
// checkpoint on a reader connection. Its failures are logged: a checkpoint
// that does not happen leaves a longer WAL, never a lost row.
func (db *DB) startCheckpoints(every time.Duration) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	db.stopCheckpoints = func() { cancel(); <-done }
	go func() {
		defer close(done)
		t := time.NewTicker(every)
		defer t.Stop()
		var last int64
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
			if n := db.commits.Load(); n != last {
				last = n
				if _, err := db.r.ExecContext(ctx, "PRAGMA wal_checkpoint(PASSIVE)"); err != nil && ctx.Err() == nil {
					db.log.Warn("journal checkpoint", "err", err)
				}
			}
		}
	}()
}

// OpenReader opens an existing journal for queries only (the CLI's
// `plexus journal`, while the daemon may be running): no writer connection,
// no migration, no audit mirror, and a missing file is an error rather than
// a new database. Update on the result returns an error; View and the query
// methods work.
func OpenReader(ctx context.Context, path string) (*DB, error) {
	r, err := openReaders(ctx, path)
	if err != nil {
		return nil, fmt.Errorf("open journal %s: %w", path, err)
	}
	db := &DB{r: r, clock: time.Now, log: slog.New(slog.DiscardHandler)}
	var v int
	if err := r.QueryRowContext(ctx, "PRAGMA user_version").Scan(&v); err != nil {
		db.Close()
		return nil, fmt.Errorf("open journal %s: %w", path, err)
	}
	if want := len(migrations()); v != want {
		db.Close()
		return nil, fmt.Errorf("open journal %s: schema version %d, this build reads %d (run plexus serve once to migrate, or use a matching build)", path, v, want)
	}
	return db, nil
}

// openReaders opens the query-only reader pool. query_only (rather than a
// read-only open) keeps the connections able to use the WAL index whether
// or not a writer has the database open; mode=rw (not rwc) means a reader
// never creates a database.
func openReaders(ctx context.Context, path string) (*sql.DB, error) {
	r, err := sql.Open("sqlite3", dsn(path, url.Values{
		"mode":             {"rw"},
		"_query_only":      {"1"},
		"_busy_timeout":    {"5000"},
		"_foreign_keys":    {"1"},
		"_stmt_cache_size": {"64"},
	}))
	if err != nil {
		return nil, err
	}
	n := max(4, runtime.GOMAXPROCS(0))
	r.SetMaxOpenConns(n)
	r.SetMaxIdleConns(n)
	if err := r.PingContext(ctx); err != nil {
		r.Close()
		return nil, fmt.Errorf("readers: %w", err)
	}
	return r, nil
}

// prepareFiles makes sure journal.db exists with mode 0600 before SQLite
// opens it: SQLite creates the -wal and -shm files with the database file's
// permissions, so this is what keeps all three private. It runs before any
// SQLite connection exists; afterwards the files are SQLite's alone.
func prepareFiles(path string) error {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600)
	switch {
	case err == nil:
		return f.Close()
	case !errors.Is(err, fs.ErrExist):
		return err
	}
	// An existing database, possibly with looser permissions (an old
	// install, a copy). chmod does not open the file, so it cannot disturb
	// another process's locks on it.
	for _, p := range []string{path, path + "-wal", path + "-shm"} {
		fi, err := os.Stat(p)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return err
		}
		if fi.Mode().Perm()&0o077 != 0 {
			if err := os.Chmod(p, 0o600); err != nil {
				return err
			}
		}
	}
	return nil
}

// dsn builds a SQLite URI filename: the "file:" form makes SQLite, not the
// driver, parse the path, so a path containing '?' or '#' still works.
func dsn(path string, params url.Values) string {
	esc := strings.NewReplacer("%", "%25", "?", "%3f", "#", "%23").Replace(path)
	return "file:" + esc + "?" + params.Encode()
}

func (db *DB) checkWAL(ctx context.Context) error {
	var mode string
	if err := db.w.QueryRowContext(ctx, "PRAGMA journal_mode").Scan(&mode); err != nil {
		return err
	}
	if !strings.EqualFold(mode, "wal") {
		return fmt.Errorf("journal_mode is %q, want wal", mode)
	}
	return nil
}

// Close closes the readers, then the writer (the last connection to close
// checkpoints the WAL), then the mirror and anchor files.
func (db *DB) Close() error {
	if db.stopCheckpoints != nil {
		db.stopCheckpoints()
	}
	var errs []error
	if db.r != nil {
		errs = append(errs, db.r.Close())
	}
	if db.w != nil {
		errs = append(errs, db.w.Close())
	}
	if db.mirror != nil {
		errs = append(errs, db.mirror.close())
	}
	if db.anchor != nil {
		errs = append(errs, db.anchor.close())
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("close journal: %w", err)
	}
	return nil
}

// MirrorErrors reports how many audit mirror appends have failed since Open.
// A failed append is logged and never fails the transaction: the SQLite row
// is the authority, the mirror a convenience.
func (db *DB) MirrorErrors() int {
	if db.mirror == nil {
		return 0
	}
	return int(db.mirror.errs.Load())
}

// Update runs fn in a write transaction (BEGIN IMMEDIATE on the writer
// connection) and commits when fn returns nil. fn's error is returned as is,
// after rolling fn's work back, so callers can still branch on it.
//
// When durable is true fn gets a transaction of its own, committed with
// synchronous=FULL, so it survives power loss. Otherwise concurrent calls are
// group-committed (see group.go): fn may share one transaction with other
// callers' fns, each inside its own savepoint, and may run on another
// caller's goroutine. Each caller still sees its own transaction: if fn
// fails only fn's work is rolled back, and Update returns only once the
// shared COMMIT is done; if that COMMIT fails, every caller of the batch gets
// the error and nothing of it persists. A ctx done before fn starts returns
// ctx's error and fn never runs; once fn has started, ctx no longer
// interrupts its statements (an interrupt would roll back the whole batch).
//
// Activity rows recorded in fn reach the audit mirror only after the commit.
// When fn's work is rolled back (fn's error, a panic, a failed commit), the
// ids Record and Publish set in fn's values (Activity.ID, PrevHash, Hash and
// Event.ID) are cleared: those ids may be issued again to other rows.
//
// fn must not call Update on the same DB (the writer is one connection and
// a nested Update would wait for itself), nor wait for a lock or a result
// that another caller of Update holds or produces: fn may run while that
// caller is the one leading the batch. View is safe inside fn, but reads the
// last committed state, not fn's uncommitted writes.
func (db *DB) Update(ctx context.Context, durable bool, fn func(tx plexus.StateTx) error) error {
	if db.w == nil {
		return errors.New("journal update: the journal was opened read-only (OpenReader)")
	}
	if !durable {
		return db.updateGrouped(ctx, fn, nil)
	}
	conn, err := db.w.Conn(ctx)
	if err != nil {
		return fmt.Errorf("journal update: %w", err)
	}
	defer conn.Close()

	// synchronous is per connection and outside any transaction; it is
	// restored below so ordinary commits stay cheap.
	if _, err := conn.ExecContext(ctx, "PRAGMA synchronous=FULL"); err != nil {
		return fmt.Errorf("journal update: %w", err)
	}
	defer db.restoreSync(ctx, conn)

	sqltx, err := conn.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("journal update: begin: %w", err)
	}
	t := &tx{ctx: ctx, db: db, q: sqltx, head: new(chainHead)}
	committed := false
	defer func() {
		if !committed {
			t.forget()
			if rbErr := sqltx.Rollback(); rbErr != nil && !errors.Is(rbErr, sql.ErrTxDone) {
				db.log.Error("journal rollback", "err", rbErr)
			}
		}
	}()
	if err := fn(t); err != nil {
		return err
	}
	if err := sqltx.Commit(); err != nil {
		return fmt.Errorf("journal update: commit: %w", err)
	}
	committed = true
	db.commits.Add(1)
	db.committed(t.recorded, true)
	return nil
}

// committed hands the rows of a commit to the audit mirror and advances the
// anchor to the last of them. The caller still holds the writer connection,
// so both see commits in commit order; neither can fail the commit, which
// has happened: a failure is logged and counted ([DB.MirrorErrors],
// [DB.AnchorErrors]) and verify reports what it left behind.
func (db *DB) committed(rows []mirrorRow, durable bool) {
	if len(rows) == 0 {
		return
	}
	last := rows[len(rows)-1]
	db.lastRow = chainHead{hash: last.Hash, id: last.ID, known: true}
	if db.mirror != nil {
		db.mirror.append(rows, durable)
	}
	if db.anchor != nil {
		if err := db.anchor.advance(last.ID, last.Hash, durable); err != nil {
			db.log.Error("journal anchor", "path", db.anchor.path, "row", last.ID, "err", err)
		}
	}
}

// AnchorErrors reports how many anchor writes have failed since Open.
func (db *DB) AnchorErrors() int {
	if db.anchor == nil {
		return 0
	}
	return int(db.anchor.errs.Load())
}

// Append records a as one activity row of its own: what a non-durable
// Update whose fn only calls tx.Record(a) does, with the same guarantees
// (group-committed; it returns once the row is committed, or with the error
// that kept it out, its ids cleared), at a lower cost in a shared batch: an
// append needs no savepoint of its own (see runOne). It is how the gateway
// writes a call's outcome row, the most frequent commit.
func (db *DB) Append(ctx context.Context, a *plexus.Activity) error {
	if db.w == nil {
		return errors.New("journal append: the journal was opened read-only (OpenReader)")
	}
	return db.updateGrouped(ctx, nil, a)
}

// restoreSync puts the writer back to synchronous=NORMAL. If that fails the
// connection is discarded rather than left silently in FULL (or unknown)
// mode; the pool reopens it from the DSN, which says NORMAL.
func (db *DB) restoreSync(ctx context.Context, conn *sql.Conn) {
	ctx = context.WithoutCancel(ctx)
	if _, err := conn.ExecContext(ctx, "PRAGMA synchronous=NORMAL"); err != nil {
		db.log.Error("journal restore synchronous=NORMAL", "err", err)
		// Raw hands ErrBadConn back once it has discarded the connection:
		// only another error says the discard itself failed.
		if err := conn.Raw(func(any) error { return driver.ErrBadConn }); !errors.Is(err, driver.ErrBadConn) {
			db.log.Error("journal restore synchronous=NORMAL: discard the connection", "err", err)
		}
	}
}

// View runs fn in a read transaction on the reader pool: a consistent
// snapshot that never waits for, nor blocks, the writer. Mutating methods
// called inside fn return an error.
func (db *DB) View(ctx context.Context, fn func(tx plexus.StateTx) error) error {
	sqltx, err := db.r.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
	if err != nil {
		return fmt.Errorf("journal view: %w", err)
	}
	defer sqltx.Rollback()
	return fn(&tx{ctx: ctx, db: db, q: sqltx, ro: true})
}
