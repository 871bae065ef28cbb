package watcher

import "github.com/fsnotify/fsnotify"

// source is what the Run loop reads events from and places watches with:
// fsnotify, or on Linux for [Options.Settled] an inotify descriptor of
// the package's own, whose kernel mask fsnotify cannot express.
type source interface {
	events() <-chan fsnotify.Event
	errs() <-chan error
	Add(path string) error
	Remove(path string) error
	// WatchList returns the paths that still have a watch; a watch the
	// kernel dropped (the folder removed, moved or unmounted) is not in it.
	WatchList() []string
	// Close ends the source's goroutine and waits for it.
	Close() error
}

// fsnotifySource is a plain fsnotify watcher as a source.
type fsnotifySource struct{ *fsnotify.Watcher }

func newFsnotify() (source, error) {
	fsw, err := fsnotify.NewWatcher()
	if err != nil {
		return nil, err
	}
	return fsnotifySource{fsw}, nil
}

func (s fsnotifySource) events() <-chan fsnotify.Event { return s.Events }
func (s fsnotifySource) errs() <-chan error            { return s.Errors }
