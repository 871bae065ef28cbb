package journal

import (
	"database/sql"
	"fmt"
	"time"

	"github.com/plexus-gw/plexus"
)

// PutToken registers a minted token's jti with its scopes. token_scopes
// indexes each scope's capability and, for a synthesized workflow member
// scope, the workflow it was made for: revoking (agent, workflow) must reach
// the tokens carrying its members, and nothing else of the agent's.
func (t *tx) PutToken(r *plexus.TokenRecord) error {
	if err := t.writable(); err != nil {
		return err
	}
	scopes, err := toJSON(r.Scopes)
	if err != nil {
		return fmt.Errorf("put token %q: %w", r.JTI, err)
	}
	_, err = t.exec(`INSERT INTO tokens
		(jti, agent_id, session_id, scopes, issued_at, expires_at, grant_expires_at, revoked_at, revoke_reason, trace_id)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
		ON CONFLICT (jti) DO UPDATE SET agent_id = excluded.agent_id, session_id = excluded.session_id,
			scopes = excluded.scopes, issued_at = excluded.issued_at, expires_at = excluded.expires_at,
			grant_expires_at = excluded.grant_expires_at, revoked_at = excluded.revoked_at,
			revoke_reason = excluded.revoke_reason, trace_id = excluded.trace_id`,
		r.JTI, r.AgentID, r.SessionID, scopes, fmtTime(r.IssuedAt), fmtTime(r.ExpiresAt),
		fmtTime(r.GrantExpiresAt), fmtTimePtr(r.RevokedAt), r.RevokeReason, r.TraceID)
	if err != nil {
		return fmt.Errorf("put token %q: %w", r.JTI, err)
	}
	if _, err := t.exec(`DELETE FROM token_scopes WHERE jti = ?`, r.JTI); err != nil {
		return fmt.Errorf("put token %q: scopes: %w", r.JTI, err)
	}
	for _, s := range r.Scopes {
		for _, cap := range []string{s.ID, s.SynthesizedFor} {
			if cap == "" {
				continue
			}
			if _, err := t.exec(`INSERT OR IGNORE INTO token_scopes (jti, capability_id) VALUES (?, ?)`, r.JTI, cap); err != nil {
				return fmt.Errorf("put token %q: scopes: %w", r.JTI, err)
			}
		}
	}
	return nil
}

const tokenCols = `jti, agent_id, session_id, scopes, issued_at, expires_at, grant_expires_at, revoked_at, revoke_reason, trace_id`

func scanToken(s scanner) (*plexus.TokenRecord, error) {
	var (
		r                             plexus.TokenRecord
		scopes                        string
		issued, expires, grantExpires string
		revoked                       sql.NullString
	)
	err := s.Scan(&r.JTI, &r.AgentID, &r.SessionID, &scopes, &issued, &expires, &grantExpires,
		&revoked, &r.RevokeReason, &r.TraceID)
	if err != nil {
		return nil, err
	}
	var p times
	r.IssuedAt, r.ExpiresAt, r.GrantExpiresAt, r.RevokedAt = p.at(issued), p.at(expires), p.at(grantExpires), p.opt(revoked)
	if p.err != nil {
		return nil, p.err
	}
	if err := fromJSON(scopes, &r.Scopes); err != nil {
		return nil, fmt.Errorf("scopes: %w", err)
	}
	return &r, nil
}

func (t *tx) Token(jti string) (*plexus.TokenRecord, error) {
	r, err := scanToken(t.queryRow(`SELECT `+tokenCols+` FROM tokens WHERE jti = ?`, jti))
	if err != nil {
		return nil, lookupErr(err, fmt.Sprintf("token %q", jti))
	}
	return r, nil
}

// RevokeToken reports whether this call revoked the token; false means it
// was already revoked (its first reason and time are kept).
func (t *tx) RevokeToken(jti, reason string, now time.Time) (bool, error) {
	if err := t.writable(); err != nil {
		return false, err
	}
	res, err := t.exec(`UPDATE tokens SET revoked_at = ?, revoke_reason = ? WHERE jti = ? AND revoked_at IS NULL`,
		fmtTime(now), reason, jti)
	if err != nil {
		return false, fmt.Errorf("revoke token %q: %w", jti, err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return false, fmt.Errorf("revoke token %q: %w", jti, err)
	}
	if n == 1 {
		return true, nil
	}
	ok, err := t.exists(`SELECT 1 FROM tokens WHERE jti = ?`, jti)
	if err != nil {
		return false, fmt.Errorf("revoke token %q: %w", jti, err)
	}
	if !ok {
		return false, fmt.Errorf("token %q: %w", jti, plexus.ErrNotFound)
	}
	return false, nil
}

func (t *tx) LiveTokens(agentID, capabilityID, sessionID string, now time.Time) ([]plexus.TokenRecord, error) {
	rows, err := t.query(`SELECT `+tokenCols+` FROM tokens AS k
		WHERE revoked_at IS NULL AND expires_at > ?1
		  AND (?2 = '' OR agent_id = ?2)
		  AND (?3 = '' OR session_id = ?3)
		  AND (?4 = '' OR EXISTS (SELECT 1 FROM token_scopes AS s WHERE s.jti = k.jti AND s.capability_id = ?4))
		ORDER BY issued_at, jti`, fmtTime(now), agentID, sessionID, capabilityID)
	if err != nil {
		return nil, fmt.Errorf("live tokens: %w", err)
	}
	return collect(rows, "live tokens", scanToken)
}
