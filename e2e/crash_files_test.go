package e2e

// Files as API under SIGKILL: the owner decides 200 requests by moving their
// files while the daemon is killed at random points (and moves go on while it
// is down); after the last restart every move has been applied exactly once,
// no file is lost and the journal is intact (DESIGN.md, "Reliability and
// security": crash safety, the level-triggered watcher).

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/plexus-gw/plexus"
	"github.com/plexus-gw/plexus/inbox"
	"github.com/plexus-gw/plexus/journal"
)

// crashFileDecisions is how many requests the owner decides by moving files.
const crashFileDecisions = 200

// crashFileKill is one SIGKILL of the file-move crash test: after the at-th
// move and a pause, with down more moves made before the restart.
type crashFileKill struct {
	at, down int
	pause    time.Duration
}

// crashFileDecision is one request and the folder its file was moved to.
type crashFileDecision struct {
	id      string
	approve bool
}

func (d crashFileDecision) to() string {
	if d.approve {
		return plexus.FolderActive
	}
	return plexus.FolderRejected
}

// TestCrashFileDecisions puts up 200 write-grant requests, then moves their
// files (2 of 3 to active/, the others to rejected/) from a goroutine while
// the daemon is SIGKILLed 3 to 5 times at random points, some moves being
// made while it is down, and once more right after the last move. After the
// final restart every decision is what its move said, made once (one journal
// row each, none of the other outcome), every file is in the folder its
// decision belongs in and only there, the journal's record of each file
// agrees, the hash chain verifies and PRAGMA integrity_check is ok.
func TestCrashFileDecisions(t *testing.T) {
	if testing.Short() {
		t.Skip("starts and kills the daemon several times")
	}
	failOnLeakedGoroutines(t)
	start := time.Now()
	rng := crashRand(t, 20250611)
	home := filepath.Join(t.TempDir(), "home")
	p := startPlexus(t, home)
	f := setUpCrashFixture(t, p)
	sid := f.handshake(t, p)

	// Every request pends: a write with no grant standing yet. They are all
	// made before any is approved, since an approved write would let the
	// next request through without the owner.
	decs := make([]crashFileDecision, crashFileDecisions)
	for i := range decs {
		var pend plexus.GrantPendingResponse
		st := p.call(t, "PUT", "/grants", map[string]string{plexus.SessionHeader: sid}, map[string]any{"grants": map[string]any{
			"portal.notes.write": map[string]any{"decision": "allow", "verbs": []string{"write"}, "purpose": fmt.Sprintf("file crash %d", i)}}}, &pend)
		if st != http.StatusAccepted || !inbox.ValidID(pend.PendingID) {
			t.Fatalf("grant request %d: status %d, %+v", i, st, pend)
		}
		decs[i] = crashFileDecision{id: pend.PendingID, approve: rng.IntN(3) != 0}
	}
	waitFor(t, 30*time.Second, "every decision's file in inbox/", func() string {
		for _, d := range decs {
			if _, err := os.Stat(filepath.Join(home, plexus.FolderInbox, inbox.FileName(d.id))); err != nil {
				return err.Error()
			}
		}
		return ""
	})
	setUp := time.Since(start)

	// The moves are made in a random order; the kills land after random
	// moves, a random pause later, while the daemon is still applying the
	// moves before them.
	order := rng.Perm(len(decs))
	kills := planFileKills(rng, len(decs))
	var plan []string
	for _, k := range kills {
		plan = append(plan, fmt.Sprintf("after move %d +%s, %d moves while down", k.at, k.pause, k.down))
	}
	t.Logf("%d moves (%d to active/), kills: %s", len(decs), countApproved(decs), strings.Join(plan, "; "))
	gaps := make([]time.Duration, len(decs))
	for i := range gaps {
		gaps[i] = time.Duration(rng.IntN(8000)) * time.Microsecond
	}

	// The mover makes a move for each permit, so that the test says how
	// many are made before each kill and while the daemon is down.
	permits := make(chan struct{}, len(decs))
	moved := make(chan error, len(decs))
	stop := make(chan struct{})
	mover := make(chan struct{})
	go func() {
		defer close(mover)
		for n, i := range order {
			select {
			case <-permits:
			case <-stop:
				return
			}
			d := decs[i]
			moved <- os.Rename(filepath.Join(home, plexus.FolderInbox, inbox.FileName(d.id)), filepath.Join(home, d.to(), inbox.FileName(d.id)))
			if n < len(order)-1 {
				time.Sleep(gaps[n])
			}
		}
	}()
	defer func() { close(stop); <-mover }()
	allowed, done := 0, 0
	allow := func(upto int) {
		for ; allowed < upto; allowed++ {
			permits <- struct{}{}
		}
	}
	await := func(upto int) {
		t.Helper()
		for ; done < upto; done++ {
			if err := <-moved; err != nil {
				t.Fatalf("move %d: %v (a file the owner moves must still be where the daemon put it)", done, err)
			}
		}
	}
	for _, k := range kills {
		allow(k.at + k.down)
		await(k.at)
		time.Sleep(k.pause)
		p.kill(t)
		checkIntegrity(t, home) // before anything recovers the WAL
		applied := countDecided(t, home, decs)
		await(k.at + k.down)
		t.Logf("killed after move %d, %d decided", k.at, applied)
		p = startPlexus(t, home)
	}
	moves := time.Since(start) - setUp

	// The last restart applies what is left; the generous deadline only
	// bounds a hang.
	want := map[string]crashFileDecision{}
	for _, d := range decs {
		want[d.id] = d
	}
	waitFor(t, 60*time.Second, "every move applied", func() string {
		var pend plexus.PendingListResponse
		if st := p.call(t, "GET", "/admin/api/pending", f.admin(), nil, &pend); st != http.StatusOK {
			return fmt.Sprintf("admin pending: status %d", st)
		}
		if len(pend.Pending) > 0 {
			return fmt.Sprintf("%d still pending, first %s", len(pend.Pending), pend.Pending[0].ID)
		}
		if problems := checkFileDecisions(t, home, want); len(problems) > 0 {
			return fmt.Sprintf("%d problems:\n  %s", len(problems), strings.Join(problems[:min(len(problems), 10)], "\n  "))
		}
		return ""
	})
	verifyJournalCLI(t, home)
	// The files are not looked at again after the stop: it may interrupt
	// the daemon filing an approval whose grant a later one replaced,
	// between writing it in archive/ and recording it, which its next
	// start completes.
	p.stop(t)
	checkIntegrity(t, home)
	checkFileDecisionRows(t, journalRows(t, home), decs)
	scratch, _ := filepath.Glob(filepath.Join(home, "*", "."+inbox.IDPrefix+"*"+inbox.Ext+".tmp*"))
	t.Logf("set-up %s, moves and %d kills %s, total %s; %d scratch files left by kills", setUp.Round(time.Millisecond), len(kills),
		moves.Round(time.Millisecond), time.Since(start).Round(time.Millisecond), len(scratch))
}

