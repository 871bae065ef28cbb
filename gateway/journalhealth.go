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

// sideWrites is what a store that keeps copies beside its database (the
// journal's audit mirror and anchor) tells of the writes to them that
// failed. Both methods must be safe for concurrent use.
type sideWrites interface {
	MirrorErrors() int
	AnchorErrors() int
}

// journalHealth is the count and the latest failure for the status view,
// nil while nothing has failed.
func (g *Gateway) journalHealth() *plexus.JournalHealth {
	var h plexus.JournalHealth
	if sw, ok := g.d.Store.(sideWrites); ok {
		h.MirrorFailures, h.AnchorFailures = int64(sw.MirrorErrors()), int64(sw.AnchorErrors())
	}
	g.jfail.mu.Lock()
	defer g.jfail.mu.Unlock()
	if g.jfail.n > 0 {
		at := g.jfail.last
		h.WriteFailures, h.LastFailure, h.LastWhat = g.jfail.n, &at, g.jfail.what
	}
	if h == (plexus.JournalHealth{}) {
		return nil
	}
	return &h
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
