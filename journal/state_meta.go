package journal

import (
	"database/sql"
	"fmt"

	"github.com/plexus-gw/plexus"
)

func (t *tx) Meta(key string) (string, error) {
	var v string
	if err := t.queryRow(`SELECT value FROM meta WHERE key = ?`, key).Scan(&v); err != nil {
		return "", lookupErr(err, fmt.Sprintf("meta %q", key))
	}
	return v, nil
}

func (t *tx) SetMeta(key, value string) error {
	if err := t.writable(); err != nil {
		return err
	}
	_, err := t.exec(`INSERT INTO meta (key, value) VALUES (?, ?)
		ON CONFLICT (key) DO UPDATE SET value = excluded.value`, key, value)
	if err != nil {
		return fmt.Errorf("set meta %q: %w", key, err)
	}
	return nil
}

// PutSource stores c.Config as given (NULL when nil), byte for byte.
func (t *tx) PutSource(c *plexus.SourceConfig) error {
	if err := t.writable(); err != nil {
		return err
	}
	var config any
	if c.Config != nil {
		config = string(c.Config)
	}
	_, err := t.exec(`INSERT INTO sources (id, kind, provenance, config, created_at) VALUES (?, ?, ?, ?, ?)
		ON CONFLICT (id) DO UPDATE SET kind = excluded.kind, provenance = excluded.provenance,
			config = excluded.config, created_at = excluded.created_at`,
		c.ID, c.Kind, string(c.Provenance), config, fmtTime(c.CreatedAt))
	if err != nil {
		return fmt.Errorf("put source %q: %w", c.ID, err)
	}
	return nil
}

func (t *tx) DeleteSource(id string) error {
	if err := t.writable(); err != nil {
		return err
	}
	res, err := t.exec(`DELETE FROM sources WHERE id = ?`, id)
	if err != nil {
		return fmt.Errorf("delete source %q: %w", id, err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return fmt.Errorf("delete source %q: %w", id, err)
	}
	if n == 0 {
		return fmt.Errorf("source %q: %w", id, plexus.ErrNotFound)
	}
	return nil
}

func scanSource(s scanner) (*plexus.SourceConfig, error) {
	var (
		c       plexus.SourceConfig
		prov    string
		config  sql.NullString
		created string
	)
	if err := s.Scan(&c.ID, &c.Kind, &prov, &config, &created); err != nil {
		return nil, err
	}
	c.Provenance = plexus.Provenance(prov)
	if config.Valid {
		c.Config = []byte(config.String)
	}
	var p times
	c.CreatedAt = p.at(created)
	return &c, p.err
}

func (t *tx) Sources() ([]plexus.SourceConfig, error) {
	rows, err := t.query(`SELECT id, kind, provenance, config, created_at FROM sources ORDER BY created_at, id`)
	if err != nil {
		return nil, fmt.Errorf("sources: %w", err)
	}
	return collect(rows, "sources", scanSource)
}
