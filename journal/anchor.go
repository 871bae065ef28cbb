package journal

import (
	"bytes"
	"context"
	"crypto/hmac"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/plexus-gw/plexus"
)

// anchor is the head of the activity chain kept outside journal.db
// (Options.AnchorPath): the last row id and hash the daemon committed, so
// that rows deleted from the end of the table (with sqlite_sequence fixed
// up to match) are still noticed. It is MACed with the chain key, so it
// cannot be rewritten to match a truncated table without the key.
//
// When it is written, and why that is sound (docs/journal.md, "The
// anchor"): after every commit that recorded rows, once per group-committed
// batch, never before its commit. So after a process crash the anchor is
// at or behind the table's head, never ahead of it, and an anchor behind
// the head is accepted as long as the row it names still has its hash.
// Batches do not fsync it (they do not fsync the WAL either:
// synchronous=NORMAL); durable commits fsync it after their
// synchronous=FULL commit and record their head as DurableID, the point
// below which a missing tail cannot be blamed on a power failure.
//
// It is one fixed-size record overwritten in place by a single pwrite,
// not a temporary file renamed over it: a rename cost about 0.7 ms on the
// reference machine's ext4 (which flushes data on replace-by-rename), more
// than the whole commit, while a pwrite of one record within one page costs
// about 1 µs (5 µs with its MAC: BenchmarkAnchorAdvance). A pwrite within one page is whole or absent after a process
// crash; a reader racing it may see a torn record, which fails its MAC, and
// verify reads again.
type anchor struct {
	V          int    `json:"v"`
	KeyedAfter int64  `json:"keyedAfter"`
	ID         int64  `json:"id"`
	Hash       string `json:"hash"`
	DurableID  int64  `json:"durableId"`
	MAC        string `json:"mac"`
}

const (
	anchorVersion = 1
	// anchorSize is the record's fixed size: JSON padded with spaces, well
	// within one disk sector and one page.
	anchorSize = 512
)

// errNoAnchor is what readAnchor returns for a missing (or never written,
// empty) anchor.
var errNoAnchor = errors.New("no anchor file")

// readAnchor reads the anchor record. Something other than a regular file
// in its place (a link, a FIFO that would block the read) is an error, never
// followed or waited on.
func readAnchor(path string) (anchor, error) {
	var a anchor
	b, err := readRecord(path)
	if errors.Is(err, fs.ErrNotExist) || err == nil && len(bytes.TrimSpace(b)) == 0 {
		return a, errNoAnchor
	}
	if err != nil {
		return a, err
	}
	if err := json.Unmarshal(b, &a); err != nil {
		return a, fmt.Errorf("not an anchor: %w", err)
	}
	if a.V != anchorVersion {
		return a, fmt.Errorf("anchor version %d, this build reads %d", a.V, anchorVersion)
	}
	return a, nil
}

func readRecord(path string) ([]byte, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("%s is not a regular file (%s)", filepath.Base(path), fi.Mode().Type())
	}
	// A record is anchorSize bytes; twice that is plenty to see it is not one.
	return io.ReadAll(io.LimitReader(f, 2*anchorSize))
}

// anchorFile writes the anchor. mu guards f and durableID; the writer
// connection already orders advances, mu keeps Close out of them.
type anchorFile struct {
	path  string
	chain *chainer
	errs  atomic.Int64

	mu         sync.Mutex
	f          *os.File
	keyedAfter int64
	durableID  int64
	rec        [anchorSize]byte // the record being written, reused: one per commit
}

