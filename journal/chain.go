package journal

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"strconv"
	"sync"

	"github.com/plexus-gw/plexus"
)

// MinChainKeyBytes is the shortest key [Options.ChainKey] accepts.
const MinChainKeyBytes = 32

// metaKeyedAfter is the meta key holding the id of the last row of the
// plain SHA-256 chain: rows with a greater id are keyed. It is set once, by
// the migration to schema version 4 (0 for a journal created keyed). The
// anchor file repeats it under its MAC, so moving the boundary in the
// database (to pass rewritten rows off as old unkeyed ones) is detected.
const metaKeyedAfter = "chain.keyed_after"

// ActionChainKeyed is the action type of the row that starts the keyed
// chain of a journal written by an older build: its payload says how many
// unkeyed rows precede it, the head they ended with, and whether their
// plain SHA-256 chain was intact when the key took over.
const ActionChainKeyed = "journal.chain_keyed"

// ErrChainKey is returned by [Open] when the key cannot be this journal's:
// neither the newest keyed row nor the anchor verifies with it.
var ErrChainKey = errors.New("chain-key does not match this journal")

// chainer computes keyed row hashes. One HMAC state is reused (Reset
// restores the keyed state without re-deriving the pads); mu makes that
// safe for the writer and any reader of the same DB at once.
type chainer struct {
	mu  sync.Mutex
	mac hash.Hash
	key []byte
	// msg and sum are scratch space for mac, guarded by mu: a stack buffer
	// handed to a hash.Hash escapes, and these run for every row and
	// every commit.
	msg []byte
	sum [sha256.Size]byte
}

func newChainer(key []byte) (*chainer, error) {
	if len(key) < MinChainKeyBytes {
		return nil, fmt.Errorf("chain key is %d bytes, want at least %d", len(key), MinChainKeyBytes)
	}
	k := append([]byte(nil), key...)
	return &chainer{mac: hmac.New(sha256.New, k), key: k}, nil
}

// rowHash is hex(HMAC-SHA256(key, prev || canonical)): the chain of
// docs/journal.md with a secret key, so that rewriting a row and every row
// after it needs the key, not just the file.
func (c *chainer) rowHash(prev string, canonical []byte) string {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.msg = append(c.msg[:0], prev...)
	c.mac.Reset()
	c.mac.Write(c.msg)
	c.mac.Write(canonical)
	return c.hexSum()
}

// hexSum is the hex of mac's sum, encoded on the stack: the one allocation
// is the string itself. c.mu must be held.
func (c *chainer) hexSum() string {
	var h [2 * sha256.Size]byte
	hex.Encode(h[:], c.mac.Sum(c.sum[:0]))
	return string(h[:])
}

// anchorMAC authenticates an anchor's fields. The domain prefix keeps an
// anchor MAC from ever equalling a row hash. It is computed after every
// group commit, so it shares rowHash's HMAC state instead of building one.
func (c *chainer) anchorMAC(a *anchor) string {
	c.mu.Lock()
	defer c.mu.Unlock()
	msg := append(c.msg[:0], "plexus journal anchor v1\n"...)
	msg = strconv.AppendInt(msg, a.KeyedAfter, 10)
	msg = append(msg, '\n')
	msg = strconv.AppendInt(msg, a.ID, 10)
	msg = append(msg, '\n')
	msg = append(msg, a.Hash...)
	msg = append(msg, '\n')
	msg = strconv.AppendInt(msg, a.DurableID, 10)
	msg = append(msg, '\n')
	c.msg = msg
	c.mac.Reset()
	c.mac.Write(msg)
	return c.hexSum()
}

// legacyHash is the unkeyed chain hash of rows written before the key,
// hex(sha256(prev || canonical)).
func legacyHash(prev string, canonical []byte) string {
	h := sha256.New()
	h.Write([]byte(prev))
	h.Write(canonical)
	var sum [sha256.Size]byte
	return hex.EncodeToString(h.Sum(sum[:0]))
}

// keyedAfter reads the boundary of the keyed chain; ok is false when the
// journal has none (a tampered meta table, or a journal never migrated).
func keyedAfter(q rowQuerier) (id int64, ok bool, err error) {
	var v string
	err = q.QueryRowContext(context.Background(), `SELECT value FROM meta WHERE key = ?`, metaKeyedAfter).Scan(&v)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, false, nil
	}
	if err != nil {
		return 0, false, err
	}
	id, err = strconv.ParseInt(v, 10, 64)
	if err != nil {
		return 0, false, fmt.Errorf("meta %s = %q: %w", metaKeyedAfter, v, err)
	}
	return id, true, nil
}

// keyChain is the Go half of the migration to schema version 4, run in its
// transaction. It never re-hashes an existing row (that would launder any
// edit made before the upgrade into a valid keyed chain): it checks the
// plain chain as it stands, records the last unkeyed row as the boundary,
// and, when there are unkeyed rows, records a keyed [ActionChainKeyed] row
// that chains to their head. From then on an edit to an old row that is
// covered by recomputing the plain chain still breaks the link of that
// keyed row, whose HMAC covers the head it follows.
func (t *tx) keyChain() (legacyWalk, error) {
	rep, err := walkLegacy(t)
	if err != nil {
		return rep, fmt.Errorf("key the chain: %w", err)
	}
	if err := t.SetMeta(metaKeyedAfter, strconv.FormatInt(rep.lastID, 10)); err != nil {
		return rep, fmt.Errorf("key the chain: %w", err)
	}
	if rep.rows == 0 {
		return rep, nil
	}
	payload := map[string]any{
		"legacyRows":   rep.rows,
		"legacyLastId": rep.lastID,
		"legacyHead":   rep.head,
		"legacyIntact": rep.problems == 0,
	}
	if rep.problems > 0 {
		payload["legacyProblems"] = rep.problems
	}
	err = t.Record(&plexus.Activity{Actor: plexus.ActorSystem, ActionType: ActionChainKeyed,
		Target: "journal", Payload: payload})
	if err != nil {
		return rep, fmt.Errorf("key the chain: %w", err)
	}
	return rep, nil
}

// legacyWalk summarizes the plain chain found when the key takes over.
type legacyWalk struct {
	rows     int
	lastID   int64
	head     string
	problems int // rows whose hash or link does not check
}

// walkLegacy checks every existing row against the plain SHA-256 chain.
func walkLegacy(t *tx) (legacyWalk, error) {
	var w legacyWalk
	rows, err := t.query(`SELECT id, ts, trace_id, actor, agent_id, action_type, target,
		payload, prev_hash, hash FROM activity ORDER BY id`)
	if err != nil {
		return w, err
	}
	defer rows.Close()
	for rows.Next() {
		r, err := scanActivityRow(rows)
		if err != nil {
			return w, err
		}
		c, err := canonicalOf(&r)
		if err != nil || legacyHash(r.PrevHash, c) != r.Hash || r.PrevHash != w.head {
			w.problems++
		}
		w.rows++
		w.lastID, w.head = r.ID, r.Hash
	}
	return w, rows.Err()
}
