package daemon

import (
	"context"
	"errors"
	"time"

	"github.com/plexus-gw/plexus"
	"github.com/plexus-gw/plexus/journal"
)

// newPruner keeps journal.db bounded (journal.Pruner): ended state on every
// pass, and activity rows older than auth-config.json's
// activityRetentionDays when the owner set it. Run runs it.
func (d *Daemon) newPruner(o Options) *journal.Pruner {
	return &journal.Pruner{DB: d.db, Clock: o.Clock, Every: o.PruneEvery, Logger: d.log,
		ActivityRetention: time.Duration(d.home.Auth.ActivityRetentionDays) * 24 * time.Hour}
}

// pruneJournal is the gateway's JournalPruner: `plexus journal prune`
// while the daemon runs prunes here, in the one process that writes the
// journal, rather than opening it a second time.
func (d *Daemon) pruneJournal(ctx context.Context, req plexus.JournalPruneRequest, now time.Time) (plexus.JournalPruneResponse, error) {
	res, err := d.db.PruneActivity(ctx, journal.PruneRequest{Before: req.Before, Now: now, By: plexus.ActorHuman, Force: req.Force})
	var pe *journal.PrefixError
	switch {
	case errors.Is(err, journal.ErrPruneTooRecent):
		return plexus.JournalPruneResponse{}, plexus.WrapError(plexus.CodeInvalidRequest, err,
			"before is less than a day ago: the gateway still looks up a day of calls (idempotency keys, once grants)")
	case errors.As(err, &pe):
		return plexus.JournalPruneResponse{}, &plexus.Error{Code: plexus.CodeConflict, Message: pe.Error(), Detail: wireProblems(pe.Problems)}
	case err != nil:
		return plexus.JournalPruneResponse{}, err
	}
	return plexus.JournalPruneResponse{Rows: res.Rows, Through: res.Through, Checkpoint: res.Checkpoint,
		Unverified: wireProblems(res.Unverified)}, nil
}

func wireProblems(ps []journal.Problem) []plexus.JournalProblem {
	var out []plexus.JournalProblem
	for _, p := range ps {
		out = append(out, plexus.JournalProblem(p))
	}
	return out
}
