package gateway

import (
	"testing"

	"github.com/plexus-gw/plexus"
)

// mustSubscribe subscribes an agent session of agentID.
func mustSubscribe(t *testing.T, b *bus, agentID, sessionID string) *subscriber {
	t.Helper()
	s, err := b.subscribe(&plexus.Session{ID: sessionID, AgentID: agentID, Kind: plexus.SessionAgent})
	if err != nil {
		t.Fatalf("subscribe %s/%s: %v", agentID, sessionID, err)
	}
	return s
}

func TestBusStreamCaps(t *testing.T) {
	agentSess := func(agent, id string) *plexus.Session {
		return &plexus.Session{ID: id, AgentID: agent, Kind: plexus.SessionAgent}
	}
	refused := func(t *testing.T, b *bus, sess *plexus.Session) {
		t.Helper()
		s, err := b.subscribe(sess)
		if plexus.AsError(err).Code != plexus.CodeRateLimited || s != nil {
			t.Fatalf("subscribe %s over the cap = (%v, %v), want rate_limited", sess.ID, s, err)
		}
	}
	t.Run("PerSession", func(t *testing.T) {
		b := newBus(StreamLimits{PerSession: 2, PerAgent: 10})
		first := mustSubscribe(t, b, "a", "s1")
		mustSubscribe(t, b, "a", "s1")
		refused(t, b, agentSess("a", "s1"))
		mustSubscribe(t, b, "a", "s2") // another session of the agent has its own slots
		b.unsubscribe(first)
		b.unsubscribe(first) // twice gives back one slot, not two
		mustSubscribe(t, b, "a", "s1")
		refused(t, b, agentSess("a", "s1"))
	})
	t.Run("PerAgent", func(t *testing.T) {
		b := newBus(StreamLimits{PerSession: 2, PerAgent: 3})
		mustSubscribe(t, b, "a", "s1")
		mustSubscribe(t, b, "a", "s1")
		last := mustSubscribe(t, b, "a", "s2")
		refused(t, b, agentSess("a", "s3"))
		mustSubscribe(t, b, "b", "s4") // another agent is not counted against a
		// An owner's session naming the agent is the owner's, not the agent's.
		if _, err := b.subscribe(&plexus.Session{ID: "s5", AgentID: "a", Kind: plexus.SessionAdmin}); err != nil {
			t.Fatalf("owner session refused: %v", err)
		}
		b.unsubscribe(last)
		mustSubscribe(t, b, "a", "s3")
	})
	t.Run("DroppedSubscriberKeepsSlotUntilUnsubscribed", func(t *testing.T) {
		b := newBus(StreamLimits{PerSession: 1, PerAgent: 1})
		s := mustSubscribe(t, b, "a", "s1")
		b.end([]string{"s1"}) // the bus closes the channel; the forwarder has not returned yet
		refused(t, b, agentSess("a", "s1"))
		b.unsubscribe(s)
		mustSubscribe(t, b, "a", "s1")
	})
	t.Run("Defaults", func(t *testing.T) {
		b := newBus(StreamLimits{})
		for range DefaultStreamsPerSession {
			mustSubscribe(t, b, "a", "s1")
		}
		refused(t, b, agentSess("a", "s1"))
	})
}
