package inbox_test

// The reconciler over a real journal, with a stand-in for the gateway's
// decision function, for states the daemon reaches only through a crash or
// a race that a test cannot time (the crash tests find them at random).

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/plexus-gw/plexus"
	"github.com/plexus-gw/plexus/inbox"
	"github.com/plexus-gw/plexus/internal/plexustest"
	"github.com/plexus-gw/plexus/journal"
)

// approveOnly is the gateway's decision function reduced to approving:
// it commits the approval and grants nothing, as if the grant had ended at
// once (used, or replaced by a later decision).
type approveOnly struct {
	db    *journal.DB
	calls int
}

func (a *approveOnly) Decide(ctx context.Context, d plexus.Decision) (plexus.Pending, error) {
	a.calls++
	var out plexus.Pending
	err := a.db.Update(ctx, true, func(tx plexus.StateTx) error {
		p, err := tx.Pending(d.PendingID)
		if err != nil {
			return err
		}
		if p.State != plexus.StatePending || !d.Approve {
			return plexus.Errorf(plexus.CodeConflict, "approveOnly: %s is %s", p.ID, p.State)
		}
		now := time.Now().UTC()
		p.State, p.DecidedAt, p.DecidedBy, p.Via = plexus.StateApproved, &now, d.DecidedBy, d.Via
		out = *p
		return tx.PutPending(p)
	})
	return out, err
}

func (a *approveOnly) RevokeDecision(context.Context, string, string, string, string) (int, error) {
	return 0, errors.New("approveOnly: no revocation expected")
}

// reconcileHome is a scaffolded home (the four decision folders among the
// rest) and its journal.
func reconcileHome(t *testing.T) (string, *journal.DB) {
	t.Helper()
	home := plexustest.TempHome(t)
	return home.Dir, plexustest.MustOpenHomeJournal(t, home, nil)
}

// reconcilePending is a write grant put up at now; approved (as if by a
// move into active/) when decided.
func reconcilePending(now time.Time, decided bool) plexus.Pending {
	p := plexus.Pending{ID: "pend_01JDX3K9Q8M2V7T4R6W5Y0Z1AB", Kind: plexus.PendingGrant, AgentID: "claude", SessionID: "sess_1",
		State: plexus.StatePending, CreatedAt: now, ExpiresAt: now.Add(time.Hour), TraceID: "01JDX3K9Q8M2V7T4R6W5Y0Z1AC",
		Items: []plexus.PendingItem{{CapabilityID: "portal.notes.write", Verbs: []plexus.Verb{plexus.VerbWrite},
			TrustWindow: plexus.TrustWindow{Kind: plexus.Window1d}, Provenance: plexus.ProvenanceFirstParty,
			Sensitivity: plexus.SensitivityElevated}},
		Purpose: "write the weekly summary"}
	if decided {
		at := now.Add(time.Minute)
		p.State, p.DecidedAt, p.DecidedBy, p.Via = plexus.StateApproved, &at, "owner", plexus.ViaFile
	}
	return p
}

// putLaterGrant stores a later decision's grant of p's capability: p's own
// grant, if it had one, is replaced.
func putLaterGrant(tx plexus.StateTx, now time.Time) error {
	return tx.PutGrant(&plexus.Grant{ID: "grt_later", PendingID: "pend_01JDX3K9Q8M2V7T4R6W5Y0Z1AD",
		StandingGrant: plexus.StandingGrant{AgentID: "claude", CapabilityID: "portal.notes.write", Verbs: []plexus.Verb{plexus.VerbWrite},
			Provenance: plexus.ProvenanceFirstParty, GrantedAt: now, ExpiresAt: now.Add(24 * time.Hour),
			TrustWindow: plexus.TrustWindow{Kind: plexus.Window1d}, Standing: true}})
}

