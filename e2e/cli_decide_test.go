package e2e

// `plexus approve` and `plexus reject` decide by moving the decision file,
// as a person would: the real CLI against a real in-process daemon, its
// reconciler applying the move.

import (
	"context"
	"encoding/json"
	"maps"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/plexus-gw/plexus"
	"github.com/plexus-gw/plexus/daemon"
	"github.com/plexus-gw/plexus/inbox"
	"github.com/plexus-gw/plexus/journal"
)

// decideEnv is a daemon exposing the notes portal, an enrolled agent whose
// session listens on /events, and the CLI pointed at the daemon.
type decideEnv struct {
	*cliEnv
	td     *testDaemon
	sid    string
	events <-chan sseEvent
}

func newDecideEnv(t *testing.T) *decideEnv {
	t.Helper()
	e, td := newCLIEnv(t)
	addPortal(t, td, "notes")
	_, sid := enrolledAgent(t, td, "claude")
	return &decideEnv{cliEnv: e, td: td, sid: sid, events: td.openEvents(t, sid, "")}
}

// ask makes the agent ask to write notes and returns the pending id once
// the daemon has put its file up in inbox/.
func (d *decideEnv) ask(t *testing.T) string {
	t.Helper()
	var pend plexus.GrantPendingResponse
	st := d.td.call(t, "PUT", "/grants", session(d.sid), map[string]any{"grants": map[string]any{
		"portal.notes.write": map[string]any{"decision": "allow", "verbs": []string{"write"}, "purpose": "save the minutes"}}}, &pend)
	if st != http.StatusAccepted || pend.PendingID == "" {
		t.Fatalf("write grant: status %d, %+v", st, pend)
	}
	syncInbox(t, d.td)
	if !hasFile(d.home, plexus.FolderInbox, pend.PendingID) {
		t.Fatalf("no inbox file for %s", pend.PendingID)
	}
	return pend.PendingID
}

// resolved waits for the agent's grant_resolved event.
func (d *decideEnv) resolved(t *testing.T) plexus.GrantResolvedEvent {
	t.Helper()
	ev := waitEvent(t, d.events, plexus.EventGrantResolved)
	var r plexus.GrantResolvedEvent
	if err := json.Unmarshal([]byte(ev.Data), &r); err != nil {
		t.Fatal(err)
	}
	return r
}

// syncInbox waits for a full pass of td's reconciler.
func syncInbox(t *testing.T, td *testDaemon) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := td.Inbox().Sync(ctx); err != nil {
		t.Fatalf("inbox sync: %v", err)
	}
}

func hasFile(home, folder, id string) bool {
	_, err := os.Lstat(filepath.Join(home, folder, inbox.FileName(id)))
	return err == nil
}

// decisionFile parses id's file in folder.
func decisionFile(t *testing.T, home, folder, id string) *inbox.File {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(home, folder, inbox.FileName(id)))
	if err != nil {
		t.Fatal(err)
	}
	f, err := inbox.Parse(b)
	if err != nil {
		t.Fatalf("%s/%s: %v", folder, inbox.FileName(id), err)
	}
	return f
}

// decisionRows returns the journal's rows of type typ about decision pid.
func decisionRows(t *testing.T, td *testDaemon, typ, pid string) []plexus.Activity {
	t.Helper()
	var out []plexus.Activity
	for _, a := range td.activity(t, journal.Filter{Type: typ}) {
		if a.Payload["pendingId"] == pid || a.Target == pid {
			out = append(out, a)
		}
	}
	return out
}

// folders maps every file under the four decision folders to its content.
func folders(t *testing.T, home string) map[string]string {
	t.Helper()
	m := map[string]string{}
	for _, f := range []string{plexus.FolderInbox, plexus.FolderActive, plexus.FolderRejected, plexus.FolderArchive} {
		for p, v := range snapshotTree(t, filepath.Join(home, f)) {
			m[p] = v
		}
	}
	return m
}

func TestCLIApproveMovesTheFile(t *testing.T) {
	failOnLeakedGoroutines(t)
	d := newDecideEnv(t)
	pid := d.ask(t)

	r := d.ok("approve", pid)
	for _, want := range []string{
		"Approved " + pid + " for claude: portal.notes.write (write, window 1d).",
		"Approved by " + testDecider + " via cli; the file is in active/" + pid + ".md.",
		"minted and sent to the agent's session with grant_resolved.",
	} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("stdout lacks %q: %s", want, r)
		}
	}
	ev := d.resolved(t)
	if ev.PendingID != pid || ev.Decision != plexus.StateApproved || ev.Token == nil {
		t.Fatalf("grant_resolved = %+v", ev)
	}
	if want := "Token " + ev.Token.JTI + " minted"; !strings.Contains(r.stdout, want) {
		t.Errorf("stdout lacks %q: %s", want, r)
	}

	rows := decisionRows(t, d.td, "grant.approved", pid)
	if len(rows) != 1 || rows[0].Payload["via"] != plexus.ViaCLI || rows[0].Payload["decidedBy"] != testDecider ||
		rows[0].Actor != plexus.ActorHuman {
		t.Errorf("grant.approved rows for %s = %+v, want one via cli by %s", pid, rows, testDecider)
	}

	syncInbox(t, d.td)
	if hasFile(d.home, plexus.FolderInbox, pid) {
		t.Error("the file is still in inbox/")
	}
	f := decisionFile(t, d.home, plexus.FolderActive, pid)
	if f.State != plexus.StateApproved || f.Via != plexus.ViaCLI || f.DecidedBy != testDecider {
		t.Errorf("active/ file: state %q, via %q, decided_by %q", f.State, f.Via, f.DecidedBy)
	}
	if p := d.ok("show", pid).stdout; !strings.Contains(p, "Approved by "+testDecider+" via cli") {
		t.Errorf("show after approve:\n%s", p)
	}
}

