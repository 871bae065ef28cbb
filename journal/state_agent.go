package journal

import (
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/plexus-gw/plexus"
)

// Upserts everywhere rather than INSERT OR REPLACE: REPLACE deletes the old
// row first, which would cascade to rows that reference it (an agent's
// enrollment codes, a token's scopes).

func (t *tx) PutAgent(a *plexus.Agent) error {
	if err := t.writable(); err != nil {
		return err
	}
	_, err := t.exec(`INSERT INTO agents (id, label, created_at, pat_hash, enrolled_at, revoked_at)
		VALUES (?, ?, ?, ?, ?, ?)
		ON CONFLICT (id) DO UPDATE SET label = excluded.label, created_at = excluded.created_at,
			pat_hash = excluded.pat_hash, enrolled_at = excluded.enrolled_at, revoked_at = excluded.revoked_at`,
		a.ID, a.Label, fmtTime(a.CreatedAt), nullBytes(a.PATHash), fmtTimePtr(a.EnrolledAt), fmtTimePtr(a.RevokedAt))
	if err != nil {
		return fmt.Errorf("put agent %q: %w", a.ID, err)
	}
	return nil
}

const agentCols = `id, label, created_at, pat_hash, enrolled_at, revoked_at`

func scanAgent(s scanner) (*plexus.Agent, error) {
	var (
		a                 plexus.Agent
		created           string
		enrolled, revoked sql.NullString
	)
	if err := s.Scan(&a.ID, &a.Label, &created, &a.PATHash, &enrolled, &revoked); err != nil {
		return nil, err
	}
	var p times
	a.CreatedAt, a.EnrolledAt, a.RevokedAt = p.at(created), p.opt(enrolled), p.opt(revoked)
	return &a, p.err
}

func (t *tx) Agent(id string) (*plexus.Agent, error) {
	a, err := scanAgent(t.queryRow(`SELECT `+agentCols+` FROM agents WHERE id = ?`, id))
	if err != nil {
		return nil, lookupErr(err, fmt.Sprintf("agent %q", id))
	}
	return a, nil
}

func (t *tx) AgentByPATHash(hash []byte) (*plexus.Agent, error) {
	if len(hash) == 0 {
		return nil, fmt.Errorf("agent by PAT hash: %w", plexus.ErrNotFound)
	}
	a, err := scanAgent(t.queryRow(`SELECT `+agentCols+` FROM agents WHERE pat_hash = ?`, hash))
	if err != nil {
		// Never print the hash: it is credential material.
		return nil, lookupErr(err, "agent by PAT hash")
	}
	return a, nil
}

func (t *tx) Agents() ([]plexus.Agent, error) {
	rows, err := t.query(`SELECT ` + agentCols + ` FROM agents ORDER BY created_at, id`)
	if err != nil {
		return nil, fmt.Errorf("agents: %w", err)
	}
	return collect(rows, "agents", scanAgent)
}

func (t *tx) PutEnrollCode(c *plexus.EnrollCode) error {
	if err := t.writable(); err != nil {
		return err
	}
	if len(c.Hash) == 0 {
		return fmt.Errorf("put enroll code for agent %q: empty hash", c.AgentID)
	}
	_, err := t.exec(`INSERT INTO enroll_codes (hash, agent_id, created_at, expires_at, consumed_at, trace_id)
		VALUES (?, ?, ?, ?, ?, ?)
		ON CONFLICT (hash) DO UPDATE SET agent_id = excluded.agent_id, created_at = excluded.created_at,
			expires_at = excluded.expires_at, consumed_at = excluded.consumed_at, trace_id = excluded.trace_id`,
		c.Hash, c.AgentID, fmtTime(c.CreatedAt), fmtTime(c.ExpiresAt), fmtTimePtr(c.ConsumedAt), c.TraceID)
	if err != nil {
		return fmt.Errorf("put enroll code for agent %q: %w", c.AgentID, err)
	}
	return nil
}

func (t *tx) EnrollCode(hash []byte) (*plexus.EnrollCode, error) {
	var (
		c                plexus.EnrollCode
		created, expires string
		consumed         sql.NullString
	)
	err := t.queryRow(`SELECT hash, agent_id, created_at, expires_at, consumed_at, trace_id
		FROM enroll_codes WHERE hash = ?`, hash).
		Scan(&c.Hash, &c.AgentID, &created, &expires, &consumed, &c.TraceID)
	if err != nil {
		return nil, lookupErr(err, "enroll code")
	}
	var p times
	c.CreatedAt, c.ExpiresAt, c.ConsumedAt = p.at(created), p.at(expires), p.opt(consumed)
	if p.err != nil {
		return nil, fmt.Errorf("enroll code: %w", p.err)
	}
	return &c, nil
}

// ConsumeEnrollCode is a compare-and-set on consumed_at: of any number of
// concurrent redemptions, in this process or another, exactly one sees the
// row still unconsumed and changes it.
func (t *tx) ConsumeEnrollCode(hash []byte, now time.Time) (bool, error) {
	if err := t.writable(); err != nil {
		return false, err
	}
	res, err := t.exec(`UPDATE enroll_codes SET consumed_at = ? WHERE hash = ? AND consumed_at IS NULL`,
		fmtTime(now), hash)
	if err != nil {
		return false, fmt.Errorf("consume enroll code: %w", err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return false, fmt.Errorf("consume enroll code: %w", err)
	}
	if n == 1 {
		return true, nil
	}
	ok, err := t.exists(`SELECT 1 FROM enroll_codes WHERE hash = ?`, hash)
	if err != nil {
		return false, fmt.Errorf("consume enroll code: %w", err)
	}
	if !ok {
		return false, fmt.Errorf("enroll code: %w", plexus.ErrNotFound)
	}
	return false, nil
}

// lookupErr turns sql.ErrNoRows into an error wrapping plexus.ErrNotFound
// and gives any other error its context.
func lookupErr(err error, what string) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, sql.ErrNoRows):
		return fmt.Errorf("%s: %w", what, plexus.ErrNotFound)
	}
	return fmt.Errorf("%s: %w", what, err)
}

// collect scans every row with scan and closes rows.
func collect[T any](rows *sql.Rows, what string, scan func(scanner) (*T, error)) ([]T, error) {
	defer rows.Close()
	var out []T
	for rows.Next() {
		v, err := scan(rows)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", what, err)
		}
		out = append(out, *v)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	return out, nil
}
