package gateway

import (
	"context"
	"sync"
	"time"

	"github.com/plexus-gw/plexus"
)

// journalFailures counts the journal writes that failed where the operation
// went on without its row (a source status change, a failed credential
// noted), or where a call was refused or withheld for want of its audit
// row, so that `plexus status` shows the owner what the journal is missing.
type journalFailures struct {
	mu   sync.Mutex // guards all fields
	n    int64
	last time.Time
	what string
}

// JournalFailed logs (once: callers do not log it again) and counts a
// journal write that failed. what says which row or operation it was, and
// must hold no secret or call content.
func (g *Gateway) JournalFailed(what string, err error) {
	g.log.Error("journal write failed", "what", what, "err", err)
	g.jfail.mu.Lock()
	defer g.jfail.mu.Unlock()
	g.jfail.n++
	g.jfail.last, g.jfail.what = g.now(), what
}

// journalHealth is the count and the latest failure for the status view.
func (g *Gateway) journalHealth() *plexus.JournalHealth {
	g.jfail.mu.Lock()
	defer g.jfail.mu.Unlock()
	if g.jfail.n == 0 {
		return nil
	}
	at := g.jfail.last
	return &plexus.JournalHealth{WriteFailures: g.jfail.n, LastFailure: &at, LastWhat: g.jfail.what}
}

// recordAnyway writes a row for something that has happened and cannot be
// undone (a source failed to load, an id collided): the row's failure is
// counted and logged instead of failing what already happened. A caller
// that has gone away does not keep the row from being written.
func (g *Gateway) recordAnyway(ctx context.Context, a *plexus.Activity) {
	if err := g.record(context.WithoutCancel(ctx), false, a); err != nil {
		g.JournalFailed(a.ActionType+" "+a.Target, err)
	}
}
