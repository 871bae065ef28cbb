package journal

import (
	"context"
	"fmt"
)

// TraceIDs returns up to limit distinct trace ids of activity rows that
// start with prefix, in order, so a person can name a trace by its first
// characters (plexus journal --trace 01JD…). The prefix is matched as a
// range, [prefix, prefix+0xff), which the trace_id index serves, and is
// case-sensitive as the ids are. An empty prefix matches nothing.
func (db *DB) TraceIDs(ctx context.Context, prefix string, limit int) ([]string, error) {
	if prefix == "" || limit <= 0 {
		return nil, nil
	}
	rows, err := db.r.QueryContext(ctx,
		`SELECT DISTINCT trace_id FROM activity WHERE trace_id >= ? AND trace_id < ? ORDER BY trace_id LIMIT ?`,
		prefix, prefix+"\xff", limit)
	if err != nil {
		return nil, fmt.Errorf("trace ids: %w", err)
	}
	defer rows.Close()
	var ids []string
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			return nil, fmt.Errorf("trace ids: %w", err)
		}
		ids = append(ids, id)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("trace ids: %w", err)
	}
	return ids, nil
}
