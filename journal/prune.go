package journal

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"time"

	"github.com/plexus-gw/plexus"
)

// Retention defaults: how long what has ended is kept before the daemon
// prunes it. Each is well past the longest time anything may still ask for
// it (a token's refresh grace is an hour, a session lives 12 hours).
const (
	DefaultTokenGrace   = 24 * time.Hour
	DefaultSessionGrace = 24 * time.Hour
	DefaultEventWindow  = 24 * time.Hour
	DefaultPruneEvery   = time.Hour
	// pruneBatch bounds one delete statement, so that a pass holds the
	// writer for short transactions and the daemon's calls go between them.
	pruneBatch = 1000
)

// ActionPruned is the action type of the row that records an activity
// prune: its payload names the last pruned row (throughId) and its hash
// (head), the checkpoint verify starts the chain from. The row is keyed
// like every other, so the checkpoint cannot be moved without the key.
const ActionPruned = "journal.pruned"

// Meta keys of the prune checkpoint: rows 1..pruned_through are gone, and
// the first row left chains to pruned_head.
const (
	metaPrunedThrough = "chain.pruned_through"
	metaPrunedHead    = "chain.pruned_head"
)

// MinActivityAge is the youngest an activity row may be pruned: the
// gateway looks calls up in the journal for a day (an idempotencyKey's
// window, a once grant's retry), and a call pruned sooner could run twice.
const MinActivityAge = 24 * time.Hour

// ErrPruneTooRecent refuses a prune whose cut-off is less than
// MinActivityAge before now (or after it).
var ErrPruneTooRecent = errors.New("the cut-off is less than a day ago: the gateway still looks those calls up (idempotency keys, once grants)")

// StatePruned counts what one [DB.PruneState] pass deleted.
type StatePruned struct {
	Tokens, Sessions, Events, EnrollCodes int64
}

// StateRetention says how long ended state is kept; zero fields take the
// defaults.
type StateRetention struct {
	TokenGrace   time.Duration // after a token's expiry
	SessionGrace time.Duration // after a session's end (revoked or expired)
	EventWindow  time.Duration // the Last-Event-ID replay window
}

// PruneState deletes what can no longer be used at now: tokens expired
// longer ago than the grace (their jti can no longer verify, so the
// revocation registry need not remember them), sessions that ended longer
// ago than theirs, enrollment codes expired as long ago, and events older
// than the replay window (a client resuming from an older Last-Event-ID
// gets what remains). Activity rows are never touched here.
func (db *DB) PruneState(ctx context.Context, now time.Time, r StateRetention) (StatePruned, error) {
	var out StatePruned
	steps := []struct {
		n     *int64
		query string
		arg   string
	}{
		{&out.Tokens, `DELETE FROM tokens WHERE jti IN (SELECT jti FROM tokens WHERE expires_at < ? LIMIT ?)`,
			fmtTime(now.Add(-orDur(r.TokenGrace, DefaultTokenGrace)))},
		{&out.Sessions, `DELETE FROM sessions WHERE id IN (SELECT id FROM sessions
			WHERE expires_at < ?1 OR (revoked_at IS NOT NULL AND revoked_at < ?1) LIMIT ?2)`,
			fmtTime(now.Add(-orDur(r.SessionGrace, DefaultSessionGrace)))},
		{&out.EnrollCodes, `DELETE FROM enroll_codes WHERE hash IN (SELECT hash FROM enroll_codes WHERE expires_at < ? LIMIT ?)`,
			fmtTime(now.Add(-orDur(r.TokenGrace, DefaultTokenGrace)))},
		{&out.Events, `DELETE FROM events WHERE id IN (SELECT id FROM events WHERE ts < ? LIMIT ?)`,
			fmtTime(now.Add(-orDur(r.EventWindow, DefaultEventWindow)))},
	}
	for _, s := range steps {
		n, err := db.deleteBatches(ctx, s.query, s.arg)
		*s.n += n
		if err != nil {
			return out, fmt.Errorf("prune state: %w", err)
		}
	}
	return out, nil
}

// deleteBatches runs a batched delete until it deletes less than a batch.
func (db *DB) deleteBatches(ctx context.Context, query, cutoff string) (int64, error) {
	var total int64
	for {
		var n int64
		err := db.Update(ctx, false, func(st plexus.StateTx) error {
			res, err := st.(*tx).exec(query, cutoff, pruneBatch)
			if err != nil {
				return err
			}
			n, err = res.RowsAffected()
			return err
		})
		total += n
		if err != nil || n < pruneBatch {
			return total, err
		}
	}
}

func orDur(d, def time.Duration) time.Duration {
	if d <= 0 {
		return def
	}
	return d
}

// ActivityPruned is what [DB.PruneActivity] did: rows 1..Through are gone
// (Rows of them by this prune), recorded by row Checkpoint.
type ActivityPruned struct {
	Rows       int64 `json:"rows"`
	Through    int64 `json:"through"`
	Checkpoint int64 `json:"checkpoint"`
}

