package journal

import (
	"fmt"
	"strings"

	"github.com/plexus-gw/plexus"
)

func (t *tx) PutDecisionFile(f *plexus.DecisionFile) error {
	if err := t.writable(); err != nil {
		return err
	}
	prev := f.Prev
	if prev == nil {
		prev = []plexus.FilePlace{}
	}
	prevJSON, err := toJSON(prev)
	if err != nil {
		return fmt.Errorf("put decision file %q: prev: %w", f.PendingID, err)
	}
	_, err = t.exec(`INSERT INTO decision_files (pending_id, folder, sum, prev, written_at) VALUES (?, ?, ?, ?, ?)
		ON CONFLICT (pending_id) DO UPDATE SET folder = excluded.folder, sum = excluded.sum,
			prev = excluded.prev, written_at = excluded.written_at`,
		f.PendingID, f.Folder, f.Sum, prevJSON, fmtTime(f.WrittenAt))
	if err != nil {
		return fmt.Errorf("put decision file %q: %w", f.PendingID, err)
	}
	return nil
}

const decisionFileCols = `pending_id, folder, sum, prev, written_at`

func scanDecisionFile(s scanner) (*plexus.DecisionFile, error) {
	var f plexus.DecisionFile
	var written, prev string
	if err := s.Scan(&f.PendingID, &f.Folder, &f.Sum, &prev, &written); err != nil {
		return nil, err
	}
	if err := fromJSON(prev, &f.Prev); err != nil {
		return nil, fmt.Errorf("prev: %w", err)
	}
	if len(f.Prev) == 0 {
		f.Prev = nil
	}
	var ts times
	f.WrittenAt = ts.at(written)
	return &f, ts.err
}

func (t *tx) DecisionFile(pendingID string) (*plexus.DecisionFile, error) {
	f, err := scanDecisionFile(t.queryRow(`SELECT `+decisionFileCols+` FROM decision_files WHERE pending_id = ?`, pendingID))
	if err != nil {
		return nil, lookupErr(err, fmt.Sprintf("decision file %q", pendingID))
	}
	return f, nil
}

func (t *tx) DecisionFiles(folders ...string) ([]plexus.DecisionFile, error) {
	if len(folders) == 0 {
		return nil, nil
	}
	args := make([]any, len(folders))
	for i, f := range folders {
		args[i] = f
	}
	rows, err := t.query(`SELECT `+decisionFileCols+` FROM decision_files
		WHERE folder IN (?`+strings.Repeat(", ?", len(folders)-1)+`) ORDER BY pending_id`, args...)
	if err != nil {
		return nil, fmt.Errorf("decision files: %w", err)
	}
	return collect(rows, "decision files", scanDecisionFile)
}
