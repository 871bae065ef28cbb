package journal

import (
	"cmp"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
)

// Kinds of problems [DB.Verify] reports.
const (
	// ProblemEdited: a row's content no longer matches its hash, or a row
	// was rewritten together with its hash so the next row no longer
	// chains to it.
	ProblemEdited = "edited"
	// ProblemRewritten: keyed rows whose hashes chain to each other but are
	// not their HMAC under the key: the chain was recomputed from that row
	// on by someone without the key, after an edit there or later.
	ProblemRewritten = "rewritten"
	// ProblemDeleted: rows are missing (an id gap with a broken link, or
	// ids issued after the last row that remains).
	ProblemDeleted = "deleted"
	// ProblemReordered: a row chains to a row other than its predecessor,
	// or ids were renumbered under an intact chain.
	ProblemReordered = "reordered"
	// ProblemTruncated: the table ends before the head the anchor recorded.
	ProblemTruncated = "truncated"
	// ProblemAnchor: the anchor is missing, unreadable or forged.
	ProblemAnchor = "anchor"
	// ProblemBoundary: where the keyed chain starts is missing or moved.
	ProblemBoundary = "boundary"
	// ProblemMirror: the audit mirror and the table disagree about a row.
	ProblemMirror = "mirror"
	// ProblemKey: the chain key is missing or is not this journal's.
	ProblemKey = "key"
	// ProblemUnverifiedPrune: the owner pruned rows that did not verify
	// (journal prune --force); the journal.pruned row keeps what was wrong.
	ProblemUnverifiedPrune = "unverified_prune"
)

// maxProblems bounds a report on a badly damaged journal; the first
// problems are the ones that matter.
const maxProblems = 100

// maxHashLookups bounds the unindexed searches used to tell reordering from
// editing.
const maxHashLookups = 10

// Problem is one thing wrong with the journal. ID is the row it concerns
// (0 for the journal as a whole).
type Problem struct {
	ID     int64  `json:"id"`
	Kind   string `json:"kind"`
	Detail string `json:"detail"`
}

// VerifyReport is the result of [DB.Verify]. Notes are disagreements that
// are not evidence of tampering (rows a crash kept out of the mirror).
type VerifyReport struct {
	Rows       int   `json:"rows"`
	KeyedAfter int64 `json:"keyedAfter"`
	// PrunedThrough is the last row pruned (journal prune): the chain is
	// checked from the row after it.
	PrunedThrough int64     `json:"prunedThrough,omitempty"`
	OK            bool      `json:"ok"`
	Problems      []Problem `json:"problems,omitempty"`
	Notes         []Problem `json:"notes,omitempty"`
}

func (rep *VerifyReport) add(p Problem) {
	if len(rep.Problems) < maxProblems {
		rep.Problems = append(rep.Problems, p)
	}
}

// VerifyOptions says where the secrets and witnesses outside journal.db
// are. Key nil means the key could not be read (KeyErr says why): the
// keyed rows' links are still checked, their hashes cannot be.
type VerifyOptions struct {
	Key        []byte
	KeyErr     error
	AnchorPath string // "" skips the anchor
	AuditDir   string // "" skips the mirror
}

// Verify checks the activity journal against everything that witnesses it:
// each row's hash (plain SHA-256 up to the boundary the migration recorded,
// HMAC under the key after it), each row's link to the one before, the ids
// SQLite issued, the anchor kept outside the database and the audit mirror.
// It names each problem it finds (at most maxProblems, ordered by id).
//
// The anchor and the mirror are read before the table's snapshot: both are
// written after their commit, so whatever they hold is in the snapshot even
// while the daemon is writing.
func (db *DB) Verify(ctx context.Context, opts VerifyOptions) (VerifyReport, error) {
	var chain *chainer
	if opts.Key != nil {
		c, err := newChainer(opts.Key)
		if err != nil {
			return VerifyReport{}, fmt.Errorf("verify: %w", err)
		}
		chain = c
	}
	return db.verify(ctx, opts, chain, 0)
}

