package inbox

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/plexus-gw/plexus"
	"github.com/plexus-gw/plexus/platform"
)

// seenFile is what a path held when a pass last looked at it, so that a
// later pass can skip an unchanged file in a folder that only gets arrivals.
type seenFile struct {
	info os.FileInfo
}

// changed reports whether path differs from when a pass last looked at it.
func (r *Reconciler) changed(path string) bool {
	fi, err := os.Lstat(path)
	if err != nil {
		return true
	}
	prev, ok := r.seen[path]
	return !ok || !os.SameFile(prev.info, fi) || prev.info.Size() != fi.Size() || !prev.info.ModTime().Equal(fi.ModTime())
}

// copyOf is one file named after a decision, in one folder.
type copyOf struct {
	folder, path string
	b            []byte
	sum          string
}

// locate reads every file named after id in the four folders. blind is true
// when a folder could not be read: absence then proves nothing.
//
// Only regular files count. Anything else under a decision's name (a
// symlink, a FIFO, a socket, a device, a folder) is never opened or
// followed, is journaled once ([Reconciler.ignore]) and left where it is,
// and counts as no file: the decision is the journal's, so its file
// replaced by a link is its file gone (a withdrawal from inbox/, a
// revocation from active/), and a link the owner moves decides nothing.
func (r *Reconciler) locate(id string) (here []*copyOf, blind bool) {
	name := FileName(id)
	for _, f := range folders {
		path := filepath.Join(r.dir(f), name)
		fi, err := os.Lstat(path)
		if errors.Is(err, os.ErrNotExist) {
			delete(r.seen, path)
			delete(r.odd, path)
			continue
		}
		if err != nil {
			blind = true
			continue
		}
		var b []byte
		if fi.Mode().IsRegular() {
			b, err = ReadFile(path)
		} else {
			err = &platform.NotRegularError{Path: path, Kind: platform.KindOf(fi.Mode())}
		}
		var nr *platform.NotRegularError
		switch {
		case errors.As(err, &nr):
			delete(r.seen, path)
			r.ignore(id, f, nr.Kind)
			continue
		case errors.Is(err, os.ErrNotExist):
			continue
		case err != nil:
			blind = true
			continue
		}
		delete(r.odd, path)
		r.seen[path] = seenFile{info: fi}
		here = append(here, &copyOf{folder: f, path: path, b: b, sum: Sum(b)})
	}
	for _, f := range folders {
		if _, err := os.Stat(r.dir(f)); err != nil {
			blind = true // a folder replaced or removed: its files may be anywhere
		}
	}
	return here, blind
}

// ignore journals, once for as long as it stays there, that something other
// than a regular file sits under decision id's name in folder. It is left
// as it is: Plexus did not write it, so it neither moves nor deletes it, and
// writes nothing in its place until the owner removes it.
func (r *Reconciler) ignore(id, folder, kind string) {
	path := filepath.Join(r.dir(folder), FileName(id))
	if r.odd[path] == kind {
		return
	}
	r.odd[path] = kind
	problem := "a " + kind + " is not a decision file: it is never opened or followed, and counts as no file " +
		"(nothing is decided from it, and a decision whose file it replaced is withdrawn or revoked as for a deleted file); " +
		"Plexus writes nothing in its place until it is removed"
	a := &plexus.Activity{ActionType: "inbox.ignored", Target: id,
		Payload: map[string]any{"folder": folder, "name": FileName(id), "kind": kind, "problem": problem}}
	r.log.Warn("inbox: not a regular file under a decision's name; ignored", "id", id, "folder", folder, "kind", kind)
	r.journalAnyway(a)
}

// absence says how decision id's file left folder, for the reason of the
// withdrawal or revocation it makes.
func (r *Reconciler) absence(id, folder string) string {
	if kind, ok := r.odd[filepath.Join(r.dir(folder), FileName(id))]; ok {
		return "its file in " + folder + "/ was replaced by a " + kind
	}
	return "its file was deleted from " + folder + "/"
}

// ReadFile reads the decision file at path: at most [MaxFileSize]+1 bytes
// (Parse refuses anything longer, and a huge file must not be read whole),
// and only from a regular file ([platform.OpenRegular]): a symlink is never
// followed and a FIFO never waited on, but is an error wrapping
// *[platform.NotRegularError]. `plexus approve` and `plexus reject` read
// through it too.
func ReadFile(path string) ([]byte, error) {
	return platform.ReadRegular(path, MaxFileSize+1)
}

// freeName is id's file name in folder, or, when that is taken, a name
// that is no decision file's ("<id>.2.md"), so the copy decides nothing.
func (r *Reconciler) freeName(folder, id string) (string, error) {
	for i := 1; i < 1000; i++ {
		name := FileName(id)
		if i > 1 {
			name = fmt.Sprintf("%s.%d%s", id, i, Ext)
		}
		if _, err := os.Lstat(filepath.Join(r.dir(folder), name)); errors.Is(err, os.ErrNotExist) {
			return name, nil
		}
	}
	return "", fmt.Errorf("no free name for %s in %s/", id, folder)
}

