package gateway

import (
	"context"
	"time"

	"github.com/plexus-gw/plexus"
)

// JournalPruner prunes the activity journal at now (the daemon hands in
// the journal's own), returning the protocol's errors: invalid_request for
// a cut-off too recent, conflict for rows that do not verify.
type JournalPruner func(ctx context.Context, req plexus.JournalPruneRequest, now time.Time) (plexus.JournalPruneResponse, error)

// PruneJournal is `plexus journal prune` while the daemon runs: the owner
// asks the process that writes the journal to prune it, so that no second
// writer opens it.
func (g *Gateway) PruneJournal(ctx context.Context, c Credentials, req plexus.JournalPruneRequest) (plexus.JournalPruneResponse, error) {
	if err := g.AdminCheck(ctx, c); err != nil {
		return plexus.JournalPruneResponse{}, err
	}
	if g.d.PruneJournal == nil {
		return plexus.JournalPruneResponse{}, plexus.Errorf(plexus.CodeNotFound, "this gateway does not prune its journal")
	}
	if req.Before.IsZero() {
		return plexus.JournalPruneResponse{}, plexus.Errorf(plexus.CodeInvalidRequest, "before is required: the time before which activity rows go")
	}
	resp, err := g.d.PruneJournal(ctx, req, g.now())
	if err != nil {
		return plexus.JournalPruneResponse{}, plexus.AsError(err)
	}
	return resp, nil
}