// planFileKills picks 3 to 5 kills after distinct random moves, each with
// 0 to 10 moves made while the daemon is down, and a last one right after
// the last move.
func planFileKills(rng *rand.Rand, n int) []crashFileKill {
	var at []int
	for count := 3 + rng.IntN(3); len(at) < count; {
		if a := 5 + rng.IntN(n-10); !slices.Contains(at, a) {
			at = append(at, a)
		}
	}
	slices.Sort(at)
	at = append(at, n)
	kills := make([]crashFileKill, len(at))
	for i, a := range at {
		k := crashFileKill{at: a, pause: time.Duration(rng.IntN(5000)) * time.Microsecond}
		if i < len(at)-1 && rng.IntN(3) != 0 {
			k.down = min(1+rng.IntN(10), at[i+1]-a)
		}
		kills[i] = k
	}
	return kills
}

// countDecided counts the decisions of decs that are no longer pending.
func countDecided(t testing.TB, home string, decs []crashFileDecision) int {
	t.Helper()
	ctx := context.Background()
	db, err := journal.OpenReader(ctx, filepath.Join(home, "journal.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	n := 0
	err = db.View(ctx, func(tx plexus.StateTx) error {
		for _, d := range decs {
			p, err := tx.Pending(d.id)
			if err != nil {
				return err
			}
			if p.State != plexus.StatePending {
				n++
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func countApproved(decs []crashFileDecision) int {
	n := 0
	for _, d := range decs {
		if d.approve {
			n++
		}
	}
	return n
}

// checkFileDecisions compares each decision in the journal (read through a
// separate read-only connection) and its file with the move that decided
// it: approved via file with its file in active/ (or archive/, once a later
// approval replaced its grant), or denied with its file in rejected/; in one
// folder only, written as decided, and recorded where it is. It returns what
// differs.
func checkFileDecisions(t testing.TB, home string, want map[string]crashFileDecision) []string {
	t.Helper()
	ctx := context.Background()
	db, err := journal.OpenReader(ctx, filepath.Join(home, "journal.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	folders := []string{plexus.FolderInbox, plexus.FolderActive, plexus.FolderRejected, plexus.FolderArchive}
	var problems []string
	ids := make([]string, 0, len(want))
	for id := range want {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	for _, id := range ids {
		d := want[id]
		var p *plexus.Pending
		var rec *plexus.DecisionFile
		err := db.View(ctx, func(tx plexus.StateTx) error {
			var err error
			if p, err = tx.Pending(id); err != nil {
				return err
			}
			rec, err = tx.DecisionFile(id)
			return err
		})
		if err != nil {
			problems = append(problems, fmt.Sprintf("%s: %v", id, err))
			continue
		}
		state, may := plexus.StateDenied, []string{plexus.FolderRejected}
		if d.approve {
			state, may = plexus.StateApproved, []string{plexus.FolderActive, plexus.FolderArchive}
		}
		if p.State != state || p.Via != plexus.ViaFile {
			problems = append(problems, fmt.Sprintf("%s moved to %s/ is %s via %q", id, d.to(), p.State, p.Via))
		}
		var in []string
		for _, folder := range folders {
			b, err := os.ReadFile(filepath.Join(home, folder, inbox.FileName(id)))
			if os.IsNotExist(err) {
				continue
			} else if err != nil {
				problems = append(problems, fmt.Sprintf("%s in %s/: %v", id, folder, err))
				continue
			}
			in = append(in, folder)
			if file, err := inbox.Parse(b); err != nil || file.ID != id || file.State != state {
				problems = append(problems, fmt.Sprintf("%s in %s/ is not written as %s: %v %q", id, folder, state, err, b))
			} else if rec.Folder != folder || rec.Sum != inbox.Sum(b) {
				problems = append(problems, fmt.Sprintf("%s in %s/ is recorded in %q with another sum", id, folder, rec.Folder))
			}
		}
		if len(in) != 1 || !slices.Contains(may, in[0]) {
			problems = append(problems, fmt.Sprintf("%s (%s) has files in %q, want one in one of %q", id, state, in, may))
		}
	}
	// A kill may leave a write's scratch file behind (the reconciler removes
	// those older than a minute at start); never instead of a real file.
	for _, folder := range folders {
		names, _ := filepath.Glob(filepath.Join(home, folder, "."+inbox.IDPrefix+"*"))
		for _, n := range names {
			id, _, _ := strings.Cut(strings.TrimPrefix(filepath.Base(n), "."), inbox.Ext+".tmp")
			if _, ok := want[id]; !ok {
				problems = append(problems, fmt.Sprintf("stray file %s", n))
			}
		}
	}
	return problems
}

// checkFileDecisionRows requires each decision to have its request row and
// exactly one row of its outcome, none of the other, and no row saying a
// file was refused, in conflict, unknown, or a grant withdrawn or revoked.
func checkFileDecisionRows(t testing.TB, rows []plexus.Activity, decs []crashFileDecision) {
	t.Helper()
	for _, d := range decs {
		approved, _ := countRows(rows, "grant.approved", payloadIs("pendingId", d.id))
		denied, _ := countRows(rows, "grant.denied", targetIs(d.id))
		requested, _ := countRows(rows, "grant.requested", targetIs(d.id))
		wantApproved, wantDenied := 0, 1
		if d.approve {
			wantApproved, wantDenied = 1, 0
		}
		if approved != wantApproved || denied != wantDenied || requested != 1 {
			t.Errorf("%s moved to %s/: %d grant.requested, %d grant.approved, %d grant.denied rows; want 1, %d, %d",
				d.id, d.to(), requested, approved, denied, wantApproved, wantDenied)
		}
	}
	bad := []string{"grant.withdrawn", "grant.revoked", "inbox.refused", "inbox.conflict", "inbox.unknown", "inbox.forged", "inbox.ignored"}
	for _, r := range rows {
		if slices.Contains(bad, r.ActionType) {
			t.Errorf("unexpected %s row %d on %s: %v", r.ActionType, r.ID, r.Target, r.Payload)
		}
	}
}