// verify is Verify under chain (nil without a key). through > 0 ends the
// walk at the first row after it: the prefix PruneActivity checks before
// it cuts, with the row that must chain to it.
func (db *DB) verify(ctx context.Context, opts VerifyOptions, chain *chainer, through int64) (VerifyReport, error) {
	var rep VerifyReport
	v := &verifier{rep: &rep, opts: opts, chain: chain, through: through}
	if err := v.readWitnesses(); err != nil {
		return rep, fmt.Errorf("verify: %w", err)
	}
	sqltx, err := db.r.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
	if err != nil {
		return rep, fmt.Errorf("verify: %w", err)
	}
	defer sqltx.Rollback()
	if err := v.run(ctx, sqltx); err != nil {
		return rep, fmt.Errorf("verify: %w", err)
	}
	slices.SortStableFunc(rep.Problems, func(a, b Problem) int { return cmp.Compare(a.ID, b.ID) })
	rep.OK = len(rep.Problems) == 0
	return rep, nil
}

// readWitnesses reads the anchor and the audit mirror, before the table's
// snapshot (Verify says why).
func (v *verifier) readWitnesses() error {
	if v.opts.AnchorPath != "" {
		// The daemon overwrites the anchor in place: a read racing that
		// write can see a torn record, which a second read does not.
		for range 3 {
			v.anchor, v.anchorErr = readAnchor(v.opts.AnchorPath)
			if v.anchorErr == nil && (v.chain == nil || hmacEqual(v.chain.anchorMAC(&v.anchor), v.anchor.MAC)) ||
				errors.Is(v.anchorErr, errNoAnchor) {
				break
			}
		}
	}
	if v.opts.AuditDir != "" {
		m, err := readMirror(v.opts.AuditDir, v.chain)
		if err != nil {
			return err
		}
		v.mirror = m
	}
	return nil
}

// verifier is one run of Verify.
type verifier struct {
	rep       *VerifyReport
	opts      VerifyOptions
	chain     *chainer // nil without a key
	anchor    anchor
	anchorErr error
	mirror    *mirrorIndex // nil without an audit dir
	through   int64        // > 0: walk only up to the first row after it

	after      int64 // the keyed chain starts after this row
	pruned     checkpoint
	lastPruned *mirrorRow // the newest journal.pruned row that verifies
	// mirrorPruned is the last row lastPruned says was pruned, and
	// prunedHead its hash: mirror rows up to it may be missing from the
	// table (never meta's word, which needs no key to change), and their
	// lines there must still verify.
	mirrorPruned int64
	prunedHead   string
	lastID       int64
	anchorHash   string // the hash of the anchored row, when the walk met it
	anchorSeen   bool

	keyedRows, keyedOK int
	boundary           *mirrorRow // row after+1, when the walk met it
	boundaryOK         bool       // and its hash is its HMAC under the key
	keyedMarks         []int64    // journal.chain_keyed rows elsewhere that verify under the key
	bad                []badRow   // keyed rows whose hash is not their HMAC
	links              []brokenLink
}

// badRow is a keyed row that failed its HMAC; runs of them that chain to
// each other are one rewrite.
type badRow struct {
	id      int64
	linked  bool // its prev_hash is the stored hash of the row before it
	plain   bool // its hash is the plain SHA-256 of its content
	evident bool // the row before it also failed and is its id predecessor
}

type brokenLink struct {
	id, prevID int64
	prevHash   string // what the row says it follows
}

