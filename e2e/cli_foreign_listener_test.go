package e2e

import (
	"strings"
	"testing"

	"github.com/plexus-gw/plexus/internal/plexustest"
)

// TestForeignListenerHelper is the squatter TestCLIForeignListener dials,
// run as another user (plexustest.ForeignListener).
func TestForeignListenerHelper(t *testing.T) { plexustest.ServeForeignListener(t) }

// Another user's listener at the daemon's address (the port left free by a
// daemon that stopped) gets a connection and not one byte from an owner
// command: the connection-key never reaches it. The same commands reach
// the real daemon.
func TestCLIForeignListener(t *testing.T) {
	e, _ := newCLIEnv(t)
	for _, args := range [][]string{{"status"}, {"console", "--print"}} {
		name := strings.Join(args, " ")
		t.Run(name, func(t *testing.T) {
			addr, received := plexustest.ForeignListener(t, "TestForeignListenerHelper")
			squatted := &cliEnv{t: t, home: e.home, addr: addr, agentHome: e.agentHome}
			r := squatted.run(args...)
			if r.code != exitError || !strings.Contains(r.stderr, addr) || !strings.Contains(r.stderr, "uid 65534") {
				t.Errorf("want a refusal naming %s and uid 65534: %s", addr, r)
			}
			if got := received(); got != "0 <nil>" {
				t.Errorf("the other user's listener received %s bytes; want none", got)
			}
			e.with(t).ok(args...)
		})
	}
}
