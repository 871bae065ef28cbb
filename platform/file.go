package platform

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
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

// Durability says what [WriteFileAtomic] waits for before it returns.
// Either way a reader, or a process killed mid-write, sees the old file or
// the new one, never a part.
type Durability int

const (
	// Durable syncs the new file before the rename and its folder after
	// it, so that the new content survives a power loss once the write
	// returns: for what the owner or the agent would otherwise lose.
	Durable Durability = iota
	// Volatile syncs nothing: for records that matter only while the
	// machine keeps running.
	Volatile
)

// WriteOptions are the optional settings of [WriteFileAtomic]; the zero
// value writes a 0600 file, [Durable].
type WriteOptions struct {
	Mode       fs.FileMode // permission bits of the new file; zero means 0600
	Durability Durability
	// NoReplace links the new file into place instead of renaming it, so
	// the write fails with an error wrapping fs.ErrExist when anything at
	// all is at path: for a file that, once written, is the owner's.
	NoReplace bool
	// Check, when set, runs once the new file is written and synced, right
	// before it replaces path; an error from it leaves path as it was and
	// is returned as is. It is how an editor refuses to clobber a change
	// made on disk since it read the file: the window left is the rename's.
	Check func() error
}

// WriteFileAtomic writes data to path so that a reader sees the old file
// or the new one, never a part: it writes a temporary file beside path
// (".<name>.tmp-…"), with exactly opts.Mode, and renames it over path. The
// folder must exist.
//
// It replaces only a regular file: anything else under the name (a
// symlink, a FIFO, a socket, a device, a folder) is left as it is and the
// error wraps *[NotRegularError] ([CheckReplaceable]), since a rename would
// remove what is not the daemon's to remove.
func WriteFileAtomic(path string, data []byte, opts WriteOptions) error {
	if !opts.NoReplace {
		if err := CheckReplaceable(path); err != nil {
			return fmt.Errorf("write %s: %w", path, err)
		}
	}
	tmp, err := writeTemp(path, data, opts)
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	if opts.Check != nil {
		if err := opts.Check(); err != nil {
			os.Remove(tmp)
			return err
		}
	}
	if opts.NoReplace {
		// The link, unlike a rename, fails if path appeared meanwhile; the
		// temporary name goes either way.
		err = os.Link(tmp, path)
		os.Remove(tmp)
	} else if err = os.Rename(tmp, path); err != nil {
		os.Remove(tmp)
	}
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	if opts.Durability == Volatile {
		return nil
	}
	return SyncDir(filepath.Dir(path))
}

// writeTemp writes data to a new temporary file beside path, with exactly
// the mode opts asks for (the umask may have narrowed it), synced when it
// is to be durable, and returns its name.
func writeTemp(path string, data []byte, opts WriteOptions) (string, error) {
	mode := opts.Mode
	if mode == 0 {
		mode = 0o600
	}
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return "", err
	}
	err = f.Chmod(mode)
	if err == nil {
		_, err = f.Write(data)
	}
	if err == nil && opts.Durability == Durable {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(f.Name())
		return "", err
	}
	return f.Name(), nil
}

// SyncDir makes a change of names in dir (a rename, a link, a removal)
// durable. It opens dir with O_DIRECTORY, so a FIFO put in the folder's
// place is refused, never waited on. A platform that cannot sync a folder
// (errors.ErrUnsupported) offers nothing better and is not an error.
func SyncDir(dir string) error {
	d, err := os.OpenFile(dir, os.O_RDONLY|syscall.O_DIRECTORY, 0)
	if err != nil {
		return fmt.Errorf("sync %s: %w", dir, err)
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	if err != nil && !errors.Is(err, errors.ErrUnsupported) {
		return fmt.Errorf("sync %s: %w", dir, err)
	}
	return nil
}

// renameChecked is RenameNoReplace's fallback: an lstat of dst, then the
// rename. It leaves a window in which a file appearing at dst is replaced.
func renameChecked(src, dst string) error {
	if _, err := os.Lstat(dst); err == nil {
		return &os.LinkError{Op: "rename", Old: src, New: dst, Err: fs.ErrExist}
	} else if !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	return os.Rename(src, dst)
}
