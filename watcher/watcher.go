// Package watcher turns filesystem notifications on a fixed set of folders
// into hints to look again.
//
// It exists for files as API: the inbox decides by comparing what its folders
// hold with what the journal holds, and a [Hint] tells it when comparing is
// worth doing. A hint is never a decision, and nothing this package emits may
// be treated as the source of truth: inotify cannot pair renames reliably,
// drops events when its queue overflows, loses its watch when a folder is
// replaced, and sees nothing while the daemon is down. So a hint only says
// "these folders changed, look again" or, when [Hint.Full], "look at
// everything"; the consumer compares the folders with the journal and applies
// the difference, and reaches the same state whether an event was lost,
// duplicated or mis-paired.
//
// What the package does promise is liveness. Every change it is told about is
// covered by a hint emitted after it: hints are coalesced, never dropped, and
// the consumer is never waited for. A Full hint is emitted at start-up, after
// the kernel's event queue overflowed, after a watched folder was removed,
// moved away or replaced and is watched again, and every [Options.Rescan].
//
// It depends on the standard library, fsnotify and, on Linux, golang.org/x/sys/unix
// (for [Options.Settled]).
package watcher

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// Defaults for the zero values of [Options].
const (
	DefaultDebounce = 50 * time.Millisecond
	DefaultRescan   = 30 * time.Second
	DefaultPoll     = 100 * time.Millisecond
)

// maxWaitFactor bounds how long a steady stream of events can hold a hint
// back: one is emitted at least every maxWaitFactor × Debounce.
const maxWaitFactor = 10

// Options tune a [Watcher]. The zero value of each field means its default.
type Options struct {
	// Debounce is how long the folders must stay quiet before the changes
	// seen are emitted as one hint, so that a burst (an editor's save, a
	// script moving many files) costs the consumer one look. A steady stream
	// of events still yields a hint at least every 10 × Debounce. It is also
	// the floor of the latency between a change and its hint. Default 50ms.
	Debounce time.Duration
	// Rescan is the interval of the periodic Full hint, which also checks
	// that every folder's watch is still on the folder at its path.
	// Default 30s.
	Rescan time.Duration
	// Poll is how often a watched folder that has gone missing is looked for.
	// Default 100ms.
	Poll time.Duration
	// Logger receives what the watcher notices and repairs (a folder gone or
	// watched again, an overflow). Nil discards.
	Logger *slog.Logger
	// Only, when set, narrows what counts as a change: an event on a file
	// in a watched folder counts only when Only(its base name) is true. A
	// consumer of one file in a busy folder (mcp.json beside the journal)
	// then gets no hint for the others; their events are still read and
	// dropped, which Settled spares for files written in place.
	Only func(name string) bool
	// Settled leaves each write out of what the folders report: a file
	// counts when its writer closes it, or when it is created, moved,
	// removed or its mode changes. A file held open and written again and
	// again (the journal beside the owner's config files) then wakes
	// nothing, where Only still had every write read and dropped. A file
	// still being written is not worth a look anyway; one changed without
	// a close (truncate(2) by name) waits for the periodic rescan. On
	// Linux the watch's own kernel mask leaves the writes out, which
	// fsnotify cannot; elsewhere Settled changes nothing.
	Settled bool
}

// Hint says that some folders should be looked at again. It carries no
// decision and no file names: the consumer looks at the folders.
type Hint struct {
	// Full asks for a look at every folder: at start-up, after an overflow
	// (events were lost), after a folder was watched again (events were
	// missed while it had no watch), and at each periodic rescan.
	Full bool
	// Dirs are the watched folders that saw events since the previous hint,
	// sorted and without duplicates, as given to [New] (cleaned). A folder
	// that went missing or was watched again is listed too. It may be empty
	// in a Full hint.
	Dirs []string
}

// merge returns the hint that says everything a and b say.
func merge(a, b Hint) Hint {
	dirs := slices.Concat(a.Dirs, b.Dirs)
	slices.Sort(dirs)
	return Hint{Full: a.Full || b.Full, Dirs: slices.Compact(dirs)}
}

