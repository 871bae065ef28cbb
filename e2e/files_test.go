package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/plexus-gw/plexus"
	"github.com/plexus-gw/plexus/auth"
	"github.com/plexus-gw/plexus/daemon"
	"github.com/plexus-gw/plexus/inbox"
	"github.com/plexus-gw/plexus/internal/plexustest"
	"github.com/plexus-gw/plexus/journal"
	"github.com/plexus-gw/plexus/scaffold"
)

// Files as API, end to end: each transition of docs/files-as-api.md made on
// real folders, seen by the real fsnotify watcher and applied by the real
// daemon, then checked three ways: as the agent sees it (GET /grants/status,
// /events, /invoke), as a script reading the journal sees it, and as the
// owner sees the folders.

// filesOwner is who decides by moving files in these tests.
const filesOwner = "owner@example.test"

// filesEnv is a daemon on a fake clock with two portals ("notes" and
// "docs") and one enrolled agent, "claude", whose events are being read.
type filesEnv struct {
	*testDaemon
	clock  *plexustest.Clock
	pat    string
	sid    string
	events <-chan sseEvent
}

// newFilesEnv starts a filesEnv on home ("" for a new one).
func newFilesEnv(t *testing.T, home string) *filesEnv {
	t.Helper()
	e := &filesEnv{clock: newFakeClock()}
	e.testDaemon = startFilesDaemon(t, home, e.clock)
	addPortal(t, e.testDaemon, "notes")
	addPortal(t, e.testDaemon, "docs")
	e.pat, e.sid = enrolledAgent(t, e.testDaemon, "claude")
	e.events = e.openEvents(t, e.sid, "")
	return e
}

// startFilesDaemon starts a daemon on home ("" for a new one) whose file
// moves are made by filesOwner.
func startFilesDaemon(t *testing.T, home string, clock *plexustest.Clock) *testDaemon {
	t.Helper()
	return startTestDaemon(t, daemon.Options{Home: home, Clock: clock.Now, Owner: func() string { return filesOwner }})
}

// asked is a decision put up for the owner.
type asked struct{ ID, Trace string }

// ask has claude ask to write through each of caps (as one bundle when
// bundle is set), which pends, and waits for the decision's file in inbox/.
func (e *filesEnv) ask(t *testing.T, bundle string, caps ...string) asked {
	t.Helper()
	grants := map[string]any{}
	for _, c := range caps {
		grants[c] = map[string]any{"decision": "allow", "verbs": []string{"write"}, "purpose": "save the meeting notes"}
	}
	body := map[string]any{"grants": grants}
	if bundle != "" {
		body["bundle"] = map[string]any{"name": bundle}
	}
	var pend plexus.GrantPendingResponse
	if st := e.call(t, "PUT", "/grants", session(e.sid), body, &pend); st != http.StatusAccepted || pend.PendingID == "" {
		t.Fatalf("PUT /grants %v: status %d, %+v", caps, st, pend)
	}
	a := asked{ID: pend.PendingID}
	for _, r := range e.activity(t, journal.Filter{Type: "grant.requested"}) {
		if r.Target == a.ID {
			a.Trace = r.TraceID
		}
	}
	if a.Trace == "" {
		t.Fatalf("no grant.requested row for %s", a.ID)
	}
	e.waitFile(t, plexus.FolderInbox, a.ID, nil)
	return a
}

// path is where decision id's file is in folder.
func (e *filesEnv) path(folder, id string) string {
	return filepath.Join(e.Home().Dir, folder, inbox.FileName(id))
}

// inboxFile is decision id's file in inbox/: its path and what it holds.
func (e *filesEnv) inboxFile(t *testing.T, id string) (string, []byte) {
	t.Helper()
	in := e.path(plexus.FolderInbox, id)
	b, err := os.ReadFile(in)
	if err != nil {
		t.Fatal(err)
	}
	return in, b
}

// waitRaw waits until folder holds id's file and ok (nil: anything) accepts
// its bytes, then until the reconciler's pass is over (the daemon writes a
// file before journaling why), and returns the bytes.
func (e *filesEnv) waitRaw(t *testing.T, folder, id string, ok func([]byte) bool) []byte {
	t.Helper()
	accepts := func(b []byte, err error) bool { return err == nil && (ok == nil || ok(b)) }
	var b []byte
	waitFor(t, 10*time.Second, folder+"/"+inbox.FileName(id), holds(func() bool {
		var err error
		b, err = os.ReadFile(e.path(folder, id))
		return accepts(b, err)
	}))
	e.settle(t)
	b, err := os.ReadFile(e.path(folder, id))
	if !accepts(b, err) {
		t.Fatalf("%s/%s changed after the reconciler settled: %v\n%s", folder, inbox.FileName(id), err, b)
	}
	return b
}

// waitFile waits until folder holds id's file, parsed, and ok (nil:
// anything) accepts it.
func (e *filesEnv) waitFile(t *testing.T, folder, id string, ok func(*inbox.File) bool) (*inbox.File, []byte) {
	t.Helper()
	var f *inbox.File
	b := e.waitRaw(t, folder, id, func(b []byte) bool {
		var err error
		f, err = inbox.Parse(b)
		return err == nil && (ok == nil || ok(f))
	})
	return f, b
}

func stateIs(s string) func(*inbox.File) bool {
	return func(f *inbox.File) bool { return f.State == s }
}

// settle has the reconciler take a full look and waits until it is done.
func (e *filesEnv) settle(t *testing.T) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := e.Inbox().Sync(ctx); err != nil {
		t.Fatalf("sync the inbox: %v", err)
	}
}

// onlyIn settles, then checks that id's file is in folder and in no other
// ("" for none at all), and returns its bytes.
func (e *filesEnv) onlyIn(t *testing.T, id, folder string) []byte {
	t.Helper()
	e.settle(t)
	var got []string
	var b []byte
	for _, f := range []string{plexus.FolderInbox, plexus.FolderActive, plexus.FolderRejected, plexus.FolderArchive} {
		if raw, err := os.ReadFile(e.path(f, id)); err == nil {
			got = append(got, f)
			b = raw
		} else if !errors.Is(err, os.ErrNotExist) {
			t.Fatal(err)
		}
	}
	want := []string{folder}
	if folder == "" {
		want = nil
	}
	if !slices.Equal(got, want) {
		t.Fatalf("%s's file is in %v, want %v", id, got, want)
	}
	return b
}

// parse parses b, failing the test if it cannot.
func parse(t *testing.T, b []byte) *inbox.File {
	t.Helper()
	f, err := inbox.Parse(b)
	if err != nil {
		t.Fatalf("parse %q: %v", b, err)
	}
	return f
}