// put writes b as folder/<id>.md (unless it holds b already), records it
// together with rows, then removes the copies in drop that still hold what
// they held when looked at. The order (write, record, remove) means a crash
// at any point leaves a file the next pass recognizes. Where something other
// than a regular file holds the name, nothing is written, recorded or
// removed: the error wraps *[platform.NotRegularError].
func (r *Reconciler) put(ctx context.Context, id, folder string, b []byte, drop []*copyOf, rows ...*plexus.Activity) error {
	dir, name := r.dir(folder), FileName(id)
	path := filepath.Join(dir, name)
	cur, err := ReadFile(path)
	var nr *platform.NotRegularError
	if errors.As(err, &nr) {
		return fmt.Errorf("put %s in %s/: %w", id, folder, err)
	}
	if err != nil || !bytes.Equal(cur, b) {
		if err := WriteAtomic(dir, name, b); err != nil {
			return err
		}
	}
	rec := plexus.DecisionFile{PendingID: id, Folder: folder, Sum: Sum(b)}
	for _, c := range drop {
		if c.path != path {
			rec.Prev = append(rec.Prev, plexus.FilePlace{Folder: c.folder, Sum: c.sum})
		}
	}
	if err := r.record(ctx, rec, rows...); err != nil {
		return err
	}
	if fi, err := os.Lstat(path); err == nil {
		r.seen[path] = seenFile{info: fi}
	}
	for _, c := range drop {
		if c.path == path {
			continue
		}
		if err := removeIf(c); err != nil {
			return err
		}
	}
	return nil
}

// drop removes stale copies.
func (r *Reconciler) drop(stale []*copyOf) error {
	for _, c := range stale {
		if err := removeIf(c); err != nil {
			return err
		}
	}
	return nil
}

// removeIf removes c's file if it still holds what it held when read: an
// edit saved since is the owner's and stays, and so does anything put in
// its place that is not a regular file.
func removeIf(c *copyOf) error {
	b, err := ReadFile(c.path)
	var nr *platform.NotRegularError
	if errors.Is(err, os.ErrNotExist) || errors.As(err, &nr) {
		return nil
	} else if err != nil {
		return err
	}
	if Sum(b) != c.sum {
		return nil
	}
	if err := os.Remove(c.path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	return platform.SyncDir(filepath.Dir(c.path))
}

// record stores rec (and rows, in the same transaction) and mirrors it in
// memory.
func (r *Reconciler) record(ctx context.Context, rec plexus.DecisionFile, rows ...*plexus.Activity) error {
	rec.WrittenAt = r.now()
	// Not cancelled with the daemon: a file already written must be
	// recorded, or the next start cannot tell it from an owner's file (the
	// journal closes only after the reconciler has returned).
	err := r.store.Update(context.WithoutCancel(ctx), false, func(tx plexus.StateTx) error {
		if err := tx.PutDecisionFile(&rec); err != nil {
			return err
		}
		for _, a := range rows {
			a.Actor = plexus.ActorSystem
			if err := tx.Record(a); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("record %s in %s/: %w", rec.PendingID, rec.Folder, err)
	}
	if rec.Folder == plexus.FolderInbox || rec.Folder == plexus.FolderActive {
		r.records[rec.PendingID] = rec
	} else {
		delete(r.records, rec.PendingID)
	}
	return nil
}

// journal writes one row of the reconciler's own.
func (r *Reconciler) journal(ctx context.Context, a *plexus.Activity) error {
	a.Actor = plexus.ActorSystem
	return r.store.Update(ctx, false, func(tx plexus.StateTx) error { return tx.Record(a) })
}

// journalAnyway writes a row for something that has happened and that the
// reconciler goes on from (a file ignored, a problem reported): a row that
// cannot be written goes to journalFailed, never dropped. The daemon
// stopping does not keep the row from being written.
func (r *Reconciler) journalAnyway(a *plexus.Activity) {
	if err := r.journal(context.Background(), a); err != nil {
		r.journalFailed(a.ActionType+" "+a.Target, err)
	}
}

// journalFailed hands a row the reconciler went on without to
// Config.JournalFailed, or logs it.
func (r *Reconciler) journalFailed(what string, err error) {
	if r.cfg.JournalFailed != nil {
		r.cfg.JournalFailed(what, err)
		return
	}
	r.log.Error("inbox: journal write failed", "what", what, "err", err)
}

// report journals a problem the owner must fix by hand, once for as long
// as it stays the same problem.
func (r *Reconciler) report(id, key, action string, a plexus.Activity) {
	if r.reported[id] == key {
		return
	}
	r.reported[id] = key
	a.ActionType = action
	r.log.Warn("inbox: "+action, "id", id, "detail", a.Payload)
	r.journalAnyway(&a)
}
