package gateway

import (
	"context"
	"sync"

	"github.com/plexus-gw/plexus"
)

// progressKey carries a streamed /invoke's sink through the pipeline, so a
// workflow's member calls (re-entering through invokeMember with the same
// ctx) stream to the caller too.
type progressKey struct{}

// InvokeStream is Invoke for a caller that wants the call's progress as it
// happens: every piece a transport relays (and a workflow member's) is
// handed to sink, in order, from whichever goroutine relayed it, before
// InvokeStream returns. Calls to sink never overlap. The same pieces go
// live (not replayable) to the session's /events.
func (g *Gateway) InvokeStream(ctx context.Context, c Credentials, req plexus.InvokeRequest, sink func(plexus.InvokeProgressEvent)) plexus.InvokeResponse {
	if sink != nil {
		ctx = context.WithValue(ctx, progressKey{}, &serialSink{sink: sink})
	}
	return g.Invoke(ctx, c, req)
}

// serialSink hands pieces to a streaming caller's sink one at a time.
type serialSink struct {
	mu   sync.Mutex
	sink func(plexus.InvokeProgressEvent)
}

func (s *serialSink) send(ev plexus.InvokeProgressEvent) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.sink(ev)
}

// relay numbers one dispatch's progress and fans it out to the streaming
// caller (if any) and the session's live subscribers. After end it drops
// whatever a transport still relays: the result has been decided.
type relay struct {
	g       *Gateway
	id      string
	ic      plexus.InvokeContext
	sink    *serialSink
	mu      sync.Mutex
	seq     int
	stopped bool
}

func (g *Gateway) newRelay(ctx context.Context, id string, ic plexus.InvokeContext) *relay {
	sink, _ := ctx.Value(progressKey{}).(*serialSink)
	return &relay{g: g, id: id, ic: ic, sink: sink}
}

func (r *relay) report(p plexus.InvokeProgress) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.stopped {
		return
	}
	r.seq++
	ev := plexus.InvokeProgressEvent{Type: plexus.EventInvokeProgress, ID: r.id, TraceID: r.ic.TraceID, Seq: r.seq, InvokeProgress: p}
	if r.sink != nil {
		r.sink.send(ev)
	}
	if r.ic.SessionID != "" {
		r.g.bus.publishLive(*newEvent(plexus.EventInvokeProgress, r.ic.AgentID, r.ic.SessionID, ev, nil))
	}
}

// end waits for a report in flight and refuses any later one.
func (r *relay) end() {
	r.mu.Lock()
	r.stopped = true
	r.mu.Unlock()
}
