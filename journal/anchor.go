package journal

import (
	"context"
	"crypto/hmac"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"

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
// batch, by renaming a fresh temporary file over it. The rename makes each
// version whole; it never runs before its commit, so after a process crash
// the anchor is at or behind the table's head, never ahead of it, and an
// anchor behind the head is accepted as long as the chain from the
// anchored row on is intact. Batches do not fsync it (they do not fsync the
// WAL either: synchronous=NORMAL); durable commits fsync it after their
// synchronous=FULL commit and record their head as DurableID, the point
// below which a missing tail cannot be blamed on a power failure.
type anchor struct {
	V          int    `json:"v"`
	KeyedAfter int64  `json:"keyedAfter"`
	ID         int64  `json:"id"`
	Hash       string `json:"hash"`
	DurableID  int64  `json:"durableId"`
	MAC        string `json:"mac"`
}

const anchorVersion = 1

// errNoAnchor is what readAnchor returns for a missing file.
var errNoAnchor = errors.New("no anchor file")

func readAnchor(path string) (anchor, error) {
	var a anchor
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
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

// anchorFile writes the anchor. mu orders writers: the writer connection
// already serializes them within a process, but Open's start-up write and a
// later commit must not interleave their renames.
type anchorFile struct {
	path  string
	chain *chainer
	errs  atomic.Int64

	mu         sync.Mutex
	keyedAfter int64
	durableID  int64
}

// advance records a new head, after its commit. A failure is counted and
// returned for the caller to log: the rows are committed whatever happens
// to the anchor, and verify reports an anchor that lags.
func (f *anchorFile) advance(id int64, hash string, durable bool) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	a := anchor{V: anchorVersion, KeyedAfter: f.keyedAfter, ID: id, Hash: hash, DurableID: f.durableID}
	if durable {
		a.DurableID = id
	}
	a.MAC = f.chain.anchorMAC(&a)
	if err := writeAnchor(f.path, &a, durable); err != nil {
		f.errs.Add(1)
		return fmt.Errorf("journal anchor: %w", err)
	}
	f.durableID = a.DurableID
	return nil
}

// writeAnchor replaces path by a temporary file renamed over it, so a
// reader (verify, while the daemon runs) sees the old anchor or the new
// one, never a torn one. sync adds the fsyncs that make it survive a power
// failure.
func writeAnchor(path string, a *anchor, sync bool) error {
	b, err := json.Marshal(a)
	if err != nil {
		return err
	}
	dir := filepath.Dir(path)
	f, err := os.CreateTemp(dir, "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return err
	}
	tmp := f.Name()
	_, err = f.Write(append(b, '\n'))
	if err == nil && sync {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err != nil {
		os.Remove(tmp)
		return err
	}
	if !sync {
		return nil
	}
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	if err := d.Sync(); err != nil && !errors.Is(err, errors.ErrUnsupported) {
		return err
	}
	return nil
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
func (db *DB) openAnchor(ctx context.Context, path string) error {
	after, ok, err := keyedAfter(db.w)
	if err != nil {
		return fmt.Errorf("anchor: %w", err)
	}
	if !ok {
		return fmt.Errorf("anchor: meta has no %s: journal.db was edited (run: plexus journal verify)", metaKeyedAfter)
	}
	head, err := db.headRow(ctx)
	if err != nil {
		return fmt.Errorf("anchor: %w", err)
	}
	a, aerr := readAnchor(path)
	kind, problem, err := db.compareAnchor(ctx, head, after, a, aerr)
	if err != nil {
		return err
	}
	if problem != "" {
		db.log.Error("journal anchor disagrees with journal.db", "anchor", path, "problem", problem)
		err := db.Update(ctx, true, func(t plexus.StateTx) error {
			return t.Record(&plexus.Activity{Actor: plexus.ActorSystem, ActionType: ActionAnchorMismatch,
				Target: filepath.Base(path), Payload: map[string]any{
					"kind": kind, "problem": problem, "anchorId": a.ID, "headId": head.ID,
				}})
		})
		if err != nil {
			return fmt.Errorf("anchor: record the mismatch: %w", err)
		}
		if head, err = db.headRow(ctx); err != nil {
			return fmt.Errorf("anchor: %w", err)
		}
	}
	f := &anchorFile{path: path, chain: db.chain, keyedAfter: after}
	if aerr == nil && problem == "" {
		f.durableID = min(a.DurableID, head.ID)
	}
	if err := f.advance(head.ID, head.Hash, true); err != nil {
		return err
	}
	db.anchor = f
	return nil
}

// headRow reads the newest activity row on the writer (zero when none).
func (db *DB) headRow(ctx context.Context) (mirrorRow, error) {
	r, err := scanActivityRow(db.w.QueryRowContext(ctx, `SELECT id, ts, trace_id, actor, agent_id, action_type,
		target, payload, prev_hash, hash FROM activity ORDER BY id DESC LIMIT 1`))
	if errors.Is(err, sql.ErrNoRows) {
		return mirrorRow{}, nil
	}
	return r, err
}

// compareAnchor says what, if anything, is wrong between the anchor and the
// table's head; the kind is one of verify's problem kinds. An anchor behind
// the head is fine (a crash between a commit and its anchor write) as long
// as the row it names still has the hash it recorded.
func (db *DB) compareAnchor(ctx context.Context, head mirrorRow, after int64, a anchor, aerr error) (kind, problem string, err error) {
	keyedRows := head.ID > after
	// A journal migrated by this build has one keyed row before its first
	// anchor: a crash right after the migration leaves no anchor yet.
	justKeyed := head.ID == after+1 && head.ActionType == ActionChainKeyed
	switch {
	case errors.Is(aerr, errNoAnchor):
		if !keyedRows || justKeyed {
			return "", "", nil
		}
		return ProblemAnchor, fmt.Sprintf("the anchor is missing while the keyed chain has rows %d..%d", after+1, head.ID), nil
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
	err = db.w.QueryRowContext(ctx, `SELECT hash FROM activity WHERE id = ?`, a.ID).Scan(&h)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return ProblemDeleted, fmt.Sprintf("row %d, the anchored head, is missing", a.ID), nil
	case err != nil:
		return "", "", fmt.Errorf("anchor: %w", err)
	case h != a.Hash:
		return ProblemRewritten, fmt.Sprintf("row %d no longer has the hash the anchor recorded: it was rewritten after it was written", a.ID), nil
	}
	return "", "", nil
}

// rowVerifies reports whether a keyed row's hash is its HMAC under the key.
func (db *DB) rowVerifies(r *mirrorRow) bool {
	c, err := canonicalOf(r)
	return err == nil && hmacEqual(db.chain.rowHash(r.PrevHash, c), r.Hash)
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