// seedCrashState puts the state a crash left behind: p in the journal with
// rec as its file's record (and whatever more does), and files on disk.
func seedCrashState(t *testing.T, home string, db *journal.DB, p plexus.Pending, rec plexus.DecisionFile,
	files map[string][]byte, more func(tx plexus.StateTx) error) {
	t.Helper()
	for folder, b := range files {
		if err := os.WriteFile(filepath.Join(home, folder, inbox.FileName(p.ID)), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	err := db.Update(context.Background(), true, func(tx plexus.StateTx) error {
		if err := tx.PutPending(&p); err != nil {
			return err
		}
		if more != nil {
			if err := more(tx); err != nil {
				return err
			}
		}
		return tx.PutDecisionFile(&rec)
	})
	if err != nil {
		t.Fatal(err)
	}
}

// reconcileOnce runs a reconciler over home until its first full pass is
// over.
func reconcileOnce(t *testing.T, home string, db *journal.DB, dec inbox.Decider) {
	t.Helper()
	r, err := inbox.New(inbox.Config{Home: home, Owner: func() string { return "owner" }}, db, dec)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- r.Run(ctx) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	}()
	if err := r.Sync(ctx); err != nil {
		t.Fatal(err)
	}
}

// checkFiled requires p's file in folder only, written as approved with no
// problem, recorded there, and no inbox.refused row.
func checkFiled(t *testing.T, home string, db *journal.DB, id, folder string) []byte {
	t.Helper()
	ctx := context.Background()
	for _, f := range []string{plexus.FolderInbox, plexus.FolderActive, plexus.FolderRejected, plexus.FolderArchive} {
		if _, err := os.Stat(filepath.Join(home, f, inbox.FileName(id))); f != folder && !os.IsNotExist(err) {
			t.Errorf("%s/%s: %v, want none", f, inbox.FileName(id), err)
		}
	}
	got, err := os.ReadFile(filepath.Join(home, folder, inbox.FileName(id)))
	if err != nil {
		t.Fatal(err)
	}
	f, err := inbox.Parse(got)
	if err != nil || f.State != plexus.StateApproved || f.Problem != "" || bytes.Contains(got, []byte("could not apply")) {
		t.Errorf("%s/%s: state %q, problem %q, %v; want approved and no problem:\n%s", folder, inbox.FileName(id), f.State, f.Problem, err, got)
	}
	var rec *plexus.DecisionFile
	if err := db.View(ctx, func(tx plexus.StateTx) error { rec, err = tx.DecisionFile(id); return err }); err != nil {
		t.Fatal(err)
	}
	if rec.Folder != folder || rec.Sum != inbox.Sum(got) {
		t.Errorf("record: folder %q, sum matches %v; want %s, true", rec.Folder, rec.Sum == inbox.Sum(got), folder)
	}
	rows, err := db.Activity(ctx, journal.Filter{})
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range rows {
		if a.ActionType == "inbox.refused" {
			t.Errorf("journaled %s: %v", a.ActionType, a.Payload)
		}
	}
	return got
}

// TestReconcileMovedFileOfEndedApproval: the owner moved a decision's file
// into active/ and it was approved, but its grant ended before the daemon
// filed it (a SIGKILL between the decision's commit and the file's
// placement, then a later approval of the same capability; or a once grant
// used at once). The file goes to archive/ written as approved, recorded
// there, and nothing is journaled as refused: it was this move that
// approved it.
func TestReconcileMovedFileOfEndedApproval(t *testing.T) {
	for _, tc := range []struct {
		name    string
		decided bool // the approval committed before the reconciler looks
	}{
		{"DecidedBeforeACrash", true},
		{"EndedAtOnce", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			home, db := reconcileHome(t)
			now := time.Now().UTC().Truncate(time.Second)
			p := reconcilePending(now, tc.decided)
			// The file the daemon wrote in inbox/, which the owner moved
			// to active/.
			b, err := inbox.Render(reconcilePending(now, false), inbox.RenderOptions{})
			if err != nil {
				t.Fatal(err)
			}
			seedCrashState(t, home, db, p, plexus.DecisionFile{PendingID: p.ID, Folder: plexus.FolderInbox, Sum: inbox.Sum(b), WrittenAt: now},
				map[string][]byte{plexus.FolderActive: b}, func(tx plexus.StateTx) error { return putLaterGrant(tx, now) })

			dec := &approveOnly{db: db}
			reconcileOnce(t, home, db, dec)
			if want := map[bool]int{true: 0, false: 1}[tc.decided]; dec.calls != want {
				t.Errorf("Decide called %d times, want %d", dec.calls, want)
			}
			checkFiled(t, home, db, p.ID, plexus.FolderArchive)
		})
	}
}

