//go:build linux

package watcher

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"sync"
	"syscall"

	"github.com/fsnotify/fsnotify"
	"golang.org/x/sys/unix"
)

// settledMask is what a settled watch asks the kernel for: what fsnotify
// asks for, less IN_MODIFY, plus IN_CLOSE_WRITE. A file written in place
// then counts once, when its writer closes it, and a file held open and
// written again and again (the journal's WAL and anchor) queues nothing
// at all. fsnotify always asks for IN_MODIFY: its way to leave it out is
// unexported.
const settledMask = unix.IN_CREATE | unix.IN_CLOSE_WRITE | unix.IN_MOVED_FROM | unix.IN_MOVED_TO |
	unix.IN_DELETE | unix.IN_ATTRIB | unix.IN_DELETE_SELF | unix.IN_MOVE_SELF

// newSource returns fsnotify, or for a settled watch an inotify source.
func newSource(ctx context.Context, settled bool) (source, error) {
	if !settled {
		return newFsnotify()
	}
	return newInotify(ctx)
}

// inotifySource reads one inotify descriptor of its own. Its reading
// goroutine turns the kernel's events into fsnotify's Event and error
// values, so that the loop handles both sources alike.
type inotifySource struct {
	// file is the descriptor, non-blocking so that Read parks in the
	// runtime's poller and Close ends it. conn reaches the descriptor for
	// inotify_add_watch without Fd, which would make it blocking.
	file   *os.File
	conn   syscall.RawConn
	evs    chan fsnotify.Event
	errc   chan error
	cancel context.CancelFunc
	done   chan struct{} // closed when the reading goroutine has returned

	mu    sync.Mutex
	paths map[int32]string // guarded by mu; watch descriptor → path
	wds   map[string]int32 // guarded by mu; path → watch descriptor
}

func newInotify(ctx context.Context) (*inotifySource, error) {
	fd, err := unix.InotifyInit1(unix.IN_CLOEXEC | unix.IN_NONBLOCK)
	if err != nil {
		return nil, fmt.Errorf("inotify_init1: %w", err)
	}
	file := os.NewFile(uintptr(fd), "inotify")
	conn, err := file.SyscallConn()
	if err != nil {
		return nil, errors.Join(fmt.Errorf("inotify descriptor: %w", err), file.Close())
	}
	ctx, cancel := context.WithCancel(ctx)
	s := &inotifySource{file: file, conn: conn, evs: make(chan fsnotify.Event), errc: make(chan error),
		cancel: cancel, done: make(chan struct{}), paths: map[int32]string{}, wds: map[string]int32{}}
	go s.read(ctx)
	return s, nil
}

func (s *inotifySource) events() <-chan fsnotify.Event { return s.evs }
func (s *inotifySource) errs() <-chan error            { return s.errc }

// Close ends the reading goroutine, whether it waits in Read or to send,
// and waits for it.
func (s *inotifySource) Close() error {
	s.cancel()
	err := s.file.Close()
	<-s.done
	return err
}

// Add watches the folder at path, or changes nothing if it is watched.
func (s *inotifySource) Add(path string) error {
	var wd int
	var err error
	if cerr := s.conn.Control(func(fd uintptr) { wd, err = unix.InotifyAddWatch(int(fd), path, settledMask) }); cerr != nil {
		return cerr
	}
	if err != nil {
		// A PathError keeps errors.Is(err, fs.ErrNotExist) for a folder gone.
		return &os.PathError{Op: "inotify_add_watch", Path: path, Err: err}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if old, ok := s.wds[path]; ok && old != int32(wd) {
		delete(s.paths, old)
	}
	s.wds[path] = int32(wd)
	s.paths[int32(wd)] = path
	return nil
}

// Remove drops the watch of path.
func (s *inotifySource) Remove(path string) error {
	s.mu.Lock()
	wd, ok := s.wds[path]
	delete(s.wds, path)
	delete(s.paths, wd)
	s.mu.Unlock()
	if !ok {
		return fmt.Errorf("%s: %w", path, fsnotify.ErrNonExistentWatch)
	}
	return s.rmWatch(wd)
}

func (s *inotifySource) rmWatch(wd int32) error {
	var err error
	if cerr := s.conn.Control(func(fd uintptr) { _, err = unix.InotifyRmWatch(int(fd), uint32(wd)) }); cerr != nil {
		return cerr
	}
	if err != nil {
		return fmt.Errorf("inotify_rm_watch: %w", err)
	}
	return nil
}

func (s *inotifySource) WatchList() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	list := make([]string, 0, len(s.wds))
	for p := range s.wds {
		list = append(list, p)
	}
	return list
}

