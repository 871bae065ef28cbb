package journal

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/plexus-gw/plexus"
)

// Filter selects activity rows for [DB.Activity]; zero fields match all.
type Filter struct {
	TraceID string
	// Type matches action_type exactly, or as a prefix when it ends in '.'
	// ("grant." matches grant.requested) or '*' ("grant*" matches grant and
	// grant.requested).
	Type    string
	AgentID string
	// Since keeps rows with ts at or after it, from the first row whose ts
	// reaches it (ids follow time): after the clock was set back, rows
	// written before the step with a later ts are not returned, with or
	// without AgentID.
	Since time.Time
	// AfterID keeps rows with id greater than it, in either order: a cursor.
	AfterID int64
	// Limit caps the rows returned; 0 means no cap.
	Limit int
	// Desc returns newest first.
	Desc bool
}

// ParseSince reads a [Filter]'s Since as a person gives it: a duration ago
// ("90m", "2h", "3d") from now, or an RFC 3339 time.
func ParseSince(s string, now time.Time) (time.Time, error) {
	if strings.HasSuffix(s, "d") {
		var n int
		if _, err := fmt.Sscanf(s, "%dd", &n); err == nil && n >= 0 {
			return now.Add(-time.Duration(n) * 24 * time.Hour), nil
		}
	}
	if d, err := time.ParseDuration(s); err == nil && d >= 0 {
		return now.Add(-d), nil
	}
	if t, err := time.Parse(time.RFC3339, s); err == nil {
		return t, nil
	}
	return time.Time{}, fmt.Errorf("%q is neither a duration (1h, 3d) nor an RFC 3339 time", s)
}

// Activity returns the journal rows matching f, by id. Payload numbers come
// back as json.Number, exactly as stored. It reads from the
// reader pool and never waits for the writer. Each selective field is served
// by an index (trace_id; agent_id, in id order) or, for Since, by a search
// over ids, so `--trace` and `--agent` stay fast however long the journal
// grows.
func (db *DB) Activity(ctx context.Context, f Filter) ([]plexus.Activity, error) {
	query, args, err := db.activityQuery(ctx, f)
	if err != nil {
		return nil, fmt.Errorf("activity query: %w", err)
	}
	rows, err := db.r.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, fmt.Errorf("activity query: %w", err)
	}
	defer rows.Close()
	var out []plexus.Activity
	for rows.Next() {
		r, err := scanActivityRow(rows)
		if err != nil {
			return nil, fmt.Errorf("activity query: %w", err)
		}
		a, err := r.activity()
		if err != nil {
			return nil, fmt.Errorf("activity query: row %d: %w", r.ID, err)
		}
		out = append(out, a)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("activity query: %w", err)
	}
	return out, nil
}

// activityQuery is the SELECT of f with its arguments.
func (db *DB) activityQuery(ctx context.Context, f Filter) (string, []any, error) {
	var (
		where []string
		args  []any
	)
	if f.TraceID != "" {
		where, args = append(where, "trace_id = ?"), append(args, f.TraceID)
	}
	if f.Type != "" {
		w, a := typeMatch(f.Type)
		where, args = append(where, w), append(args, a...)
	}
	if f.AgentID != "" {
		// With a trace, its few rows come from the trace index: the unary
		// + keeps SQLite from preferring the agent index (whose order is
		// the id order asked for) and walking all of the agent's rows.
		cond := "agent_id = ?"
		if f.TraceID != "" {
			cond = "+agent_id = ?"
		}
		where, args = append(where, cond), append(args, f.AgentID)
	}
	if !f.Since.IsZero() {
		since := fmtTime(f.Since)
		if f.TraceID == "" {
			// Bound the rows by id (ts has no index since schema version
			// 8; id order is time order): alone, or within an agent's
			// rows, which activity_agent keeps in id order.
			from, err := firstAtOrAfter(ctx, db.r, since)
			if err != nil {
				return "", nil, err
			}
			where, args = append(where, "id >= ?"), append(args, from)
		}
		where, args = append(where, "ts >= ?"), append(args, since)
	}
	if f.AfterID > 0 {
		where, args = append(where, "id > ?"), append(args, f.AfterID)
	}
	var q strings.Builder
	q.WriteString(`SELECT id, ts, trace_id, actor, agent_id, action_type, target, payload, prev_hash, hash FROM activity`)
	if len(where) > 0 {
		q.WriteString(" WHERE " + strings.Join(where, " AND "))
	}
	if f.Desc {
		q.WriteString(" ORDER BY id DESC")
	} else {
		q.WriteString(" ORDER BY id")
	}
	if f.Limit > 0 {
		q.WriteString(" LIMIT ?")
		args = append(args, f.Limit)
	}
	return q.String(), args, nil
}

