package gateway

import (
	"slices"
	"sync"

	"github.com/plexus-gw/plexus"
)

// subscriberBuffer is how many events a subscriber may fall behind before it
// is dropped. A dropped subscriber reconnects with Last-Event-ID and replays
// what it missed from the journal, so dropping loses nothing.
const subscriberBuffer = 256

// bus fans events out to live /events subscribers. It owns no goroutine:
// Publish never blocks, and a subscriber that cannot keep up is closed.
type bus struct {
	mu   sync.Mutex // guards subs
	subs map[*subscriber]struct{}
}

type subscriber struct {
	agentID   string
	sessionID string
	ch        chan plexus.Event
	closed    bool // guarded by bus.mu
}

func newBus() *bus { return &bus{subs: make(map[*subscriber]struct{})} }

func (b *bus) subscribe(agentID, sessionID string) *subscriber {
	s := &subscriber{agentID: agentID, sessionID: sessionID, ch: make(chan plexus.Event, subscriberBuffer)}
	b.mu.Lock()
	b.subs[s] = struct{}{}
	b.mu.Unlock()
	return s
}

func (b *bus) unsubscribe(s *subscriber) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if !s.closed {
		s.closed = true
		close(s.ch)
	}
	delete(b.subs, s)
}

// end closes the subscribers of sessions: a stream lives no longer than the
// session that authorized it. Events already queued to them are still
// delivered (the token_revoked of the ending, say) before their channel
// reports closed.
func (b *bus) end(sessions []string) {
	if len(sessions) == 0 {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	for s := range b.subs {
		if !s.closed && slices.Contains(sessions, s.sessionID) {
			s.closed = true
			close(s.ch)
			delete(b.subs, s)
		}
	}
}

// audience reports whether e may be delivered to a subscriber of
// (agentID, sessionID): broadcast events go to everyone, agent events to that
// agent's sessions, session events to that one session.
func audience(e plexus.Event, agentID, sessionID string) bool {
	if e.AgentID == "" && e.SessionID == "" {
		return true
	}
	if e.SessionID != "" {
		return e.SessionID == sessionID
	}
	return e.AgentID == agentID
}

// publish delivers e to every matching subscriber. The Secret body rides only
// to the subscriber whose session the event names; everyone else (and every
// replay) gets Data.
func (b *bus) publish(e plexus.Event) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for s := range b.subs {
		if s.closed || !audience(e, s.agentID, s.sessionID) {
			continue
		}
		out := e
		if e.SessionID == "" || e.SessionID != s.sessionID {
			out.Secret = nil
		}
		select {
		case s.ch <- out:
		default:
			// Too slow: drop it rather than block the publisher.
			s.closed = true
			close(s.ch)
			delete(b.subs, s)
		}
	}
}

// publishLive delivers an event that is never journaled (a call's progress)
// to the matching subscribers that have room for it, keeping half of each
// buffer for journaled events: a slow reader misses progress, and is not
// dropped for it, since a replay could not bring progress back.
func (b *bus) publishLive(e plexus.Event) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for s := range b.subs {
		if s.closed || !audience(e, s.agentID, s.sessionID) || len(s.ch) >= cap(s.ch)/2 {
			continue
		}
		s.ch <- e
	}
}