func (v *verifier) run(ctx context.Context, q *sql.Tx) error {
	after, ok, err := keyedAfter(q)
	if err != nil {
		return err
	}
	if !ok {
		detail := "meta has no " + metaKeyedAfter + ": where the keyed chain starts was deleted; "
		if v.anchorErr == nil && v.chain != nil && hmacEqual(v.chain.anchorMAC(&v.anchor), v.anchor.MAC) {
			after = v.anchor.KeyedAfter
			detail += fmt.Sprintf("the anchor's (after row %d) is used", after)
		} else {
			detail += "every row is checked as keyed"
		}
		v.rep.add(Problem{Kind: ProblemBoundary, Detail: detail})
	}
	v.after, v.rep.KeyedAfter = after, after
	if v.pruned, err = prunedThrough(q); err != nil {
		return err
	}
	v.rep.PrunedThrough = v.pruned.id
	if err := v.walk(ctx, q); err != nil {
		return err
	}
	if err := v.resolveLinks(ctx, q); err != nil {
		return err
	}
	if err := v.checkSequence(ctx, q); err != nil {
		return err
	}
	v.checkBoundary()
	if v.through == 0 {
		// A walk that stops early may not meet the newest journal.pruned
		// row, which this compares meta with.
		v.checkPruned()
	}
	anchorOK := v.checkAnchor()
	v.reportBadRows(anchorOK)
	if v.chain == nil && v.keyedRows > 0 {
		detail := "chain-key is missing"
		if v.opts.KeyErr != nil {
			detail = v.opts.KeyErr.Error()
		}
		v.rep.add(Problem{Kind: ProblemKey, Detail: fmt.Sprintf("%s: the hashes of rows %d..%d (keyed) cannot be checked",
			detail, v.after+1, v.lastID)})
	}
	if v.mirror != nil {
		v.mirror.finish(v.rep, v.mirrorPruned)
		v.mirror.checkPruned(v.rep, prunedCopy{through: v.mirrorPruned, head: v.prunedHead, after: v.after, keyed: v.chain != nil})
	}
	return nil
}

// walk reads the table in id order and checks each row's hash and link.
func (v *verifier) walk(ctx context.Context, q *sql.Tx) error {
	end := int64(math.MaxInt64)
	if v.through > 0 {
		end = v.through
	}
	rows, err := q.QueryContext(ctx, `SELECT id, ts, trace_id, actor, agent_id, action_type, target,
		payload, prev_hash, hash FROM activity WHERE id <= COALESCE((SELECT MIN(id) FROM activity WHERE id > ?1), ?1)
		ORDER BY id`, end)
	if err != nil {
		return err
	}
	defer rows.Close()
	var (
		// After a prune the chain starts at its checkpoint (prune.go).
		prevID   = v.pruned.id
		prevHash = v.pruned.head
		prevOK   = true // the previous row matched its own hash
	)
	for rows.Next() {
		r, err := scanActivityRow(rows)
		if err != nil {
			return err
		}
		v.rep.Rows++
		contentOK := v.checkRow(&r, prevID, prevHash, prevOK)
		gap := r.ID != prevID+1
		switch {
		case r.PrevHash != prevHash && gap:
			v.rep.add(Problem{ID: prevID + 1, Kind: ProblemDeleted,
				Detail: fmt.Sprintf("rows %d..%d missing: row %d does not chain to row %d", prevID+1, r.ID-1, r.ID, prevID)})
		case r.PrevHash != prevHash && contentOK && prevOK && len(v.links) < maxProblems:
			// Both rows are intact (prev_hash is part of a row's hash), so
			// either the row before was rewritten, hash and all, or this
			// row belongs after another row. (When the row before failed
			// its own check, the broken link is that same problem.)
			v.links = append(v.links, brokenLink{id: r.ID, prevID: prevID, prevHash: r.PrevHash})
		case r.PrevHash == prevHash && gap:
			v.rep.add(Problem{ID: r.ID, Kind: ProblemReordered,
				Detail: fmt.Sprintf("id gap after row %d but the chain is intact: ids were renumbered", prevID)})
		}
		if contentOK && r.ActionType == ActionAnchorMismatch && r.ID > v.after {
			v.reportRecordedMismatch(&r)
		}
		v.noteBoundary(&r, contentOK)
		if r.ActionType == ActionPruned && contentOK {
			p := r
			v.lastPruned = &p
			v.reportForcedPrune(&r)
		}
		if v.anchorErr == nil && r.ID == v.anchor.ID {
			v.anchorHash, v.anchorSeen = r.Hash, true
		}
		if v.mirror != nil {
			v.mirror.compare(&r, contentOK)
		}
		prevID, prevHash, prevOK = r.ID, r.Hash, contentOK
	}
	v.lastID = prevID
	return rows.Err()
}