// openAnchorFile opens (creating, 0600) the anchor for writing. Anything
// but a regular file in its place (a link, a FIFO, a folder) is renamed
// aside first, never written through: openAnchor has already recorded it,
// and the daemon must still start.
func openAnchorFile(path string, chain *chainer, keyedAfter int64) (*anchorFile, error) {
	if fi, err := os.Lstat(path); err == nil && !fi.Mode().IsRegular() {
		aside := fmt.Sprintf("%s.not-a-file-%d", path, time.Now().UnixNano())
		if err := os.Rename(path, aside); err != nil {
			return nil, err
		}
	}
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0o600)
	if err != nil {
		return nil, err
	}
	if fi, err := f.Stat(); err != nil || !fi.Mode().IsRegular() {
		f.Close()
		return nil, fmt.Errorf("%s is not a regular file", filepath.Base(path))
	}
	return &anchorFile{path: path, chain: chain, f: f, keyedAfter: keyedAfter}, nil
}

// advance records a new head, after its commit. A failure is counted and
// returned for the caller to log: the rows are committed whatever happens
// to the anchor, and verify reports an anchor that lags.
func (f *anchorFile) advance(id int64, hash string, durable bool) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.f == nil {
		return errors.New("journal anchor: closed")
	}
	a := anchor{V: anchorVersion, KeyedAfter: f.keyedAfter, ID: id, Hash: hash, DurableID: f.durableID}
	if durable {
		a.DurableID = id
	}
	a.MAC = f.chain.anchorMAC(&a)
	if err := f.write(&a, durable); err != nil {
		f.errs.Add(1)
		return fmt.Errorf("journal anchor: %w", err)
	}
	f.durableID = a.DurableID
	return nil
}

func (f *anchorFile) write(a *anchor, sync bool) error {
	b := appendAnchor(f.rec[:0], a)
	if len(b) >= anchorSize {
		return fmt.Errorf("anchor record is %d bytes, more than %d", len(b), anchorSize-1)
	}
	rec := f.rec[:]
	for i := len(b); i < anchorSize-1; i++ {
		rec[i] = ' '
	}
	rec[anchorSize-1] = '\n'
	if _, err := f.f.WriteAt(rec, 0); err != nil {
		return err
	}
	if sync {
		return f.f.Sync()
	}
	return nil
}

// appendAnchor appends a's JSON as json.Marshal writes it (a test holds
// them equal). It runs after every commit, and json.Marshal of the struct
// cost six allocations there.
func appendAnchor(dst []byte, a *anchor) []byte {
	dst = append(dst, `{"v":`...)
	dst = strconv.AppendInt(dst, int64(a.V), 10)
	dst = append(dst, `,"keyedAfter":`...)
	dst = strconv.AppendInt(dst, a.KeyedAfter, 10)
	dst = append(dst, `,"id":`...)
	dst = strconv.AppendInt(dst, a.ID, 10)
	dst = append(dst, `,"hash":`...)
	dst = appendJSONString(dst, a.Hash)
	dst = append(dst, `,"durableId":`...)
	dst = strconv.AppendInt(dst, a.DurableID, 10)
	dst = append(dst, `,"mac":`...)
	dst = appendJSONString(dst, a.MAC)
	return append(dst, '}')
}

// truncate drops anything past the record (a longer file someone wrote),
// once, at start-up.
func (f *anchorFile) truncate() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.f.Truncate(anchorSize)
}

func (f *anchorFile) close() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.f == nil {
		return nil
	}
	err := f.f.Close()
	f.f = nil
	return err
}

// ActionAnchorMismatch is the action type of the row the daemon records
// when, at start-up, the anchor and the table disagree (rows deleted from
// the end while it was stopped, an anchor deleted or forged). Writing on
// would re-anchor the table as it now is and erase the evidence; the row
// keeps it in the keyed chain, and verify reports it from then on.
const ActionAnchorMismatch = "journal.anchor_mismatch"

