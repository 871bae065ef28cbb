package watcher

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/fsnotify/fsnotify"
)

var errNotDir = errors.New("not a folder")

// loop is the state of one Run. All of it is owned by the Run goroutine; the
// only state shared with other goroutines is Watcher.live (under Watcher.mu)
// and the hints channel.
type loop struct {
	w   *Watcher
	src source

	folders []*folder          // sorted by path
	byPath  map[string]*folder // the same folders, by cleaned path

	// What the next hint will say. since is when the first of it was
	// gathered; it is zero when nothing is pending.
	full    bool
	changed map[string]bool
	since   time.Time

	quiet *time.Timer // armed while something is pending: emits it
	poll  *time.Timer // armed while a folder is missing: looks for it
}

// folder is one watched path and what the watch is on.
type folder struct {
	path string
	// info is the folder the watch was placed on, nil while there is no
	// watch (the folder is missing, or adding the watch failed).
	info os.FileInfo
	// problem is why there is no watch, as last logged, so that a folder
	// that stays missing is logged once, not at every poll.
	problem string
}

func newLoop(w *Watcher, src source) *loop {
	l := &loop{
		w:       w,
		src:     src,
		byPath:  make(map[string]*folder, len(w.dirs)),
		changed: make(map[string]bool, len(w.dirs)),
		quiet:   time.NewTimer(time.Hour),
		poll:    time.NewTimer(time.Hour),
	}
	// Since Go 1.23 a stopped timer delivers nothing, so stopped timers
	// stand for "not armed".
	l.quiet.Stop()
	l.poll.Stop()
	for _, d := range w.dirs {
		f := &folder{path: d}
		l.folders = append(l.folders, f)
		l.byPath[d] = f
	}
	return l
}

func (l *loop) stop() {
	l.quiet.Stop()
	l.poll.Stop()
}

// start places the first watches and emits the start-up hint. The watches
// come first, so that a change made while the consumer reconciles is hinted
// again.
func (l *loop) start() error {
	for _, f := range l.folders {
		fi, err := l.add(f.path)
		switch {
		case err == nil:
			f.info = fi
		case errors.Is(err, fs.ErrNotExist) || errors.Is(err, errNotDir):
			l.missing(f, err)
		default:
			return fmt.Errorf("watcher: watch %s: %w", f.path, err)
		}
	}
	l.publish()
	l.send(Hint{Full: true})
	return nil
}

func (l *loop) run(ctx context.Context) error {
	rescan := time.NewTicker(l.w.rescan)
	defer rescan.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case ev, ok := <-l.src.events():
			if !ok {
				return errors.New("watcher: the event source closed its event channel")
			}
			l.event(ev)
		case err, ok := <-l.src.errs():
			if !ok {
				return errors.New("watcher: the event source closed its error channel")
			}
			l.fsError(err)
		case <-l.quiet.C:
			l.flush()
		case <-l.poll.C:
			l.lookForMissing()
		case <-rescan.C:
			l.full = true
			if l.since.IsZero() {
				l.flush()
			} // else the pending hint carries it, once the burst is over
		}
	}
}

// event handles one fsnotify event. Its operation does not matter: whatever
// happened in a folder, the consumer looks at the folder.
func (l *loop) event(ev fsnotify.Event) {
	name := filepath.Clean(ev.Name)
	if f, ok := l.byPath[name]; ok {
		// The event names a watched folder itself: the folder was removed or
		// moved away (seen by its own watch), or changed in a watched parent.
		// Either way, see whether the watch still holds.
		l.check(f)
	}
	if parent := filepath.Dir(name); l.byPath[parent] != nil && (l.w.only == nil || l.w.only(filepath.Base(name))) {
		l.mark(parent)
	}
	if l.w.observe != nil {
		l.w.observe(note{event: ev.Name})
	}
}

// fsError handles an error from fsnotify. An overflow means events were lost;
// any other error may mean the same. Both ask for a full look, after the
// storm, and for every watch to be checked.
func (l *loop) fsError(err error) {
	if errors.Is(err, fsnotify.ErrEventOverflow) {
		l.w.log.Warn("watcher: event queue overflowed; asking for a full rescan")
	} else {
		l.w.log.Warn("watcher: fsnotify error; asking for a full rescan", "err", err)
	}
	l.full = true
	l.pending()
	if l.w.observe != nil {
		l.w.observe(note{err: err})
	}
}

// mark records that dir changed.
func (l *loop) mark(dir string) {
	l.changed[dir] = true
	l.pending()
}

// pending (re)arms the debounce: the hint goes out once the folders have been
// quiet for Debounce, or maxWaitFactor × Debounce after the first change it
// covers, whichever comes first.
func (l *loop) pending() {
	now := time.Now()
	if l.since.IsZero() {
		l.since = now
	}
	wait := l.w.debounce
	if left := maxWaitFactor*l.w.debounce - now.Sub(l.since); left < wait {
		wait = max(left, 0)
	}
	l.quiet.Reset(wait)
}

