package journal

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"reflect"

	"github.com/plexus-gw/plexus"
)

// Publish persists e for Last-Event-ID replay and sets e.ID and e.At. If the
// Update is rolled back (including fn's own savepoint in a group-committed
// batch), e.ID is reset to 0: the id may belong to another event by then. Only
// Type, the audience and a redacted copy of Data are written; e.Secret never
// is. e.Data itself is left as given for the live delivery the caller makes
// after the commit.
func (t *tx) Publish(e *plexus.Event) error {
	if err := t.writable(); err != nil {
		return err
	}
	var data any // NULL when the event has no body
	if len(e.Data) > 0 {
		v, err := decodeJSON(e.Data)
		if err != nil {
			return fmt.Errorf("publish %s: data: %w", e.Type, err)
		}
		// Keep the body as sent (compacted) when redaction finds nothing,
		// so a replay carries the same bytes as the live delivery.
		var b []byte
		if red := redactValue(v); reflect.DeepEqual(red, v) {
			var buf bytes.Buffer
			err = json.Compact(&buf, e.Data)
			b = buf.Bytes()
		} else {
			b, err = encodeCanonical(red)
		}
		if err != nil {
			return fmt.Errorf("publish %s: data: %w", e.Type, err)
		}
		data = string(b)
	}
	at := t.db.clock().UTC().Round(0)
	res, err := t.exec(`INSERT INTO events (ts, type, agent_id, session_id, data) VALUES (?, ?, ?, ?, ?)`,
		fmtTime(at), e.Type, e.AgentID, e.SessionID, data)
	if err != nil {
		return fmt.Errorf("publish %s: %w", e.Type, err)
	}
	id, err := res.LastInsertId()
	if err != nil {
		return fmt.Errorf("publish %s: %w", e.Type, err)
	}
	e.ID, e.At = id, at
	t.handedEvents = append(t.handedEvents, e)
	return nil
}

// EventsSince returns, oldest first, the persisted events after afterID that
// the session (agentID, sessionID) may see: broadcasts (no agent and no
// session), and its agent's events addressed to every session of the agent
// or to this one. An event naming a session but no agent (an admin session's)
// is not a broadcast: it goes to that session only.
// limit <= 0 means no limit. Replayed events carry Data only, never Secret.
func (db *DB) EventsSince(ctx context.Context, afterID int64, agentID, sessionID string, limit int) ([]plexus.Event, error) {
	if limit <= 0 {
		limit = -1 // SQLite: no limit
	}
	rows, err := db.r.QueryContext(ctx, `SELECT id, ts, type, agent_id, session_id, data FROM events
		WHERE id > ?
		  AND ((agent_id = '' AND session_id = '')
		       OR (agent_id = ? AND (session_id = '' OR session_id = ?)))
		ORDER BY id LIMIT ?`, afterID, agentID, sessionID, limit)
	if err != nil {
		return nil, fmt.Errorf("events since %d: %w", afterID, err)
	}
	defer rows.Close()
	var out []plexus.Event
	for rows.Next() {
		var (
			e    plexus.Event
			ts   string
			data sql.NullString
		)
		if err := rows.Scan(&e.ID, &ts, &e.Type, &e.AgentID, &e.SessionID, &data); err != nil {
			return nil, fmt.Errorf("events since %d: %w", afterID, err)
		}
		if e.At, err = parseTime(ts); err != nil {
			return nil, fmt.Errorf("events since %d: %w", afterID, err)
		}
		if data.Valid {
			e.Data = json.RawMessage(data.String)
		}
		out = append(out, e)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("events since %d: %w", afterID, err)
	}
	return out, nil
}