// openAnchor checks the anchor against the table at start-up, records what
// disagrees, and anchors the current head durably. It refuses a key that
// verifies neither the newest keyed row nor the anchor ([ErrChainKey]):
// appending rows under a wrong key would bury the chain.
//
// The head and the anchor are read inside one BEGIN IMMEDIATE transaction:
// another process writing the journal (the daemon, while a command opens
// it) commits and then advances the anchor, so read apart they could show
// an anchor ahead of the head read a moment before, which would look like
// rows deleted from the end. Holding the writer lock, no commit can land
// between the two reads, and an anchor behind the head is accepted.
func (db *DB) openAnchor(ctx context.Context, path string) error {
	var (
		head  mirrorRow
		after int64
		a     anchor
		aerr  error
		mis   bool
	)
	err := db.Update(ctx, true, func(st plexus.StateTx) error {
		t := st.(*tx)
		var err error
		if head, after, err = anchorHead(t.q); err != nil {
			return err
		}
		a, aerr = readAnchor(path)
		kind, problem, err := db.compareAnchor(t.q, head, after, a, aerr)
		if err != nil || problem == "" {
			return err
		}
		mis = true
		db.log.Error("journal anchor disagrees with journal.db", "anchor", path, "problem", problem)
		if err := t.Record(&plexus.Activity{Actor: plexus.ActorSystem, ActionType: ActionAnchorMismatch,
			Target: filepath.Base(path), Payload: map[string]any{
				"kind": kind, "problem": problem, "anchorId": a.ID, "headId": head.ID,
			}}); err != nil {
			return fmt.Errorf("anchor: record the mismatch: %w", err)
		}
		head, _, err = anchorHead(t.q)
		return err
	})
	if err != nil {
		return err
	}
	return db.anchorHeadNow(path, head, after, a, aerr == nil && !mis)
}

// anchorHead reads the keyed boundary and the newest activity row (zero
// when none) in q.
func anchorHead(q rowQuerier) (mirrorRow, int64, error) {
	after, ok, err := keyedAfter(q)
	if err != nil {
		return mirrorRow{}, 0, fmt.Errorf("anchor: %w", err)
	}
	if !ok {
		return mirrorRow{}, 0, fmt.Errorf("anchor: meta has no %s: journal.db was edited (run: plexus journal verify)", metaKeyedAfter)
	}
	head, err := scanActivityRow(q.QueryRowContext(context.Background(), `SELECT id, ts, trace_id, actor, agent_id, action_type,
		target, payload, prev_hash, hash FROM activity ORDER BY id DESC LIMIT 1`))
	if errors.Is(err, sql.ErrNoRows) {
		return mirrorRow{}, after, nil
	}
	if err != nil {
		return mirrorRow{}, 0, fmt.Errorf("anchor: %w", err)
	}
	return head, after, nil
}

// anchorHeadNow opens the anchor for writing and anchors head durably;
// kept says the old anchor was sound, so its DurableID still holds.
func (db *DB) anchorHeadNow(path string, head mirrorRow, after int64, old anchor, kept bool) error {
	f, err := openAnchorFile(path, db.chain, after)
	if err != nil {
		return fmt.Errorf("anchor: %w", err)
	}
	db.anchor = f // Close closes it from here on
	if kept {
		f.durableID = min(old.DurableID, head.ID)
	}
	if err := f.advance(head.ID, head.Hash, true); err != nil {
		return err
	}
	if err := f.truncate(); err != nil {
		return fmt.Errorf("anchor: %w", err)
	}
	return nil
}

