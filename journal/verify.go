package journal

import (
	"cmp"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
)

// Kinds of chain problems [DB.Verify] reports.
const (
	// ProblemEdited: a row's content no longer matches its hash, or a row
	// was rewritten together with its hash so the next row no longer
	// chains to it.
	ProblemEdited = "edited"
	// ProblemDeleted: rows are missing (an id gap with a broken link, or
	// ids issued after the last row that remains).
	ProblemDeleted = "deleted"
	// ProblemReordered: a row chains to a row other than its predecessor,
	// or ids were renumbered under an intact chain.
	ProblemReordered = "reordered"
)

// maxProblems bounds a report on a badly damaged journal; the first
// problems are the ones that matter.
const maxProblems = 100

// maxHashLookups bounds the unindexed searches used to tell reordering from
// editing.
const maxHashLookups = 10

// Problem is one break in the activity chain.
type Problem struct {
	ID     int64  `json:"id"`
	Kind   string `json:"kind"`
	Detail string `json:"detail"`
}

// VerifyReport is the result of walking the activity chain.
type VerifyReport struct {
	Rows     int       `json:"rows"`
	OK       bool      `json:"ok"`
	Problems []Problem `json:"problems,omitempty"`
}

// Verify walks the activity table in id order on one read snapshot,
// recomputing each row's hash and checking that it chains to the row
// before, and reports where the chain breaks (at most maxProblems, ordered
// by id). It detects rows edited or deleted behind the daemon's back; it
// cannot detect a rewrite of the whole chain from some row to the end, which
// is what the audit mirror, kept elsewhere, is for.
func (db *DB) Verify(ctx context.Context) (VerifyReport, error) {
	var rep VerifyReport
	sqltx, err := db.r.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
	if err != nil {
		return rep, fmt.Errorf("verify: %w", err)
	}
	defer sqltx.Rollback()

	rows, err := sqltx.QueryContext(ctx, `SELECT id, ts, trace_id, actor, agent_id, action_type, target,
		payload, prev_hash, hash FROM activity ORDER BY id`)
	if err != nil {
		return rep, fmt.Errorf("verify: %w", err)
	}
	defer rows.Close()

	type brokenLink struct {
		id, prevID int64
		prevHash   string // what the row says it follows
	}
	var (
		links    []brokenLink
		prevID   int64
		prevHash string
		prevOK   = true // the previous row matched its own hash
	)
	add := func(p Problem) {
		if len(rep.Problems) < maxProblems {
			rep.Problems = append(rep.Problems, p)
		}
	}
	for rows.Next() {
		r, err := scanActivityRow(rows)
		if err != nil {
			return rep, fmt.Errorf("verify: %w", err)
		}
		rep.Rows++
		want, err := rowHash(r)
		contentOK := err == nil && want == r.Hash
		if !contentOK {
			add(Problem{ID: r.ID, Kind: ProblemEdited, Detail: "content does not match its hash"})
		}
		gap := r.ID != prevID+1
		switch {
		case r.PrevHash != prevHash && gap:
			add(Problem{ID: prevID + 1, Kind: ProblemDeleted,
				Detail: fmt.Sprintf("rows %d..%d missing: row %d does not chain to row %d", prevID+1, r.ID-1, r.ID, prevID)})
		case r.PrevHash != prevHash && contentOK && prevOK && len(links) < maxProblems:
			// Both rows are intact (prev_hash is part of a row's hash), so
			// either the row before was rewritten, hash and all, or this
			// row belongs after another row. (When the row before failed
			// its own check, the broken link is that same problem.)
			links = append(links, brokenLink{id: r.ID, prevID: prevID, prevHash: r.PrevHash})
		case r.PrevHash == prevHash && gap:
			add(Problem{ID: r.ID, Kind: ProblemReordered,
				Detail: fmt.Sprintf("id gap after row %d but the chain is intact: ids were renumbered", prevID)})
		}
		prevID, prevHash, prevOK = r.ID, r.Hash, contentOK
	}
	if err := rows.Err(); err != nil {
		return rep, fmt.Errorf("verify: %w", err)
	}
	rows.Close()

	for i, l := range links {
		var other int64
		err := sql.ErrNoRows
		if i < maxHashLookups {
			err = sqltx.QueryRowContext(ctx, `SELECT id FROM activity WHERE hash = ? LIMIT 1`, l.prevHash).Scan(&other)
		}
		switch {
		case err == nil:
			add(Problem{ID: l.id, Kind: ProblemReordered,
				Detail: fmt.Sprintf("row %d chains to row %d, not to row %d", l.id, other, l.prevID)})
		case errors.Is(err, sql.ErrNoRows):
			add(Problem{ID: l.prevID, Kind: ProblemEdited,
				Detail: fmt.Sprintf("row %d was rewritten: row %d no longer chains to it", l.prevID, l.id)})
		default:
			return rep, fmt.Errorf("verify: %w", err)
		}
	}

	// AUTOINCREMENT records the highest id ever issued, and a rolled-back
	// insert rolls it back too, so a sequence past the last row means rows
	// were deleted from the end.
	var seq int64
	err = sqltx.QueryRowContext(ctx, `SELECT seq FROM sqlite_sequence WHERE name = 'activity'`).Scan(&seq)
	if err != nil && !errors.Is(err, sql.ErrNoRows) {
		return rep, fmt.Errorf("verify: %w", err)
	}
	if seq > prevID {
		add(Problem{ID: prevID + 1, Kind: ProblemDeleted,
			Detail: fmt.Sprintf("rows %d..%d missing at the end", prevID+1, seq)})
	}

	slices.SortStableFunc(rep.Problems, func(a, b Problem) int { return cmp.Compare(a.ID, b.ID) })
	rep.OK = len(rep.Problems) == 0
	return rep, nil
}
