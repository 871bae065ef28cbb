package watcher

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/fsnotify/fsnotify"
	"github.com/google/go-cmp/cmp"
)

// patience bounds every wait. It is far above what any wait takes on an idle
// machine; no test asserts on how long something took.
const patience = 5 * time.Second

// recorder keeps what the Run goroutine reports through Watcher.observe, so
// that a test can wait for the watcher to have handled a given event and to
// have emitted a hint after it.
type recorder struct {
	mu      sync.Mutex
	notes   []note
	changed chan struct{} // signalled (without blocking) on every note
}

func newRecorder() *recorder { return &recorder{changed: make(chan struct{}, 1)} }

func (r *recorder) observe(n note) {
	if n.hint != nil {
		h := *n.hint
		h.Dirs = slices.Clone(h.Dirs)
		n.hint = &h
	}
	r.mu.Lock()
	r.notes = append(r.notes, n)
	r.mu.Unlock()
	select {
	case r.changed <- struct{}{}:
	default:
	}
}

// mark returns a position in the notes; conditions look at what came after.
func (r *recorder) mark() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.notes)
}

// since returns a copy of the notes from position from on.
func (r *recorder) since(from int) []note {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.notes[from:])
}

// waitFor waits until cond holds for the notes after from.
func (r *recorder) waitFor(t *testing.T, from int, what string, cond func([]note) bool) {
	t.Helper()
	timeout := time.After(patience)
	for !cond(r.since(from)) {
		select {
		case <-r.changed:
		case <-timeout:
			ns := r.since(from)
			t.Fatalf("gave up waiting for %s; last notes of %d: %v", what, len(ns), ns[max(0, len(ns)-20):])
		}
	}
}

// hintAfter reports whether a hint was emitted after the last event named
// name.
func hintAfter(name string) func([]note) bool {
	return func(ns []note) bool {
		last := -1
		for i, n := range ns {
			if n.event == name {
				last = i
			}
		}
		return last >= 0 && slices.ContainsFunc(ns[last+1:], func(n note) bool { return n.hint != nil })
	}
}

func hints(ns []note) []Hint {
	var hs []Hint
	for _, n := range ns {
		if n.hint != nil {
			hs = append(hs, *n.hint)
		}
	}
	return hs
}

func (n note) String() string {
	switch {
	case n.hint != nil:
		return fmt.Sprintf("hint%+v", *n.hint)
	case n.err != nil:
		return "err(" + n.err.Error() + ")"
	default:
		return "event(" + n.event + ")"
	}
}

// start creates a Watcher on dirs and runs it until the test ends; the
// cleanup checks that Run returns nil. hook, if not nil, is called on the
// Run goroutine after the recorder.
func start(t *testing.T, opts Options, hook func(note), dirs ...string) (*Watcher, *recorder) {
	t.Helper()
	w, err := New(dirs, opts)
	if err != nil {
		t.Fatal(err)
	}
	rec := newRecorder()
	w.observe = func(n note) {
		rec.observe(n)
		if hook != nil {
			hook(n)
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("Run: %v", err)
			}
		case <-time.After(patience):
			t.Errorf("Run did not return after cancel")
		}
	})
	return w, rec
}

// next reads hints until one satisfies ok.
func next(t *testing.T, w *Watcher, what string, ok func(Hint) bool) Hint {
	t.Helper()
	timeout := time.After(patience)
	var seen []Hint
	for {
		select {
		case h, open := <-w.Hints():
			if !open {
				t.Fatalf("hints closed while waiting for %s; seen %+v", what, seen)
			}
			if ok(h) {
				return h
			}
			seen = append(seen, h)
		case <-timeout:
			t.Fatalf("no hint %s within %v; seen %+v", what, patience, seen)
		}
	}
}

// started reads the start-up hint and waits until the recorder has it too,
// returning the position after it.
func started(t *testing.T, w *Watcher, rec *recorder) int {
	t.Helper()
	next(t, w, "at start-up", isFull)
	rec.waitFor(t, 0, "the start-up hint noted", func(ns []note) bool { return len(hints(ns)) > 0 })
	return rec.mark()
}

func isFull(h Hint) bool { return h.Full }

func naming(dir string) func(Hint) bool {
	return func(h Hint) bool { return slices.Contains(h.Dirs, dir) }
}