// rowQuerier is what reads a row: the writer's transaction, or a reader's.
type rowQuerier interface {
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

// compareAnchor says what, if anything, is wrong between the anchor and the
// table's head; the kind is one of verify's problem kinds. An anchor behind
// the head is fine (a crash between a commit and its anchor write) as long
// as the row it names still has the hash it recorded.
func (db *DB) compareAnchor(q rowQuerier, head mirrorRow, after int64, a anchor, aerr error) (kind, problem string, err error) {
	keyedRows := head.ID > after
	switch {
	case errors.Is(aerr, errNoAnchor):
		// No row is ever committed without an anchor to follow: Open
		// anchors a new journal before its first row, and the migration
		// that keys an old one anchors its legacy head before it commits
		// (anchorLegacyHead). So rows without an anchor mean it was
		// deleted, whatever the boundary claims: a forged boundary
		// (every row passed off as legacy) must not be re-anchored as is.
		if head.ID == 0 {
			return "", "", nil
		}
		return ProblemAnchor, fmt.Sprintf("journal.anchor is missing while journal.db holds rows up to %d: it was deleted", head.ID), nil
	case aerr != nil:
		return ProblemAnchor, "the anchor is unreadable: " + aerr.Error(), nil
	}
	if !hmacEqual(db.chain.anchorMAC(&a), a.MAC) {
		if keyedRows && !db.rowVerifies(&head) {
			return "", "", fmt.Errorf("anchor: %w: neither the newest row (%d) nor the anchor verifies with it; restore the chain-key this journal was written with (if it is lost, move journal.db aside to start a new journal)", ErrChainKey, head.ID)
		}
		return ProblemAnchor, "the anchor does not verify with chain-key: it was edited or replaced", nil
	}
	if a.KeyedAfter != after {
		return ProblemBoundary, fmt.Sprintf("meta says the keyed chain starts after row %d, the anchor says after row %d", after, a.KeyedAfter), nil
	}
	if a.ID > head.ID {
		return ProblemTruncated, truncatedDetail(head.ID, a), nil
	}
	if a.ID == 0 {
		return "", "", nil
	}
	var h string
	err = q.QueryRowContext(context.Background(), `SELECT hash FROM activity WHERE id = ?`, a.ID).Scan(&h)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		if c, cerr := prunedThrough(q); cerr == nil && a.ID <= c.id {
			return "", "", nil // pruned since it was anchored; verify checks the prune
		}
		return ProblemDeleted, fmt.Sprintf("row %d, the anchored head, is missing", a.ID), nil
	case err != nil:
		return "", "", fmt.Errorf("anchor: %w", err)
	case h != a.Hash:
		return ProblemRewritten, fmt.Sprintf("row %d no longer has the hash the anchor recorded: it was rewritten after it was written", a.ID), nil
	}
	return "", "", nil
}

// rowVerifies reports whether a keyed row's hash is its HMAC under the key.
func (db *DB) rowVerifies(r *mirrorRow) bool { return db.chain.verifies(r) }

// verifies reports whether r's hash is its HMAC under the key.
func (c *chainer) verifies(r *mirrorRow) bool {
	canon, err := canonicalOf(r)
	return err == nil && hmacEqual(c.rowHash(r.PrevHash, canon), r.Hash)
}

// anchorLegacyHead anchors the head of the plain chain, inside the
// migration that keys it and before that commits: the anchor then exists
// before the first keyed row does, so a crash right after the migration
// leaves an anchor behind the head (accepted), never none. Should the
// commit fail, the next Open migrates again and rewrites it.
func (db *DB) anchorLegacyHead(w legacyWalk) error {
	if db.anchorPath == "" || w.rows == 0 {
		return nil
	}
	f, err := openAnchorFile(db.anchorPath, db.chain, w.lastID)
	if err != nil {
		return fmt.Errorf("anchor the legacy head: %w", err)
	}
	err = f.advance(w.lastID, w.head, true)
	if err == nil {
		err = f.truncate()
	}
	if cerr := f.close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("anchor the legacy head: %w", err)
	}
	return nil
}

func hmacEqual(a, b string) bool { return hmac.Equal([]byte(a), []byte(b)) }

// truncatedDetail describes a table that ends before the anchor. Rows
// after the anchor's DurableID were committed without fsync, so a power
// failure (not a process crash) can also have lost them.
func truncatedDetail(last int64, a anchor) string {
	s := fmt.Sprintf("the database ends at row %d but the anchor records row %d: rows %d..%d were deleted from the end", last, a.ID, last+1, a.ID)
	if last >= a.DurableID {
		s += fmt.Sprintf(" (or lost to a power failure: rows after %d were committed without fsync)", a.DurableID)
	}
	return s
}
