package journal

import (
	"database/sql"
	"fmt"
	"slices"
	"time"

	"github.com/plexus-gw/plexus"
)

func (t *tx) PutSession(s *plexus.Session) error {
	if err := t.writable(); err != nil {
		return err
	}
	_, err := t.exec(`INSERT INTO sessions
		(id, agent_id, kind, client_name, client_version, created_at, expires_at, revoked_at, key_epoch)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)
		ON CONFLICT (id) DO UPDATE SET agent_id = excluded.agent_id, kind = excluded.kind,
			client_name = excluded.client_name, client_version = excluded.client_version,
			created_at = excluded.created_at, expires_at = excluded.expires_at,
			revoked_at = excluded.revoked_at, key_epoch = excluded.key_epoch`,
		s.ID, s.AgentID, string(s.Kind), s.ClientName, s.ClientVersion,
		fmtTime(s.CreatedAt), fmtTime(s.ExpiresAt), fmtTimePtr(s.RevokedAt), s.KeyEpoch)
	if err != nil {
		return fmt.Errorf("put session %q: %w", s.ID, err)
	}
	return nil
}

func (t *tx) Session(id string) (*plexus.Session, error) {
	var (
		s                plexus.Session
		kind             string
		created, expires string
		revoked          sql.NullString
	)
	err := t.queryRow(`SELECT id, agent_id, kind, client_name, client_version, created_at, expires_at, revoked_at, key_epoch
		FROM sessions WHERE id = ?`, id).
		Scan(&s.ID, &s.AgentID, &kind, &s.ClientName, &s.ClientVersion, &created, &expires, &revoked, &s.KeyEpoch)
	if err != nil {
		return nil, lookupErr(err, fmt.Sprintf("session %q", id))
	}
	var p times
	s.Kind = plexus.SessionKind(kind)
	s.CreatedAt, s.ExpiresAt, s.RevokedAt = p.at(created), p.at(expires), p.opt(revoked)
	if p.err != nil {
		return nil, fmt.Errorf("session %q: %w", id, p.err)
	}
	return &s, nil
}

// RevokeSessions ends the live sessions that match and returns their ids,
// sorted. Sessions already revoked or expired are left as they are: their
// revoked_at keeps recording when they actually ended.
func (t *tx) RevokeSessions(kind plexus.SessionKind, agentID string, beforeEpoch int64, now time.Time) ([]string, error) {
	if err := t.writable(); err != nil {
		return nil, err
	}
	ts := fmtTime(now)
	rows, err := t.query(`UPDATE sessions SET revoked_at = ?
		WHERE kind = ? AND revoked_at IS NULL AND expires_at > ?
		  AND (? = '' OR agent_id = ?)
		  AND (? <= 0 OR key_epoch < ?)
		RETURNING id`,
		ts, string(kind), ts, agentID, agentID, beforeEpoch, beforeEpoch)
	if err != nil {
		return nil, fmt.Errorf("revoke %s sessions: %w", kind, err)
	}
	defer rows.Close()
	ids := []string{}
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			return nil, fmt.Errorf("revoke %s sessions: %w", kind, err)
		}
		ids = append(ids, id)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("revoke %s sessions: %w", kind, err)
	}
	slices.Sort(ids)
	return ids, nil
}