// typeMatch turns a Type filter into SQL. A prefix is matched as a range
// [p, p') where p' is p with its last byte incremented, so the action_type
// index serves it (LIKE would not: it is case-insensitive by default).
func typeMatch(typ string) (string, []any) {
	prefix, isPrefix := strings.CutSuffix(typ, "*")
	if !isPrefix && !strings.HasSuffix(typ, ".") {
		return "action_type = ?", []any{typ}
	}
	if prefix == "" {
		return "1", nil
	}
	last := prefix[len(prefix)-1]
	if last == 0xff {
		return "substr(action_type, 1, ?) = ?", []any{len(prefix), prefix}
	}
	upper := prefix[:len(prefix)-1] + string([]byte{last + 1})
	return "action_type >= ? AND action_type < ?", []any{prefix, upper}
}

func scanActivityRow(s scanner) (mirrorRow, error) {
	var (
		r       mirrorRow
		payload string
	)
	err := s.Scan(&r.ID, &r.TS, &r.TraceID, &r.Actor, &r.AgentID, &r.ActionType, &r.Target,
		&payload, &r.PrevHash, &r.Hash)
	r.Payload = []byte(payload)
	return r, err
}

func (r mirrorRow) activity() (plexus.Activity, error) {
	a := plexus.Activity{
		ID: r.ID, TraceID: r.TraceID, Actor: r.Actor, AgentID: r.AgentID,
		ActionType: r.ActionType, Target: r.Target, PrevHash: r.PrevHash, Hash: r.Hash,
	}
	var err error
	if a.TS, err = parseTime(r.TS); err != nil {
		return a, err
	}
	if len(r.Payload) > 0 {
		v, err := decodeJSON(r.Payload)
		if err != nil {
			return a, fmt.Errorf("payload: %w", err)
		}
		if m, ok := v.(map[string]any); ok && len(m) > 0 {
			a.Payload = m
		}
	}
	return a, nil
}

// firstAtOrAfter returns where the activity rows recorded at or after ts (a
// stored time text) start: an id such that every row below it was recorded
// before ts and the first row at or above it, if any, was not (one past the
// newest row when every row is older; 0 for an empty table). It is a binary
// search over ids, each probe one rowid lookup: rows are appended in time
// order (Record reads the clock under the write lock), so id order is ts
// order. Should the system clock have been set back while
// rows were written, the search finds one of the places where the times
// cross ts, and the rows before it are not searched.
func firstAtOrAfter(ctx context.Context, q rowQuerier, ts string) (int64, error) {
	var first, last sql.NullInt64
	// Two subqueries: SQLite answers a lone MIN or MAX from the rowid
	// B-tree's ends, but scans the table for both in one SELECT.
	err := q.QueryRowContext(ctx, `SELECT (SELECT MIN(id) FROM activity), (SELECT MAX(id) FROM activity)`).Scan(&first, &last)
	if err != nil {
		return 0, fmt.Errorf("first row since %s: %w", ts, err)
	}
	if !first.Valid {
		return 0, nil
	}
	// Rows below lo are before ts; the row at or after hi (if any) is not.
	lo, hi := first.Int64, last.Int64+1
	for lo < hi {
		mid := lo + (hi-lo)/2
		var id int64
		var rowTS string
		err := q.QueryRowContext(ctx, `SELECT id, ts FROM activity WHERE id >= ? ORDER BY id LIMIT 1`, mid).Scan(&id, &rowTS)
		switch {
		case errors.Is(err, sql.ErrNoRows): // rows deleted since MAX was read
			hi = mid
		case err != nil:
			return 0, fmt.Errorf("first row since %s: %w", ts, err)
		case rowTS >= ts:
			hi = mid
		default:
			lo = id + 1
		}
	}
	return lo, nil
}
