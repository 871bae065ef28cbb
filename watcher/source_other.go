//go:build !linux

package watcher

import "context"

// newSource returns fsnotify: only Linux's inotify lets a watch leave each
// write out, so elsewhere a settled watch is a plain one.
func newSource(context.Context, bool) (source, error) { return newFsnotify() }
