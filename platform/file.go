package platform

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"syscall"
)

// NotRegularError is what [OpenRegular] and [ReadRegular] return when the
// path holds something other than a regular file: a symbolic link, a FIFO,
// a socket, a device or a directory. Kind names what was found, for the
// owner ("symlink", "fifo", "socket", "device", "directory", "other").
type NotRegularError struct {
	Path string
	Kind string
}

func (e *NotRegularError) Error() string {
	return fmt.Sprintf("%s is a %s, not a regular file (never opened or followed)", e.Path, e.Kind)
}

// KindOf names the kind of file m describes, as [NotRegularError.Kind] does;
// a regular file is "file".
func KindOf(m fs.FileMode) string {
	switch {
	case m.IsRegular():
		return "file"
	case m&fs.ModeSymlink != 0:
		return "symlink"
	case m&fs.ModeNamedPipe != 0:
		return "fifo"
	case m&fs.ModeSocket != 0:
		return "socket"
	case m&fs.ModeDevice != 0, m&fs.ModeCharDevice != 0:
		return "device"
	case m.IsDir():
		return "directory"
	}
	return "other"
}

// OpenRegular opens path for reading only if it is a regular file. A path
// that holds anything else is an error wrapping *[NotRegularError]; a
// missing one wraps fs.ErrNotExist.
//
// The last element of path is never followed and never waited on: it is
// checked with lstat first, so a FIFO or a device is normally not opened at
// all, and then opened with O_NOFOLLOW|O_NONBLOCK, so that something swapped
// in between the two can neither redirect the open (a symlink fails it) nor
// hang it (a FIFO without a writer opens at once). The check that counts is
// the fstat of the opened descriptor: what was checked is what is read. A
// directory on the way to the last element is followed, as the owner may
// have linked a folder.
func OpenRegular(path string) (*os.File, error) {
	fi, err := os.Lstat(path)
	if err != nil {
		return nil, err
	}
	if !fi.Mode().IsRegular() {
		return nil, &NotRegularError{Path: path, Kind: KindOf(fi.Mode())}
	}
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0)
	switch {
	case errors.Is(err, syscall.ELOOP), errors.Is(err, syscall.EMLINK):
		// O_NOFOLLOW's answer to a link (EMLINK on the BSDs).
		return nil, &NotRegularError{Path: path, Kind: "symlink"}
	case errors.Is(err, syscall.ENXIO):
		// A socket, or a device without its driver, swapped in after lstat.
		return nil, &NotRegularError{Path: path, Kind: lstatKind(path)}
	case err != nil:
		return nil, err
	}
	opened, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, err
	}
	if !opened.Mode().IsRegular() {
		f.Close()
		return nil, &NotRegularError{Path: path, Kind: KindOf(opened.Mode())}
	}
	return f, nil
}

// lstatKind names what path holds now, "other" when it cannot tell.
func lstatKind(path string) string {
	if fi, err := os.Lstat(path); err == nil {
		return KindOf(fi.Mode())
	}
	return "other"
}

// ReadRegular reads at most limit bytes of the regular file at path,
// opened with [OpenRegular]. A file longer than limit returns its first
// limit bytes and no error: the caller that cares asks for one more byte
// than it accepts.
func ReadRegular(path string, limit int64) ([]byte, error) {
	f, err := OpenRegular(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, limit))
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	return b, nil
}

// CheckReplaceable reports, as an error wrapping *[NotRegularError], that
// path holds something a writer must not replace: anything but a regular
// file. A missing path is replaceable (nil). A writer that renames a new
// file into place calls it first, so that a FIFO, socket, device or link
// planted under the name is left as it was rather than silently removed;
// a rename never follows or opens what it replaces, so what is swapped in
// after the check is replaced without harm.
func CheckReplaceable(path string) error {
	fi, err := os.Lstat(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil
	case err != nil:
		return err
	case !fi.Mode().IsRegular():
		return &NotRegularError{Path: path, Kind: KindOf(fi.Mode())}
	}
	return nil
}