func fullNaming(dir string) func(Hint) bool {
	return func(h Hint) bool { return h.Full && slices.Contains(h.Dirs, dir) }
}

// waitWatched waits until Watched reports dir as watched (want) or not.
func waitWatched(t *testing.T, w *Watcher, dir string, want bool) {
	t.Helper()
	deadline := time.Now().Add(patience)
	for slices.Contains(w.Watched(), dir) != want {
		if time.Now().After(deadline) {
			t.Fatalf("Watched() = %v; want %s in it: %v", w.Watched(), dir, want)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func write(t *testing.T, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
}

// eachMode runs test once for each way a watch can be placed: what every
// watch promises holds for both.
func eachMode(t *testing.T, test func(t *testing.T, base Options)) {
	for _, m := range []struct {
		name    string
		settled bool
	}{{"Plain", false}, {"Settled", true}} {
		t.Run(m.name, func(t *testing.T) { test(t, Options{Settled: m.settled}) })
	}
}

// mkdirs makes named folders in a fresh temp dir.
func mkdirs(t *testing.T, names ...string) []string {
	t.Helper()
	root := t.TempDir()
	var dirs []string
	for _, n := range names {
		d := filepath.Join(root, n)
		if err := os.Mkdir(d, 0o700); err != nil {
			t.Fatal(err)
		}
		dirs = append(dirs, d)
	}
	return dirs
}

func TestNew(t *testing.T) {
	root := t.TempDir()
	dir := filepath.Join(root, "inbox")
	file := filepath.Join(root, "file")
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	write(t, file, "x")

	t.Run("OK", func(t *testing.T) {
		w, err := New([]string{dir + "/", dir, filepath.Join(dir, "..", "inbox")}, Options{})
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff([]string{dir}, w.dirs); diff != "" {
			t.Errorf("folders (-want +got):\n%s", diff)
		}
		if w.debounce != DefaultDebounce || w.rescan != DefaultRescan || w.poll != DefaultPoll {
			t.Errorf("defaults: debounce %v, rescan %v, poll %v", w.debounce, w.rescan, w.poll)
		}
		if got := w.Watched(); len(got) != 0 {
			t.Errorf("Watched() before Run = %v, want none", got)
		}
	})
	for name, tc := range map[string]struct {
		dirs []string
		opts Options
		want string // in the error
	}{
		"ErrMissing":  {dirs: []string{dir, filepath.Join(root, "nope")}, want: filepath.Join(root, "nope")},
		"ErrNotDir":   {dirs: []string{file}, want: file},
		"ErrNone":     {want: "no folders"},
		"ErrEmpty":    {dirs: []string{""}, want: "empty"},
		"ErrNegative": {dirs: []string{dir}, opts: Options{Debounce: -1}, want: "negative"},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := New(tc.dirs, tc.opts)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("New(%q) error = %v, want one containing %q", tc.dirs, err, tc.want)
			}
		})
	}
}

func TestStartupHintIsFull(t *testing.T) { eachMode(t, testStartupHintIsFull) }

func testStartupHintIsFull(t *testing.T, base Options) {
	dirs := mkdirs(t, "inbox", "active")
	w, _ := start(t, base, nil, dirs...)
	h := next(t, w, "at start-up", func(Hint) bool { return true })
	if diff := cmp.Diff(Hint{Full: true}, h); diff != "" {
		t.Errorf("first hint (-want +got):\n%s", diff)
	}
	// The watches are placed before the start-up hint is emitted.
	slices.Sort(dirs)
	if diff := cmp.Diff(dirs, w.Watched()); diff != "" {
		t.Errorf("Watched() (-want +got):\n%s", diff)
	}
}

func TestFileChangesNameTheirFolder(t *testing.T) { eachMode(t, testFileChangesNameTheirFolder) }