// TestReconcileLeftBehindAfterRefiling: the daemon filed an approval whose
// grant a later one replaced from active/ into archive/, recorded that, and
// was killed before it removed the copy in active/. The next start removes
// that copy and leaves the filed one as it is: no refusal, no note.
func TestReconcileLeftBehindAfterRefiling(t *testing.T) {
	home, db := reconcileHome(t)
	now := time.Now().UTC().Truncate(time.Second)
	p := reconcilePending(now, true)
	old, err := inbox.Render(p, inbox.RenderOptions{})
	if err != nil {
		t.Fatal(err)
	}
	filed, err := inbox.Render(p, inbox.RenderOptions{Ended: "portal.notes.write replaced by a later decision"})
	if err != nil {
		t.Fatal(err)
	}
	// As put records it: the new place, and the copy it replaced and was
	// about to remove when the daemon was killed.
	seedCrashState(t, home, db, p, plexus.DecisionFile{PendingID: p.ID, Folder: plexus.FolderArchive, Sum: inbox.Sum(filed),
		Prev: []plexus.FilePlace{{Folder: plexus.FolderActive, Sum: inbox.Sum(old)}}, WrittenAt: now},
		map[string][]byte{plexus.FolderActive: old, plexus.FolderArchive: filed},
		func(tx plexus.StateTx) error { return putLaterGrant(tx, now) })

	dec := &approveOnly{db: db}
	reconcileOnce(t, home, db, dec)
	if dec.calls != 0 {
		t.Errorf("Decide called %d times, want 0", dec.calls)
	}
	if got := checkFiled(t, home, db, p.ID, plexus.FolderArchive); !bytes.Equal(got, filed) {
		t.Errorf("archive/%s was rewritten:\n%s", inbox.FileName(p.ID), got)
	}
}

// TestReconcileLeftBehindAfterRefusal: the daemon refused a move into
// active/ (the file was sent back to inbox/ with the problem, and that was
// recorded) and was killed before it removed the owner's copy in active/.
// That copy is the refused move, already answered: the next start removes
// it and approves nothing, even though the file itself would approve.
func TestReconcileLeftBehindAfterRefusal(t *testing.T) {
	home, db := reconcileHome(t)
	now := time.Now().UTC().Truncate(time.Second)
	p := reconcilePending(now, false)
	moved, err := inbox.Render(p, inbox.RenderOptions{})
	if err != nil {
		t.Fatal(err)
	}
	refused, err := inbox.Render(p, inbox.RenderOptions{Note: "this decision could not be applied, so nothing changed: capability offline"})
	if err != nil {
		t.Fatal(err)
	}
	seedCrashState(t, home, db, p, plexus.DecisionFile{PendingID: p.ID, Folder: plexus.FolderInbox, Sum: inbox.Sum(refused),
		Prev: []plexus.FilePlace{{Folder: plexus.FolderActive, Sum: inbox.Sum(moved)}}, WrittenAt: now},
		map[string][]byte{plexus.FolderActive: moved, plexus.FolderInbox: refused}, nil)

	dec := &approveOnly{db: db}
	reconcileOnce(t, home, db, dec)
	reconcileOnce(t, home, db, dec) // a later start forgets the leftover
	if dec.calls != 0 {
		t.Errorf("Decide called %d times: a refused move was applied after the crash", dec.calls)
	}
	if _, err := os.Stat(filepath.Join(home, plexus.FolderActive, inbox.FileName(p.ID))); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the refused move's copy is still in active/ (%v)", err)
	}
	if got, err := os.ReadFile(filepath.Join(home, plexus.FolderInbox, inbox.FileName(p.ID))); err != nil || !bytes.Equal(got, refused) {
		t.Errorf("inbox/ copy changed (%v):\n%s", err, got)
	}
	var rec *plexus.DecisionFile
	if err := db.View(context.Background(), func(tx plexus.StateTx) error {
		var err error
		rec, err = tx.DecisionFile(p.ID)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	if rec.Folder != plexus.FolderInbox || len(rec.Prev) != 0 {
		t.Errorf("record = %+v, want inbox/ with the leftover forgotten", rec)
	}
}
