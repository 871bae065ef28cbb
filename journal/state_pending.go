package journal

import (
	"database/sql"
	"fmt"

	"github.com/plexus-gw/plexus"
)

func (t *tx) PutPending(p *plexus.Pending) error {
	if err := t.writable(); err != nil {
		return err
	}
	items, err := toJSON(p.Items)
	if err != nil {
		return fmt.Errorf("put pending %q: items: %w", p.ID, err)
	}
	narration, err := toJSON(p.Narration)
	if err != nil {
		return fmt.Errorf("put pending %q: narration: %w", p.ID, err)
	}
	bundle, err := toJSONNullable(p.Bundle)
	if err != nil {
		return fmt.Errorf("put pending %q: bundle: %w", p.ID, err)
	}
	ext, err := toJSONNullable(p.Extension)
	if err != nil {
		return fmt.Errorf("put pending %q: extension: %w", p.ID, err)
	}
	def, err := toJSONNullable(p.Definition)
	if err != nil {
		return fmt.Errorf("put pending %q: definition: %w", p.ID, err)
	}
	signIn, err := toJSONNullable(p.SignIn)
	if err != nil {
		return fmt.Errorf("put pending %q: signin: %w", p.ID, err)
	}
	_, err = t.exec(`INSERT INTO pending
		(id, kind, agent_id, session_id, state, created_at, expires_at, decided_at, decided_by, via,
		 reason, items, narration, purpose, bundle_id, bundle, trace_id, same_user, extension, definition, signin)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
		ON CONFLICT (id) DO UPDATE SET kind = excluded.kind, agent_id = excluded.agent_id,
			session_id = excluded.session_id, state = excluded.state, created_at = excluded.created_at,
			expires_at = excluded.expires_at, decided_at = excluded.decided_at,
			decided_by = excluded.decided_by, via = excluded.via, reason = excluded.reason,
			items = excluded.items, narration = excluded.narration, purpose = excluded.purpose,
			bundle_id = excluded.bundle_id, bundle = excluded.bundle, trace_id = excluded.trace_id,
			same_user = excluded.same_user, extension = excluded.extension, definition = excluded.definition,
			signin = excluded.signin`,
		p.ID, p.Kind, p.AgentID, p.SessionID, p.State, fmtTime(p.CreatedAt), fmtTime(p.ExpiresAt),
		fmtTimePtr(p.DecidedAt), p.DecidedBy, p.Via, p.Reason, items, narration, p.Purpose,
		p.BundleID, bundle, p.TraceID, p.SameUser, ext, def, signIn)
	if err != nil {
		return fmt.Errorf("put pending %q: %w", p.ID, err)
	}
	return nil
}

const pendingCols = `id, kind, agent_id, session_id, state, created_at, expires_at, decided_at, decided_by, via,
	reason, items, narration, purpose, bundle_id, bundle, trace_id, same_user, extension, definition, signin`

func scanPending(s scanner) (*plexus.Pending, error) {
	var (
		p                plexus.Pending
		created, expires string
		decided, bundle  sql.NullString
		ext, def, signIn sql.NullString
		items, narration string
	)
	err := s.Scan(&p.ID, &p.Kind, &p.AgentID, &p.SessionID, &p.State, &created, &expires, &decided,
		&p.DecidedBy, &p.Via, &p.Reason, &items, &narration, &p.Purpose, &p.BundleID, &bundle, &p.TraceID, &p.SameUser, &ext, &def, &signIn)
	if err != nil {
		return nil, err
	}
	var ts times
	p.CreatedAt, p.ExpiresAt, p.DecidedAt = ts.at(created), ts.at(expires), ts.opt(decided)
	if ts.err != nil {
		return nil, ts.err
	}
	if err := fromJSON(items, &p.Items); err != nil {
		return nil, fmt.Errorf("items: %w", err)
	}
	if err := fromJSON(narration, &p.Narration); err != nil {
		return nil, fmt.Errorf("narration: %w", err)
	}
	if p.Bundle, err = fromJSONNullable[plexus.BundleRequest](bundle); err != nil {
		return nil, fmt.Errorf("bundle: %w", err)
	}
	if p.Extension, err = fromJSONNullable[plexus.ExtensionManifest](ext); err != nil {
		return nil, fmt.Errorf("extension: %w", err)
	}
	if p.Definition, err = fromJSONNullable[plexus.DefinitionChange](def); err != nil {
		return nil, fmt.Errorf("definition: %w", err)
	}
	if p.SignIn, err = fromJSONNullable[plexus.SignInDecision](signIn); err != nil {
		return nil, fmt.Errorf("signin: %w", err)
	}
	return &p, nil
}

func (t *tx) Pending(id string) (*plexus.Pending, error) {
	p, err := scanPending(t.queryRow(`SELECT `+pendingCols+` FROM pending WHERE id = ?`, id))
	if err != nil {
		return nil, lookupErr(err, fmt.Sprintf("pending %q", id))
	}
	return p, nil
}

func (t *tx) PendingList(state string) ([]plexus.Pending, error) {
	rows, err := t.query(`SELECT `+pendingCols+` FROM pending
		WHERE ? = '' OR state = ?
		ORDER BY created_at, id`, state, state)
	if err != nil {
		return nil, fmt.Errorf("pending list: %w", err)
	}
	return collect(rows, "pending list", scanPending)
}