func testFileChangesNameTheirFolder(t *testing.T, base Options) {
	dirs := mkdirs(t, "inbox", "active", "untouched")
	inbox, active, untouched := dirs[0], dirs[1], dirs[2]
	w, _ := start(t, base, nil, dirs...)
	next(t, w, "at start-up", isFull)

	steps := []struct {
		name string
		dir  string
		do   func() error
	}{
		{"Create", inbox, func() error { return os.WriteFile(filepath.Join(inbox, "a.md"), []byte("a"), 0o600) }},
		{"Write", inbox, func() error { return os.WriteFile(filepath.Join(inbox, "a.md"), []byte("b"), 0o600) }},
		{"MoveAcross", active, func() error { return os.Rename(filepath.Join(inbox, "a.md"), filepath.Join(active, "a.md")) }},
		{"RenameWithin", active, func() error { return os.Rename(filepath.Join(active, "a.md"), filepath.Join(active, "b.md")) }},
		{"Chmod", active, func() error { return os.Chmod(filepath.Join(active, "b.md"), 0o644) }},
		{"Delete", active, func() error { return os.Remove(filepath.Join(active, "b.md")) }},
	}
	var all []Hint
	for _, s := range steps {
		t.Run(s.name, func(t *testing.T) {
			if err := s.do(); err != nil {
				t.Fatal(err)
			}
			h := next(t, w, "naming "+s.dir, naming(s.dir))
			all = append(all, h)
			if !slices.IsSorted(h.Dirs) || len(slices.Compact(slices.Clone(h.Dirs))) != len(h.Dirs) {
				t.Errorf("Dirs %v: not sorted or not unique", h.Dirs)
			}
		})
	}
	for _, h := range all {
		if slices.Contains(h.Dirs, untouched) {
			t.Errorf("hint %+v names a folder nothing happened in", h)
		}
	}
}

// burst writes n files into dir, then makes the folder marker (one fsnotify
// event, so once the watcher has handled it there is nothing left to
// handle). It returns how long the writes took and how many pauses between
// two of them were long enough to let a quiet period of d run out. It may
// run on any goroutine.
func burst(dir string, n int, d time.Duration) (took time.Duration, pauses int, err error) {
	begin := time.Now()
	prev := begin
	for i := range n {
		if err := os.WriteFile(filepath.Join(dir, "f"+strconv.Itoa(i)+".md"), []byte("x"), 0o600); err != nil {
			return 0, 0, err
		}
		now := time.Now()
		if now.Sub(prev) > d/2 {
			pauses++
		}
		prev = now
	}
	if err := os.Mkdir(filepath.Join(dir, "marker"), 0o700); err != nil {
		return 0, 0, err
	}
	return time.Since(begin), pauses, nil
}

func TestBurstIsCoalesced(t *testing.T) { eachMode(t, testBurstIsCoalesced) }

func testBurstIsCoalesced(t *testing.T, base Options) {
	dir := mkdirs(t, "inbox")[0]
	const debounce = 100 * time.Millisecond
	w, rec := start(t, Options{Settled: base.Settled, Debounce: debounce}, nil, dir)
	from := started(t, w, rec)
	marker := filepath.Join(dir, "marker")

	// The writer runs while this goroutine keeps reading hints, as the inbox
	// would.
	type result struct {
		took   time.Duration
		pauses int
		err    error
	}
	written := make(chan result, 1)
	go func() {
		took, pauses, err := burst(dir, 500, debounce)
		written <- result{took, pauses, err}
	}()
	var got []Hint
	var res *result
	timeout := time.After(patience)
	for res == nil || !hintAfter(marker)(rec.since(from)) {
		select {
		case h := <-w.Hints():
			got = append(got, h)
		case r := <-written:
			if r.err != nil {
				t.Fatal(r.err)
			}
			res = &r
		case <-rec.changed:
		case <-timeout:
			ns := rec.since(from)
			t.Fatalf("gave up; hints %+v, last notes of %d: %v", got, len(ns), ns[max(0, len(ns)-20):])
		}
	}
	// The hint emitted after the marker is in the channel or already read.
	select {
	case h := <-w.Hints():
		got = append(got, h)
	default:
	}

	emitted := hints(rec.since(from))
	// One hint for the burst; one more per stretch of 10 × debounce it
	// lasted and per pause of the writer long enough to end a quiet period;
	// and one for a stall of the watcher's own goroutines on a loaded
	// machine, which the writer cannot see. Without coalescing there would
	// be hundreds.
	limit := 2 + int(res.took/(maxWaitFactor*debounce)) + res.pauses
	t.Logf("burst of 500 took %v with %d pauses: %d hints emitted, %d read", res.took, res.pauses, len(emitted), len(got))
	if len(emitted) > limit {
		t.Errorf("%d hints emitted for the burst, want at most %d: %+v", len(emitted), limit, emitted)
	}
	if len(got) < 1 || len(got) > len(emitted) {
		t.Errorf("read %d hints, want between 1 and %d", len(got), len(emitted))
	}
	for _, h := range got {
		if diff := cmp.Diff(Hint{Dirs: []string{dir}}, h); diff != "" {
			t.Errorf("hint (-want +got):\n%s", diff)
		}
	}
}

