package journal

import (
	"database/sql"
	"fmt"
	"time"

	"github.com/plexus-gw/plexus"
)

// PutGrant writes g as the one grant row of (g.AgentID, g.CapabilityID),
// replacing whatever grant that pair had, live or revoked: the row keeps
// only the latest decision, and the activity journal keeps the history.
func (t *tx) PutGrant(g *plexus.Grant) error {
	if err := t.writable(); err != nil {
		return err
	}
	verbs, err := toJSON(g.Verbs)
	if err != nil {
		return fmt.Errorf("put grant %q: %w", g.ID, err)
	}
	window, err := toJSON(g.TrustWindow)
	if err != nil {
		return fmt.Errorf("put grant %q: %w", g.ID, err)
	}
	constraint, err := toJSONNullable(g.Constraint)
	if err != nil {
		return fmt.Errorf("put grant %q: %w", g.ID, err)
	}
	_, err = t.exec(`INSERT INTO grants
		(id, agent_id, capability_id, verbs, provenance, sensitivity, granted_at, expires_at,
		 trust_window, standing, synthesized_for, constraint_json, bundle_id, top_level_disabled,
		 pending_id, trace_id, revoked_at, used_at)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
		ON CONFLICT (agent_id, capability_id) DO UPDATE SET
			id = excluded.id, verbs = excluded.verbs, provenance = excluded.provenance,
			sensitivity = excluded.sensitivity, granted_at = excluded.granted_at,
			expires_at = excluded.expires_at, trust_window = excluded.trust_window,
			standing = excluded.standing, synthesized_for = excluded.synthesized_for,
			constraint_json = excluded.constraint_json, bundle_id = excluded.bundle_id,
			top_level_disabled = excluded.top_level_disabled, pending_id = excluded.pending_id,
			trace_id = excluded.trace_id, revoked_at = excluded.revoked_at, used_at = excluded.used_at`,
		g.ID, g.AgentID, g.CapabilityID, verbs, string(g.Provenance), string(g.Sensitivity),
		fmtTime(g.GrantedAt), fmtTime(g.ExpiresAt), window, boolInt(g.Standing), g.SynthesizedFor,
		constraint, g.BundleID, boolInt(g.TopLevelDisabled), g.PendingID, g.TraceID,
		fmtTimePtr(g.RevokedAt), fmtTimePtr(g.UsedAt))
	if err != nil {
		return fmt.Errorf("put grant %q: %w", g.ID, err)
	}
	return nil
}

const grantCols = `id, agent_id, capability_id, verbs, provenance, sensitivity, granted_at, expires_at,
	trust_window, standing, synthesized_for, constraint_json, bundle_id, top_level_disabled,
	pending_id, trace_id, revoked_at, used_at`

func scanGrant(s scanner) (*plexus.Grant, error) {
	var (
		g                     plexus.Grant
		verbs, window         string
		prov, sens            string
		granted, expires      string
		constraint            sql.NullString
		revoked, used         sql.NullString
		standing, topDisabled int
	)
	err := s.Scan(&g.ID, &g.AgentID, &g.CapabilityID, &verbs, &prov, &sens, &granted, &expires,
		&window, &standing, &g.SynthesizedFor, &constraint, &g.BundleID, &topDisabled,
		&g.PendingID, &g.TraceID, &revoked, &used)
	if err != nil {
		return nil, err
	}
	g.Provenance, g.Sensitivity = plexus.Provenance(prov), plexus.Sensitivity(sens)
	g.Standing, g.TopLevelDisabled = standing != 0, topDisabled != 0
	var p times
	g.GrantedAt, g.ExpiresAt, g.RevokedAt, g.UsedAt = p.at(granted), p.at(expires), p.opt(revoked), p.opt(used)
	if p.err != nil {
		return nil, p.err
	}
	if err := fromJSON(verbs, &g.Verbs); err != nil {
		return nil, fmt.Errorf("verbs: %w", err)
	}
	if err := fromJSON(window, &g.TrustWindow); err != nil {
		return nil, fmt.Errorf("trust window: %w", err)
	}
	if g.Constraint, err = fromJSONNullable[plexus.ScopeConstraint](constraint); err != nil {
		return nil, fmt.Errorf("constraint: %w", err)
	}
	return &g, nil
}

func (t *tx) Grant(agentID, capabilityID string) (*plexus.Grant, error) {
	g, err := scanGrant(t.queryRow(`SELECT `+grantCols+` FROM grants WHERE agent_id = ? AND capability_id = ?`,
		agentID, capabilityID))
	if err != nil {
		return nil, lookupErr(err, fmt.Sprintf("grant %q/%q", agentID, capabilityID))
	}
	return g, nil
}

// Grants lists the grants that can still authorize a call at now, in the
// same terms as [plexus.Grant.Live]: a once grant lives until used or
// revoked, a standing grant until its window ends.
func (t *tx) Grants(agentID string, now time.Time) ([]plexus.Grant, error) {
	rows, err := t.query(`SELECT `+grantCols+` FROM grants WHERE `+liveGrant+`
		ORDER BY agent_id, capability_id`, agentID, agentID, fmtTime(now))
	if err != nil {
		return nil, fmt.Errorf("grants: %w", err)
	}
	return collect(rows, "grants", scanGrant)
}

// liveGrant selects the rows Grants lists (args: agentID, agentID, now);
// GrantCount shares it so the count cannot drift from the list.
const liveGrant = `(? = '' OR agent_id = ?)
		  AND revoked_at IS NULL AND used_at IS NULL
		  AND (standing = 0 OR expires_at > ?)`

// GrantCount counts what Grants("", now) would list, without loading the
// rows: status asks it with 100k grants.
func (t *tx) GrantCount(now time.Time) (int, error) {
	var n int
	if err := t.queryRow(`SELECT count(*) FROM grants WHERE `+liveGrant, "", "", fmtTime(now)).Scan(&n); err != nil {
		return 0, fmt.Errorf("count grants: %w", err)
	}
	return n, nil
}

// RevokeGrant is idempotent: revoking a revoked grant keeps the first
// revocation time.
func (t *tx) RevokeGrant(id string, now time.Time) error {
	return t.stampGrant("revoked_at", id, now)
}

// MarkGrantUsed is idempotent like RevokeGrant.
func (t *tx) MarkGrantUsed(id string, now time.Time) error {
	return t.stampGrant("used_at", id, now)
}

// stampGrant sets col (a fixed column name, never caller input) if unset.
func (t *tx) stampGrant(col, id string, now time.Time) error {
	if err := t.writable(); err != nil {
		return err
	}
	res, err := t.exec(`UPDATE grants SET `+col+` = ? WHERE id = ? AND `+col+` IS NULL`, fmtTime(now), id)
	if err != nil {
		return fmt.Errorf("grant %q: set %s: %w", id, col, err)
	}
	if n, err := res.RowsAffected(); err != nil || n == 1 {
		return err
	}
	ok, err := t.exists(`SELECT 1 FROM grants WHERE id = ?`, id)
	if err != nil {
		return fmt.Errorf("grant %q: %w", id, err)
	}
	if !ok {
		return fmt.Errorf("grant %q: %w", id, plexus.ErrNotFound)
	}
	return nil
}
