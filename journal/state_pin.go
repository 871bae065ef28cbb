package journal

import (
	"fmt"

	"github.com/plexus-gw/plexus"
)

func (t *tx) PutPin(p *plexus.Pin) error {
	if err := t.writable(); err != nil {
		return err
	}
	_, err := t.exec(`INSERT INTO pins (source, entry_id, hash, definition, pending_id, pinned_at) VALUES (?, ?, ?, ?, ?, ?)
		ON CONFLICT (source, entry_id) DO UPDATE SET hash = excluded.hash, definition = excluded.definition,
			pending_id = excluded.pending_id, pinned_at = excluded.pinned_at`,
		p.Source, p.EntryID, p.Hash, string(p.Definition), p.PendingID, fmtTime(p.PinnedAt))
	if err != nil {
		return fmt.Errorf("put pin %s %s: %w", p.Source, p.EntryID, err)
	}
	return nil
}

func (t *tx) Pins(source string) ([]plexus.Pin, error) {
	rows, err := t.query(`SELECT source, entry_id, hash, definition, pending_id, pinned_at FROM pins
		WHERE source = ? ORDER BY entry_id`, source)
	if err != nil {
		return nil, fmt.Errorf("pins of %s: %w", source, err)
	}
	return collect(rows, "pins", func(s scanner) (*plexus.Pin, error) {
		var p plexus.Pin
		var def, at string
		if err := s.Scan(&p.Source, &p.EntryID, &p.Hash, &def, &p.PendingID, &at); err != nil {
			return nil, err
		}
		var ts times
		p.PinnedAt = ts.at(at)
		if ts.err != nil {
			return nil, ts.err
		}
		p.Definition = []byte(def)
		return &p, nil
	})
}

func (t *tx) DeletePins(source string) error {
	if err := t.writable(); err != nil {
		return err
	}
	if _, err := t.exec(`DELETE FROM pins WHERE source = ?`, source); err != nil {
		return fmt.Errorf("delete pins of %s: %w", source, err)
	}
	return nil
}