// ownerWrite writes b at path as the owner's editor would write it in place.
func ownerWrite(t *testing.T, path string, b []byte) {
	t.Helper()
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
}

func move(t *testing.T, from, to string) {
	t.Helper()
	if err := os.Rename(from, to); err != nil {
		t.Fatal(err)
	}
}

// edit replaces each old with its new in b, each exactly once, as the owner
// would in an editor.
func edit(t *testing.T, b []byte, oldNew ...string) []byte {
	t.Helper()
	s := string(b)
	for i := 0; i+1 < len(oldNew); i += 2 {
		if n := strings.Count(s, oldNew[i]); n != 1 {
			t.Fatalf("edit: %q occurs %d times in\n%s", oldNew[i], n, s)
		}
		s = strings.Replace(s, oldNew[i], oldNew[i+1], 1)
	}
	return []byte(s)
}

// dropCapability removes capability id's entry from a file's capabilities.
func dropCapability(t *testing.T, b []byte, id string) []byte {
	t.Helper()
	lines := strings.SplitAfter(string(b), "\n")
	start := slices.Index(lines, "  - id: "+id+"\n")
	if start < 0 {
		t.Fatalf("no capability %s in\n%s", id, b)
	}
	end := start + 1
	for end < len(lines) && strings.HasPrefix(lines[end], "    ") {
		end++
	}
	return []byte(strings.Join(slices.Delete(lines, start, end), ""))
}

// story is the action types the journal holds under trace, in order.
func (e *filesEnv) story(t *testing.T, trace string) []string {
	t.Helper()
	var s []string
	for _, r := range e.activity(t, journal.Filter{TraceID: trace}) {
		s = append(s, r.ActionType)
	}
	return s
}

// checkStory checks the action types under trace, in order.
func (e *filesEnv) checkStory(t *testing.T, trace string, want ...string) {
	t.Helper()
	if diff := cmp.Diff(want, e.story(t, trace)); diff != "" {
		t.Errorf("journal under trace %s (-want +got):\n%s", trace, diff)
	}
}

// rows returns the rows of action under trace.
func (e *filesEnv) rows(t *testing.T, trace, action string) []plexus.Activity {
	t.Helper()
	return e.activity(t, journal.Filter{TraceID: trace, Type: action})
}

// checkRow checks that trace holds exactly one row of action, by actor,
// with target and at least the payload fields in want.
func (e *filesEnv) checkRow(t *testing.T, trace, action, actor, target string, want map[string]any) plexus.Activity {
	t.Helper()
	rows := e.rows(t, trace, action)
	if len(rows) != 1 {
		t.Fatalf("%d %s rows under trace %s, want 1: %+v", len(rows), action, trace, rows)
	}
	r := rows[0]
	if r.Actor != actor || r.Target != target {
		t.Errorf("%s: actor %q target %q, want %q %q", action, r.Actor, r.Target, actor, target)
	}
	checkPayload(t, r, want)
	return r
}

// checkPayload checks that row's payload holds the fields of want.
func checkPayload(t *testing.T, row plexus.Activity, want map[string]any) {
	t.Helper()
	got := map[string]any{}
	for k := range want {
		if v, ok := row.Payload[k]; ok {
			got[k] = v
		}
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("%s %s payload (-want +got):\n%s\nwhole payload: %v", row.ActionType, row.Target, diff, row.Payload)
	}
}

// status is GET /grants/status for decision id, as the agent asks it.
func (e *filesEnv) status(t *testing.T, id string) plexus.GrantStatusResponse {
	t.Helper()
	var s plexus.GrantStatusResponse
	if st := e.call(t, "GET", "/grants/status?pendingId="+id, session(e.sid), nil, &s); st != http.StatusOK {
		t.Fatalf("GET /grants/status %s: status %d", id, st)
	}
	return s
}

// resolved waits for the grant_resolved event of decision id.
func (e *filesEnv) resolved(t *testing.T, id string) plexus.GrantResolvedEvent {
	t.Helper()
	return eventWhere(t, e.events, plexus.EventGrantResolved, func(r plexus.GrantResolvedEvent) bool { return r.PendingID == id })
}

// revoked waits for the token_revoked event of jti.
func (e *filesEnv) revoked(t *testing.T, jti string) plexus.TokenRevokedEvent {
	t.Helper()
	return eventWhere(t, e.events, plexus.EventTokenRevoked, func(r plexus.TokenRevokedEvent) bool { return r.JTI == jti })
}

// write has claude write a note through capability id with tok.
func (e *filesEnv) write(t *testing.T, tok *plexus.ScopedToken, id string) (int, plexus.InvokeResponse) {
	t.Helper()
	if tok == nil {
		t.Fatalf("no token to call %s with", id)
	}
	st, resp, _ := e.invoke(t, tok.Token, plexus.InvokeRequest{ID: id, Input: map[string]any{"path": "files-test.md", "content": "written"}})
	return st, resp
}

// mustWrite checks that a write through id with tok works.
func (e *filesEnv) mustWrite(t *testing.T, tok *plexus.ScopedToken, id string) {
	t.Helper()
	if st, resp := e.write(t, tok, id); st != http.StatusOK || !resp.OK {
		t.Fatalf("invoke %s: status %d, %+v", id, st, resp)
	}
}

// refused checks that a write through id with tok is refused with code.
func (e *filesEnv) refused(t *testing.T, tok *plexus.ScopedToken, id string, code plexus.ErrorCode) {
	t.Helper()
	st, resp := e.write(t, tok, id)
	if resp.OK || resp.Error == nil || resp.Error.Code != code {
		t.Fatalf("invoke %s: status %d, %+v; want refused with %s", id, st, resp, code)
	}
}

// standing is the capabilities claude holds (GET /grants).
func (e *filesEnv) standing(t *testing.T) []string {
	t.Helper()
	var l plexus.GrantsListResponse
	if st := e.call(t, "GET", "/grants", session(e.sid), nil, &l); st != http.StatusOK {
		t.Fatalf("GET /grants: status %d", st)
	}
	var ids []string
	for _, g := range l.Grants {
		ids = append(ids, g.CapabilityID)
	}
	return ids
}

// checkApproved checks the agent's side of an approval of a: the event
// carries a token, the status says approved with a token, and the token's
// scopes are caps.
func (e *filesEnv) checkApproved(t *testing.T, a asked, caps ...string) *plexus.ScopedToken {
	t.Helper()
	ev := e.resolved(t, a.ID)
	if ev.Decision != plexus.StateApproved || ev.Token == nil {
		t.Fatalf("grant_resolved = %+v, want approved with a token", ev)
	}
	s := e.status(t, a.ID)
	if s.State != plexus.StateApproved || s.Token == nil {
		t.Fatalf("status = %+v, want approved with a token", s)
	}
	var scopes []string
	for _, sc := range ev.Token.Scopes {
		scopes = append(scopes, sc.ID)
	}
	if diff := cmp.Diff(caps, scopes); diff != "" {
		t.Errorf("token scopes (-want +got):\n%s", diff)
	}
	return ev.Token
}

