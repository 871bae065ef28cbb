package journal

import (
	"context"
	"slices"
	"time"

	"github.com/plexus-gw/plexus"
)

// This file is how a reader follows the journal: its newest rows, then each
// row written after them (plexus journal --follow), and the one question
// approve asks of it.

// Newest returns the newest limit rows matching f, oldest first; every row
// when limit is 0. f's Limit and Desc are ignored.
func (db *DB) Newest(ctx context.Context, f Filter, limit int) ([]plexus.Activity, error) {
	f.Limit, f.Desc = limit, limit > 0
	rows, err := db.Activity(ctx, f)
	if err != nil {
		return nil, err
	}
	if f.Desc {
		slices.Reverse(rows)
	}
	return rows, nil
}

// LastID is the id of the journal's newest row, 0 when it has none.
func (db *DB) LastID(ctx context.Context) (int64, error) {
	latest, err := db.Activity(ctx, Filter{Desc: true, Limit: 1})
	if err != nil || len(latest) == 0 {
		return 0, err
	}
	return latest[0].ID, nil
}

// Follow hands fn, every interval until ctx ends, the rows matching f
// written after the row id after (up to 1,000 a time, oldest first). It
// returns nil when ctx ends, or the first error of a read.
func (db *DB) Follow(ctx context.Context, f Filter, after int64, every time.Duration, fn func([]plexus.Activity) error) error {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
		f.AfterID, f.Limit, f.Desc = after, 1000, false
		more, err := db.Activity(ctx, f)
		if err != nil {
			if ctx.Err() != nil {
				return nil // the read was cut short by the end of ctx, not a failure
			}
			return err
		}
		if err := fn(more); err != nil {
			return err
		}
		if len(more) > 0 {
			after = more[len(more)-1].ID
		}
	}
}

// MintedOnApproval returns the id of the token minted when decision
// pendingID, on trace traceID, was approved; "" when none was (the asking
// session had ended). The gateway's decision journals grant.approved for
// each capability, then token.minted, on the request's trace.
func (db *DB) MintedOnApproval(ctx context.Context, traceID, pendingID string) (string, error) {
	rows, err := db.Activity(ctx, Filter{TraceID: traceID})
	if err != nil {
		return "", err
	}
	var approved bool
	var jti string
	for _, a := range rows {
		switch {
		case a.ActionType == "grant.approved" && a.Payload["pendingId"] == pendingID:
			approved, jti = true, ""
		case a.ActionType == "token.minted" && approved && jti == "":
			jti = a.Target
		}
	}
	return jti, nil
}
