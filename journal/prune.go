package journal

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
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

// ErrPrefixUnverified is what a prune of rows that do not verify returns
// (as a *[PrefixError]) unless the owner forces it.
var ErrPrefixUnverified = errors.New("the rows to prune do not verify")

// PrefixError refuses a prune: rows From..Through, which it would delete,
// do not verify, and deleting them would erase the evidence. Nothing was
// pruned.
type PrefixError struct {
	From, Through int64
	Problems      []Problem
}

func (e *PrefixError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s (%s): %d problem(s)\n", ErrPrefixUnverified, rowsLabel(e.From, e.Through), len(e.Problems))
	for _, p := range e.Problems {
		writeProblem(&b, p)
	}
	return strings.TrimRight(b.String(), "\n")
}

func (e *PrefixError) Is(target error) bool { return target == ErrPrefixUnverified }

// PruneRequest asks [DB.PruneActivity] to delete the activity rows written
// before Before, at Now, on behalf of By (plexus.ActorHuman or
// ActorSystem). Force prunes rows that do not verify; the journal.pruned
// rows then record the problems and verify keeps reporting them.
type PruneRequest struct {
	Before, Now time.Time
	By          string
	Force       bool
}

// ActivityPruned is what [DB.PruneActivity] did: rows 1..Through are gone
// (Rows of them by this prune), recorded by row Checkpoint (the last of
// the prune's journal.pruned rows, one per batch). Unverified are the
// problems of the pruned rows a forced prune deleted anyway.
type ActivityPruned struct {
	Rows       int64     `json:"rows"`
	Through    int64     `json:"through"`
	Checkpoint int64     `json:"checkpoint"`
	Unverified []Problem `json:"unverified,omitempty"`
}

// PruneActivity deletes the activity rows written before the cut-off (at
// least [MinActivityAge] before now), as a prefix of the chain: from the
// first row up to the last one before the first row at or after before (a
// row out of time order stops it, so no row at or after the cut-off is
// ever deleted).
//
// It verifies the prefix first (its rows' hashes and links, the row after
// it, their audit mirror lines) and refuses, with a *[PrefixError],
// rows that do not verify unless req.Force: a prune must not launder
// tampering. It then deletes in batches of pruneBatch rows, each its own
// durable transaction, so that the daemon's writes go between them: each
// batch records an [ActionPruned] row naming its last deleted row and its
// hash, and keeps that checkpoint in meta, so that `plexus journal verify`
// checks the chain from the newest checkpoint on and still catches a row
// deleted from the middle, a prefix cut further than recorded, or a forged
// checkpoint. Rows already in the audit mirror stay there until its own
// retention, and verify checks their lines. Nothing to prune writes
// nothing.
func (db *DB) PruneActivity(ctx context.Context, req PruneRequest) (ActivityPruned, error) {
	if req.Before.After(req.Now.Add(-MinActivityAge)) {
		return ActivityPruned{}, fmt.Errorf("prune activity before %s: %w", req.Before.UTC().Format(time.RFC3339), ErrPruneTooRecent)
	}
	from, through, err := db.planPrune(ctx, req.Before)
	if err != nil || through <= from {
		return ActivityPruned{}, err
	}
	problems, err := db.verifyPrefix(ctx, from, through)
	if err != nil {
		return ActivityPruned{}, fmt.Errorf("prune activity: %w", err)
	}
	if len(problems) > 0 && !req.Force {
		return ActivityPruned{}, fmt.Errorf("prune activity: %w", &PrefixError{From: from + 1, Through: through, Problems: problems})
	}
	out := ActivityPruned{Unverified: problems}
	for {
		n, err := db.pruneBatch(ctx, req, through, problems, &out)
		if err != nil {
			return out, fmt.Errorf("prune activity: %w", err)
		}
		if n == 0 {
			return out, nil
		}
	}
}

// planPrune reads, in one snapshot, where the last prune ended and the
// last row this one may delete.
func (db *DB) planPrune(ctx context.Context, before time.Time) (from, through int64, err error) {
	q, err := db.r.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
	if err != nil {
		return 0, 0, fmt.Errorf("prune activity: %w", err)
	}
	defer q.Rollback()
	c, err := prunedThrough(q)
	if err != nil {
		return 0, 0, fmt.Errorf("prune activity: %w", err)
	}
	through, err = pruneEnd(q, before)
	if err != nil {
		return 0, 0, fmt.Errorf("prune activity: %w", err)
	}
	return c.id, through, nil
}

// verifyPrefix verifies the rows up to through (and the row after them,
// which must chain to the last) under the journal's own key, anchor and
// mirror, and returns the problems of rows from+1..through: those a prune
// to through would delete.
func (db *DB) verifyPrefix(ctx context.Context, from, through int64) ([]Problem, error) {
	opts := VerifyOptions{AnchorPath: db.anchorPath}
	if db.mirror != nil {
		opts.AuditDir = db.mirror.dir
	}
	rep, err := db.verify(ctx, opts, db.chain, through)
	if err != nil {
		return nil, err
	}
	var out []Problem
	for _, p := range rep.Problems {
		// A key no row verifies under is the prefix's problem too; other
		// journal-wide ones (the anchor) are not about these rows.
		if p.ID > from && p.ID <= through || p.ID == 0 && p.Kind == ProblemKey {
			out = append(out, p)
		}
	}
	return out, nil
}