// checkRow checks r's hash under its row's scheme and reports whether it
// holds. A keyed row that fails is kept for reportBadRows, which needs the
// whole walk (and the anchor) to tell a rewrite from a wrong key.
func (v *verifier) checkRow(r *mirrorRow, prevID int64, prevHash string, prevOK bool) bool {
	c, err := canonicalOf(r)
	if r.ID <= v.after {
		if err != nil || legacyHash(r.PrevHash, c) != r.Hash {
			v.rep.add(Problem{ID: r.ID, Kind: ProblemEdited, Detail: "content does not match its hash"})
			return false
		}
		return true
	}
	v.keyedRows++
	if v.chain == nil {
		return true // unchecked: reported once as a key problem
	}
	if err == nil && hmacEqual(v.chain.rowHash(r.PrevHash, c), r.Hash) {
		v.keyedOK++
		return true
	}
	v.bad = append(v.bad, badRow{
		id:      r.ID,
		linked:  r.PrevHash == prevHash,
		plain:   err == nil && legacyHash(r.PrevHash, c) == r.Hash,
		evident: !prevOK && r.ID == prevID+1,
	})
	return false
}

// noteBoundary keeps what checkBoundary needs: the row that must start the
// keyed chain, and any journal.chain_keyed row written by this key that
// sits anywhere else.
func (v *verifier) noteBoundary(r *mirrorRow, contentOK bool) {
	if v.after > 0 && r.ID == v.after+1 {
		b := *r
		v.boundary, v.boundaryOK = &b, contentOK && v.chain != nil
		return
	}
	if r.ActionType == ActionChainKeyed && v.chain != nil && v.chain.verifies(r) && len(v.keyedMarks) < maxProblems {
		v.keyedMarks = append(v.keyedMarks, r.ID)
	}
}

// checkBoundary enforces what the migration that keyed the chain
// guarantees (keyChain): a journal keyed after row n > 0 has, as row n+1,
// the journal.chain_keyed row, written under the key, whose payload names
// n as the last legacy row. Without this, meta chain.keyed_after can be
// raised to pass every row off as legacy (re-hashed plainly, no key
// needed), or lowered or raised onto other rows. A journal created keyed
// (n = 0) has no such row: its first row is keyed, which checkRow checks.
func (v *verifier) checkBoundary() {
	for _, id := range v.keyedMarks {
		v.rep.add(Problem{ID: id, Kind: ProblemBoundary, Detail: fmt.Sprintf(
			"row %d is the journal.chain_keyed row that starts the keyed chain, but meta says the keyed chain starts after row %d: the boundary (meta %s) was moved",
			id, v.after, metaKeyedAfter)})
	}
	if v.after == 0 {
		return
	}
	n := v.after
	problem := func(detail string) {
		v.rep.add(Problem{ID: n + 1, Kind: ProblemBoundary, Detail: fmt.Sprintf(
			"meta %s says rows 1..%d are legacy (unkeyed), but %s: the boundary was moved, or the rows from %d on were cut",
			metaKeyedAfter, n, detail, n+1)})
	}
	b := v.boundary
	switch {
	case b == nil && v.pruned.id > n && v.lastPruned != nil:
		// The journal.chain_keyed row was pruned with the rows before it;
		// checkPruned vouches for the prune.
	case b == nil:
		problem(fmt.Sprintf("row %d, the journal.chain_keyed row that must follow them, is missing", n+1))
	case b.ActionType != ActionChainKeyed:
		problem(fmt.Sprintf("row %d, which must be the journal.chain_keyed row, is %s", n+1, b.ActionType))
	case v.chain != nil && !v.boundaryOK:
		problem(fmt.Sprintf("row %d, the journal.chain_keyed row, does not verify under chain-key", n+1))
	default:
		if last, ok := legacyLastID(b); !ok || last != n {
			problem(fmt.Sprintf("row %d, the journal.chain_keyed row, records a different last legacy row (legacyLastId)", n+1))
		}
	}
}

