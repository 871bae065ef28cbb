package e2e

import (
	"strings"
	"testing"

	"github.com/plexus-gw/plexus"
)

// `plexus show` tells the owner what a decision asks, in the gateway's words
// and the agent's (kept apart), before and after it is decided.
func TestCLIShow(t *testing.T) {
	e, _ := newCLIEnv(t)
	e.notesDir()
	e.enroll("claude")
	r := e.run("agent", "call", "portal.notes.write", "path=a.md", "content=x", "--purpose", "save the minutes")
	m := pendingIDRe.FindStringSubmatch(r.stderr)
	if r.code != exitPending || m == nil {
		t.Fatalf("call: %s", r)
	}
	out := e.ok("show", m[1]).stdout
	for _, want := range []string{m[1], "claude", "portal.notes.write", "write", "window 1d", "Approving lets claude WRITE",
		"The agent says (its own words, not checked by Plexus):", `purpose: "save the minutes"`, "plexus approve " + m[1]} {
		if !strings.Contains(out, want) {
			t.Errorf("show lacks %q:\n%s", want, out)
		}
	}
	var p plexus.Pending
	e.jsonOut(&p, "show", m[1], "--json")
	if p.ID != m[1] || p.State != plexus.StatePending || len(p.Items) != 1 {
		t.Errorf("show --json = %+v", p)
	}

	e.ok("reject", m[1], "--reason", "not now")
	out = e.ok("show", m[1]).stdout
	if !strings.Contains(out, "Denied by "+testDecider+" via cli") || !strings.Contains(out, "not now") {
		t.Errorf("show after reject:\n%s", out)
	}

	if r := e.run("show", "pend_01NOSUCHDECISION0000000000"); r.code != exitError || !strings.Contains(r.stderr, "not_found") {
		t.Errorf("unknown id: %s", r)
	}
}
