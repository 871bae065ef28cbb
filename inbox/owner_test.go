package inbox

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/plexus-gw/plexus"
)

// ownerDaemon answers an owner's move as a daemon would: a fixed word on
// the decision, and what it says after the move.
type ownerDaemon struct {
	p     plexus.Pending
	err   error
	after *plexus.Pending // the daemon's word once the file moved
	home  string
}

func (d *ownerDaemon) Pending(context.Context, string) (plexus.Pending, error) {
	if d.after != nil {
		if _, err := os.Lstat(filepath.Join(d.home, plexus.FolderInbox, FileName(testID))); errors.Is(err, os.ErrNotExist) {
			return *d.after, nil
		}
	}
	return d.p, d.err
}

func (d *ownerDaemon) MintedToken(context.Context, plexus.Pending) (string, error) {
	return "jti_1", nil
}

const testID = "pend_01JDX3K9Q8M2V7T4R6W5Y0Z1AB" // the id of testdata/grant.md

// TestOwnerMove checks an owner's move from the command line: what is
// refused before anything moves, what moves while the daemon is down, and
// the daemon's outcome reported after the move.
func TestOwnerMove(t *testing.T) {
	grant, err := os.ReadFile("testdata/grant.md")
	if err != nil {
		t.Fatal(err)
	}
	approved, err := os.ReadFile("testdata/approved.md")
	if err != nil {
		t.Fatal(err)
	}
	pending := plexus.Pending{ID: testID, State: plexus.StatePending}
	notRunning := &ownerDaemon{err: ErrNotRunning}
	for _, tt := range []struct {
		name       string
		id         string
		files      map[string][]byte // folder → the decision's file
		daemon     *ownerDaemon
		wantErr    string // "" when the move succeeds
		wantFolder string // where the file ends up
		wantOut    string
	}{
		{name: "MalformedID", id: "pend_nope", daemon: notRunning, wantErr: "a decision id is pend_"},
		{name: "NoFileNoDaemon", daemon: notRunning, wantErr: "there is no inbox/" + FileName(testID)},
		{name: "NeverPutUp", files: map[string][]byte{plexus.FolderInbox: grant},
			daemon: &ownerDaemon{err: ErrUnknown}, wantErr: "Plexus never put it up", wantFolder: plexus.FolderInbox},
		{name: "DecidedAlready", files: map[string][]byte{plexus.FolderInbox: grant},
			daemon:  &ownerDaemon{p: plexus.Pending{ID: testID, State: plexus.StateDenied}},
			wantErr: "was already", wantFolder: plexus.FolderInbox},
		{name: "FileMovedAlready", files: map[string][]byte{plexus.FolderActive: approved},
			daemon: notRunning, wantErr: "its file is active/", wantFolder: plexus.FolderActive},
		{name: "Unreadable", files: map[string][]byte{plexus.FolderInbox: []byte("not a decision")},
			daemon: notRunning, wantErr: "cannot be read, so nothing was moved", wantFolder: plexus.FolderInbox},
		{name: "Queued", files: map[string][]byte{plexus.FolderInbox: grant}, daemon: notRunning,
			wantFolder: plexus.FolderActive, wantOut: "queued in active/"},
		{name: "Applied", files: map[string][]byte{plexus.FolderInbox: grant},
			daemon: &ownerDaemon{p: pending, after: &plexus.Pending{ID: testID, State: plexus.StateApproved,
				Via: plexus.ViaCLI, DecidedBy: "ann"}},
			wantFolder: plexus.FolderActive, wantOut: "Token jti_1 minted"},
		{name: "DecidedMeanwhile", files: map[string][]byte{plexus.FolderInbox: grant},
			daemon: &ownerDaemon{p: pending, after: &plexus.Pending{ID: testID, State: plexus.StateApproved,
				Via: plexus.ViaFile, DecidedBy: "bob"}},
			wantErr: "before this decision reached Plexus", wantFolder: plexus.FolderActive},
	} {
		t.Run(tt.name, func(t *testing.T) {
			home := moveHome(t)
			for folder, b := range tt.files {
				if err := os.WriteFile(filepath.Join(home, folder, FileName(testID)), b, 0o600); err != nil {
					t.Fatal(err)
				}
			}
			tt.daemon.home = home
			id := tt.id
			if id == "" {
				id = testID
			}
			var out bytes.Buffer
			m := &OwnerMove{Home: home, ID: id, Approve: true, Stamp: StampOptions{DecidedBy: "ann"}, Out: &out}
			err := m.Run(context.Background(), func() (Daemon, error) { return tt.daemon, nil })
			var me *MoveError
			switch {
			case tt.wantErr == "" && err != nil:
				t.Fatalf("Run: %v", err)
			case tt.wantErr != "" && (!errors.As(err, &me) || !strings.Contains(err.Error(), tt.wantErr)):
				t.Fatalf("Run: err = %v, want a *MoveError saying %q", err, tt.wantErr)
			}
			if !strings.Contains(out.String(), tt.wantOut) {
				t.Errorf("Run wrote %q, want %q in it", out.String(), tt.wantOut)
			}
			if tt.wantFolder != "" {
				if folder, _, err := Locate(home, testID); err != nil || folder != tt.wantFolder {
					t.Errorf("the file is in %q (%v), want %q", folder, err, tt.wantFolder)
				}
			}
		})
	}
}

// signInDaemon answers like a daemon whose approved sign-in starts a
// moment after the approval: approved without the page to open first,
// then with it.
type signInDaemon struct {
	home  string
	polls int
}

func (d *signInDaemon) Pending(context.Context, string) (plexus.Pending, error) {
	p := approvedSignInFixture()
	p.Via, p.DecidedBy = plexus.ViaCLI, "ann"
	if _, err := os.Lstat(filepath.Join(d.home, plexus.FolderInbox, FileName(testID))); err == nil {
		p.State, p.SignIn.AuthURL = plexus.StatePending, ""
		return p, nil
	}
	d.polls++
	if d.polls == 1 {
		p.SignIn.AuthURL = ""
	}
	return p, nil
}

func (d *signInDaemon) MintedToken(context.Context, plexus.Pending) (string, error) {
	return "", errors.New("a sign-in mints no token")
}

// TestOwnerMoveSignIn: `plexus approve` of a sign-in request waits for
// the sign-in to start and prints the page to open; it reads no token.
func TestOwnerMoveSignIn(t *testing.T) {
	home := moveHome(t)
	b, err := Render(signInFixture(), RenderOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(home, plexus.FolderInbox, FileName(testID)), b, 0o600); err != nil {
		t.Fatal(err)
	}
	d := &signInDaemon{home: home}
	var out bytes.Buffer
	m := &OwnerMove{Home: home, ID: testID, Approve: true, Stamp: StampOptions{DecidedBy: "ann"}, Out: &out}
	if err := m.Run(context.Background(), func() (Daemon, error) { return d, nil }); err != nil {
		t.Fatalf("Run: %v", err)
	}
	if got := out.String(); !strings.Contains(got, signInURL) || strings.Contains(got, "token") {
		t.Errorf("plexus approve said:\n%s\nwant the page to open and no token", got)
	}
	if d.polls < 2 {
		t.Errorf("the daemon was asked %d times after the move; want it asked again until the sign-in started", d.polls)
	}
}
