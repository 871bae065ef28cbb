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

// Default caps on the /events streams open at once.
const (
	DefaultStreamsPerSession = 8
	DefaultStreamsPerAgent   = 32
)

// StreamLimits caps the /events streams open at once, so that one agent
// cannot hold the daemon's connections, goroutines and buffers (one held
// 1,500). PerAgent counts the streams of every session of one agent (agent
// sessions only: an owner's session naming an agent is the owner's, and
// counts on its own). Zero means the default.
type StreamLimits struct {
	PerSession int
	PerAgent   int
}

// bus fans events out to live /events subscribers. It owns no goroutine:
// Publish never blocks, and a subscriber that cannot keep up is closed.
type bus struct {
	limits StreamLimits
	mu     sync.Mutex // guards subs and open
	subs   map[*subscriber]struct{}
	// open counts the subscribers holding a stream slot, per session id
	// and per agent key. A slot is taken by subscribe and given back by
	// unsubscribe alone, whoever closed the channel.
	open map[string]int
}

type subscriber struct {
	agentID   string
	sessionID string
	agentKey  string // "" when the per-agent cap does not apply
	ch        chan plexus.Event
	closed    bool // guarded by bus.mu
	released  bool // guarded by bus.mu: the slot was given back
}

func newBus(limits StreamLimits) *bus {
	if limits.PerSession <= 0 {
		limits.PerSession = DefaultStreamsPerSession
	}
	if limits.PerAgent <= 0 {
		limits.PerAgent = DefaultStreamsPerAgent
	}
	return &bus{limits: limits, subs: make(map[*subscriber]struct{}), open: make(map[string]int)}
}

// subscribe takes a stream slot of sess, or refuses with rate_limited when
// the session or its agent holds as many streams as the caps allow.
func (b *bus) subscribe(sess *plexus.Session) (*subscriber, error) {
	s := &subscriber{agentID: sess.AgentID, sessionID: sess.ID, ch: make(chan plexus.Event, subscriberBuffer)}
	if sess.Kind == plexus.SessionAgent {
		s.agentKey = "agent\x00" + sess.AgentID
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	sessKey := "session\x00" + sess.ID
	if b.open[sessKey] >= b.limits.PerSession {
		return nil, plexus.Errorf(plexus.CodeRateLimited,
			"this session already holds %d open event streams, the most allowed; close one first", b.limits.PerSession)
	}
	if s.agentKey != "" && b.open[s.agentKey] >= b.limits.PerAgent {
		return nil, plexus.Errorf(plexus.CodeRateLimited,
			"agent %s already holds %d open event streams, the most allowed; close one first", sess.AgentID, b.limits.PerAgent)
	}
	b.open[sessKey]++
	if s.agentKey != "" {
		b.open[s.agentKey]++
	}
	b.subs[s] = struct{}{}
	return s, nil
}

// unsubscribe closes s (if the bus has not already) and gives its slot back.
func (b *bus) unsubscribe(s *subscriber) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if !s.closed {
		s.closed = true
		close(s.ch)
	}
	delete(b.subs, s)
	if s.released {
		return
	}
	s.released = true
	b.release("session\x00" + s.sessionID)
	if s.agentKey != "" {
		b.release(s.agentKey)
	}
}

// release gives back one slot of key; the caller holds b.mu.
func (b *bus) release(key string) {
	if b.open[key] <= 1 {
		delete(b.open, key)
		return
	}
	b.open[key]--
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