func TestSlowConsumerGetsOneMergedHint(t *testing.T) { eachMode(t, testSlowConsumerGetsOneMergedHint) }

func testSlowConsumerGetsOneMergedHint(t *testing.T, base Options) {
	dir := mkdirs(t, "inbox")[0]
	w, rec := start(t, base, nil, dir)
	// Nobody reads, not even the start-up hint; its note says the watch is
	// in place.
	rec.waitFor(t, 0, "the start-up hint noted", func(ns []note) bool { return len(hints(ns)) > 0 })
	if _, _, err := burst(dir, 500, DefaultDebounce); err != nil {
		t.Fatal(err)
	}
	rec.waitFor(t, 0, "a hint after the last event", hintAfter(filepath.Join(dir, "marker")))

	ns := rec.since(0)
	events := 0
	for _, n := range ns {
		if n.event != "" {
			events++
		}
	}
	// The watcher kept handling events (at least one per file) and emitting
	// hints (the start-up one and at least one after the burst) while
	// nobody read.
	if events < 501 || len(hints(ns)) < 2 {
		t.Errorf("handled %d events and emitted %d hints; want >= 501 and >= 2", events, len(hints(ns)))
	}
	select {
	case h := <-w.Hints():
		if diff := cmp.Diff(Hint{Full: true, Dirs: []string{dir}}, h); diff != "" {
			t.Errorf("pending hint (-want +got):\n%s", diff)
		}
	default:
		t.Fatal("no hint pending")
	}
	select {
	case h := <-w.Hints():
		t.Errorf("a second hint pending: %+v", h)
	default:
	}
}

func TestAtomicSave(t *testing.T) { eachMode(t, testAtomicSave) }

func testAtomicSave(t *testing.T, base Options) {
	dir := mkdirs(t, "active")[0]
	target := filepath.Join(dir, "01J.md")
	write(t, target, "old")
	w, rec := start(t, base, nil, dir)
	next(t, w, "at start-up", isFull)

	t.Run("TempThenRename", func(t *testing.T) {
		from := rec.mark()
		tmp := filepath.Join(dir, ".01J.md.tmp")
		write(t, tmp, "new")
		if err := os.Rename(tmp, target); err != nil {
			t.Fatal(err)
		}
		rec.waitFor(t, from, "a hint after the rename", hintAfter(target))
		next(t, w, "naming the folder", naming(dir))
		if b, err := os.ReadFile(target); err != nil || string(b) != "new" {
			t.Errorf("after the hint the file reads %q, %v", b, err)
		}
	})
	t.Run("SwapFile", func(t *testing.T) {
		from := rec.mark()
		swp := filepath.Join(dir, ".01J.md.swp")
		write(t, swp, "swap")
		if err := os.Remove(swp); err != nil {
			t.Fatal(err)
		}
		rec.waitFor(t, from, "a hint after the swap file went", hintAfter(swp))
		next(t, w, "naming the folder", naming(dir))
	})
}

// replaced checks that after replace, dir is watched again: a Full hint
// naming it arrives, and a file created in it afterwards is seen and hinted.
func replaced(t *testing.T, dir string, opts Options, replace func()) {
	t.Helper()
	w, rec := start(t, opts, nil, dir)
	next(t, w, "at start-up", isFull)
	replace()
	next(t, w, "Full, naming the replaced folder", fullNaming(dir))
	if !slices.Contains(w.Watched(), dir) {
		t.Errorf("Watched() = %v after the Full hint, want %s in it", w.Watched(), dir)
	}
	from := rec.mark()
	after := filepath.Join(dir, "after.md")
	write(t, after, "x")
	rec.waitFor(t, from, "the new folder's event and a hint after it", hintAfter(after))
	next(t, w, "naming the new folder", naming(dir))
}

func TestFolderReplaced(t *testing.T) { eachMode(t, testFolderReplaced) }

