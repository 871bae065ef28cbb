package journal

import (
	"context"
	"database/sql/driver"
	"errors"
	"fmt"

	"github.com/mattn/go-sqlite3"
)

// writerConnector opens the writer's connections with the automatic
// checkpoint moved out of the way (see DefaultCheckpointEvery), also for a
// connection the pool opens again after discarding one.
type writerConnector struct {
	d   *sqlite3.SQLiteDriver
	dsn string
}

func newWriterConnector(dsn string) writerConnector {
	return writerConnector{dsn: dsn, d: &sqlite3.SQLiteDriver{ConnectHook: func(c *sqlite3.SQLiteConn) error {
		_, err := c.Exec(fmt.Sprintf("PRAGMA wal_autocheckpoint=%d", walBackstopPages), nil)
		return err
	}}}
}

func (c writerConnector) Connect(context.Context) (driver.Conn, error) {
	dc, err := c.d.Open(c.dsn)
	if err != nil {
		return nil, err
	}
	return &writerConn{SQLiteConn: dc.(*sqlite3.SQLiteConn)}, nil
}

func (c writerConnector) Driver() driver.Driver { return c.d }

// ctlStmt names a transaction-control statement a group commit runs on
// every batch (BEGIN, COMMIT) or for every caller of a shared one (the
// savepoints).
type ctlStmt int

const (
	ctlBegin ctlStmt = iota
	ctlCommit
	ctlSavepoint
	ctlRelease
	ctlRollbackTo
	numCtlStmts
)

func (s ctlStmt) sql() string {
	switch s {
	case ctlBegin:
		return "BEGIN IMMEDIATE"
	case ctlCommit:
		return "COMMIT"
	case ctlSavepoint:
		return "SAVEPOINT group_item"
	case ctlRelease:
		return "RELEASE group_item"
	case ctlRollbackTo:
		return "ROLLBACK TO group_item"
	}
	panic(fmt.Sprintf("journal: unknown control statement %d", int(s)))
}

// writerConn is a connection of the writer pool: the SQLite connection and
// the control statements prepared on it.
//
// The driver runs an argument-less Exec by parsing its text anew every time
// (sqlite3_exec, with a C copy of the text and about seven allocations):
// BEGIN IMMEDIATE and COMMIT on every commit, two savepoint statements per
// caller of a shared batch. Each is therefore prepared once, the first time
// it runs on this connection, and lives exactly as long as the connection:
// Close finalizes them before closing it, so a connection the pool discards
// (driver.ErrBadConn) takes its statements with it, and a new one prepares
// its own. Only the holder of the pool's single connection runs them.
type writerConn struct {
	*sqlite3.SQLiteConn
	ctl [numCtlStmts]driver.Stmt
}

// run executes the control statement s on c, preparing it the first time.
func (c *writerConn) run(s ctlStmt) error {
	st := c.ctl[s]
	if st == nil {
		var err error
		if st, err = c.Prepare(s.sql()); err != nil {
			return err
		}
		c.ctl[s] = st
	}
	// A background context: the driver then steps the statement on this
	// goroutine, with no watcher (batch statements are never interrupted).
	_, err := st.(driver.StmtExecContext).ExecContext(context.Background(), nil)
	return err
}

// Close finalizes the prepared statements, then closes the connection.
func (c *writerConn) Close() error {
	var errs []error
	for i, st := range c.ctl {
		if st != nil {
			errs = append(errs, st.Close())
			c.ctl[i] = nil
		}
	}
	errs = append(errs, c.SQLiteConn.Close())
	return errors.Join(errs...)
}
