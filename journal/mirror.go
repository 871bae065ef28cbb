package journal

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// mirrorRow is one activity row as written to the audit mirror: the column
// values exactly as stored, so a mirror line can be checked against the
// chain.
type mirrorRow struct {
	ID         int64           `json:"id"`
	TS         string          `json:"ts"`
	TraceID    string          `json:"trace_id"`
	Actor      string          `json:"actor"`
	AgentID    string          `json:"agent_id"`
	ActionType string          `json:"action_type"`
	Target     string          `json:"target"`
	Payload    json.RawMessage `json:"payload"`
	PrevHash   string          `json:"prev_hash"`
	Hash       string          `json:"hash"`

	// canonical is the hashed encoding Record built for the row, reused
	// for the mirror line; nil for rows read back from the table.
	canonical []byte
}

// mirror appends committed activity rows to AuditDir/YYYY-MM-DD.jsonl (the
// UTC date of each row) and deletes files older than the retention. It is
// best effort by design: SQLite holds the authoritative row, so a failure
// here is logged and counted, never returned.
//
// mu guards f, day and pruned. append is called by Update while it holds
// the writer connection, so lines land in commit order; mu only protects
// against Close.
type mirror struct {
	dir       string
	retention int
	clock     func() time.Time
	log       *slog.Logger
	errs      atomic.Int64

	mu     sync.Mutex
	f      *os.File // the open file of day, or nil
	day    string
	pruned string // the clock's date at the last retention pass
	// buf is the lines of the batch being written, reused: every group
	// commit appends its rows here.
	buf []byte
}

// maxMirrorBuf bounds the line buffer kept between batches, so that one
// batch of large rows does not pin its memory.
const maxMirrorBuf = 64 << 10

const mirrorDayLayout = "2006-01-02"

func openMirror(dir string, retention int, clock func() time.Time, log *slog.Logger) (*mirror, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("audit mirror: %w", err)
	}
	m := &mirror{dir: dir, retention: retention, clock: clock, log: log}
	m.mu.Lock()
	m.prune()
	m.mu.Unlock()
	return m, nil
}

// append writes rows, one JSON line each. When sync is true (a durable
// Update) the file is fsynced, matching the durability SQLite gave the same
// rows; otherwise the lines survive a process crash (they are in the page
// cache) but not necessarily a power loss, like the synchronous=NORMAL commit
// they mirror, and the /invoke path does not pay an fsync per call.
func (m *mirror) append(rows []mirrorRow, sync bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	var today [len(mirrorDayLayout)]byte
	if string(m.clock().UTC().AppendFormat(today[:0], mirrorDayLayout)) != m.pruned {
		m.prune()
	}
	for len(rows) > 0 {
		day := rowDay(rows[0])
		n := 1
		for n < len(rows) && rowDay(rows[n]) == day {
			n++
		}
		if err := m.write(day, rows[:n], sync); err != nil {
			m.errs.Add(1)
			m.log.Error("audit mirror append", "dir", m.dir, "day", day, "rows", n, "err", err)
		}
		rows = rows[n:]
	}
}

// rowDay is the UTC date of a row: ts is stored as UTC text, so its first
// ten bytes are the date.
func rowDay(r mirrorRow) string {
	if len(r.TS) >= len(mirrorDayLayout) {
		return r.TS[:len(mirrorDayLayout)]
	}
	return "unknown-date"
}

func (m *mirror) write(day string, rows []mirrorRow, sync bool) error {
	buf := m.buf[:0]
	defer func() {
		if cap(buf) <= maxMirrorBuf {
			m.buf = buf[:0]
		}
	}()
	for i := range rows {
		// Unescaped like the payload column, so a line carries the stored
		// text byte for byte.
		var err error
		if buf, err = appendMirrorLine(buf, &rows[i]); err != nil {
			return err
		}
		buf = append(buf, '\n')
	}
	if m.f == nil || m.day != day {
		if m.f != nil {
			m.f.Close()
			m.f = nil
		}
		f, err := openMirrorFile(filepath.Join(m.dir, day+".jsonl"))
		if err != nil {
			return err
		}
		m.f, m.day = f, day
	}
	// One write per batch: with O_APPEND the batch is not interleaved with
	// lines another plexus process (the CLI) appends to the same file.
	if _, err := m.f.Write(buf); err != nil {
		m.dropFile()
		return err
	}
	if sync {
		if err := m.f.Sync(); err != nil {
			m.dropFile()
			return err
		}
	}
	return nil
}

// dropFile closes the current file after an error, so the next append
// reopens it instead of writing to a descriptor in an unknown state.
func (m *mirror) dropFile() {
	if m.f != nil {
		m.f.Close()
		m.f = nil
	}
}

// prune deletes mirror files whose date is more than retention days before
// the clock's date. Only names of the form YYYY-MM-DD.jsonl are touched.
func (m *mirror) prune() {
	now := m.clock().UTC()
	m.pruned = now.Format(mirrorDayLayout)
	cutoff := time.Date(now.Year(), now.Month(), now.Day(), 0, 0, 0, 0, time.UTC).AddDate(0, 0, -m.retention)
	entries, err := os.ReadDir(m.dir)
	if err != nil {
		m.log.Error("audit mirror retention", "dir", m.dir, "err", err)
		return
	}
	for _, e := range entries {
		name, ok := strings.CutSuffix(e.Name(), ".jsonl")
		if !ok || !e.Type().IsRegular() {
			continue
		}
		day, err := time.Parse(mirrorDayLayout, name)
		if err != nil || !day.Before(cutoff) {
			continue
		}
		if name == m.day {
			m.dropFile()
		}
		if err := os.Remove(filepath.Join(m.dir, e.Name())); err != nil {
			m.log.Error("audit mirror retention", "file", e.Name(), "err", err)
		}
	}
}

func (m *mirror) close() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.f == nil {
		return nil
	}
	err := m.f.Close()
	m.f = nil
	return err
}

// openMirrorFile opens a day's file for appending, creating it 0600. A link
// planted under the day's name is never followed (O_NOFOLLOW), and a FIFO
// never waited on (O_NONBLOCK): a process that can write audit/ could
// otherwise have the daemon append every row to a file of its choosing, or
// stall every commit. What is opened must be a regular file.
func openMirrorFile(path string) (*os.File, error) {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0o600)
	if err != nil {
		return nil, err
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, err
	}
	if !fi.Mode().IsRegular() {
		f.Close()
		return nil, fmt.Errorf("audit mirror %s: a %s, not a regular file", path, fi.Mode().Type())
	}
	return f, nil
}