// flush checks every watch, then emits what is pending as one hint.
func (l *loop) flush() {
	for _, f := range l.folders {
		l.check(f)
	}
	h := Hint{Full: l.full}
	for _, f := range l.folders {
		if l.changed[f.path] {
			h.Dirs = append(h.Dirs, f.path)
		}
	}
	l.full = false
	clear(l.changed)
	l.since = time.Time{}
	l.quiet.Stop()
	if h.Full || len(h.Dirs) > 0 {
		l.send(h)
	}
}

// send hands h to the consumer without ever waiting for it, so the fsnotify
// events keep being read however slow the consumer is. The Run goroutine is
// the only sender: if the buffer holds a hint the consumer has not taken, it
// takes that hint back and merges it into h, and the buffer then has room.
// The loop runs at most twice (the consumer may take the pending hint in
// between), and never blocks, so it needs no ctx case.
func (l *loop) send(h Hint) {
	if l.w.observe != nil {
		defer l.w.observe(note{hint: &h})
	}
	for merged := h; ; {
		select {
		case l.w.hints <- merged:
			return
		default:
		}
		select {
		case old := <-l.w.hints:
			merged = merge(old, merged)
		default:
		}
	}
}

// check makes sure f's watch is on the folder now at f.path: when the folder
// is gone it drops the watch and starts looking for it; when it was replaced
// (another inode or device at the path) or lost its watch behind our back,
// it watches it again.
func (l *loop) check(f *folder) {
	fi, err := os.Stat(f.path)
	if err == nil && !fi.IsDir() {
		err = errNotDir
	}
	switch {
	case err != nil:
		if f.info != nil {
			l.gone(f, err)
		}
	case f.info != nil && os.SameFile(f.info, fi) && l.watching(f.path):
		// The watch still holds.
	default:
		l.rewatch(f)
	}
}

// watching reports whether the source still has a watch for path; it drops
// one by itself when the kernel does (IN_IGNORED, IN_UNMOUNT, IN_MOVE_SELF).
func (l *loop) watching(path string) bool {
	return slices.Contains(l.src.WatchList(), path)
}

// gone drops the watch of a folder that is no longer at its path. Its
// contents are gone with it, so it counts as changed.
func (l *loop) gone(f *folder, err error) {
	// The kernel may have removed the watch already; the source's own state
	// is what this cleans.
	_ = l.src.Remove(f.path)
	f.info = nil
	l.missing(f, err)
	l.mark(f.path)
	l.publish()
}

// missing records that f has no watch because of err and starts looking for
// it every Poll.
func (l *loop) missing(f *folder, err error) {
	if p := err.Error(); p != f.problem {
		f.problem = p
		l.w.log.Warn("watcher: folder not watched; looking for it", "dir", f.path, "err", err)
	}
	l.poll.Reset(l.w.poll)
}

// lookForMissing watches again every missing folder that is back, and keeps
// polling while one is still missing.
func (l *loop) lookForMissing() {
	again := false
	for _, f := range l.folders {
		if f.info == nil {
			l.check(f)
			again = again || f.info == nil
		}
	}
	if again {
		l.poll.Reset(l.w.poll)
	}
}

// rewatch places a new watch on the folder at f.path. Events may have been
// missed while it had none, or while it pointed at the old folder, so it
// asks for a full look.
func (l *loop) rewatch(f *folder) {
	_ = l.src.Remove(f.path) // the old watch, if the source still has it
	fi, err := l.add(f.path)
	if err != nil {
		if f.info != nil {
			l.gone(f, err)
		} else {
			l.missing(f, err)
		}
		return
	}
	f.info = fi
	f.problem = ""
	l.w.log.Info("watcher: folder watched again", "dir", f.path)
	l.full = true
	l.mark(f.path)
	l.publish()
}

// add watches path and returns what the watch is on. It stats the folder
// before and after adding the watch: if the two differ, the folder was
// replaced while the watch was placed and the watch may be on either, so it
// tries again.
func (l *loop) add(path string) (os.FileInfo, error) {
	for range 3 {
		before, err := os.Stat(path)
		if err != nil {
			return nil, err
		}
		if !before.IsDir() {
			return nil, errNotDir
		}
		if err := l.src.Add(path); err != nil {
			return nil, err
		}
		after, err := os.Stat(path)
		if err == nil && os.SameFile(before, after) {
			return after, nil
		}
		_ = l.src.Remove(path)
	}
	return nil, errors.New("folder keeps being replaced")
}

// publish copies the set of watched folders for [Watcher.Watched].
func (l *loop) publish() {
	var live []string
	for _, f := range l.folders {
		if f.info != nil {
			live = append(live, f.path)
		}
	}
	l.w.setLive(live)
}
