package e2e

import (
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/plexus-gw/plexus"
	"github.com/plexus-gw/plexus/daemon"
	"github.com/plexus-gw/plexus/journal"
)

// TestAttackMirrorLink: a process that can write PLEXUS_HOME/audit plants a
// symlink under the name of tomorrow's mirror file, pointing at a file of
// its choosing. When the day turns, the daemon must not append the journal's
// rows to that file: the append fails, the row stays in journal.db, and
// `plexus status` shows the owner the failed mirror write.
func TestAttackMirrorLink(t *testing.T) {
	clock := newFakeClock()
	td := startTestDaemon(t, daemon.Options{Clock: clock.Now})
	target := filepath.Join(t.TempDir(), "owner-notes.txt")
	if err := os.WriteFile(target, []byte("the owner's notes\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	tomorrow := clock.Now().Add(24 * time.Hour).UTC().Format("2006-01-02")
	if err := os.Symlink(target, filepath.Join(td.Home().Dir, "audit", tomorrow+".jsonl")); err != nil {
		t.Fatal(err)
	}
	clock.Advance(24 * time.Hour)

	// Any journaled event will do: a handshake with a bad PAT writes auth.failed.
	if st := td.call(t, "POST", "/link/handshake", bearer("plx_agent_not-a-real-pat"), plexus.HandshakeRequest{}, nil); st != http.StatusUnauthorized {
		t.Fatalf("handshake with a bad PAT: status %d, want 401", st)
	}
	if n := len(td.activity(t, journal.Filter{Type: "auth.failed"})); n != 1 {
		t.Fatalf("%d auth.failed rows, want 1 in journal.db", n)
	}
	if b, err := os.ReadFile(target); err != nil || string(b) != "the owner's notes\n" {
		t.Errorf("the link's target holds %q (%v): the mirror followed the planted link", b, err)
	}
	var status plexus.StatusResponse
	if st := td.call(t, "GET", "/admin/api/status", td.admin(), nil, &status); st != http.StatusOK {
		t.Fatalf("status: %d", st)
	}
	if j := status.Journal; j == nil || j.MirrorFailures != 1 || j.WriteFailures != 0 {
		t.Errorf("status journal = %+v; want 1 mirror failure and no row lost", status.Journal)
	}
}
