package journal

import (
	"bytes"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/plexus-gw/plexus"
)

// Record is the single write path of the activity journal. It redacts the
// payload, chains the row to the one before it (keyed: [chainer.rowHash])
// and inserts it in the
// caller's transaction; any failure is returned so the whole transaction
// rolls back (nothing happens without its audit row). On success a.TS is
// the stored time (UTC) and a.Payload the redacted payload actually stored.
// The row reaches the audit mirror only once the transaction commits.
func (t *tx) Record(a *plexus.Activity) error {
	_, err := t.record(a)
	return err
}

// record is Record. inserted says whether its INSERT succeeded: a failure
// before the INSERT changed nothing, and a failed INSERT is undone by
// SQLite itself (its statement journal), leaving the transaction as it was
// unless SQLite had to end the whole transaction (an I/O error, a full
// disk); a failure after it (relinking the row) leaves the row in place.
// That is what lets [DB.Append] run without a savepoint.
func (t *tx) record(a *plexus.Activity) (inserted bool, err error) {
	if err := t.writable(); err != nil {
		return false, err
	}
	if a.TS.IsZero() {
		a.TS = t.db.clock()
	}
	payload := Redact(a.Payload)
	head, err := t.chainHead()
	if err != nil {
		return false, fmt.Errorf("record %s: chain head: %w", a.ActionType, err)
	}
	row := mirrorRow{
		TS:         fmtTime(a.TS),
		TraceID:    a.TraceID,
		Actor:      a.Actor,
		AgentID:    a.AgentID,
		ActionType: a.ActionType,
		Target:     redactString(a.Target),
		PrevHash:   head.hash,
	}
	// The payload is encoded once, in place inside the canonical row: the
	// same bytes are the column, part of the hashed row and part of the
	// mirror line, in one buffer.
	buf := appendCanonicalHead(make([]byte, 0, 512), &row)
	start := len(buf)
	if payload == nil {
		buf = append(buf, "{}"...)
	} else if buf, err = appendPayloadObject(buf, payload); err != nil {
		return false, fmt.Errorf("record %s: payload: %w", a.ActionType, err)
	}
	row.Payload = buf[start:len(buf):len(buf)]
	row.canonical = append(buf, '}')
	row.Hash = t.db.chain.rowHash(row.PrevHash, row.canonical)
	res, err := t.exec(`INSERT INTO activity
		(ts, trace_id, actor, agent_id, action_type, target, payload, prev_hash, hash)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)`,
		row.TS, row.TraceID, row.Actor, row.AgentID, row.ActionType, row.Target,
		string(row.Payload), row.PrevHash, row.Hash)
	if err != nil {
		return false, fmt.Errorf("record %s: %w", a.ActionType, err)
	}
	if row.ID, err = res.LastInsertId(); err != nil {
		return true, fmt.Errorf("record %s: %w", a.ActionType, err)
	}
	if head.remembered && row.ID != head.id+1 {
		if err := t.relink(&row); err != nil {
			return true, fmt.Errorf("record %s: chain head: %w", a.ActionType, err)
		}
	}
	*t.head = chainHead{hash: row.Hash, id: row.ID, known: true}
	t.recorded = append(t.recorded, row)
	t.handedActs = append(t.handedActs, a)

	a.ID, a.TS, a.Payload = row.ID, a.TS.UTC().Round(0), payload
	a.Target, a.PrevHash, a.Hash = row.Target, row.PrevHash, row.Hash
	return true, nil
}

// chainHead returns the newest activity row. It is read once per
// transaction, then kept in t.head (shared by the fns of a group-committed
// batch, restored when one is rolled back to its savepoint); the first
// transaction reads it inside the write transaction (BEGIN IMMEDIATE holds
// the write lock, so nobody can append between the read and the insert).
//
// Later transactions start from the last row this DB committed
// (db.lastRow) instead of reading it again: the read was a query per commit.
// Another process (the CLI, a script) may have appended since; that insert
// took an id, and AUTOINCREMENT never reissues one, so Record's own row then
// gets an id past lastRow's next and relink chains it to the row actually
// before it, still inside the transaction, before anyone can see it.
func (t *tx) chainHead() (chainHead, error) {
	if t.head == nil {
		t.head = new(chainHead)
	}
	if t.head.known {
		return *t.head, nil
	}
	if last := t.db.lastRow; last.known {
		*t.head = last
		t.head.remembered = true
		return *t.head, nil
	}
	err := t.queryRow(`SELECT id, hash FROM activity ORDER BY id DESC LIMIT 1`).Scan(&t.head.id, &t.head.hash)
	if err != nil && !errors.Is(err, sql.ErrNoRows) {
		return chainHead{}, err
	}
	t.head.known = true
	return *t.head, nil
}

// relink re-chains row, just inserted after a remembered head that turned
// out not to be the row before it: it links row to the newest row below
// its id as the table holds it, as if that had been read first.
func (t *tx) relink(row *mirrorRow) error {
	var prev string
	err := t.queryRow(`SELECT hash FROM activity WHERE id < ? ORDER BY id DESC LIMIT 1`, row.ID).Scan(&prev)
	if err != nil && !errors.Is(err, sql.ErrNoRows) {
		return err
	}
	if prev == row.PrevHash {
		return nil
	}
	row.PrevHash = prev
	row.Hash = t.db.chain.rowHash(prev, row.canonical)
	_, err = t.exec(`UPDATE activity SET prev_hash = ?, hash = ? WHERE id = ?`, row.PrevHash, row.Hash, row.ID)
	return err
}

// canonicalRow is the hashed content of an activity row, in its fixed key
// order. It holds the stored texts (payload is the payload column verbatim),
// so verify recomputes the hash from the table without re-encoding values.
type canonicalRow struct {
	TS         string          `json:"ts"`
	TraceID    string          `json:"trace_id"`
	Actor      string          `json:"actor"`
	AgentID    string          `json:"agent_id"`
	ActionType string          `json:"action_type"`
	Target     string          `json:"target"`
	Payload    json.RawMessage `json:"payload"`
}

// canonicalOf is the hashed content of r from its stored texts alone
// (verify's view of a row): encodeCanonical compacts a payload column that
// something other than Record wrote.
func canonicalOf(r *mirrorRow) ([]byte, error) {
	return encodeCanonical(canonicalRow{
		TS: r.TS, TraceID: r.TraceID, Actor: r.Actor, AgentID: r.AgentID,
		ActionType: r.ActionType, Target: r.Target, Payload: r.Payload,
	})
}

// encodeCanonical is compact JSON with HTML escaping off (so a script in any
// language reproduces it) and map keys sorted (encoding/json's rule).
func encodeCanonical(v any) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil
}