// checkPruned: a prune checkpoint in meta must be the one the newest
// journal.pruned row (keyed, so unforgeable without the key) records, and
// such a row means there is a checkpoint. Without this, deleting more of
// the prefix and moving the checkpoint to match would pass.
func (v *verifier) checkPruned() {
	p, r := v.pruned, v.lastPruned
	if r == nil {
		if p.id > 0 {
			v.rep.add(Problem{ID: p.id, Kind: ProblemDeleted, Detail: fmt.Sprintf(
				"meta %s says rows 1..%d were pruned, but no journal.pruned row that verifies records it: rows were deleted and the checkpoint forged",
				metaPrunedThrough, p.id)})
		}
		return
	}
	var rec struct {
		ThroughID *int64 `json:"throughId"`
		Head      string `json:"head"`
	}
	err := json.Unmarshal(r.Payload, &rec)
	if err == nil && rec.ThroughID != nil {
		v.mirrorPruned, v.prunedHead = *rec.ThroughID, rec.Head
	}
	if err != nil || rec.ThroughID == nil || *rec.ThroughID != p.id || rec.Head != p.head {
		v.rep.add(Problem{ID: r.ID, Kind: ProblemDeleted, Detail: fmt.Sprintf(
			"row %d, the newest journal.pruned row, records another checkpoint than meta %s (%d): the checkpoint was moved or removed",
			r.ID, metaPrunedThrough, p.id)})
	}
}

// reportForcedPrune reports a journal.pruned row that records a prune forced
// over rows that did not verify (PruneActivity with Force): the rows are
// gone, and this row is what is left of the problems they had.
func (v *verifier) reportForcedPrune(r *mirrorRow) {
	var rec struct {
		PrefixVerified *bool     `json:"prefixVerified"`
		FromID         int64     `json:"fromId"`
		ThroughID      int64     `json:"throughId"`
		Problems       []Problem `json:"problems"`
	}
	if err := json.Unmarshal(r.Payload, &rec); err != nil || rec.PrefixVerified == nil || *rec.PrefixVerified {
		return // rows from before prunes were checked say nothing
	}
	var b strings.Builder
	if len(rec.Problems) == 0 {
		b.WriteString("past the most problems one verify lists, so they were not shown to verify")
	}
	for i, p := range rec.Problems {
		if i > 0 {
			b.WriteString("; ")
		}
		fmt.Fprintf(&b, "row %d: %s — %s", p.ID, p.Kind, p.Detail)
	}
	v.rep.add(Problem{ID: r.ID, Kind: ProblemUnverifiedPrune, Detail: fmt.Sprintf(
		"%s were pruned by force though they did not verify: %s", rowsLabel(rec.FromID, rec.ThroughID), b.String())})
}

// legacyLastID reads the last legacy row a journal.chain_keyed row records.
func legacyLastID(r *mirrorRow) (int64, bool) {
	var p struct {
		LegacyLastID *int64 `json:"legacyLastId"`
	}
	if err := json.Unmarshal(r.Payload, &p); err != nil || p.LegacyLastID == nil {
		return 0, false
	}
	return *p.LegacyLastID, true
}

