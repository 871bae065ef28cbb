package gateway

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/plexus-gw/plexus"
)

// DefaultDenialWindow is how long repeated denials of one kind coalesce into
// one journal row when Config.DenialWindow is zero.
const DefaultDenialWindow = time.Minute

// denialKey names a run of denials that coalesce: the row's action, whom it
// is about (an agent, or a credential kind when no agent is known) and the
// error code or reason.
type denialKey struct{ action, subject, code string }

// denialRun is one open window of a key: the row that opened it, as
// journaled, and how many denials it absorbed since. ready is closed once
// the opening row's write ended (err says how); until then first's audit id
// is not known, and a denial it absorbed waits for it.
type denialRun struct {
	first       *plexus.Activity
	since, last time.Time
	count       int
	ready       chan struct{}
	err         error // set before ready is closed
}

// denials coalesces the journal rows of the denials a flood can repeat as
// fast as it can send (a rate-limited call, a failed credential): the first
// of a window is journaled at once, the rest of the window only counted, and
// one summary row carrying the count follows when the window ends (on the
// key's next denial, on Run's tick, or at shutdown). Without it a flood wrote
// about 1.4 MB of rows a second.
//
// mu guards runs, closed and the counts of the runs in runs. It is never
// held across a journal write: a run is put in runs before its opening row
// is written, so concurrent denials of one key never open two runs nor lose
// a count, and a run leaves runs before its summary is written, so nothing
// counts into it after. Denials of other keys, other agents' above all,
// never wait for a row that is not theirs.
type denials struct {
	window time.Duration
	mu     sync.Mutex
	runs   map[denialKey]*denialRun
	// closed is set by the final flush at shutdown: from then on every
	// denial gets a row of its own, so a request still draining loses no
	// count.
	closed bool
}

func newDenials(window time.Duration) *denials {
	if window <= 0 {
		window = DefaultDenialWindow
	}
	return &denials{window: window, runs: make(map[denialKey]*denialRun)}
}

// journalDenial journals a (a denial of key k) unless an open window of k
// absorbs it, and returns the audit id of the row that accounts for it: its
// own, or the one that opened its window. No lock is held while a row is
// written.
func (g *Gateway) journalDenial(ctx context.Context, k denialKey, a *plexus.Activity) (string, error) {
	now := g.now()
	d := g.denials
	d.mu.Lock()
	run := d.runs[k]
	if run != nil && now.Before(run.since.Add(d.window)) {
		run.count++
		run.last = now
		d.mu.Unlock()
		<-run.ready // the opening row's write ends whatever ctx does
		if run.err != nil {
			return "", run.err
		}
		return run.first.AuditID(), nil
	}
	var ended, mine *denialRun
	if run != nil {
		delete(d.runs, k)
		ended = run
	}
	if !d.closed {
		mine = &denialRun{first: a, since: now, last: now, ready: make(chan struct{})}
		d.runs[k] = mine
	}
	d.mu.Unlock()

	if ended != nil {
		<-ended.ready
		g.summarize(ctx, ended)
	}
	err := g.record(ctx, false, a)
	if mine != nil {
		if err != nil {
			// The next denial of k opens a window of its own.
			d.mu.Lock()
			if d.runs[k] == mine {
				delete(d.runs, k)
			}
			d.mu.Unlock()
		}
		mine.err = err
		close(mine.ready)
	}
	if err != nil {
		return "", err
	}
	return a.AuditID(), nil
}

// flushDenials writes the summary of every window that has ended, or of
// every window when final (at shutdown, after which nothing coalesces).
func (g *Gateway) flushDenials(ctx context.Context, final bool) {
	now := g.now()
	d := g.denials
	var ended []*denialRun
	d.mu.Lock()
	for k, run := range d.runs {
		if final || !now.Before(run.since.Add(d.window)) {
			delete(d.runs, k)
			ended = append(ended, run)
		}
	}
	if final {
		d.closed = true
	}
	d.mu.Unlock()
	for _, run := range ended {
		<-run.ready
		g.summarize(ctx, run)
	}
}

// summarize writes run's summary row, when it absorbed any denial. The row
// repeats the first row's actor, agent, action and target, and carries the
// count of denials after the first. It is written even when the caller that
// closed the window has gone away; a failure is logged and counted
// ([Gateway.JournalFailed]) with the count it loses, since the denials it
// sums were answered already.
func (g *Gateway) summarize(ctx context.Context, run *denialRun) {
	if run.count == 0 || run.err != nil { // a failed first row: its absorbed denials failed with it
		return
	}
	f := run.first
	payload := map[string]any{"coalesced": true, "count": run.count, "firstAuditId": f.AuditID(),
		"from": run.since.Format(time.RFC3339Nano), "until": run.last.Format(time.RFC3339Nano)}
	for _, key := range [...]string{"errorCode", "reason"} {
		if v, ok := f.Payload[key]; ok {
			payload[key] = v
		}
	}
	a := &plexus.Activity{TraceID: f.TraceID, Actor: f.Actor, AgentID: f.AgentID, ActionType: f.ActionType,
		Target: f.Target, Payload: payload}
	if err := g.record(context.WithoutCancel(ctx), false, a); err != nil {
		g.JournalFailed(fmt.Sprintf("%s %s (%d coalesced)", f.ActionType, f.Target, run.count), err)
	}
}