func testFolderReplaced(t *testing.T, base Options) {
	t.Run("MovedAwayAndMade", func(t *testing.T) {
		dir := mkdirs(t, "inbox")[0]
		replaced(t, dir, base, func() {
			if err := os.Rename(dir, dir+".old"); err != nil {
				t.Fatal(err)
			}
			if err := os.Mkdir(dir, 0o700); err != nil {
				t.Fatal(err)
			}
		})
	})
	t.Run("RemovedAndMade", func(t *testing.T) {
		dir := mkdirs(t, "inbox")[0]
		write(t, filepath.Join(dir, "a.md"), "a")
		replaced(t, dir, base, func() {
			if err := os.RemoveAll(dir); err != nil {
				t.Fatal(err)
			}
			if err := os.Mkdir(dir, 0o700); err != nil {
				t.Fatal(err)
			}
		})
	})
	t.Run("OtherMovedIntoPlace", func(t *testing.T) {
		dirs := mkdirs(t, "inbox", "staging")
		dir, other := dirs[0], dirs[1]
		write(t, filepath.Join(other, "a.md"), "a")
		replaced(t, dir, base, func() {
			if err := os.Rename(dir, dir+".old"); err != nil {
				t.Fatal(err)
			}
			if err := os.Rename(other, dir); err != nil {
				t.Fatal(err)
			}
		})
	})
	t.Run("OtherRenamedOverIt", func(t *testing.T) {
		// rename(2) onto an empty folder replaces it without the path ever
		// missing. (os.Rename refuses an existing folder as the target.)
		dirs := mkdirs(t, "inbox", "staging")
		dir, other := dirs[0], dirs[1]
		write(t, filepath.Join(other, "a.md"), "a")
		replaced(t, dir, base, func() {
			if err := syscall.Rename(other, dir); err != nil {
				t.Fatal(err)
			}
		})
	})
}

func TestFolderRemovedThenRecreatedLater(t *testing.T) {
	eachMode(t, testFolderRemovedThenRecreatedLater)
}

func testFolderRemovedThenRecreatedLater(t *testing.T, base Options) {
	dir := mkdirs(t, "inbox")[0]
	write(t, filepath.Join(dir, "a.md"), "a")
	w, rec := start(t, base, nil, dir)
	next(t, w, "at start-up", isFull)

	if err := os.RemoveAll(dir); err != nil {
		t.Fatal(err)
	}
	// Its contents went with it: that is a change in the folder.
	next(t, w, "naming the removed folder", naming(dir))
	waitWatched(t, w, dir, false)

	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	next(t, w, "Full, naming the recreated folder", fullNaming(dir))
	waitWatched(t, w, dir, true)
	from := rec.mark()
	after := filepath.Join(dir, "after.md")
	write(t, after, "x")
	rec.waitFor(t, from, "the new folder's event and a hint after it", hintAfter(after))
	next(t, w, "naming the recreated folder", naming(dir))
}

func TestFolderMissingAtRun(t *testing.T) { eachMode(t, testFolderMissingAtRun) }

func testFolderMissingAtRun(t *testing.T, base Options) {
	dirs := mkdirs(t, "inbox", "active")
	inbox, active := dirs[0], dirs[1]
	w, err := New(dirs, base)
	if err != nil {
		t.Fatal(err)
	}
	// Gone between New and Run: Run does not fail; it waits for it.
	if err := os.Remove(active); err != nil {
		t.Fatal(err)
	}
	rec := newRecorder()
	w.observe = rec.observe
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	}()
	next(t, w, "at start-up", isFull)
	if diff := cmp.Diff([]string{inbox}, w.Watched()); diff != "" {
		t.Errorf("Watched() (-want +got):\n%s", diff)
	}
	if err := os.Mkdir(active, 0o700); err != nil {
		t.Fatal(err)
	}
	next(t, w, "Full, naming the folder that appeared", fullNaming(active))
	if diff := cmp.Diff([]string{active, inbox}, w.Watched()); diff != "" {
		t.Errorf("Watched() (-want +got):\n%s", diff)
	}
}

func TestPeriodicRescan(t *testing.T) { eachMode(t, testPeriodicRescan) }