// PruneActivity deletes the activity rows written before the cut-off (at
// least [MinActivityAge] before now), as a
// prefix of the chain: from the first row up to the last one before the
// first row at or after before (a row out of time order stops it, so no row
// at or after the cut-off is ever deleted). In the same durable transaction
// it records an [ActionPruned] row naming the last deleted row and its hash,
// and keeps that checkpoint in meta, so that `plexus journal verify` checks
// the chain from the checkpoint on and still catches a row deleted from the
// middle, a prefix cut further than recorded, or a forged checkpoint. Rows
// already in the audit mirror stay there until its own retention. Nothing
// to prune writes nothing.
func (db *DB) PruneActivity(ctx context.Context, before, now time.Time, by string) (ActivityPruned, error) {
	var out ActivityPruned
	if before.After(now.Add(-MinActivityAge)) {
		return out, fmt.Errorf("prune activity before %s: %w", before.UTC().Format(time.RFC3339), ErrPruneTooRecent)
	}
	err := db.Update(ctx, true, func(st plexus.StateTx) error {
		out = ActivityPruned{}
		t := st.(*tx)
		from, err := prunedThrough(t.q)
		if err != nil {
			return err
		}
		through, head, err := pruneEnd(t, before)
		if err != nil || through <= from.id {
			return err
		}
		a := &plexus.Activity{Actor: by, ActionType: ActionPruned, Target: "activity", Payload: map[string]any{
			"throughId": through, "head": head, "before": fmtTime(before), "fromId": from.id + 1}}
		if err := t.Record(a); err != nil {
			return err
		}
		if err := t.SetMeta(metaPrunedThrough, strconv.FormatInt(through, 10)); err != nil {
			return err
		}
		if err := t.SetMeta(metaPrunedHead, head); err != nil {
			return err
		}
		res, err := t.exec(`DELETE FROM activity WHERE id <= ?`, through)
		if err != nil {
			return err
		}
		out.Rows, err = res.RowsAffected()
		out.Through, out.Checkpoint = through, a.ID
		return err
	})
	if err != nil {
		return ActivityPruned{}, fmt.Errorf("prune activity: %w", err)
	}
	return out, nil
}

// pruneEnd finds the last row of the prefix written before the cut-off, and
// its hash (0 when there is none).
func pruneEnd(t *tx, before time.Time) (int64, string, error) {
	var through sql.NullInt64
	err := t.queryRow(`SELECT COALESCE((SELECT MIN(id) FROM activity WHERE ts >= ?) - 1, (SELECT MAX(id) FROM activity))`,
		fmtTime(before)).Scan(&through)
	if err != nil || !through.Valid || through.Int64 <= 0 {
		return 0, "", err
	}
	var head string
	err = t.queryRow(`SELECT hash FROM activity WHERE id <= ? ORDER BY id DESC LIMIT 1`, through.Int64).Scan(&head)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, "", nil // already pruned through there
	}
	return through.Int64, head, err
}

// checkpoint is where the chain starts after pruning: rows 1..id are gone
// and the first row left chains to head. The zero value is "never pruned".
type checkpoint struct {
	id   int64
	head string
}

// prunedThrough reads the prune checkpoint from meta.
func prunedThrough(q interface {
	QueryRow(query string, args ...any) *sql.Row
}) (checkpoint, error) {
	var c checkpoint
	var v string
	err := q.QueryRow(`SELECT value FROM meta WHERE key = ?`, metaPrunedThrough).Scan(&v)
	if errors.Is(err, sql.ErrNoRows) {
		return c, nil
	}
	if err != nil {
		return c, err
	}
	if c.id, err = strconv.ParseInt(v, 10, 64); err != nil {
		return c, fmt.Errorf("meta %s = %q: %w", metaPrunedThrough, v, err)
	}
	err = q.QueryRow(`SELECT value FROM meta WHERE key = ?`, metaPrunedHead).Scan(&c.head)
	if errors.Is(err, sql.ErrNoRows) {
		return c, nil // verify reports the missing head as a broken link
	}
	return c, err
}

// PruneMirror applies the audit mirror's retention now, for a daemon that
// ran across days without writing a row (the mirror otherwise prunes when
// it opens and on the first row of each day).
func (db *DB) PruneMirror() {
	if db.mirror == nil {
		return
	}
	db.mirror.mu.Lock()
	defer db.mirror.mu.Unlock()
	db.mirror.prune()
}

// Pruner keeps journal.db bounded: on Run's start and every Every, it
// prunes ended state ([DB.PruneState]), the activity rows older than
// ActivityRetention when that is set ([DB.PruneActivity]), and the audit
// mirror's old files.
type Pruner struct {
	DB    *DB
	Clock func() time.Time // nil means time.Now
	Every time.Duration    // 0 means DefaultPruneEvery
	State StateRetention
	// ActivityRetention is how long activity rows are kept; 0 keeps them
	// forever (the default: the journal is the owner's record).
	ActivityRetention time.Duration
	Logger            *slog.Logger
}

// Run prunes until ctx ends. A failed pass is logged and tried again at
// the next tick: pruning is housekeeping, never a reason to stop serving.
func (p *Pruner) Run(ctx context.Context) error {
	every := p.Every
	if every <= 0 {
		every = DefaultPruneEvery
	}
	tick := time.NewTicker(every)
	defer tick.Stop()
	for {
		if err := p.Pass(ctx); err != nil && ctx.Err() == nil && p.Logger != nil {
			p.Logger.Error("journal prune", "err", err)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
		}
	}
}

// Pass is one round of pruning at the clock's now.
func (p *Pruner) Pass(ctx context.Context) error {
	now := time.Now()
	if p.Clock != nil {
		now = p.Clock()
	}
	if _, err := p.DB.PruneState(ctx, now, p.State); err != nil {
		return err
	}
	p.DB.PruneMirror()
	if p.ActivityRetention <= 0 {
		return nil
	}
	_, err := p.DB.PruneActivity(ctx, now.Add(-p.ActivityRetention), now, plexus.ActorSystem)
	return err
}