// reportBadRows turns the keyed rows that failed into problems. When none
// verifies and the anchor does not either, the key is the likelier
// culprit and one problem says so; otherwise runs of failing rows that
// chain to each other are one rewrite, named by its first row.
func (v *verifier) reportBadRows(anchorOK bool) {
	if len(v.bad) == 0 {
		return
	}
	if v.keyedOK == 0 && !anchorOK {
		v.rep.add(Problem{Kind: ProblemKey, Detail: fmt.Sprintf("no keyed row (%d..%d) verifies with chain-key and neither does the anchor: "+
			"chain-key is not the key this journal was written with (replaced?), or every keyed row was rewritten", v.after+1, v.lastID)})
		return
	}
	for i := 0; i < len(v.bad); {
		j := i + 1
		for j < len(v.bad) && v.bad[j].evident && v.bad[j].linked {
			j++
		}
		first, last := v.bad[i], v.bad[j-1]
		switch {
		case j-i > 1:
			how := "without the key"
			if first.plain {
				how = "as a plain SHA-256, without the key"
			}
			v.rep.add(Problem{ID: first.id, Kind: ProblemRewritten, Detail: fmt.Sprintf(
				"rows %d..%d chain to each other but their hashes are not their HMAC under chain-key: the chain was recomputed from row %d on %s (row %d or a later one was edited)",
				first.id, last.id, first.id, how, first.id)})
		case first.plain:
			v.rep.add(Problem{ID: first.id, Kind: ProblemEdited, Detail: "its hash is a plain SHA-256 of its content, not its HMAC under chain-key: it was edited and re-hashed without the key"})
		default:
			v.rep.add(Problem{ID: first.id, Kind: ProblemEdited, Detail: "content does not match its hash"})
		}
		i = j
	}
}

// reportRecordedMismatch reports what the daemon found and recorded at a
// start-up (openAnchor). The row stays: it is the journal's memory of rows
// that are gone.
func (v *verifier) reportRecordedMismatch(r *mirrorRow) {
	a, err := r.activity()
	if err != nil {
		v.rep.add(Problem{ID: r.ID, Kind: ProblemAnchor, Detail: "an anchor mismatch was recorded at start-up: " + err.Error()})
		return
	}
	kind, _ := a.Payload["kind"].(string)
	if kind == "" {
		kind = ProblemAnchor
	}
	problem, _ := a.Payload["problem"].(string)
	v.rep.add(Problem{ID: r.ID, Kind: kind, Detail: fmt.Sprintf("recorded at start-up on %s: %s", r.TS, problem)})
}

// resolveLinks tells reordering from editing for intact rows whose link
// is broken.
func (v *verifier) resolveLinks(ctx context.Context, q *sql.Tx) error {
	for i, l := range v.links {
		var other int64
		err := sql.ErrNoRows
		if i < maxHashLookups {
			err = q.QueryRowContext(ctx, `SELECT id FROM activity WHERE hash = ? LIMIT 1`, l.prevHash).Scan(&other)
		}
		switch {
		case err == nil:
			v.rep.add(Problem{ID: l.id, Kind: ProblemReordered,
				Detail: fmt.Sprintf("row %d chains to row %d, not to row %d", l.id, other, l.prevID)})
		case errors.Is(err, sql.ErrNoRows):
			v.rep.add(Problem{ID: l.prevID, Kind: ProblemEdited,
				Detail: fmt.Sprintf("row %d was rewritten: row %d no longer chains to it", l.prevID, l.id)})
		default:
			return err
		}
	}
	return nil
}

// checkSequence: AUTOINCREMENT records the highest id ever issued, and a
// rolled-back insert rolls it back too, so a sequence past the last row
// means rows were deleted from the end (unless sqlite_sequence was fixed up
// too, which is what the anchor is for).
func (v *verifier) checkSequence(ctx context.Context, q *sql.Tx) error {
	var seq int64
	err := q.QueryRowContext(ctx, `SELECT seq FROM sqlite_sequence WHERE name = 'activity'`).Scan(&seq)
	if err != nil && !errors.Is(err, sql.ErrNoRows) {
		return err
	}
	if seq > v.lastID {
		v.rep.add(Problem{ID: v.lastID + 1, Kind: ProblemDeleted,
			Detail: fmt.Sprintf("rows %d..%d missing at the end", v.lastID+1, seq)})
	}
	return nil
}

