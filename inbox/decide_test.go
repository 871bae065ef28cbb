package inbox_test

// Files as API through the real gateway: the reconciler puts a decision's
// file up, the owner moves it, and the gateway's one decision function
// applies the move on a real journal. cmd/plexus tells the same stories end
// to end (TestFiles, with the daemon, fsnotify and an agent); here the
// reconciler and the gateway meet without a daemon, so a failure points at
// one of the two.

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"testing/synctest"
	"time"

	"github.com/plexus-gw/plexus"
	"github.com/plexus-gw/plexus/auth"
	"github.com/plexus-gw/plexus/gateway"
	"github.com/plexus-gw/plexus/inbox"
	"github.com/plexus-gw/plexus/internal/plexustest"
	"github.com/plexus-gw/plexus/journal"
	"github.com/plexus-gw/plexus/registry"
	"github.com/plexus-gw/plexus/sources/portal"
)

// decideOwner is who decides by moving files in these tests.
const decideOwner = "owner@example.test"

// filesStack is a reconciler and the real gateway it decides through, over
// one scaffolded home and its journal, with a "notes" portal registered.
type filesStack struct {
	home string
	db   *journal.DB
	gw   *gateway.Gateway
	rec  *inbox.Reconciler
}

// newFilesStack wires the stack the way the daemon does, reading clock (nil:
// the real one, or the bubble's under testing/synctest), and runs the
// reconciler until the test ends.
func newFilesStack(t *testing.T, clock func() time.Time) *filesStack {
	t.Helper()
	ctx := context.Background()
	home := plexustest.TempHome(t)
	db := plexustest.MustOpenHomeJournal(t, home, clock)
	reg := registry.New(registry.Options{Clock: clock, Sensitivity: auth.Sensitivity, DefaultWindow: auth.DefaultWindow})
	reg.AddTransport(portal.NewTransport())
	notes, err := portal.NewSource("notes", t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := reg.Add(ctx, notes); err != nil {
		t.Fatal(err)
	}
	signer, err := auth.NewSigner(home.SigningKey, "plexus", clock)
	if err != nil {
		t.Fatal(err)
	}
	hasher, err := auth.NewHasher(home.HashKey)
	if err != nil {
		t.Fatal(err)
	}
	s := &filesStack{home: home.Dir, db: db}
	s.gw, err = gateway.New(gateway.Config{Home: home.Dir}, gateway.Deps{Store: db, Events: db, Registry: reg,
		Signer: signer, Hasher: hasher, Authorizer: auth.UserConfirmAuthorizer{}, ConnectionKey: home.ConnectionKey,
		Sources:    func(plexus.SourceConfig) (plexus.Source, error) { return nil, errors.New("no sources in this test") },
		Clock:      clock,
		OnDecision: func(id string) { s.rec.Touch(id) }})
	if err != nil {
		t.Fatal(err)
	}
	s.rec, err = inbox.New(inbox.Config{Home: home.Dir, Owner: func() string { return decideOwner }, Clock: clock}, db, s.gw)
	if err != nil {
		t.Fatal(err)
	}
	runCtx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- s.rec.Run(runCtx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	})
	return s
}

// putUp stores p as the gateway stores a request for the owner (the agent
// and the pending request), then waits until the reconciler has put its
// file up in inbox/.
func (s *filesStack) putUp(t *testing.T, p plexus.Pending) {
	t.Helper()
	err := s.db.Update(context.Background(), true, func(tx plexus.StateTx) error {
		if err := tx.PutAgent(&plexus.Agent{ID: p.AgentID, CreatedAt: p.CreatedAt}); err != nil {
			return err
		}
		return tx.PutPending(&p)
	})
	if err != nil {
		t.Fatal(err)
	}
	s.sync(t)
	if _, err := os.Stat(s.path(plexus.FolderInbox, p.ID)); err != nil {
		t.Fatalf("no file put up in inbox/: %v", err)
	}
}

func (s *filesStack) path(folder, id string) string {
	return filepath.Join(s.home, folder, inbox.FileName(id))
}

// sync has the reconciler take a full look and waits until it is done.
func (s *filesStack) sync(t *testing.T) {
	t.Helper()
	if err := s.rec.Sync(t.Context()); err != nil {
		t.Fatalf("sync the inbox: %v", err)
	}
}

// onlyIn checks that id's file is in folder and in no other, and returns it
// parsed.
func (s *filesStack) onlyIn(t *testing.T, id, folder string) *inbox.File {
	t.Helper()
	var in []string
	var b []byte
	for _, f := range []string{plexus.FolderInbox, plexus.FolderActive, plexus.FolderRejected, plexus.FolderArchive} {
		if raw, err := os.ReadFile(s.path(f, id)); err == nil {
			in, b = append(in, f), raw
		} else if !errors.Is(err, os.ErrNotExist) {
			t.Fatal(err)
		}
	}
	if !slices.Equal(in, []string{folder}) {
		t.Fatalf("%s's file is in %v, want only %s", id, in, folder)
	}
	f, err := inbox.Parse(b)
	if err != nil {
		t.Fatalf("parse %s/%s: %v\n%s", folder, inbox.FileName(id), err, b)
	}
	return f
}

