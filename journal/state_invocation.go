package journal

import (
	"fmt"
	"time"

	"github.com/plexus-gw/plexus"
)

// invocationQuery repeats the activity_idem index's WHERE terms verbatim so
// that SQLite can use that partial index: it runs before every dispatch of
// a call that carries an idempotencyKey.
const invocationQuery = `SELECT id, action_type, coalesce(json_extract(payload, '$.errorCode'), '')
	FROM activity
	WHERE json_extract(payload, '$.idemHash') = ?
	  AND json_extract(payload, '$.idemHash') IS NOT NULL
	  AND action_type IN ('invoke.started', 'invoke.ok', 'invoke.failed')
	  AND ts >= ?
	ORDER BY id`

// Invocation finds the latest call started with keyHash since since, and
// its outcome if one was recorded.
func (t *tx) Invocation(keyHash string, since time.Time) (*plexus.Invocation, error) {
	rows, err := t.query(invocationQuery, keyHash, fmtTime(since))
	if err != nil {
		return nil, fmt.Errorf("invocation: %w", err)
	}
	defer rows.Close()
	var inv *plexus.Invocation
	for rows.Next() {
		var id int64
		var action, code string
		if err := rows.Scan(&id, &action, &code); err != nil {
			return nil, fmt.Errorf("invocation: %w", err)
		}
		switch {
		case action == plexus.ActionInvokeStarted:
			inv = &plexus.Invocation{StartedID: id} // a later start supersedes (the window passed)
		case inv != nil && inv.OutcomeID == 0:
			inv.OutcomeID, inv.OK, inv.ErrorCode = id, action == plexus.ActionInvokeOK, plexus.ErrorCode(code)
		}
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("invocation: %w", err)
	}
	if inv == nil {
		return nil, fmt.Errorf("invocation: %w", plexus.ErrNotFound)
	}
	return inv, nil
}