func TestCLIApproveWindow(t *testing.T) {
	failOnLeakedGoroutines(t)
	d := newDecideEnv(t)

	t.Run("ErrLonger", func(t *testing.T) {
		e := d.with(t)
		pid := d.ask(t)
		before := folders(t, e.home)
		r := e.run("approve", pid, "--window", "30d")
		if r.code != exitError || !strings.Contains(r.stderr, "window 30d is longer than the request asks (portal.notes.write 1d)") ||
			!strings.Contains(r.stderr, "nothing was moved") {
			t.Errorf("%s", r)
		}
		if after := folders(t, e.home); !maps.Equal(before, after) {
			t.Errorf("a refused approve changed the folders:\nbefore %v\nafter  %v", before, after)
		}
		if r := e.run("approve", pid, "--window", "fortnight"); r.code != exitUsage {
			t.Errorf("%s", r)
		}
		e.ok("reject", pid, "--reason", "cleanup")
		d.resolved(t)
	})
	t.Run("OK", func(t *testing.T) {
		e := d.with(t)
		pid := d.ask(t)
		r := e.ok("approve", pid, "--window", "1h")
		if !strings.Contains(r.stdout, "portal.notes.write (write, window 1h)") {
			t.Errorf("%s", r)
		}
		var grants []plexus.StandingGrant
		e.jsonOut(&grants, "grants", "--json")
		i := slices.IndexFunc(grants, func(g plexus.StandingGrant) bool { return g.CapabilityID == "portal.notes.write" })
		if i < 0 || grants[i].TrustWindow.Kind != plexus.Window1h {
			t.Errorf("grants after approve --window 1h = %+v", grants)
		}
		rows := decisionRows(t, d.td, "grant.approved", pid)
		if len(rows) != 1 {
			t.Fatalf("grant.approved rows = %+v", rows)
		}
		if w, _ := rows[0].Payload["trustWindow"].(map[string]any); w["kind"] != string(plexus.Window1h) {
			t.Errorf("journaled trustWindow = %v", rows[0].Payload["trustWindow"])
		}
		if ev := d.resolved(t); ev.Token == nil || ev.Token.TrustWindow == nil || ev.Token.TrustWindow.Kind != plexus.Window1h {
			t.Errorf("grant_resolved = %+v", ev)
		}
	})
}

func TestCLIRejectMovesTheFile(t *testing.T) {
	failOnLeakedGoroutines(t)
	d := newDecideEnv(t)
	pid := d.ask(t)

	r := d.ok("reject", pid, "--reason", "not this week")
	for _, want := range []string{
		"Rejected " + pid + " for claude: portal.notes.write (write, window 1d).",
		"Denied by " + testDecider + " via cli: not this week; the file is in rejected/" + pid + ".md.",
		"The agent is told with grant_resolved.",
	} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("stdout lacks %q: %s", want, r)
		}
	}
	if ev := d.resolved(t); ev.PendingID != pid || ev.Decision != plexus.StateDenied || ev.Token != nil {
		t.Errorf("grant_resolved = %+v", ev)
	}
	rows := decisionRows(t, d.td, "grant.denied", pid)
	if len(rows) != 1 || rows[0].Payload["reason"] != "not this week" || rows[0].Payload["via"] != plexus.ViaCLI ||
		rows[0].Payload["decidedBy"] != testDecider {
		t.Errorf("grant.denied rows for %s = %+v", pid, rows)
	}
	syncInbox(t, d.td)
	f := decisionFile(t, d.home, plexus.FolderRejected, pid)
	if f.State != plexus.StateDenied || f.Reason != "not this week" || f.Via != plexus.ViaCLI {
		t.Errorf("rejected/ file: state %q, reason %q, via %q", f.State, f.Reason, f.Via)
	}
	if r := d.run("reject", pid); r.code != exitUsage {
		t.Errorf("reject without --reason: %s", r)
	}
}