// checkAnchor compares the anchor with the table and reports whether the
// anchor itself is authentic (its MAC verifies under the key).
func (v *verifier) checkAnchor() bool {
	if v.opts.AnchorPath == "" {
		return false
	}
	switch {
	case errors.Is(v.anchorErr, errNoAnchor):
		// The daemon anchors a journal before its first row (Open, and
		// the migration that keys an old one), so rows without an anchor
		// mean it was deleted, whatever the boundary says.
		if v.rep.Rows > 0 {
			v.rep.add(Problem{Kind: ProblemAnchor, Detail: fmt.Sprintf(
				"journal.anchor is missing (%s) while the journal holds rows up to %d: it was deleted; rows cut from the end cannot be ruled out",
				v.opts.AnchorPath, v.lastID)})
		}
		return false
	case v.anchorErr != nil:
		v.rep.add(Problem{Kind: ProblemAnchor, Detail: fmt.Sprintf("%s is unreadable: %v", v.opts.AnchorPath, v.anchorErr)})
		return false
	}
	a := v.anchor
	authentic := v.chain != nil && hmacEqual(v.chain.anchorMAC(&a), a.MAC)
	if v.chain != nil && !authentic {
		v.rep.add(Problem{Kind: ProblemAnchor, Detail: v.opts.AnchorPath + " does not verify with chain-key: it was edited or replaced"})
		return false
	}
	if a.KeyedAfter != v.after {
		v.rep.add(Problem{ID: min(a.KeyedAfter, v.after) + 1, Kind: ProblemBoundary, Detail: fmt.Sprintf(
			"meta says the keyed chain starts after row %d, the anchor says after row %d: the boundary was moved", v.after, a.KeyedAfter)})
	}
	switch {
	case a.ID > v.lastID:
		v.rep.add(Problem{ID: v.lastID + 1, Kind: ProblemTruncated, Detail: truncatedDetail(v.lastID, a)})
	case a.ID == 0:
	case !v.anchorSeen && a.ID <= v.pruned.id && v.lastPruned != nil:
		// An anchor left behind the head by a crash, naming a row pruned
		// since: the prune's row vouches for it.
	case !v.anchorSeen:
		// The walk already named the gap; this says it held the head.
		v.rep.add(Problem{ID: a.ID, Kind: ProblemDeleted, Detail: fmt.Sprintf("row %d, the head the anchor recorded, is missing", a.ID)})
	case v.anchorHash != a.Hash:
		v.rep.add(Problem{ID: a.ID, Kind: ProblemRewritten, Detail: fmt.Sprintf(
			"row %d no longer has the hash the anchor recorded: it was rewritten after it was written", a.ID)})
	}
	return authentic
}

// String renders the report as `plexus journal verify` prints it.
func (rep VerifyReport) String() string {
	var b strings.Builder
	if rep.OK && rep.PrunedThrough > 0 {
		fmt.Fprintf(&b, "ok: %d activity rows, hash chain intact from the prune checkpoint (rows 1..%d pruned)\n", rep.Rows, rep.PrunedThrough)
	} else if rep.OK {
		fmt.Fprintf(&b, "ok: %d activity rows, hash chain intact\n", rep.Rows)
	} else {
		fmt.Fprintf(&b, "BROKEN: %d activity rows checked\n", rep.Rows)
		for _, p := range rep.Problems {
			writeProblem(&b, p)
		}
	}
	if len(rep.Notes) > 0 {
		b.WriteString("notes (not tampering):\n")
		for _, p := range rep.Notes {
			writeProblem(&b, p)
		}
	}
	return b.String()
}

func writeProblem(b *strings.Builder, p Problem) {
	if p.ID > 0 {
		fmt.Fprintf(b, "  row %d: %s — %s\n", p.ID, p.Kind, p.Detail)
	} else {
		fmt.Fprintf(b, "  journal: %s — %s\n", p.Kind, p.Detail)
	}
}
