package journal

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/plexus-gw/plexus"
)

// errReadOnly is returned by a mutating method called inside View: it is a
// programming error, never a condition to handle.
var errReadOnly = errors.New("journal: mutating call inside View")

// tx is the [plexus.StateTx] handed to Update and View callbacks. It is
// owned by the goroutine running the callback and must not outlive it.
type tx struct {
	ctx context.Context
	db  *DB
	q   querier
	ro  bool
	// inserted is set by an Append whose INSERT succeeded (see runOne);
	// beside ro, it keeps tx in its allocation size class.
	inserted bool

	// recorded holds this transaction's activity rows for the audit mirror,
	// which is written only after the commit succeeds.
	recorded []mirrorRow
	// head caches the chain head once read. The fns of one group-committed
	// batch share it; a fn rolled back to its savepoint restores it.
	head *chainHead
	// handed are the values Record and Publish set ids in, so that a
	// rollback can clear them (forget).
	handedActs   []*plexus.Activity
	handedEvents []*plexus.Event
	// recordedOne and handedOne back recorded and handedActs for a
	// group-committed fn's first row (most record exactly one), saving
	// two allocations per commit.
	recordedOne [1]mirrorRow
	handedOne   [1]*plexus.Activity
}

// chainHead is the newest activity row as the transaction sees it, once
// known: its hash and id. remembered marks one taken from [DB.lastRow]
// rather than read in this transaction, which the next insert confirms.
type chainHead struct {
	hash       string
	id         int64
	known      bool
	remembered bool
}

// forget undoes what Record and Publish told the caller about rows that are
// being rolled back: their ids (which SQLite may issue again, even with
// AUTOINCREMENT, since sqlite_sequence rolls back too) and chain hashes.
// It also drops the rows from the mirror's list.
func (t *tx) forget() {
	for _, a := range t.handedActs {
		a.ID, a.PrevHash, a.Hash = 0, "", ""
	}
	for _, e := range t.handedEvents {
		e.ID = 0
	}
	t.recorded, t.handedActs, t.handedEvents = nil, nil, nil
}

var _ plexus.StateTx = (*tx)(nil)

// querier is what a tx runs its statements on: the *sql.Tx of an ordinary
// Update or View, or the writer's *sql.Conn inside a group-committed batch,
// which opens and ends the transaction itself (group.go).
type querier interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

func (t *tx) writable() error {
	if t.ro {
		return errReadOnly
	}
	return nil
}

func (t *tx) exec(query string, args ...any) (sql.Result, error) {
	return t.q.ExecContext(t.ctx, query, args...)
}

func (t *tx) query(query string, args ...any) (*sql.Rows, error) {
	return t.q.QueryContext(t.ctx, query, args...)
}

func (t *tx) queryRow(query string, args ...any) *sql.Row {
	return t.q.QueryRowContext(t.ctx, query, args...)
}

// exists reports whether query (a SELECT 1 … form) finds a row; mutations
// use it to tell "not found" from "already in the target state".
func (t *tx) exists(query string, args ...any) (bool, error) {
	var one int
	err := t.queryRow(query, args...).Scan(&one)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return false, nil
	case err != nil:
		return false, err
	}
	return true, nil
}

// scanner is what *sql.Row and *sql.Rows share.
type scanner interface {
	Scan(dest ...any) error
}

// timeLayout is RFC 3339 with a fixed nine-digit fraction: fixed width makes
// SQL text comparison agree with time order (RFC3339Nano trims zeros, and
// "…05Z" sorts after "…05.5Z").
const timeLayout = "2006-01-02T15:04:05.000000000Z07:00"

func fmtTime(t time.Time) string { return t.UTC().Format(timeLayout) }

func fmtTimePtr(t *time.Time) any {
	if t == nil {
		return nil
	}
	return fmtTime(*t)
}

func parseTime(s string) (time.Time, error) {
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return time.Time{}, fmt.Errorf("bad timestamp %q: %w", s, err)
	}
	return t.UTC(), nil
}

// times parses the timestamp columns of one row, keeping the first error, so
// a scan function reads as a list of fields instead of a ladder of checks.
type times struct{ err error }

func (p *times) at(s string) time.Time {
	t, err := parseTime(s)
	if err != nil && p.err == nil {
		p.err = err
	}
	return t
}

func (p *times) opt(s sql.NullString) *time.Time {
	if !s.Valid {
		return nil
	}
	t := p.at(s.String)
	return &t
}

func toJSON(v any) (string, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return "", err
	}
	return string(b), nil
}

// toJSONNullable stores a nil pointer as SQL NULL rather than "null".
func toJSONNullable[T any](v *T) (any, error) {
	if v == nil {
		return nil, nil
	}
	return toJSON(v)
}

func fromJSON(s string, v any) error {
	if s == "" {
		return nil
	}
	return json.Unmarshal([]byte(s), v)
}

func fromJSONNullable[T any](s sql.NullString) (*T, error) {
	if !s.Valid {
		return nil, nil
	}
	v := new(T)
	if err := json.Unmarshal([]byte(s.String), v); err != nil {
		return nil, err
	}
	return v, nil
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

func nullBytes(b []byte) any {
	if len(b) == 0 {
		return nil
	}
	return b
}