// With the daemon stopped, approve leaves the stamped file in active/; the
// next start applies it, once.
func TestCLIApproveDaemonStopped(t *testing.T) {
	failOnLeakedGoroutines(t)
	d := newDecideEnv(t)
	pid := d.ask(t)
	d.td.stop()

	r := d.ok("approve", pid)
	if want := "Plexus is not running: the decision is queued in active/" + pid + ".md and applied at the next `plexus serve`.\n"; r.stdout != want {
		t.Errorf("stdout %q, want %q", r.stdout, want)
	}
	if hasFile(d.home, plexus.FolderInbox, pid) {
		t.Error("the file is still in inbox/")
	}
	f := decisionFile(t, d.home, plexus.FolderActive, pid)
	if f.State != plexus.StatePending || f.Via != plexus.ViaCLI || f.DecidedBy != testDecider {
		t.Errorf("queued file: state %q, via %q, decided_by %q", f.State, f.Via, f.DecidedBy)
	}
	if r := d.run("approve", pid); r.code != exitError || !strings.Contains(r.stderr, "already moved to active/, and Plexus has not applied it yet") {
		t.Errorf("approving the queued decision again: %s", r)
	}

	for range 2 { // a second start finds nothing left to apply
		td := startTestDaemon(t, daemon.Options{Home: d.home})
		syncInbox(t, td)
		rows := decisionRows(t, td, "grant.approved", pid)
		if len(rows) != 1 || rows[0].Payload["via"] != plexus.ViaCLI || rows[0].Payload["decidedBy"] != testDecider {
			t.Errorf("grant.approved rows for %s = %+v, want one via cli by %s", pid, rows, testDecider)
		}
		f := decisionFile(t, d.home, plexus.FolderActive, pid)
		if f.State != plexus.StateApproved || f.Via != plexus.ViaCLI {
			t.Errorf("active/ file after the start: state %q, via %q", f.State, f.Via)
		}
		td.stop()
	}
}

// Nothing to decide: the command says why, exits 1 and moves nothing.
func TestCLIDecideNothingToDecide(t *testing.T) {
	failOnLeakedGoroutines(t)
	d := newDecideEnv(t)
	pid := d.ask(t)
	d.ok("approve", pid)
	d.resolved(t)
	syncInbox(t, d.td)

	const unknown = "pend_01JDX3K9Q8M2V7T4R6W5Y0Z1AB"
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"approve", unknown}, "no pending decision " + unknown},
		{[]string{"reject", unknown, "--reason", "x"}, "no pending decision " + unknown},
		{[]string{"approve", "nope"}, "no pending decision nope"},
		{[]string{"approve", pid}, pid + " was already approved by " + testDecider + " via cli"},
		{[]string{"reject", pid, "--reason", "too late"}, pid + " was already approved by " + testDecider + " via cli"},
	} {
		before := folders(t, d.home)
		r := d.run(tt.args...)
		if r.code != exitError || !strings.Contains(r.stderr, tt.want) {
			t.Errorf("want exit 1 saying %q: %s", tt.want, r)
		}
		if after := folders(t, d.home); !maps.Equal(before, after) {
			t.Errorf("%v changed the folders:\nbefore %v\nafter  %v", tt.args, before, after)
		}
	}
	// With the daemon stopped, the files tell.
	d.td.stop()
	r := d.run("reject", pid, "--reason", "too late")
	if r.code != exitError || !regexp.MustCompile(pid+` was already approved by `+regexp.QuoteMeta(testDecider)+` via cli at .*; its file is active/`+pid+`\.md`).MatchString(r.stderr) {
		t.Errorf("%s", r)
	}
	if r := d.run("approve", unknown); r.code != exitError || !strings.Contains(r.stderr, "no pending decision "+unknown) {
		t.Errorf("%s", r)
	}
}

// A move the daemon refuses comes back to inbox/ with the problem, which
// the command prints.
func TestCLIApproveRefused(t *testing.T) {
	failOnLeakedGoroutines(t)
	d := newDecideEnv(t)
	pid := d.ask(t)
	path := filepath.Join(d.home, plexus.FolderInbox, inbox.FileName(pid))
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	widened := strings.Replace(string(b), "verbs: [write]", "verbs: [read, write]", 1)
	if widened == string(b) {
		t.Fatalf("no verbs line to widen in:\n%s", b)
	}
	if err := os.WriteFile(path, []byte(widened), 0o600); err != nil {
		t.Fatal(err)
	}

	r := d.run("approve", pid)
	if r.code != exitError || !strings.Contains(r.stderr, "Plexus refused the decision, so nothing changed; its file is back in inbox/"+pid+".md") ||
		!strings.Contains(r.stderr, "portal.notes.write, verbs: read was not requested (asked: write)") {
		t.Errorf("%s", r)
	}
	if rows := decisionRows(t, d.td, "grant.approved", pid); len(rows) != 0 {
		t.Errorf("grant.approved rows after a refusal: %+v", rows)
	}
	f := decisionFile(t, d.home, plexus.FolderInbox, pid)
	if f.State != plexus.StatePending || !strings.Contains(f.Problem, "verbs: read was not requested") {
		t.Errorf("inbox/ file: state %q, problem %q", f.State, f.Problem)
	}
	if hasFile(d.home, plexus.FolderActive, pid) {
		t.Error("a copy is left in active/")
	}
	// The file as Plexus rewrote it can be approved.
	d.ok("approve", pid)
	if ev := d.resolved(t); ev.Decision != plexus.StateApproved {
		t.Errorf("grant_resolved = %+v", ev)
	}
}
