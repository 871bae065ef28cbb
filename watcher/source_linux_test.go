//go:build linux

package watcher

import (
	"os"
	"path/filepath"
	"strconv"
	"testing"
)

// eventsOn counts the events noted for path.
func eventsOn(ns []note, path string) int {
	n := 0
	for _, x := range ns {
		if x.event == path {
			n++
		}
	}
	return n
}

// TestSettledHintsOnWhatTheOwnerDoes: each way an owner (an editor, a
// command, a script) changes a file is an event and a hint in a settled
// watch; the in-place save is seen only by its close, as the open with
// O_TRUNC and the write are IN_MODIFY, which a settled watch leaves out.
func TestSettledHintsOnWhatTheOwnerDoes(t *testing.T) {
	home := mkdirs(t, "home")[0]
	conf := filepath.Join(home, "mcp.json")
	w, rec := start(t, Options{Settled: true}, nil, home)
	started(t, w, rec)
	steps := []struct {
		name  string
		event string // the path the event must name
		do    func() error
	}{
		{"Create", conf, func() error { return os.WriteFile(conf, []byte("{}"), 0o600) }},
		{"InPlaceWriteAndClose", conf, func() error {
			f, err := os.OpenFile(conf, os.O_WRONLY|os.O_TRUNC, 0)
			if err != nil {
				return err
			}
			if _, err := f.WriteString(`{"servers":{}}`); err != nil {
				return err
			}
			return f.Close()
		}},
		{"AtomicRenameOver", conf, func() error {
			tmp := filepath.Join(home, ".mcp.json.tmp")
			if err := os.WriteFile(tmp, []byte("{}"), 0o600); err != nil {
				return err
			}
			return os.Rename(tmp, conf)
		}},
		{"Chmod", conf, func() error { return os.Chmod(conf, 0o644) }},
		{"Remove", conf, func() error { return os.Remove(conf) }},
	}
	for _, s := range steps {
		t.Run(s.name, func(t *testing.T) {
			from := rec.mark()
			if err := s.do(); err != nil {
				t.Fatal(err)
			}
			rec.waitFor(t, from, "a hint after the event on "+s.event, hintAfter(s.event))
			next(t, w, "naming the folder", naming(home))
		})
	}
}

// TestWritesToAFileHeldOpen: the journal's pattern (open once, write at an
// offset many times) queues an event per write in a plain watch, and none
// in a settled one, whose first event for the file is its close.
func TestWritesToAFileHeldOpen(t *testing.T) {
	for _, tc := range []struct {
		name       string
		settled    bool
		wantWrites bool // events noted for the file while it is written
	}{
		{"Plain", false, true},
		{"Settled", true, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			home := mkdirs(t, "home")[0]
			wal := filepath.Join(home, "journal.db-wal")
			f, err := os.OpenFile(wal, os.O_RDWR|os.O_CREATE, 0o600)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			w, rec := start(t, Options{Settled: tc.settled}, nil, home)
			from := started(t, w, rec)
			for i := range 200 {
				if _, err := f.WriteAt([]byte("page "+strconv.Itoa(i)), int64(i%8)*4096); err != nil {
					t.Fatal(err)
				}
			}
			// Events arrive in order: once the marker's is handled, any
			// event the writes queued has been handled before it.
			marker := filepath.Join(home, "marker")
			write(t, marker, "x")
			rec.waitFor(t, from, "the marker's event and a hint after it", hintAfter(marker))
			ns := rec.since(from)
			if got := eventsOn(ns, wal) > 0; got != tc.wantWrites {
				t.Errorf("%d events for the writes to a file held open; want some: %v", eventsOn(ns, wal), tc.wantWrites)
			}
			if !tc.settled {
				return // a plain watch does not ask for closes
			}
			// The close is what counts.
			from = rec.mark()
			if err := f.Close(); err != nil {
				t.Fatal(err)
			}
			rec.waitFor(t, from, "the close's event and a hint after it", hintAfter(wal))
		})
	}
}