// state is what the journal holds for decision id: its state, who decided
// and via what, and the action types of its trace.
func (s *filesStack) state(t *testing.T, p plexus.Pending) (*plexus.Pending, []string) {
	t.Helper()
	ctx := context.Background()
	var got *plexus.Pending
	if err := s.db.View(ctx, func(tx plexus.StateTx) error {
		var err error
		got, err = tx.Pending(p.ID)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	rows, err := s.db.Activity(ctx, journal.Filter{TraceID: p.TraceID})
	if err != nil {
		t.Fatal(err)
	}
	var story []string
	for _, r := range rows {
		story = append(story, r.ActionType)
	}
	return got, story
}

// grants lists the capabilities agent holds now.
func (s *filesStack) grants(t *testing.T, agent string) []string {
	t.Helper()
	var ids []string
	if err := s.db.View(context.Background(), func(tx plexus.StateTx) error {
		gs, err := tx.Grants(agent, time.Now())
		for _, g := range gs {
			ids = append(ids, g.CapabilityID)
		}
		return err
	}); err != nil {
		t.Fatal(err)
	}
	return ids
}

// TestDecideByMove: a decision's file moved out of inbox/ is decided by the
// gateway (via file, by the owner), the journal tells it, and the file is
// rewritten in the folder it was moved to as the decision's outcome. An
// approval grants the capability; a denial grants nothing.
func TestDecideByMove(t *testing.T) {
	tests := []struct {
		name   string
		folder string
		state  string
		action string
		grants []string
	}{
		{name: "Approve", folder: plexus.FolderActive, state: plexus.StateApproved, action: "grant.approved",
			grants: []string{"portal.notes.write"}},
		{name: "Deny", folder: plexus.FolderRejected, state: plexus.StateDenied, action: "grant.denied"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := newFilesStack(t, nil)
			p := reconcilePending(time.Now().UTC().Truncate(time.Second), false)
			s.putUp(t, p)

			if err := os.Rename(s.path(plexus.FolderInbox, p.ID), s.path(tc.folder, p.ID)); err != nil {
				t.Fatal(err)
			}
			s.sync(t)

			got, story := s.state(t, p)
			if got.State != tc.state || got.DecidedBy != decideOwner || got.Via != plexus.ViaFile {
				t.Errorf("journal: state %q, decided by %q via %q; want %q by %q via %q",
					got.State, got.DecidedBy, got.Via, tc.state, decideOwner, plexus.ViaFile)
			}
			if !slices.Equal(story, []string{tc.action}) {
				t.Errorf("journal under the trace: %v, want [%s]", story, tc.action)
			}
			if ids := s.grants(t, p.AgentID); !slices.Equal(ids, tc.grants) {
				t.Errorf("%s holds %v, want %v", p.AgentID, ids, tc.grants)
			}
			f := s.onlyIn(t, p.ID, tc.folder)
			if f.State != tc.state || f.Via != plexus.ViaFile || f.DecidedBy != decideOwner || f.Problem != "" {
				t.Errorf("%s file: state %q, via %q, decided_by %q, problem %q", tc.folder, f.State, f.Via, f.DecidedBy, f.Problem)
			}
		})
	}
}

// TestWithdrawByDelete: a decision's file deleted from inbox/ withdraws it,
// but only once it has stayed gone for the withdraw grace (an editor may be
// saving it by moving it away first); then the gateway records the
// withdrawal and the file is written again in archive/. The grace runs on
// the reconciler's own timer, so testing/synctest drives it: no sleeping.
func TestWithdrawByDelete(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := newFilesStack(t, nil)
		p := reconcilePending(time.Now().UTC(), false)
		s.putUp(t, p)
		if err := os.Remove(s.path(plexus.FolderInbox, p.ID)); err != nil {
			t.Fatal(err)
		}

		s.sync(t)
		time.Sleep(inbox.DefaultWithdrawGrace / 2)
		s.sync(t)
		if got, story := s.state(t, p); got.State != plexus.StatePending || len(story) != 0 {
			t.Fatalf("within the grace: state %q, journal %v; want still pending, nothing journaled", got.State, story)
		}

		time.Sleep(inbox.DefaultWithdrawGrace)
		synctest.Wait()
		s.sync(t)
		const why = "its file was deleted from inbox/"
		got, story := s.state(t, p)
		if got.State != plexus.StateWithdrawn || got.DecidedBy != decideOwner || got.Via != plexus.ViaFile || got.Reason != why {
			t.Errorf("journal: state %q, decided by %q via %q, reason %q; want withdrawn by %q via file, %q",
				got.State, got.DecidedBy, got.Via, got.Reason, decideOwner, why)
		}
		if !slices.Equal(story, []string{"grant.withdrawn"}) {
			t.Errorf("journal under the trace: %v, want [grant.withdrawn]", story)
		}
		if f := s.onlyIn(t, p.ID, plexus.FolderArchive); f.State != plexus.StateWithdrawn || f.Reason != why {
			t.Errorf("archived file: state %q, reason %q; want withdrawn, %q", f.State, f.Reason, why)
		}
	})
}