// Watcher watches a fixed set of folders, not recursively, and emits
// [Hint]s. Create it with [New] and run it with [Watcher.Run];
// [Watcher.Hints] and [Watcher.Watched] are safe to call from any goroutine.
type Watcher struct {
	dirs     []string // cleaned, sorted, without duplicates; never modified
	debounce time.Duration
	only     func(name string) bool
	settled  bool
	rescan   time.Duration
	poll     time.Duration
	log      *slog.Logger

	// hints holds at most one pending hint. Only the Run goroutine sends on
	// it (see loop.send) and closes it when Run returns.
	hints   chan Hint
	started atomic.Bool

	mu   sync.Mutex
	live []string // guarded by mu; the folders with a live watch, sorted (the tests read it)

	// observe, when set (by tests, before Run), is called on the Run
	// goroutine after each event or error of its source is handled and with each
	// hint as it is emitted, before coalescing. It must not keep h.Dirs.
	observe func(n note)
}

// note is what observe is told.
type note struct {
	event string // the name of an event handled
	err   error  // an error the source reported
	hint  *Hint  // a hint emitted
}

// New returns a Watcher for dirs. Every folder must exist when New is called;
// the error for one that does not names it. Nothing is watched until Run.
func New(dirs []string, opts Options) (*Watcher, error) {
	if len(dirs) == 0 {
		return nil, errors.New("watcher: no folders to watch")
	}
	if opts.Debounce < 0 || opts.Rescan < 0 || opts.Poll < 0 {
		return nil, errors.New("watcher: negative duration in options")
	}
	clean := make([]string, 0, len(dirs))
	for _, d := range dirs {
		if d == "" {
			return nil, errors.New("watcher: empty folder path")
		}
		d = filepath.Clean(d)
		fi, err := os.Stat(d)
		if err != nil {
			return nil, fmt.Errorf("watcher: folder %s: %w", d, err)
		}
		if !fi.IsDir() {
			return nil, fmt.Errorf("watcher: %s is not a folder", d)
		}
		clean = append(clean, d)
	}
	slices.Sort(clean)
	w := &Watcher{
		dirs:     slices.Compact(clean),
		debounce: orDefault(opts.Debounce, DefaultDebounce),
		only:     opts.Only,
		settled:  opts.Settled,
		rescan:   orDefault(opts.Rescan, DefaultRescan),
		poll:     orDefault(opts.Poll, DefaultPoll),
		log:      opts.Logger,
		hints:    make(chan Hint, 1),
	}
	if w.log == nil {
		w.log = slog.New(slog.DiscardHandler)
	}
	return w, nil
}

// orDefault returns d, or def when d is zero.
func orDefault(d, def time.Duration) time.Duration {
	if d == 0 {
		return def
	}
	return d
}

// Hints returns the channel hints are emitted on. It holds at most one hint:
// when the consumer is slow, newer hints are merged into the pending one, so
// a consumer that reads late gets one hint covering everything it missed. It
// is closed when Run returns.
func (w *Watcher) Hints() <-chan Hint { return w.hints }

func (w *Watcher) setLive(live []string) {
	w.mu.Lock()
	w.live = live
	w.mu.Unlock()
}

// Run watches the folders until ctx ends, then releases the fsnotify (or
// inotify) watcher and its goroutine, closes [Watcher.Hints] and returns nil. The first hint,
// emitted once the watches are in place, is Full, so the consumer reconciles
// at start-up without missing a change made while it does. A folder missing
// at this point is looked for every Poll, like one that goes missing later.
// Run returns an error if fsnotify cannot be started or a folder cannot be
// watched at start-up for another reason (such as the inotify watch limit),
// or if called a second time.
func (w *Watcher) Run(ctx context.Context) error {
	if !w.started.CompareAndSwap(false, true) {
		return errors.New("watcher: Run called more than once")
	}
	defer close(w.hints)
	defer w.setLive(nil)
	src, err := newSource(ctx, w.settled)
	if err != nil {
		return fmt.Errorf("watcher: start fsnotify: %w", err)
	}
	// Close waits for the source's reading goroutine to end.
	defer src.Close()

	l := newLoop(w, src)
	defer l.stop()
	if err := l.start(); err != nil {
		return err
	}
	return l.run(ctx)
}