func testPeriodicRescan(t *testing.T, base Options) {
	dir := mkdirs(t, "inbox")[0]
	w, _ := start(t, Options{Settled: base.Settled, Rescan: 100 * time.Millisecond}, nil, dir)
	next(t, w, "at start-up", isFull)
	// Nothing happens in the folder; Full hints keep coming.
	for i := range 2 {
		h := next(t, w, "from the periodic rescan", func(Hint) bool { return true })
		if diff := cmp.Diff(Hint{Full: true}, h); diff != "" {
			t.Errorf("rescan hint %d (-want +got):\n%s", i, diff)
		}
	}
}

func TestOverflowAsksForFullRescan(t *testing.T) { eachMode(t, testOverflowAsksForFullRescan) }

func testOverflowAsksForFullRescan(t *testing.T, base Options) {
	b, err := os.ReadFile("/proc/sys/fs/inotify/max_queued_events")
	if err != nil {
		t.Skip("no inotify queue limit to overflow:", err)
	}
	limit, err := strconv.Atoi(string(bytes.TrimSpace(b)))
	if err != nil || limit > 1<<16 {
		t.Skipf("inotify queue limit %q is too large to overflow in a test", b)
	}
	dir := mkdirs(t, "inbox")[0]

	// The hook holds the Run goroutine on the first event, so fsnotify stops
	// reading and the kernel queue fills up, as it would under a storm.
	blocked, release, overflowed := make(chan struct{}), make(chan struct{}), make(chan struct{})
	var hold, unhold, overflow sync.Once
	w, _ := start(t, base, func(n note) {
		if n.event != "" {
			hold.Do(func() {
				close(blocked)
				<-release
			})
		}
		if errors.Is(n.err, fsnotify.ErrEventOverflow) {
			overflow.Do(func() { close(overflowed) })
		}
	}, dir)
	t.Cleanup(func() { unhold.Do(func() { close(release) }) }) // before Run's cleanup
	next(t, w, "at start-up", isFull)

	write(t, filepath.Join(dir, "first.md"), "x")
	select {
	case <-blocked:
	case <-time.After(patience):
		t.Fatal("the first event never reached the watcher")
	}
	for i := range limit + 500 {
		f, err := os.Create(filepath.Join(dir, "f"+strconv.Itoa(i)))
		if err != nil {
			t.Fatal(err)
		}
		f.Close()
	}
	unhold.Do(func() { close(release) })

	// The watcher now works through a full kernel queue: many events, then
	// the overflow.
	select {
	case <-overflowed:
	case <-time.After(4 * patience):
		t.Fatal("fsnotify reported no overflow")
	}
	// The start-up hint was read, and nothing else asks for a full look.
	next(t, w, "Full after the overflow", isFull)
}

func TestRunStopsAndLeavesNothingBehind(t *testing.T) {
	eachMode(t, testRunStopsAndLeavesNothingBehind)
}

func testRunStopsAndLeavesNothingBehind(t *testing.T, base Options) {
	dir := mkdirs(t, "inbox")[0]
	before := runtime.NumGoroutine()

	w, err := New([]string{dir}, Options{Settled: base.Settled, Debounce: time.Millisecond, Rescan: 10 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	next(t, w, "at start-up", isFull)
	// Stop it while events, a pending hint and the timers are all live, and
	// nobody reads.
	for i := range 50 {
		write(t, filepath.Join(dir, strconv.Itoa(i)), "x")
	}
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("Run = %v, want nil", err)
		}
	case <-time.After(patience):
		t.Fatal("Run did not return after cancel")
	}
	if got := w.Watched(); len(got) != 0 {
		t.Errorf("Watched() after Run = %v, want none", got)
	}
	// Hints is closed, after at most one pending hint.
	for range 2 {
		if _, open := <-w.Hints(); !open {
			break
		}
	}
	if _, open := <-w.Hints(); open {
		t.Error("Hints still open after Run returned")
	}
	if err := w.Run(context.Background()); err == nil {
		t.Error("a second Run succeeded")
	}

	deadline := time.Now().Add(patience)
	for runtime.NumGoroutine() > before {
		if time.Now().After(deadline) {
			buf := make([]byte, 1<<20)
			buf = buf[:runtime.Stack(buf, true)]
			t.Fatalf("%d goroutines before, %d after:\n%s", before, runtime.NumGoroutine(), buf)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func TestMerge(t *testing.T) {
	for name, tc := range map[string]struct{ a, b, want Hint }{
		"Empty":     {want: Hint{}},
		"FullWins":  {a: Hint{Full: true}, b: Hint{Dirs: []string{"/a"}}, want: Hint{Full: true, Dirs: []string{"/a"}}},
		"UnionDirs": {a: Hint{Dirs: []string{"/b", "/c"}}, b: Hint{Dirs: []string{"/a", "/b"}}, want: Hint{Dirs: []string{"/a", "/b", "/c"}}},
	} {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, merge(tc.a, tc.b), cmp.Comparer(func(x, y []string) bool {
				return slices.Equal(x, y)
			})); diff != "" {
				t.Errorf("merge (-want +got):\n%s", diff)
			}
		})
	}
}

