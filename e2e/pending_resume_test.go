package e2e

// `plexus agent call` run again after it exited 3 resumes the pending
// request rather than asking the owner a second time: the real CLI against a
// real in-process gateway, as in cli_story_test.go.

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/plexus-gw/plexus"
)

// pendingCall runs `agent call args…`, requires exit 3 and returns the
// pending id it names.
func (e *cliEnv) pendingCall(args ...string) (string, cliRun) {
	e.t.Helper()
	r := e.run(append([]string{"agent", "call"}, args...)...)
	m := pendingIDRe.FindStringSubmatch(r.stderr)
	if r.code != exitPending || m == nil || !strings.Contains(r.stderr, "plexus approve "+m[1]) {
		e.t.Fatalf("want exit 3 naming a pending decision: %s", r)
	}
	return m[1], r
}

// openFor lists the ids of the open pending decisions asking for capability.
func (e *cliEnv) openFor(capability string) []string {
	e.t.Helper()
	var ids []string
	for _, p := range e.pendings() {
		if slices.ContainsFunc(p.Items, func(it plexus.PendingItem) bool { return it.CapabilityID == capability }) {
			ids = append(ids, p.ID)
		}
	}
	return ids
}

// requested lists the pending ids the journal records as requested for
// capability (grant.requested rows), oldest first.
func (e *cliEnv) requested(capability string) []string {
	e.t.Helper()
	var ids []string
	for _, a := range e.journalLines("--type", "grant.requested") {
		caps, _ := a.Payload["capabilities"].([]any)
		if slices.Contains(caps, any(capability)) {
			ids = append(ids, a.Target)
		}
	}
	slices.Sort(ids)
	return ids
}

func TestCLIAgentCallResumesPending(t *testing.T) {
	failOnLeakedGoroutines(t)
	e, td := newCLIEnv(t)
	dir := addPortal(t, td, "notes")
	addEcho(t, td, "test", "")
	e.enroll("claude")

	t.Run("Write", func(t *testing.T) {
		e := e.with(t)
		const capability = "portal.notes.write"
		pid, first := e.pendingCall(capability, "path=a.md", "content=hi")
		if strings.Contains(first.stderr, "not asked again") {
			t.Errorf("a first request said it was resumed: %s", first)
		}

		// Again, before the owner decides: the same request, not a second one.
		again, r := e.pendingCall(capability, "path=a.md", "content=hi")
		if again != pid || !strings.Contains(r.stderr, "not asked again") {
			t.Errorf("second call pends as %s, want %s resumed: %s", again, pid, r)
		}
		if ids := e.openFor(capability); !slices.Equal(ids, []string{pid}) {
			t.Fatalf("open pending for %s = %v, want exactly [%s]", capability, ids, pid)
		}
		ps := e.pendings()
		if len(ps) != 1 || len(ps[0].Narration) != 1 || !strings.Contains(r.stderr, ps[0].Narration[0].Summary) {
			t.Errorf("the resumed call lacks the request's narration %+v: %s", ps, r)
		}
		// --json says so too.
		r = e.run("agent", "call", capability, "path=a.md", "content=hi", "--json")
		var rep map[string]any
		if r.code != exitPending || json.Unmarshal([]byte(r.stdout), &rep) != nil || rep["pendingId"] != pid || rep["resumed"] != true {
			t.Errorf("agent call --json while pending: %s", r)
		}

		// The owner approves; the next call picks the approval up.
		e.ok("approve", pid)
		r = e.ok("agent", "call", capability, "path=a.md", "content=hi")
		if strings.Contains(r.stderr, "grant pending") {
			t.Errorf("the call after approval pended: %s", r)
		}
		if b, err := os.ReadFile(filepath.Join(dir, "a.md")); err != nil || string(b) != "hi" {
			t.Errorf("a.md = %q, %v", b, err)
		}
		if ids := e.openFor(capability); len(ids) != 0 {
			t.Errorf("open pending after the approved call = %v", ids)
		}
		if ids := e.requested(capability); !slices.Equal(ids, []string{pid}) {
			t.Errorf("grant.requested for %s = %v, want only %s", capability, ids, pid)
		}
	})

	t.Run("ExecuteOnce", func(t *testing.T) {
		e := e.with(t)
		const capability = "test.echo.run"
		first, _ := e.pendingCall(capability, "msg=hello")
		if again, r := e.pendingCall(capability, "msg=hello"); again != first {
			t.Errorf("second call pends as %s, want %s resumed: %s", again, first, r)
		}
		// Execute is approved once; a new PUT /grants would pend again, so
		// only resuming the request can reach the approval.
		e.ok("approve", first)
		r := e.ok("agent", "call", capability, "msg=hello")
		if !strings.Contains(r.stdout, `"msg": "hello"`) {
			t.Errorf("the approved call's output: %s", r)
		}
		var runs int
		for _, a := range e.journalLines("--type", "invoke.") {
			if a.Target == capability && a.ActionType != plexus.ActionInvokeStarted {
				runs++
				if a.ActionType != "invoke.ok" {
					t.Errorf("%s: %+v", capability, a)
				}
			}
		}
		if runs != 1 {
			t.Errorf("%s ran %d times, want once", capability, runs)
		}
		// Used once, it is gone: the next call asks anew.
		next, _ := e.pendingCall(capability, "msg=hello")
		if next == first {
			t.Errorf("the call after the once grant was used resumed %s", first)
		}
		if ids := e.openFor(capability); !slices.Equal(ids, []string{next}) {
			t.Errorf("open pending for %s = %v, want [%s]", capability, ids, next)
		}
		if ids := e.requested(capability); len(ids) != 2 {
			t.Errorf("grant.requested for %s = %v, want two", capability, ids)
		}
		e.ok("reject", next, "--reason", "cleanup")
	})

	t.Run("Denied", func(t *testing.T) {
		e := e.with(t)
		const capability = "test.echo.write"
		pid, _ := e.pendingCall(capability, "msg=x")
		e.ok("reject", pid, "--reason", "no")

		// The owner said no: reported, not asked again.
		r := e.run("agent", "call", capability, "msg=x")
		if r.code != exitError || !strings.Contains(r.stderr, "denied") || !strings.Contains(r.stderr, pid) ||
			!strings.Contains(r.stderr, ": no") {
			t.Fatalf("want exit 1 naming the denial of %s and its reason: %s", pid, r)
		}
		if ids := e.openFor(capability); len(ids) != 0 {
			t.Errorf("the denial was asked again: open %v", ids)
		}
		// Reported once: a further call requests anew.
		next, _ := e.pendingCall(capability, "msg=x")
		if next == pid {
			t.Errorf("the call after the denial resumed %s", pid)
		}
		if ids := e.openFor(capability); !slices.Equal(ids, []string{next}) {
			t.Errorf("open pending for %s = %v, want [%s]", capability, ids, next)
		}
		e.ok("reject", next, "--reason", "cleanup")
	})
}
