package e2e

// Issue 12 §4: the daemon touches only regular files in its folders. Each
// test plants what a hostile local process can plant under a decision's
// name (a FIFO, a symlink, a socket, a folder) in the real folders of a
// real daemon, watched by the real fsnotify, and checks that the plant is
// never opened or followed, that it is journaled and left where it is, that
// a withdrawal or revocation its planting amounts to takes effect, and that
// every other decision keeps working.

import (
	"bytes"
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/plexus-gw/plexus"
	"github.com/plexus-gw/plexus/daemon"
	"github.com/plexus-gw/plexus/journal"
	"github.com/plexus-gw/plexus/platform"
	"github.com/plexus-gw/plexus/scaffold"
)

// plantFIFO replaces whatever is at path with a FIFO. Its cleanup opens the
// FIFO for writing, so that a reader blocked on it (the old daemon) is let
// go before the daemon is stopped, rather than hanging the test binary.
func plantFIFO(t *testing.T, path string) {
	t.Helper()
	if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
		t.Fatal(err)
	}
	if err := syscall.Mkfifo(path, 0o600); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if w, err := os.OpenFile(path, os.O_WRONLY|syscall.O_NONBLOCK, 0); err == nil {
			w.Close()
		}
	})
}

// plantSocket replaces whatever is at path with a listening unix socket,
// bound under a short name (a socket's path is limited to about 100 bytes)
// and renamed into place.
func plantSocket(t *testing.T, path string) {
	t.Helper()
	dir, err := os.MkdirTemp("", "sk")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	l, err := net.Listen("unix", filepath.Join(dir, "s"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	move(t, filepath.Join(dir, "s"), path)
}

// plantSymlink replaces whatever is at path with a symlink to target.
func plantSymlink(t *testing.T, path, target string) {
	t.Helper()
	if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
		t.Fatal(err)
	}
	if err := os.Symlink(target, path); err != nil {
		t.Fatal(err)
	}
}

// checkKind checks that path still holds a file of kind: the daemon left
// the plant where it was.
func checkKind(t *testing.T, path, kind string) {
	t.Helper()
	fi, err := os.Lstat(path)
	if err != nil {
		t.Fatalf("%s: %v, want the planted %s left in place", path, err, kind)
	}
	if got := platform.KindOf(fi.Mode()); got != kind {
		t.Errorf("%s is a %s, want the planted %s left in place", path, got, kind)
	}
}

// checkNoReader checks that nobody holds the FIFO at path open for reading:
// a writer that will not wait finds no reader.
func checkNoReader(t *testing.T, path string) {
	t.Helper()
	w, err := os.OpenFile(path, os.O_WRONLY|syscall.O_NONBLOCK, 0)
	if err == nil {
		w.Close()
		t.Fatalf("%s has a reader: the daemon opened the FIFO", path)
	}
	if !errors.Is(err, syscall.ENXIO) {
		t.Fatalf("open %s for writing: %v, want ENXIO (no reader)", path, err)
	}
}

// checkIgnored checks that the journal holds exactly one inbox.ignored row
// for decision id's name in folder, naming kind.
func (e *filesEnv) checkIgnored(t *testing.T, id, folder, kind string) {
	t.Helper()
	var got []plexus.Activity
	for _, r := range e.activity(t, journal.Filter{Type: "inbox.ignored"}) {
		if r.Target == id && r.Payload["folder"] == folder {
			got = append(got, r)
		}
	}
	if len(got) != 1 {
		t.Fatalf("%d inbox.ignored rows for %s in %s/, want 1 (journaled once): %+v", len(got), id, folder, got)
	}
	if got[0].Actor != plexus.ActorSystem || got[0].Payload["kind"] != kind {
		t.Errorf("inbox.ignored row: actor %q, payload %v; want system, kind %s", got[0].Actor, got[0].Payload, kind)
	}
}

// checkWithdrawn checks that a was withdrawn by the owner for why: the
// agent is told, with no token, and its file is in archive/.
func (e *filesEnv) checkWithdrawn(t *testing.T, a asked, why string) {
	t.Helper()
	e.waitFile(t, plexus.FolderArchive, a.ID, stateIs(plexus.StateWithdrawn))
	if ev := e.resolved(t, a.ID); ev.Decision != plexus.StateWithdrawn || ev.Token != nil {
		t.Errorf("grant_resolved = %+v, want withdrawn without a token", ev)
	}
	if s := e.status(t, a.ID); s.State != plexus.StateWithdrawn || s.Token != nil || s.Reason != why {
		t.Errorf("status = %+v, want withdrawn, reason %q, no token", s, why)
	}
	e.checkRow(t, a.Trace, "grant.withdrawn", plexus.ActorHuman, a.ID, map[string]any{"via": plexus.ViaFile, "reason": why})
}

// approveByMove approves a by moving its file to active/ and returns the
// token the agent gets.
func (e *filesEnv) approveByMove(t *testing.T, a asked, capability string) *plexus.ScopedToken {
	t.Helper()
	move(t, e.path(plexus.FolderInbox, a.ID), e.path(plexus.FolderActive, a.ID))
	e.waitFile(t, plexus.FolderActive, a.ID, stateIs(plexus.StateApproved))
	tok := e.checkApproved(t, a, capability)
	e.mustWrite(t, tok, capability)
	return tok
}

func TestAttackDecisionFolders(t *testing.T) {
	failOnLeakedGoroutines(t)

	// The old daemon read the file it was about to replace: a FIFO where a
	// denied decision's file goes blocked its reconciler forever, and no
	// later move was applied until a restart.
	t.Run("FIFOWhereTheDaemonWrites", func(t *testing.T) {
		e := newFilesEnv(t, "")
		a := e.ask(t, "", notesWrite)
		b := e.ask(t, "", docsWrite)
		fifo := e.path(plexus.FolderRejected, a.ID)
		plantFIFO(t, fifo)
		if st := e.call(t, "POST", "/admin/api/pending/"+a.ID+"/deny", e.admin(), plexus.DecideRequest{Reason: "not now"}, nil); st != http.StatusOK {
			t.Fatalf("deny %s: status %d", a.ID, st)
		}
		e.checkClosed(t, a, plexus.StateDenied, "not now")

		e.approveByMove(t, b, docsWrite) // decided while the FIFO is there
		e.settle(t)
		checkKind(t, fifo, "fifo")
		checkNoReader(t, fifo)
		e.checkIgnored(t, a.ID, plexus.FolderRejected, "fifo")
		// Denied in the journal, its file waits in inbox/ while the FIFO
		// holds its name in rejected/ ...
		if f := parse(t, e.onlyInRegular(t, a.ID, plexus.FolderInbox)); f.State != plexus.StatePending {
			t.Errorf("a's file in inbox/ says %q, want the file as it was", f.State)
		}
		// ... and is filed once the owner removes the FIFO.
		if err := os.Remove(fifo); err != nil {
			t.Fatal(err)
		}
		e.Inbox().Rescan()
		e.waitFile(t, plexus.FolderRejected, a.ID, stateIs(plexus.StateDenied))
		e.onlyInRegular(t, a.ID, plexus.FolderRejected)
	})

	// A FIFO in place of a pending decision's file in inbox/: the file is
	// gone, so the decision is withdrawn as for a delete; the FIFO is left
	// alone and never opened; another decision moved meanwhile is applied.
	t.Run("FIFOReplacingInboxFile", func(t *testing.T) {
		e := newFilesEnv(t, "")
		a := e.ask(t, "", notesWrite)
		b := e.ask(t, "", docsWrite)
		fifo := e.path(plexus.FolderInbox, a.ID)
		plantFIFO(t, fifo)

		e.approveByMove(t, b, docsWrite)
		e.checkWithdrawn(t, a, "its file in inbox/ was replaced by a fifo")
		e.settle(t)
		checkKind(t, fifo, "fifo")
		checkNoReader(t, fifo)
		e.checkIgnored(t, a.ID, plexus.FolderInbox, "fifo")
		e.onlyInRegular(t, a.ID, plexus.FolderArchive)
	})

	// A symlink to the connection-key in place of a decision's file: never
	// followed by the daemon or by `plexus approve`, the key is unchanged
	// and read into nothing, and the decision is withdrawn.
	t.Run("SymlinkToConnectionKey", func(t *testing.T) {
		e := newFilesEnv(t, "")
		a := e.ask(t, "", notesWrite)
		keyPath := filepath.Join(e.Home().Dir, scaffold.FileConnectionKey)
		key, err := os.ReadFile(keyPath)
		if err != nil {
			t.Fatal(err)
		}
		before, err := os.Lstat(keyPath)
		if err != nil {
			t.Fatal(err)
		}
		link := e.path(plexus.FolderInbox, a.ID)
		plantSymlink(t, link, keyPath)

		cli := &cliEnv{t: t, home: e.Home().Dir, addr: e.Addr(), agentHome: filepath.Join(t.TempDir(), "agent")}
		r := cli.run("approve", a.ID)
		if r.code != exitError || !strings.Contains(r.stderr, "inbox/"+a.ID+".md is a symlink, not a decision file") ||
			!strings.Contains(r.stderr, "nothing was moved") {
			t.Errorf("approve through a symlink: %s", r)
		}
		secret := strings.TrimSpace(string(key))
		if strings.Contains(r.stdout+r.stderr, secret) {
			t.Errorf("approve printed the connection-key: %s", r)
		}

		e.checkWithdrawn(t, a, "its file in inbox/ was replaced by a symlink")
		e.settle(t)
		checkKind(t, link, "symlink")
		e.checkIgnored(t, a.ID, plexus.FolderInbox, "symlink")
		after, err := os.Lstat(keyPath)
		if err != nil {
			t.Fatal(err)
		}
		now, err := os.ReadFile(keyPath)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(now, key) || !os.SameFile(before, after) || after.Mode() != before.Mode() || !after.ModTime().Equal(before.ModTime()) {
			t.Errorf("the connection-key changed: mode %v → %v, mtime %v → %v", before.Mode(), after.Mode(), before.ModTime(), after.ModTime())
		}
		for _, row := range e.activity(t, journal.Filter{}) {
			if b, _ := json.Marshal(row); bytes.Contains(b, []byte(secret)) {
				t.Errorf("the journal holds the connection-key: %s", b)
			}
		}
	})

	// A symlink in place of a standing grant's file in active/ (to a copy
	// of that very file, elsewhere): the owner's file is gone, so the grant
	// is revoked, as for a delete; the link and its target are untouched.
	t.Run("SymlinkReplacingActiveFile", func(t *testing.T) {
		e := newFilesEnv(t, "")
		a := e.ask(t, "", notesWrite)
		tok := e.approveByMove(t, a, notesWrite)
		active := e.path(plexus.FolderActive, a.ID)
		decoy := filepath.Join(t.TempDir(), "decoy.md")
		b, err := os.ReadFile(active)
		if err != nil {
			t.Fatal(err)
		}
		ownerWrite(t, decoy, b)
		plantSymlink(t, active, decoy)

		why := "revoked by the owner: its file in active/ was replaced by a symlink"
		if ev := e.revoked(t, tok.JTI); ev.Reason != why {
			t.Errorf("token_revoked reason %q, want %q", ev.Reason, why)
		}
		e.refused(t, tok, notesWrite, plexus.CodeTokenRevoked)
		if got := e.standing(t); len(got) != 0 {
			t.Errorf("claude holds %v after the revoke", got)
		}
		e.checkRow(t, a.Trace, "decision.revoked", plexus.ActorHuman, a.ID, map[string]any{"via": plexus.ViaFile, "reason": why})
		e.settle(t)
		checkKind(t, active, "symlink")
		e.checkIgnored(t, a.ID, plexus.FolderActive, "symlink")
		if now, err := os.ReadFile(decoy); err != nil || !bytes.Equal(now, b) {
			t.Errorf("the link's target changed: %v\n%s", err, now)
		}
	})

	// A socket and a folder under two pending decisions' names; a third
	// decision is approved by a move all the same.
	t.Run("SocketAndDirectory", func(t *testing.T) {
		e := newFilesEnv(t, "")
		a := e.ask(t, "", notesWrite)
		b := e.ask(t, "", docsWrite)
		sock, dir := e.path(plexus.FolderInbox, a.ID), e.path(plexus.FolderInbox, b.ID)
		plantSocket(t, sock)
		if err := os.Remove(dir); err != nil {
			t.Fatal(err)
		}
		if err := os.Mkdir(dir, 0o700); err != nil {
			t.Fatal(err)
		}
		c := e.ask(t, "", notesWrite)
		e.approveByMove(t, c, notesWrite)

		e.checkWithdrawn(t, a, "its file in inbox/ was replaced by a socket")
		e.checkWithdrawn(t, b, "its file in inbox/ was replaced by a directory")
		e.settle(t)
		checkKind(t, sock, "socket")
		checkKind(t, dir, "directory")
		e.checkIgnored(t, a.ID, plexus.FolderInbox, "socket")
		e.checkIgnored(t, b.ID, plexus.FolderInbox, "directory")
	})
}

// onlyInRegular is onlyIn for folders that may hold a plant: it settles,
// then checks that id's only regular file is in folder, and returns it.
func (e *filesEnv) onlyInRegular(t *testing.T, id, folder string) []byte {
	t.Helper()
	e.settle(t)
	var got []string
	var b []byte
	for _, f := range []string{plexus.FolderInbox, plexus.FolderActive, plexus.FolderRejected, plexus.FolderArchive} {
		raw, err := platform.ReadRegular(e.path(f, id), 1<<20)
		var nr *platform.NotRegularError
		switch {
		case err == nil:
			got, b = append(got, f), raw
		case errors.Is(err, os.ErrNotExist), errors.As(err, &nr):
		default:
			t.Fatal(err)
		}
	}
	if len(got) != 1 || got[0] != folder {
		t.Fatalf("%s's regular file is in %v, want only %s/", id, got, folder)
	}
	return b
}

// TestAttackPortalSymlinkConstraint: a grant narrowed to public/ of a portal
// whose public/ holds links into private/ (in the same portal, so os.Root
// follows them). The old gateway checked the path as named and served
// private/secret.txt through "public/link"; the constraint is now checked
// on the path the call reaches as well, and refuses with grant_required.
func TestAttackPortalSymlinkConstraint(t *testing.T) {
	failOnLeakedGoroutines(t)
	td := startTestDaemon(t, daemon.Options{})
	dir := addPortal(t, td, "box")
	mustFile := func(name, body string) {
		p := filepath.Join(dir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	mustFile("public/readme.txt", "PUBLIC-README")
	mustFile("private/secret.txt", "PRIVATE-SECRET")
	for name, target := range map[string]string{
		"public/link":    "../private/secret.txt",
		"public/linkdir": "../private",
		"public/same":    "readme.txt",
	} {
		if err := os.Symlink(target, filepath.Join(dir, filepath.FromSlash(name))); err != nil {
			t.Fatal(err)
		}
	}
	_, sid := enrolledAgent(t, td, "claude")
	constraint := map[string]any{"pathPrefix": map[string]any{"field": "path", "allow": []string{"public/"}}}
	read := grantOK(t, td, sid, map[string]any{
		"portal.box.read":   map[string]any{"decision": "allow", "constraint": constraint},
		"portal.box.list":   map[string]any{"decision": "allow", "constraint": constraint},
		"portal.box.search": map[string]any{"decision": "allow", "constraint": constraint},
	})
	pend := grantPending(t, td, sid, map[string]any{"portal.box.write": map[string]any{"decision": "allow", "verbs": []string{"write"}, "constraint": constraint}})
	approve(t, td, pend.PendingID, plexus.DecideRequest{})
	write := approvedToken(t, td, sid, pend.PendingID)

	refused := []struct {
		name, tok, id string
		input         map[string]any
	}{
		{"ReadLinkToPrivate", read.Token, "portal.box.read", map[string]any{"path": "public/link"}},
		{"ReadThroughLinkedFolder", read.Token, "portal.box.read", map[string]any{"path": "public/linkdir/secret.txt"}},
		{"ListLinkedFolder", read.Token, "portal.box.list", map[string]any{"path": "public/linkdir"}},
		{"SearchLinkedFolder", read.Token, "portal.box.search", map[string]any{"path": "public/linkdir", "query": "SECRET"}},
		{"WriteThroughLinkedFolder", write.Token, "portal.box.write", map[string]any{"path": "public/linkdir/planted.txt", "content": "x"}},
	}
	for _, tt := range refused {
		t.Run(tt.name, func(t *testing.T) {
			st, _, raw := td.invoke(t, tt.tok, plexus.InvokeRequest{ID: tt.id, Input: tt.input})
			wantDenial(t, td, st, raw, http.StatusUnauthorized, tt.id, plexus.CodeGrantRequired, true)
			if strings.Contains(string(raw), "PRIVATE-SECRET") {
				t.Errorf("the denial carries private/secret.txt: %s", raw)
			}
		})
	}
	if _, err := os.Lstat(filepath.Join(dir, "private", "planted.txt")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("private/planted.txt: %v, want no such file (the write was refused)", err)
	}
	if b, err := os.ReadFile(filepath.Join(dir, "private", "secret.txt")); err != nil || string(b) != "PRIVATE-SECRET" {
		t.Errorf("private/secret.txt: %q, %v; want it unchanged", b, err)
	}

	admitted := []struct {
		name, tok, id string
		input         map[string]any
		want          string
	}{
		{"ReadInside", read.Token, "portal.box.read", map[string]any{"path": "public/readme.txt"}, "PUBLIC-README"},
		{"ReadLinkInsidePrefix", read.Token, "portal.box.read", map[string]any{"path": "public/same"}, "PUBLIC-README"},
		{"ListPrefix", read.Token, "portal.box.list", map[string]any{"path": "public"}, "readme.txt"},
		{"WriteNewFile", write.Token, "portal.box.write", map[string]any{"path": "public/new/note.txt", "content": "x", "createDirs": true}, "public/new/note.txt"},
	}
	for _, tt := range admitted {
		t.Run(tt.name, func(t *testing.T) {
			st, resp, raw := td.invoke(t, tt.tok, plexus.InvokeRequest{ID: tt.id, Input: tt.input})
			if st != http.StatusOK || !resp.OK || !strings.Contains(string(raw), tt.want) {
				t.Errorf("%s %v: status %d, %s; want ok with %q", tt.id, tt.input, st, raw, tt.want)
			}
		})
	}
}