func TestOnlyNarrowsWhatCounts(t *testing.T) { eachMode(t, testOnlyNarrowsWhatCounts) }

func testOnlyNarrowsWhatCounts(t *testing.T, base Options) {
	home := mkdirs(t, "home")[0]
	const debounce = 10 * time.Millisecond
	w, rec := start(t, Options{Settled: base.Settled, Debounce: debounce, Only: func(name string) bool { return name == "mcp.json" }}, nil, home)
	from := started(t, w, rec)
	write(t, filepath.Join(home, "journal.db-wal"), "busy")
	rec.waitFor(t, from, "the journal write handled", func(ns []note) bool {
		return slices.ContainsFunc(ns, func(n note) bool { return strings.HasSuffix(n.event, "journal.db-wal") })
	})
	// Long enough for a hint the write had caused to go out on its own.
	time.Sleep(5 * debounce)
	write(t, filepath.Join(home, "mcp.json"), "{}")
	next(t, w, "naming the folder of mcp.json", naming(home))
	// The recorder notes a hint on its own goroutine, after next saw it.
	rec.waitFor(t, from, "the hint noted", func(ns []note) bool {
		return slices.ContainsFunc(ns, func(n note) bool { return n.hint != nil })
	})
	// The first hint after start-up must come after the mcp.json event: a
	// hint between the two would be the journal write's.
	ns := rec.since(from)
	firstHint := slices.IndexFunc(ns, func(n note) bool { return n.hint != nil })
	mcp := slices.IndexFunc(ns, func(n note) bool { return strings.HasSuffix(n.event, "mcp.json") })
	if mcp < 0 || firstHint < mcp {
		t.Errorf("notes %v: a hint came before the mcp.json event", ns)
	}
}

// TestNonRegularFilesOnlyHint: a FIFO, a symlink and a folder made in a
// watched folder are hints like any file, and the watcher never opens what
// it sees (the FIFO has no reader afterwards; a reader would have hung it).
func TestNonRegularFilesOnlyHint(t *testing.T) { eachMode(t, testNonRegularFilesOnlyHint) }

func testNonRegularFilesOnlyHint(t *testing.T, base Options) {
	dirs := mkdirs(t, "inbox")
	inbox := dirs[0]
	w, _ := start(t, base, nil, dirs...)
	next(t, w, "at start-up", isFull)
	fifo := filepath.Join(inbox, "pend_fifo.md")
	steps := []struct {
		name string
		do   func() error
	}{
		{"FIFO", func() error { return syscall.Mkfifo(fifo, 0o600) }},
		{"Symlink", func() error { return os.Symlink(fifo, filepath.Join(inbox, "pend_link.md")) }},
		{"Folder", func() error { return os.Mkdir(filepath.Join(inbox, "pend_dir.md"), 0o700) }},
	}
	for _, s := range steps {
		t.Run(s.name, func(t *testing.T) {
			if err := s.do(); err != nil {
				t.Fatal(err)
			}
			next(t, w, "naming "+inbox, naming(inbox))
		})
	}
	f, err := os.OpenFile(fifo, os.O_WRONLY|syscall.O_NONBLOCK, 0)
	if err == nil {
		f.Close()
		t.Fatal("the FIFO has a reader: the watcher opened it")
	}
	if !errors.Is(err, syscall.ENXIO) {
		t.Fatalf("open the FIFO for writing: %v, want ENXIO (no reader)", err)
	}
}

// Watched returns the folders that currently have a live
// watch, sorted. A folder that went missing is absent until it is back.
func (w *Watcher) Watched() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return slices.Clone(w.live)
}