// checkEnded checks that the status of a, approved, no longer hands out a
// token: what a granted has ended.
func (e *filesEnv) checkEnded(t *testing.T, a asked) {
	t.Helper()
	if s := e.status(t, a.ID); s.State != plexus.StateApproved || s.Token != nil {
		t.Errorf("status = %+v (token %+v), want approved without a token", s, s.Token)
	}
}

// checkUnresolved checks that a stays pending for the agent, with nothing
// granted.
func (e *filesEnv) checkUnresolved(t *testing.T, a asked) {
	t.Helper()
	if s := e.status(t, a.ID); s.State != plexus.StatePending || s.Token != nil {
		t.Errorf("status = %+v, want pending without a token", s)
	}
	if got := e.standing(t); len(got) != 0 {
		t.Errorf("claude holds %v, want nothing", got)
	}
}

// checkClosed checks the agent's side of a decided a that granted nothing.
func (e *filesEnv) checkClosed(t *testing.T, a asked, state, reason string) {
	t.Helper()
	if ev := e.resolved(t, a.ID); ev.Decision != state || ev.Token != nil {
		t.Errorf("grant_resolved = %+v, want %s without a token", ev, state)
	}
	if s := e.status(t, a.ID); s.State != state || s.Token != nil || s.Reason != reason {
		t.Errorf("status = %+v, want %s, reason %q, no token", s, state, reason)
	}
	if got := e.standing(t); len(got) != 0 {
		t.Errorf("claude holds %v, want nothing", got)
	}
}

// windowOf is the trust window capability id has in f.
func windowOf(t *testing.T, f *inbox.File, id string) string {
	t.Helper()
	for _, c := range f.Capabilities {
		if c.ID == id {
			w, err := inbox.FormatWindow(c.Window)
			if err != nil {
				t.Fatal(err)
			}
			return w
		}
	}
	t.Fatalf("%s is not in the file's capabilities", id)
	return ""
}

func capIDs(f *inbox.File) []string {
	var ids []string
	for _, c := range f.Capabilities {
		ids = append(ids, c.ID)
	}
	return ids
}

const (
	notesWrite = "portal.notes.write"
	docsWrite  = "portal.docs.write"
)