// pruneBatch deletes up to pruneBatch rows after the current checkpoint
// and not past through, in one durable transaction that records them
// (ActionPruned, meta), and returns how many it deleted.
func (db *DB) pruneBatch(ctx context.Context, req PruneRequest, through int64, problems []Problem, out *ActivityPruned) (int64, error) {
	var n int64
	err := db.Update(ctx, true, func(st plexus.StateTx) error {
		t := st.(*tx)
		from, err := prunedThrough(t.q)
		if err != nil || from.id >= through {
			return err
		}
		var end int64
		var head string
		err = t.queryRow(`SELECT id, hash FROM (SELECT id, hash FROM activity WHERE id > ?1 AND id <= ?2 ORDER BY id LIMIT ?3)
			ORDER BY id DESC LIMIT 1`, from.id, through, pruneBatch).Scan(&end, &head)
		if errors.Is(err, sql.ErrNoRows) {
			return nil // nothing left up to through
		}
		if err != nil {
			return err
		}
		var mine []Problem
		for _, p := range problems {
			if p.ID > from.id && p.ID <= end || p.ID == 0 {
				mine = append(mine, p)
			}
		}
		// Verify reports at most maxProblems: past the last one it listed,
		// rows were not shown to verify either.
		unlisted := len(problems) >= maxProblems && end > problems[len(problems)-1].ID
		payload := map[string]any{"throughId": end, "head": head, "before": fmtTime(req.Before), "fromId": from.id + 1,
			"prefixVerified": len(mine) == 0 && !unlisted}
		if len(mine) > 0 {
			payload["problems"] = mine
		}
		a := &plexus.Activity{Actor: req.By, ActionType: ActionPruned, Target: "activity", Payload: payload}
		if err := t.Record(a); err != nil {
			return err
		}
		if n, err = deletePrefix(t, end, head); err != nil {
			return err
		}
		out.Rows += n
		out.Through, out.Checkpoint = end, a.ID
		return nil
	})
	if err != nil {
		return 0, err
	}
	return n, nil
}

// deletePrefix moves the checkpoint in meta to end (whose hash is head) and
// deletes the rows up to it.
func deletePrefix(t *tx, end int64, head string) (int64, error) {
	if err := t.SetMeta(metaPrunedThrough, strconv.FormatInt(end, 10)); err != nil {
		return 0, err
	}
	if err := t.SetMeta(metaPrunedHead, head); err != nil {
		return 0, err
	}
	res, err := t.exec(`DELETE FROM activity WHERE id <= ?`, end)
	if err != nil {
		return 0, err
	}
	return res.RowsAffected()
}

// pruneEnd finds the last row id of the prefix written before the cut-off
// (0 when there is none). ts has no index (schema version 8): the query
// walks the rows in id order from the oldest and stops at the first one at
// or after the cut-off, so it reads the prefix that the prune then verifies
// and deletes, and no more.
func pruneEnd(q rowQuerier, before time.Time) (int64, error) {
	var through sql.NullInt64
	err := q.QueryRowContext(context.Background(), `SELECT COALESCE((SELECT id FROM activity WHERE ts >= ? ORDER BY id LIMIT 1) - 1, (SELECT MAX(id) FROM activity))`,
		fmtTime(before)).Scan(&through)
	if err != nil || !through.Valid || through.Int64 <= 0 {
		return 0, err
	}
	return through.Int64, nil
}

// checkpoint is where the chain starts after pruning: rows 1..id are gone
// and the first row left chains to head. The zero value is "never pruned".
type checkpoint struct {
	id   int64
	head string
}

// prunedThrough reads the prune checkpoint from meta.
func prunedThrough(q rowQuerier) (checkpoint, error) {
	var c checkpoint
	var v string
	err := q.QueryRowContext(context.Background(), `SELECT value FROM meta WHERE key = ?`, metaPrunedThrough).Scan(&v)
	if errors.Is(err, sql.ErrNoRows) {
		return c, nil
	}
	if err != nil {
		return c, err
	}
	if c.id, err = strconv.ParseInt(v, 10, 64); err != nil {
		return c, fmt.Errorf("meta %s = %q: %w", metaPrunedThrough, v, err)
	}
	err = q.QueryRowContext(context.Background(), `SELECT value FROM meta WHERE key = ?`, metaPrunedHead).Scan(&c.head)
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
	_, err := p.DB.PruneActivity(ctx, PruneRequest{Before: now.Add(-p.ActivityRetention), Now: now, By: plexus.ActorSystem})
	return err
}
