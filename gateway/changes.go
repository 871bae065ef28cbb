package gateway

import (
	"context"

	"github.com/plexus-gw/plexus"
)

// Changes streams the broadcast events (manifest_changed, source_status)
// to an edge inside the daemon that keeps its own views of the catalog
// fresh — the MCP front door's list_changed notifications — without
// holding any session's stream slot. The channel is closed when ctx ends
// or the reader falls too far behind (a dropped reader subscribes again
// and should assume everything changed). No agent or session event is
// ever delivered on it.
func (g *Gateway) Changes(ctx context.Context) <-chan plexus.Event {
	// A subscriber of no agent and no session: audience lets only
	// broadcast events through. released: it holds no slot to give back.
	sub := &subscriber{ch: make(chan plexus.Event, subscriberBuffer), released: true}
	g.bus.mu.Lock()
	g.bus.subs[sub] = struct{}{}
	g.bus.mu.Unlock()
	out := make(chan plexus.Event, 16)
	go func() {
		defer close(out)
		defer g.bus.unsubscribe(sub)
		for {
			select {
			case <-ctx.Done():
				return
			case ev, ok := <-sub.ch:
				if !ok {
					return
				}
				select {
				case out <- ev:
				case <-ctx.Done():
					return
				}
			}
		}
	}()
	return out
}

// SessionAgent is the id of the agent whose session c names: what an edge
// keys the owner's per-agent settings by. An owner or anonymous session
// answers "".
func (g *Gateway) SessionAgent(ctx context.Context, c Credentials) (string, error) {
	sess, err := g.session(ctx, c.SessionID)
	if err != nil {
		return "", err
	}
	if sess.Kind != plexus.SessionAgent {
		return "", nil
	}
	return sess.AgentID, nil
}