func TestFiles(t *testing.T) {
	failOnLeakedGoroutines(t)

	t.Run("ApproveByMove", func(t *testing.T) {
		e := newFilesEnv(t, "")
		a := e.ask(t, "", notesWrite)
		move(t, e.path(plexus.FolderInbox, a.ID), e.path(plexus.FolderActive, a.ID))

		f, _ := e.waitFile(t, plexus.FolderActive, a.ID, stateIs(plexus.StateApproved))
		tok := e.checkApproved(t, a, notesWrite)
		e.mustWrite(t, tok, notesWrite)

		e.checkStory(t, a.Trace, "grant.requested", "grant.approved", "token.minted", "invoke.started", "invoke.ok")
		e.checkRow(t, a.Trace, "grant.approved", plexus.ActorHuman, notesWrite, map[string]any{
			"via": plexus.ViaFile, "decidedBy": filesOwner, "pendingId": a.ID, "trustWindow": map[string]any{"kind": "1d"}})
		e.onlyIn(t, a.ID, plexus.FolderActive)
		if f.Via != plexus.ViaFile || f.DecidedBy != filesOwner || f.Decided.IsZero() || f.Problem != "" {
			t.Errorf("active file: via %q, decided_by %q, decided %v, problem %q", f.Via, f.DecidedBy, f.Decided, f.Problem)
		}
	})

	t.Run("ApproveByEditorSave", func(t *testing.T) {
		// An editor saves by writing a scratch file and renaming it onto
		// the real name; only that rename counts. Into active/, the inbox/
		// copy is removed afterwards (by the daemon, or the owner: either
		// finds it gone). The edit shortens the window, so the test also
		// shows the edited copy is the one applied.
		for _, tc := range []struct {
			name    string
			scratch func(id string) string
			inInbox bool // save in inbox/, then move the file to active/
		}{
			{"VimBackupNameInActive", func(id string) string { return inbox.FileName(id) + "~" }, false},
			{"EmacsAutoSaveNameInActive", func(id string) string { return "#" + inbox.FileName(id) + "#" }, false},
			{"GeditTempInActive", func(string) string { return ".goutputstream-7Q2KXZ" }, false},
			{"SavedInInboxThenMoved", func(id string) string { return inbox.FileName(id) + ".tmp" }, true},
		} {
			t.Run(tc.name, func(t *testing.T) {
				e := newFilesEnv(t, "")
				a := e.ask(t, "", notesWrite)
				orig := e.path(plexus.FolderInbox, a.ID)
				b, err := os.ReadFile(orig)
				if err != nil {
					t.Fatal(err)
				}
				b = edit(t, b, "window: 1d", "window: 1h")
				folder := plexus.FolderActive
				if tc.inInbox {
					folder = plexus.FolderInbox
				}
				tmp := filepath.Join(e.Home().Dir, folder, tc.scratch(a.ID))
				ownerWrite(t, tmp, b)
				move(t, tmp, e.path(folder, a.ID))
				if tc.inInbox {
					// Saved in inbox/, the edit decides nothing yet.
					e.settle(t)
					e.checkUnresolved(t, a)
					move(t, orig, e.path(plexus.FolderActive, a.ID))
				} else if err := os.Remove(orig); err != nil && !errors.Is(err, os.ErrNotExist) {
					t.Fatal(err)
				}

				f, _ := e.waitFile(t, plexus.FolderActive, a.ID, stateIs(plexus.StateApproved))
				tok := e.checkApproved(t, a, notesWrite)
				e.mustWrite(t, tok, notesWrite)
				e.checkStory(t, a.Trace, "grant.requested", "grant.approved", "token.minted", "invoke.started", "invoke.ok")
				e.checkRow(t, a.Trace, "grant.approved", plexus.ActorHuman, notesWrite, map[string]any{
					"via": plexus.ViaFile, "decidedBy": filesOwner, "trustWindow": map[string]any{"kind": "1h"}})
				e.onlyIn(t, a.ID, plexus.FolderActive)
				if w := windowOf(t, f, notesWrite); w != "1h" {
					t.Errorf("active file: window %s, want 1h", w)
				}
				if _, err := os.Lstat(tmp); !errors.Is(err, os.ErrNotExist) {
					t.Errorf("the editor's scratch file %s: %v, want gone (renamed)", tmp, err)
				}
			})
		}
	})

	t.Run("DenyByMove", func(t *testing.T) {
		e := newFilesEnv(t, "")
		a := e.ask(t, "", notesWrite)
		in, b := e.inboxFile(t, a.ID)
		ownerWrite(t, in, edit(t, b, `reason: ""`, `reason: not this week`))
		move(t, in, e.path(plexus.FolderRejected, a.ID))

		f, _ := e.waitFile(t, plexus.FolderRejected, a.ID, stateIs(plexus.StateDenied))
		e.checkClosed(t, a, plexus.StateDenied, "not this week")
		e.checkStory(t, a.Trace, "grant.requested", "grant.denied")
		e.checkRow(t, a.Trace, "grant.denied", plexus.ActorHuman, a.ID, map[string]any{
			"via": plexus.ViaFile, "decidedBy": filesOwner, "reason": "not this week", "capabilities": []any{notesWrite}})
		e.onlyIn(t, a.ID, plexus.FolderRejected)
		if f.Reason != "not this week" || f.Via != plexus.ViaFile || f.DecidedBy != filesOwner {
			t.Errorf("rejected file: reason %q, via %q, decided_by %q", f.Reason, f.Via, f.DecidedBy)
		}
	})

	t.Run("Withdraw", func(t *testing.T) {
		for _, tc := range []struct {
			name string
			act  func(t *testing.T, e *filesEnv, id string)
			why  string
		}{
			// After the grace period the absence is the owner's delete.
			{"DeletedFromInbox", func(t *testing.T, e *filesEnv, id string) {
				if err := os.Remove(e.path(plexus.FolderInbox, id)); err != nil {
					t.Fatal(err)
				}
			}, "its file was deleted from inbox/"},
			{"MovedToArchive", func(t *testing.T, e *filesEnv, id string) {
				move(t, e.path(plexus.FolderInbox, id), e.path(plexus.FolderArchive, id))
			}, "its file was moved to archive/"},
		} {
			t.Run(tc.name, func(t *testing.T) {
				e := newFilesEnv(t, "")
				a := e.ask(t, "", notesWrite)
				tc.act(t, e, a.ID)

				// Either way the decision's file ends in archive/, which
				// holds what ended, withdrawn included: a deleted file is
				// written there again, as withdrawn.
				f, _ := e.waitFile(t, plexus.FolderArchive, a.ID, stateIs(plexus.StateWithdrawn))
				e.checkClosed(t, a, plexus.StateWithdrawn, tc.why)
				e.checkStory(t, a.Trace, "grant.requested", "grant.withdrawn")
				e.checkRow(t, a.Trace, "grant.withdrawn", plexus.ActorHuman, a.ID, map[string]any{
					"via": plexus.ViaFile, "decidedBy": filesOwner, "reason": tc.why, "capabilities": []any{notesWrite}})
				e.onlyIn(t, a.ID, plexus.FolderArchive)
				if f.Via != plexus.ViaFile || f.DecidedBy != filesOwner || f.Reason != tc.why {
					t.Errorf("archived file: via %q, decided_by %q, reason %q", f.Via, f.DecidedBy, f.Reason)
				}
			})
		}
	})

	t.Run("NarrowBeforeApproval", func(t *testing.T) {
		e := newFilesEnv(t, "")
		a := e.ask(t, "Weekly review", notesWrite, docsWrite)
		in, b := e.inboxFile(t, a.ID)
		b = dropCapability(t, b, docsWrite)
		ownerWrite(t, in, edit(t, b, "window: 1d", "window: 1h"))
		move(t, in, e.path(plexus.FolderActive, a.ID))

		f, _ := e.waitFile(t, plexus.FolderActive, a.ID, stateIs(plexus.StateApproved))
		tok := e.checkApproved(t, a, notesWrite)
		e.mustWrite(t, tok, notesWrite)
		e.refused(t, tok, docsWrite, plexus.CodeGrantRequired)
		if got := e.standing(t); !slices.Equal(got, []string{notesWrite}) {
			t.Errorf("claude holds %v, want only %s", got, notesWrite)
		}
		e.checkStory(t, a.Trace, "grant.requested", "grant.approved", "token.minted", "invoke.started", "invoke.ok", "invoke.denied")
		e.checkRow(t, a.Trace, "grant.approved", plexus.ActorHuman, notesWrite, map[string]any{
			"via": plexus.ViaFile, "decidedBy": filesOwner, "trustWindow": map[string]any{"kind": "1h"}})
		e.onlyIn(t, a.ID, plexus.FolderActive)
		if got := capIDs(f); !slices.Equal(got, []string{notesWrite}) || windowOf(t, f, notesWrite) != "1h" {
			t.Errorf("active file: capabilities %v, window %s; want only %s for 1h", got, windowOf(t, f, notesWrite), notesWrite)
		}
	})

	t.Run("RefuseWidening", func(t *testing.T) {
		for _, tc := range []struct {
			name, old, new, problem string
		}{
			{"VerbAdded", "verbs: [write]", "verbs: [read, write]", notesWrite + ", verbs: read was not requested (asked: write)"},
			{"LongerWindow", "window: 1d", "window: 7d", notesWrite + ", window: 7d is longer than the 1d asked"},
			{"CapabilityAdded", `reason: ""`, "  - id: " + docsWrite + "\n    verbs: [write]\n    window: 1d\n" + `reason: ""`,
				docsWrite + ", capabilities: was not requested"},
		} {
			t.Run(tc.name, func(t *testing.T) {
				e := newFilesEnv(t, "")
				a := e.ask(t, "", notesWrite)
				in, b := e.inboxFile(t, a.ID)
				ownerWrite(t, in, edit(t, b, tc.old, tc.new))
				move(t, in, e.path(plexus.FolderActive, a.ID))

				f, _ := e.waitFile(t, plexus.FolderInbox, a.ID, func(f *inbox.File) bool { return f.Problem != "" })
				e.checkUnresolved(t, a)
				e.checkStory(t, a.Trace, "grant.requested", "inbox.refused")
				e.checkRow(t, a.Trace, "inbox.refused", plexus.ActorSystem, a.ID, map[string]any{
					"folder": plexus.FolderActive, "problem": f.Problem})
				e.onlyIn(t, a.ID, plexus.FolderInbox)
				if !strings.HasSuffix(f.Problem, "\n"+tc.problem) || f.State != plexus.StatePending {
					t.Errorf("refused file: state %q, problem %q; want pending, a problem ending %q", f.State, f.Problem, tc.problem)
				}
				// Rewritten from the gateway's record: the refused edit is gone.
				if len(f.Capabilities) != 1 || !slices.Equal(f.Capabilities[0].Verbs, []plexus.Verb{plexus.VerbWrite}) || windowOf(t, f, notesWrite) != "1d" {
					t.Errorf("refused file: capabilities %+v, want the request as asked", f.Capabilities)
				}

				// The owner can decide again: the file as it came back approves.
				move(t, in, e.path(plexus.FolderActive, a.ID))
				f, _ = e.waitFile(t, plexus.FolderActive, a.ID, stateIs(plexus.StateApproved))
				e.checkApproved(t, a, notesWrite)
				if f.Problem != "" {
					t.Errorf("approved file still says: %s", f.Problem)
				}
				e.checkStory(t, a.Trace, "grant.requested", "inbox.refused", "grant.approved", "token.minted")
			})
		}
	})

	t.Run("RevokeByFile", func(t *testing.T) {
		for _, tc := range []struct {
			name   string
			act    func(t *testing.T, e *filesEnv, id string)
			why    string
			folder string // where the file ends: "" for nowhere
		}{
			{"DeletedFromActive", func(t *testing.T, e *filesEnv, id string) {
				if err := os.Remove(e.path(plexus.FolderActive, id)); err != nil {
					t.Fatal(err)
				}
			}, "its file was deleted from active/", ""},
			{"MovedToArchive", func(t *testing.T, e *filesEnv, id string) {
				move(t, e.path(plexus.FolderActive, id), e.path(plexus.FolderArchive, id))
			}, "its file was moved from active/ to archive/", plexus.FolderArchive},
			{"MovedToRejected", func(t *testing.T, e *filesEnv, id string) {
				move(t, e.path(plexus.FolderActive, id), e.path(plexus.FolderRejected, id))
			}, "its file was moved from active/ to rejected/", plexus.FolderArchive},
		} {
			t.Run(tc.name, func(t *testing.T) {
				e := newFilesEnv(t, "")
				a := e.ask(t, "", notesWrite)
				move(t, e.path(plexus.FolderInbox, a.ID), e.path(plexus.FolderActive, a.ID))
				e.waitFile(t, plexus.FolderActive, a.ID, stateIs(plexus.StateApproved))
				tok := e.checkApproved(t, a, notesWrite)
				e.mustWrite(t, tok, notesWrite)

				tc.act(t, e, a.ID)
				reason := "revoked by the owner: " + tc.why
				if ev := e.revoked(t, tok.JTI); ev.Reason != reason {
					t.Errorf("token_revoked reason %q, want %q", ev.Reason, reason)
				}
				st, resp := e.write(t, tok, notesWrite)
				if st != http.StatusUnauthorized || resp.OK || resp.Error == nil || resp.Error.Code != plexus.CodeTokenRevoked {
					t.Errorf("invoke after revoke: status %d, %+v; want 401 token_revoked", st, resp)
				}
				if got := e.standing(t); len(got) != 0 {
					t.Errorf("claude holds %v after the revoke", got)
				}
				e.checkEnded(t, a)
				b := e.onlyIn(t, a.ID, tc.folder)
				e.checkStory(t, a.Trace, "grant.requested", "grant.approved", "token.minted", "invoke.started", "invoke.ok",
					"grant.revoked", "decision.revoked", "invoke.denied")
				e.checkRow(t, a.Trace, "grant.revoked", plexus.ActorHuman, notesWrite, map[string]any{
					"via": plexus.ViaFile, "reason": reason, "grantRemoved": true, "revokedJtis": []any{tok.JTI}})
				e.checkRow(t, a.Trace, "decision.revoked", plexus.ActorHuman, a.ID, map[string]any{
					"via": plexus.ViaFile, "decidedBy": filesOwner, "reason": reason, "grants": json.Number("1")})
				if tc.folder != "" {
					if f := parse(t, b); f.State != plexus.StateApproved || f.Ended != notesWrite+" revoked" {
						t.Errorf("archived file: state %q, ended %q; want approved, %q", f.State, f.Ended, notesWrite+" revoked")
					}
				}
			})
		}
	})

	t.Run("RevokeElsewhere", func(t *testing.T) {
		e := newFilesEnv(t, "")
		a := e.ask(t, "", notesWrite)
		move(t, e.path(plexus.FolderInbox, a.ID), e.path(plexus.FolderActive, a.ID))
		e.waitFile(t, plexus.FolderActive, a.ID, stateIs(plexus.StateApproved))
		tok := e.checkApproved(t, a, notesWrite)

		var rev plexus.RevokeResponse
		if st := e.call(t, "POST", "/grants/revoke", e.admin(), plexus.RevokeRequest{AgentID: "claude", CapabilityID: notesWrite}, &rev); st != http.StatusOK || !rev.GrantRemoved {
			t.Fatalf("revoke: status %d, %+v", st, rev)
		}
		e.revoked(t, tok.JTI)
		f, _ := e.waitFile(t, plexus.FolderArchive, a.ID, nil)
		e.refused(t, tok, notesWrite, plexus.CodeTokenRevoked)
		e.checkEnded(t, a)
		e.checkStory(t, a.Trace, "grant.requested", "grant.approved", "token.minted", "grant.revoked", "inbox.moved", "invoke.denied")
		e.checkRow(t, a.Trace, "grant.revoked", plexus.ActorHuman, notesWrite, map[string]any{"via": plexus.ViaAdminAPI})
		r := e.checkRow(t, a.Trace, "inbox.moved", plexus.ActorSystem, a.ID, map[string]any{
			"from": plexus.FolderActive, "to": plexus.FolderArchive})
		if why, _ := r.Payload["why"].(string); !strings.Contains(why, notesWrite+" revoked") {
			t.Errorf("inbox.moved why = %q", why)
		}
		e.onlyIn(t, a.ID, plexus.FolderArchive)
		if f.State != plexus.StateApproved || f.Ended != notesWrite+" revoked" {
			t.Errorf("archived file: state %q, ended %q; want approved, %q", f.State, f.Ended, notesWrite+" revoked")
		}
	})

	t.Run("Expire", func(t *testing.T) {
		e := newFilesEnv(t, "")
		a := e.ask(t, "", notesWrite)
		e.clock.Advance(24*time.Hour + time.Second)
		if err := e.Gateway().Sweep(context.Background()); err != nil {
			t.Fatal(err)
		}

		f, _ := e.waitFile(t, plexus.FolderArchive, a.ID, stateIs(plexus.StateExpired))
		// The session that asked ended before the request did (sessions
		// last 12h, requests 24h), and a dead session is told nothing: the
		// agent handshakes again and asks for the status.
		var hs plexus.HandshakeResponse
		if st := e.call(t, "POST", "/link/handshake", bearer(e.pat), plexus.HandshakeRequest{Client: &plexus.ClientInfo{Name: "test"}}, &hs); st != http.StatusOK {
			t.Fatalf("handshake: status %d", st)
		}
		e.sid = hs.SessionID
		if s := e.status(t, a.ID); s.State != plexus.StateExpired || s.Token != nil {
			t.Errorf("status = %+v, want expired without a token", s)
		}
		if got := e.standing(t); len(got) != 0 {
			t.Errorf("claude holds %v, want nothing", got)
		}
		e.checkStory(t, a.Trace, "grant.requested", "grant.expired", "inbox.moved")
		e.checkRow(t, a.Trace, "grant.expired", plexus.ActorSystem, a.ID, map[string]any{"capabilities": []any{notesWrite}})
		e.checkRow(t, a.Trace, "inbox.moved", plexus.ActorSystem, a.ID, map[string]any{
			"from": plexus.FolderInbox, "to": plexus.FolderArchive})
		e.onlyIn(t, a.ID, plexus.FolderArchive)
		if f.Via != plexus.ViaSystem {
			t.Errorf("archived file: via %q, want system", f.Via)
		}
	})

	t.Run("OnceUsed", func(t *testing.T) {
		e := newFilesEnv(t, "")
		a := e.ask(t, "", notesWrite)
		in, b := e.inboxFile(t, a.ID)
		ownerWrite(t, in, edit(t, b, "window: 1d", "window: once"))
		move(t, in, e.path(plexus.FolderActive, a.ID))
		e.waitFile(t, plexus.FolderActive, a.ID, stateIs(plexus.StateApproved))
		tok := e.checkApproved(t, a, notesWrite)
		e.mustWrite(t, tok, notesWrite)

		// The use itself hints the reconciler: no forced look is needed.
		f, _ := e.waitFile(t, plexus.FolderArchive, a.ID, nil)
		e.refused(t, tok, notesWrite, plexus.CodeGrantRequired)
		e.checkEnded(t, a)
		// The use hints the reconciler, so the file may move before the
		// call's own rows are written: anywhere after grant.used and before
		// the second call's denial. Put it where the want expects it.
		story := e.story(t, a.Trace)
		if i, used := slices.Index(story, "inbox.moved"), slices.Index(story, "grant.used"); i > used && used >= 0 && i < len(story)-1 {
			story = slices.Delete(story, i, i+1)
			story = slices.Insert(story, len(story)-1, "inbox.moved")
		}
		want := []string{"grant.requested", "grant.approved", "token.minted", "grant.used", "invoke.started", "invoke.ok", "inbox.moved", "invoke.denied"}
		if diff := cmp.Diff(want, story); diff != "" {
			t.Errorf("journal under trace %s (-want +got):\n%s", a.Trace, diff)
		}
		e.checkRow(t, a.Trace, "grant.approved", plexus.ActorHuman, notesWrite, map[string]any{
			"via": plexus.ViaFile, "trustWindow": map[string]any{"kind": "once"}})
		e.checkRow(t, a.Trace, "inbox.moved", plexus.ActorSystem, a.ID, map[string]any{
			"from": plexus.FolderActive, "to": plexus.FolderArchive})
		e.onlyIn(t, a.ID, plexus.FolderArchive)
		if f.State != plexus.StateApproved || f.Ended != notesWrite+" used" || windowOf(t, f, notesWrite) != "once" {
			t.Errorf("archived file: state %q, ended %q, window %s; want approved, %q, once", f.State, f.Ended, windowOf(t, f, notesWrite), notesWrite+" used")
		}
	})

	t.Run("WindowEnded", func(t *testing.T) {
		e := newFilesEnv(t, "")
		a := e.ask(t, "", notesWrite)
		in, b := e.inboxFile(t, a.ID)
		ownerWrite(t, in, edit(t, b, "window: 1d", "window: 1h"))
		move(t, in, e.path(plexus.FolderActive, a.ID))
		e.waitFile(t, plexus.FolderActive, a.ID, stateIs(plexus.StateApproved))
		tok := e.checkApproved(t, a, notesWrite)

		// No event marks the end of a window: the periodic full look finds
		// it, which Sync stands in for.
		e.clock.Advance(time.Hour + time.Second)
		e.settle(t)
		f, _ := e.waitFile(t, plexus.FolderArchive, a.ID, nil)
		e.refused(t, tok, notesWrite, plexus.CodeTokenExpired)
		e.checkEnded(t, a)
		if got := e.standing(t); len(got) != 0 {
			t.Errorf("claude holds %v after the window", got)
		}
		e.checkStory(t, a.Trace, "grant.requested", "grant.approved", "token.minted", "inbox.moved")
		e.checkRow(t, a.Trace, "inbox.moved", plexus.ActorSystem, a.ID, map[string]any{
			"from": plexus.FolderActive, "to": plexus.FolderArchive})
		e.onlyIn(t, a.ID, plexus.FolderArchive)
		if want := notesWrite + " its window ended"; f.State != plexus.StateApproved || f.Ended != want {
			t.Errorf("archived file: state %q, ended %q; want approved, %q", f.State, f.Ended, want)
		}
	})

	t.Run("Forged", func(t *testing.T) {
		for _, tc := range []struct {
			name     string
			old, new func(a asked) string
		}{
			{"Agent", func(asked) string { return "agent: claude" }, func(asked) string { return "agent: mallory" }},
			{"ID", func(a asked) string { return "\nid: " + a.ID }, func(asked) string { return "\nid: " + auth.NewID(inbox.IDPrefix) }},
			{"TraceID", func(a asked) string { return "trace_id: " + a.Trace }, func(asked) string { return "trace_id: " + auth.NewTraceID() }},
			{"Type", func(asked) string { return "type: grant" }, func(asked) string { return "type: install" }},
		} {
			t.Run(tc.name, func(t *testing.T) {
				e := newFilesEnv(t, "")
				a := e.ask(t, "", notesWrite)
				in, b := e.inboxFile(t, a.ID)
				changed := tc.new(a)
				ownerWrite(t, in, edit(t, b, tc.old(a), changed))
				move(t, in, e.path(plexus.FolderActive, a.ID))

				e.waitRaw(t, plexus.FolderRejected, a.ID, nil)
				const why = "its decision file was altered to claim another decision"
				e.checkClosed(t, a, plexus.StateDenied, why)
				e.checkStory(t, a.Trace, "grant.requested", "grant.denied", "inbox.forged")
				e.checkRow(t, a.Trace, "grant.denied", plexus.ActorSystem, a.ID, map[string]any{
					"via": plexus.ViaSystem, "decidedBy": plexus.ActorSystem, "reason": why})
				r := e.checkRow(t, a.Trace, "inbox.forged", plexus.ActorSystem, a.ID, map[string]any{"folder": plexus.FolderActive})
				problem, _ := r.Payload["problem"].(string)
				raw := e.onlyIn(t, a.ID, plexus.FolderRejected)
				// Kept as the owner's editor left it, with the reason.
				if !strings.Contains(string(raw), changed) || !strings.Contains(string(raw), inbox.NoteHeading) || problem == "" {
					t.Errorf("rejected file lacks the forged text or the note (problem %q):\n%s", problem, raw)
				}
				if !strings.Contains(string(raw), strings.Split(problem, "\n")[0]) {
					t.Errorf("rejected file does not say %q:\n%s", problem, raw)
				}
			})
		}
	})

	t.Run("Malformed", func(t *testing.T) {
		e := newFilesEnv(t, "")
		a := e.ask(t, "", notesWrite)
		in, b := e.inboxFile(t, a.ID)
		broken := edit(t, b, "verbs: [write]\n", "verbs: [write\n", `reason: ""`, `reason: ""`+"\nmy_note: asked Bob on Monday")
		// Edited under a scratch name and moved straight into active/, so
		// the broken text is never seen sitting in inbox/ (BrokenInInbox).
		scratch := filepath.Join(e.Home().Inbox, "."+a.ID+".md.swp")
		move(t, in, scratch)
		ownerWrite(t, scratch, broken)
		move(t, scratch, e.path(plexus.FolderActive, a.ID))

		e.waitRaw(t, plexus.FolderInbox, a.ID, func(b []byte) bool { return strings.Contains(string(b), inbox.NoteHeading) })
		e.checkUnresolved(t, a)
		e.checkStory(t, a.Trace, "grant.requested", "inbox.refused")
		r := e.checkRow(t, a.Trace, "inbox.refused", plexus.ActorSystem, a.ID, map[string]any{"folder": plexus.FolderActive})
		if p, _ := r.Payload["problem"].(string); !strings.HasPrefix(p, "this file could not be read, so nothing was approved: ") {
			t.Errorf("inbox.refused problem = %q", p)
		}
		raw := e.onlyIn(t, a.ID, plexus.FolderInbox)
		// The owner's text is all there, with the note added.
		if got := strings.Replace(string(raw), "verbs: [write\n", "", 1); !strings.Contains(string(raw), "verbs: [write\n") ||
			!strings.Contains(got, "my_note: asked Bob on Monday") {
			t.Errorf("the owner's text was not kept:\n%s", raw)
		}
		if _, err := inbox.Parse(raw); err == nil {
			t.Error("the annotated file parses: the daemon changed the owner's frontmatter")
		}

		// Fixed, the same file approves; the note does not get in the way.
		ownerWrite(t, in, edit(t, raw, "verbs: [write\n", "verbs: [write]\n"))
		move(t, in, e.path(plexus.FolderActive, a.ID))
		e.waitFile(t, plexus.FolderActive, a.ID, stateIs(plexus.StateApproved))
		e.checkApproved(t, a, notesWrite)
		e.checkStory(t, a.Trace, "grant.requested", "inbox.refused", "grant.approved", "token.minted")
	})

	t.Run("UnknownID", func(t *testing.T) {
		e := newFilesEnv(t, "")
		id := auth.NewID(inbox.IDPrefix)
		text := "---\nplexus: decision/1\nid: " + id + "\ntype: grant\nstate: pending\nagent: claude\n---\n\nplease approve me\n"
		ownerWrite(t, e.path(plexus.FolderActive, id), []byte(text))

		e.waitRaw(t, plexus.FolderRejected, id, nil)
		raw := e.onlyIn(t, id, plexus.FolderRejected)
		if !strings.Contains(string(raw), "please approve me") || !strings.Contains(string(raw), "Plexus never put up a decision "+id) {
			t.Errorf("rejected file:\n%s", raw)
		}
		rows := e.activity(t, journal.Filter{Type: "inbox.unknown"})
		if len(rows) != 1 || rows[0].Actor != plexus.ActorSystem || rows[0].Target != id {
			t.Fatalf("inbox.unknown rows = %+v", rows)
		}
		checkPayload(t, rows[0], map[string]any{"folder": plexus.FolderActive, "movedTo": plexus.FolderRejected + "/" + inbox.FileName(id)})
		if got := e.activity(t, journal.Filter{Type: "grant."}); len(got) != 0 {
			t.Errorf("grant rows: %+v", got)
		}
		if got := e.standing(t); len(got) != 0 {
			t.Errorf("claude holds %v", got)
		}
	})

	t.Run("DecidedWhileDown", func(t *testing.T) {
		e := newFilesEnv(t, "")
		// An earlier decision gives the agent an event to resume after.
		first := e.ask(t, "", docsWrite)
		if st := e.call(t, "POST", "/admin/api/pending/"+first.ID+"/approve", e.admin(), plexus.DecideRequest{}, nil); st != http.StatusOK {
			t.Fatalf("approve %s: status %d", first.ID, st)
		}
		var last string
		for {
			ev := waitEvent(t, e.events, plexus.EventGrantResolved)
			if strings.Contains(ev.Data, first.ID) {
				last = ev.ID
				break
			}
		}
		a := e.ask(t, "", notesWrite)
		e.stop()
		move(t, e.path(plexus.FolderInbox, a.ID), e.path(plexus.FolderActive, a.ID))

		home := e.Home().Dir
		e.events = nil
		for range 2 { // a second restart applies nothing again
			e.testDaemon = startFilesDaemon(t, home, e.clock)
			e.waitFile(t, plexus.FolderActive, a.ID, stateIs(plexus.StateApproved))
			e.onlyIn(t, a.ID, plexus.FolderActive)
			if n := len(e.rows(t, a.Trace, "grant.approved")); n != 1 {
				t.Fatalf("%d grant.approved rows, want exactly 1", n)
			}
			if e.events == nil {
				e.events = e.openEvents(t, e.sid, last)
				if ev := e.resolved(t, a.ID); ev.Decision != plexus.StateApproved {
					t.Errorf("replayed grant_resolved = %+v", ev)
				}
				s := e.status(t, a.ID)
				if s.State != plexus.StateApproved || s.Token == nil {
					t.Fatalf("status = %+v, want approved with a token", s)
				}
				e.mustWrite(t, s.Token, notesWrite)
			}
			e.stop()
		}
		e.checkStory(t, a.Trace, "grant.requested", "grant.approved", "token.minted", "invoke.started", "invoke.ok")
		e.checkRow(t, a.Trace, "grant.approved", plexus.ActorHuman, notesWrite, map[string]any{"via": plexus.ViaFile, "decidedBy": filesOwner})
	})

	t.Run("OwnerNotesKept", func(t *testing.T) {
		e := newFilesEnv(t, "")
		a := e.ask(t, "", notesWrite)
		in, b := e.inboxFile(t, a.ID)
		const note = "my_note: asked Bob on Monday"
		ownerWrite(t, in, edit(t, b, `reason: ""`, `reason: ""`+"\n"+note, "window: 1d", "window: 1h"))
		move(t, in, e.path(plexus.FolderActive, a.ID))

		f, raw := e.waitFile(t, plexus.FolderActive, a.ID, stateIs(plexus.StateApproved))
		e.checkApproved(t, a, notesWrite)
		if !strings.Contains(string(raw), "\n"+note+"\n") || windowOf(t, f, notesWrite) != "1h" || f.Notes.Len() != 1 {
			t.Errorf("the approved file lost the owner's note or the narrowing:\n%s", raw)
		}
	})

	t.Run("BrokenInInbox", func(t *testing.T) {
		e := newFilesEnv(t, "")
		a := e.ask(t, "", notesWrite)
		in, b := e.inboxFile(t, a.ID)
		broken := edit(t, b, "verbs: [write]\n", "verbs: [write\n")
		ownerWrite(t, in, broken)

		// Once the file has been quiet for the grace period, the problem
		// is written into it, the owner's text kept; nothing is decided.
		raw := e.waitRaw(t, plexus.FolderInbox, a.ID, func(b []byte) bool { return strings.Contains(string(b), inbox.NoteHeading) })
		if !strings.Contains(string(raw), "verbs: [write\n") || !strings.Contains(string(raw), "moving it would approve nothing") {
			t.Errorf("annotated file:\n%s", raw)
		}
		e.checkUnresolved(t, a)
		e.settle(t)
		e.checkStory(t, a.Trace, "grant.requested", "inbox.unreadable")
		e.checkRow(t, a.Trace, "inbox.unreadable", plexus.ActorSystem, a.ID, map[string]any{"folder": plexus.FolderInbox})
		if err := e.Inbox().Sync(context.Background()); err != nil {
			t.Fatal(err)
		}
		e.checkStory(t, a.Trace, "grant.requested", "inbox.unreadable") // journaled once

		// Put right and moved, it approves.
		ownerWrite(t, in, edit(t, raw, "verbs: [write\n", "verbs: [write]\n"))
		move(t, in, e.path(plexus.FolderActive, a.ID))
		e.waitFile(t, plexus.FolderActive, a.ID, stateIs(plexus.StateApproved))
		e.checkApproved(t, a, notesWrite)
	})

	t.Run("NeverOverwriteOwner", func(t *testing.T) {
		e := newFilesEnv(t, "")
		a := e.ask(t, "", notesWrite)
		in, b := e.inboxFile(t, a.ID)
		const note = "owner_note: ask Bob before approving"
		ownerWrite(t, in, edit(t, b, `reason: ""`, `reason: ""`+"\n"+note))
		e.settle(t)
		if s := e.status(t, a.ID); s.State != plexus.StatePending {
			t.Fatalf("an edit in inbox/ decided: %+v", s)
		}

		if st := e.call(t, "POST", "/admin/api/pending/"+a.ID+"/approve", e.admin(), plexus.DecideRequest{}, nil); st != http.StatusOK {
			t.Fatalf("approve: status %d", st)
		}
		tok := e.checkApproved(t, a, notesWrite)

		// The daemon moves the owner's file, as the owner wrote it, with a
		// note; it does not render over it.
		e.waitRaw(t, plexus.FolderActive, a.ID, nil)
		raw := e.onlyIn(t, a.ID, plexus.FolderActive)
		e.mustWrite(t, tok, notesWrite)
		f := parse(t, raw)
		if !strings.Contains(string(raw), note) || f.State != plexus.StatePending ||
			!strings.Contains(string(raw), "this decision is now approved via admin-api") ||
			!strings.Contains(string(raw), "your edits of this file were not applied") {
			t.Errorf("active file:\n%s", raw)
		}
		e.checkStory(t, a.Trace, "grant.requested", "grant.approved", "token.minted", "inbox.moved", "invoke.started", "invoke.ok")
		e.checkRow(t, a.Trace, "grant.approved", plexus.ActorHuman, notesWrite, map[string]any{"via": plexus.ViaAdminAPI, "decidedBy": plexus.ActorHuman})
		e.checkRow(t, a.Trace, "inbox.moved", plexus.ActorSystem, a.ID, map[string]any{"from": plexus.FolderInbox, "to": plexus.FolderActive})
	})

	t.Run("Notify", func(t *testing.T) {
		home := filepath.Join(t.TempDir(), "home")
		if _, err := scaffold.Init(home, scaffold.InitOptions{NewConnectionKey: auth.NewConnectionKey}); err != nil {
			t.Fatal(err)
		}
		out := filepath.Join(t.TempDir(), "notified.txt")
		cfgPath := filepath.Join(home, scaffold.FileAuthConfig)
		b, err := os.ReadFile(cfgPath)
		if err != nil {
			t.Fatal(err)
		}
		var cfg map[string]any
		if err := json.Unmarshal(b, &cfg); err != nil {
			t.Fatal(err)
		}
		cfg["notify"] = []string{"/bin/sh", "-c", "printf '%s\\n' \"$1\" >> '" + out + "'", "sh"}
		if b, err = json.Marshal(cfg); err != nil {
			t.Fatal(err)
		}
		ownerWrite(t, cfgPath, b)

		e := newFilesEnv(t, home)
		var readTok plexus.ScopedToken
		if st := e.call(t, "PUT", "/grants", session(e.sid), map[string]any{"grants": map[string]any{"portal.notes.read": "allow"}}, &readTok); st != http.StatusOK {
			t.Fatalf("read grant: status %d", st)
		}
		a := e.ask(t, "", notesWrite)
		e.settle(t) // a look that finds the file written notifies nobody again
		b2 := e.ask(t, "", docsWrite)
		// Notifications run one at a time, in order: once the second is
		// there, a repeat of the first would be too.
		var lines []string
		waitFor(t, 10*time.Second, "the notifications", holds(func() bool {
			b, _ := os.ReadFile(out)
			lines = strings.Split(strings.TrimSuffix(string(b), "\n"), "\n")
			return strings.Contains(string(b), b2.ID)
		}))
		want := []string{
			"claude wants to WRITE Write a file in notes — “save the meeting notes” (" + a.ID + ")",
			"claude wants to WRITE Write a file in docs — “save the meeting notes” (" + b2.ID + ")",
		}
		if diff := cmp.Diff(want, lines); diff != "" {
			t.Errorf("notifications (-want +got):\n%s", diff)
		}
		for name, secret := range map[string]string{"PAT": e.pat, "token": readTok.Token, "connection-key": e.key} {
			if secret == "" || strings.Contains(strings.Join(lines, "\n"), secret) {
				t.Errorf("the notification holds the %s (or it is empty)", name)
			}
		}
	})
}
