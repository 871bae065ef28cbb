package mcpserver_test

import (
	"context"
	"testing"
	"time"

	"github.com/plexus-gw/plexus"
	"github.com/plexus-gw/plexus/gateway"
	"github.com/plexus-gw/plexus/mcpserver"
)

// TestSweepEndsOnlyTheRevoked: after the owner revokes one agent, the
// sweep ends that agent's host session, which sends no request that would
// meet the session check, and keeps the other agent's, which goes on
// listing its tools.
func TestSweepEndsOnlyTheRevoked(t *testing.T) {
	f := newFixture(t, mcpserver.Options{SessionCheck: 20 * time.Millisecond})
	f.connect(f.agent("claude"), "claude-code", nil)
	kept := f.connect(f.agent("cursor"), "cursor", nil)
	if n := f.front.Sessions(); n != 2 {
		t.Fatalf("%d host sessions, want 2", n)
	}
	if _, err := f.gw.RevokeAgent(context.Background(), gateway.Credentials{ConnectionKey: f.home.ConnectionKey},
		plexus.AgentRevokeRequest{AgentID: "claude"}); err != nil {
		t.Fatal(err)
	}
	// A generous bound: a hang, not a speed check.
	for deadline := time.Now().Add(30 * time.Second); f.front.Sessions() != 1; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%d host sessions after the revocation, want the other agent's alone", f.front.Sessions())
		}
	}
	// Several sweeps later, the live session is still served.
	time.Sleep(100 * time.Millisecond)
	if _, err := kept.ListTools(context.Background(), nil); err != nil {
		t.Errorf("the other agent's host: %v", err)
	}
	if n := f.front.Sessions(); n != 1 {
		t.Errorf("%d host sessions, want 1", n)
	}
}