// read reads events until Close. A read error other than the close ends
// it after reporting the error, and closes the channels: the loop then
// returns an error rather than watch nothing.
func (s *inotifySource) read(ctx context.Context) {
	defer close(s.done)
	defer close(s.errc)
	defer close(s.evs)
	// The kernel never splits an event across reads; a name is at most
	// NAME_MAX+1 bytes, so this holds many.
	buf := make([]byte, 64<<10)
	for {
		n, err := s.file.Read(buf)
		if ctx.Err() != nil || errors.Is(err, os.ErrClosed) {
			return
		}
		if err != nil {
			s.sendErr(ctx, fmt.Errorf("read inotify: %w", err))
			return
		}
		for off := 0; off+unix.SizeofInotifyEvent <= n; {
			b := buf[off:n]
			wd := int32(binary.NativeEndian.Uint32(b[0:]))
			mask := binary.NativeEndian.Uint32(b[4:])
			size := unix.SizeofInotifyEvent + int(binary.NativeEndian.Uint32(b[12:]))
			name := bytes.TrimRight(b[unix.SizeofInotifyEvent:min(size, len(b))], "\x00")
			off += size
			if !s.handle(ctx, wd, mask, name) {
				return
			}
		}
	}
}

// handle passes one kernel event on, and keeps the set of watches true to
// the kernel's: it reports false once ctx has ended.
func (s *inotifySource) handle(ctx context.Context, wd int32, mask uint32, name []byte) bool {
	if mask&unix.IN_Q_OVERFLOW != 0 {
		return s.sendErr(ctx, fsnotify.ErrEventOverflow)
	}
	path, ok := s.drop(wd, mask)
	if !ok {
		return true // a watch removed already: Remove, or the folder's own event before
	}
	if mask&unix.IN_MOVE_SELF != 0 {
		// The watch would follow the folder wherever it went; the loop
		// watches whatever is at the path now.
		if err := s.rmWatch(wd); err != nil && !s.sendErr(ctx, err) {
			return false
		}
	}
	if len(name) > 0 {
		path += "/" + string(name)
	}
	select {
	case s.evs <- fsnotify.Event{Name: path, Op: opOf(mask)}:
		return true
	case <-ctx.Done():
		return false
	}
}

// drop returns the path of wd; it forgets the watch when the event says
// the kernel has removed it (IN_IGNORED, IN_UNMOUNT) or is about to
// (IN_DELETE_SELF), or when the folder moved (IN_MOVE_SELF, whose watch
// handle removes). The event still goes to the loop, named by the folder,
// so that the loop looks at once at what is at the path.
func (s *inotifySource) drop(wd int32, mask uint32) (string, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	path, ok := s.paths[wd]
	if ok && mask&(unix.IN_IGNORED|unix.IN_UNMOUNT|unix.IN_DELETE_SELF|unix.IN_MOVE_SELF) != 0 {
		delete(s.paths, wd)
		if s.wds[path] == wd {
			delete(s.wds, path)
		}
	}
	return path, ok
}

func (s *inotifySource) sendErr(ctx context.Context, err error) bool {
	select {
	case s.errc <- err:
		return true
	case <-ctx.Done():
		return false
	}
}

// opOf names the kernel's event as fsnotify would, for the logs and tests.
func opOf(mask uint32) fsnotify.Op {
	ops := []struct {
		bits uint32
		op   fsnotify.Op
	}{
		{unix.IN_CREATE | unix.IN_MOVED_TO, fsnotify.Create},
		{unix.IN_CLOSE_WRITE, fsnotify.Write},
		{unix.IN_DELETE | unix.IN_DELETE_SELF, fsnotify.Remove},
		{unix.IN_MOVED_FROM | unix.IN_MOVE_SELF, fsnotify.Rename},
		{unix.IN_ATTRIB, fsnotify.Chmod},
	}
	var op fsnotify.Op
	for _, o := range ops {
		if mask&o.bits != 0 {
			op |= o.op
		}
	}
	return op
}
