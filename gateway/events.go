package gateway

import (
	"context"
	"encoding/json"

	"github.com/plexus-gw/plexus"
)

// replayLimit bounds one Last-Event-ID replay; a client further behind
// reconnects again from the last id it saw.
const replayLimit = 1000

func newEvent(typ, agentID, sessionID string, data any, secret any) *plexus.Event {
	b, _ := json.Marshal(data)
	ev := &plexus.Event{Type: typ, AgentID: agentID, SessionID: sessionID, Data: b}
	if secret != nil {
		ev.Secret, _ = json.Marshal(secret)
	}
	return ev
}

// Subscribe opens the caller's event stream: events after lastEventID are
// replayed from the journal (without tokens: those ride only live), then
// live events follow. The returned channel is closed when ctx ends, the
// subscriber falls too far behind, or the session ends (revoked with its
// agent or key, or expired): a dead session is told nothing more. The
// forwarding goroutine is owned by ctx, and holds one of the session's and
// its agent's stream slots (StreamLimits) until it returns: a caller over a
// cap is refused with rate_limited, and one whose ctx ends frees its slot.
func (g *Gateway) Subscribe(ctx context.Context, c Credentials, lastEventID int64) (<-chan plexus.Event, error) {
	sess, err := g.session(ctx, c.SessionID)
	if err != nil {
		return nil, err
	}
	// Subscribe before reading the replay so nothing falls in between; the
	// forwarder drops live events the replay already delivered.
	sub, err := g.bus.subscribe(sess)
	if err != nil {
		return nil, err
	}
	// A revocation that committed between the check above and subscribe
	// ended its sessions' subscribers before this one existed: look again.
	if _, err := g.session(ctx, sess.ID); err != nil {
		g.bus.unsubscribe(sub)
		return nil, err
	}
	var replay []plexus.Event
	if lastEventID > 0 {
		replay, err = g.d.Events.EventsSince(ctx, lastEventID, sess.AgentID, sess.ID, replayLimit)
		if err != nil {
			g.bus.unsubscribe(sub)
			return nil, plexus.WrapError(plexus.CodeInternalError, err, "could not replay events")
		}
	}
	out := make(chan plexus.Event, 16)
	go func() {
		defer close(out)
		defer g.bus.unsubscribe(sub)
		last := lastEventID
		live := func() bool { return g.now().Before(sess.ExpiresAt) }
		for _, ev := range replay {
			ev.Secret = nil
			if !live() {
				return
			}
			select {
			case out <- ev:
				last = ev.ID
			case <-ctx.Done():
				return
			}
		}
		for {
			select {
			case <-ctx.Done():
				return
			case ev, ok := <-sub.ch:
				if !ok {
					return
				}
				if ev.ID != 0 && ev.ID <= last {
					continue // the replay delivered it; live-only events (id 0) always pass
				}
				if !live() {
					return
				}
				select {
				case out <- ev:
					last = max(last, ev.ID)
				case <-ctx.Done():
					return
				}
			}
		}
	}()
	return out, nil
}
