package inbox

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"

	"github.com/plexus-gw/plexus/platform"
)

// Sum is the hex sha256 of b. The daemon keeps the Sum of every file it
// writes and rewrites a file only while its Sum is still that one: anything
// else is the owner's edit, never overwritten.
func Sum(b []byte) string {
	h := sha256.Sum256(b)
	return hex.EncodeToString(h[:])
}

// WriteAtomic writes b to dir/name so that a reader (the owner's editor, the
// watcher, a crash) sees the old file or the new one, never a part: it
// writes a temporary file in dir (".<name>.tmp…", which [IsScratch]
// recognizes), syncs it, renames it over name and syncs dir. The file is
// 0600. name must be a plain file name.
//
// WriteAtomic replaces the regular file dir/name holds, if any. Anything
// else under the name (a symlink, a FIFO, a socket, a device, a folder) is
// left as it is and the error wraps *[platform.NotRegularError]: the rename
// would neither follow nor open it, but it is not the daemon's to remove.
// Comparing the file's [Sum] with the one last written is the caller's job,
// and a rename cannot be conditional: an edit saved between that check and
// the rename is lost, so callers keep the window short and check again
// afterwards.
func WriteAtomic(dir, name string, b []byte) (err error) {
	if name == "" || name == "." || name == ".." || filepath.Base(name) != name {
		return fmt.Errorf("write %q: not a plain file name", name)
	}
	if err := platform.CheckReplaceable(filepath.Join(dir, name)); err != nil {
		return fmt.Errorf("write %s: %w", name, err)
	}
	f, err := os.CreateTemp(dir, "."+name+".tmp*")
	if err != nil {
		return fmt.Errorf("write %s: %w", name, err)
	}
	tmp := f.Name()
	defer func() {
		if err != nil {
			f.Close()
			os.Remove(tmp)
		}
	}()
	// CreateTemp already makes 0600 files; say so in case a umask or a
	// platform thinks otherwise.
	if err = f.Chmod(0o600); err != nil {
		return fmt.Errorf("write %s: %w", name, err)
	}
	if _, err = f.Write(b); err != nil {
		return fmt.Errorf("write %s: %w", name, err)
	}
	if err = f.Sync(); err != nil {
		return fmt.Errorf("write %s: sync: %w", name, err)
	}
	if err = f.Close(); err != nil {
		return fmt.Errorf("write %s: %w", name, err)
	}
	if err = os.Rename(tmp, filepath.Join(dir, name)); err != nil {
		return fmt.Errorf("write %s: %w", name, err)
	}
	return syncDir(dir)
}

// syncDir makes a rename in dir durable. O_DIRECTORY: a FIFO put in the
// folder's place is refused, never waited on.
func syncDir(dir string) error {
	d, err := os.OpenFile(dir, os.O_RDONLY|syscall.O_DIRECTORY, 0)
	if err != nil {
		return fmt.Errorf("sync %s: %w", dir, err)
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	// A platform that cannot sync a directory (errors.ErrUnsupported) offers
	// nothing better; elsewhere a failed sync means the rename may not last.
	if err != nil && !errors.Is(err, errors.ErrUnsupported) {
		return fmt.Errorf("sync %s: %w", dir, err)
	}
	return nil
}
