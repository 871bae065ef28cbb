package inbox

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"path/filepath"

	"github.com/plexus-gw/plexus/platform"
)

// Sum is the hex sha256 of b. The daemon keeps the Sum of every file it
// writes and rewrites a file only while its Sum is still that one: anything
// else is the owner's edit, never overwritten.
func Sum(b []byte) string {
	h := sha256.Sum256(b)
	return hex.EncodeToString(h[:])
}

// WriteAtomic writes b to dir/name so that a reader (the owner's editor,
// the watcher, a crash) sees the old file or the new one, never a part,
// durably, 0600, through [platform.WriteFileAtomic]: its temporary name is
// ".<name>.tmp-…", which the reconciler cleans up after a crash and never
// takes for a decision file. name must be a plain file name.
//
// WriteAtomic replaces the regular file dir/name holds, if any. Anything
// else under the name (a symlink, a FIFO, a socket, a device, a folder) is
// left as it is and the error wraps *[platform.NotRegularError]: the rename
// would neither follow nor open it, but it is not the daemon's to remove.
// Comparing the file's [Sum] with the one last written is the caller's job,
// and a rename cannot be conditional: an edit saved between that check and
// the rename is lost, so callers keep the window short and check again
// afterwards.
func WriteAtomic(dir, name string, b []byte) error {
	if name == "" || name == "." || name == ".." || filepath.Base(name) != name {
		return fmt.Errorf("write %q: not a plain file name", name)
	}
	return platform.WriteFileAtomic(filepath.Join(dir, name), b, platform.WriteOptions{Mode: 0o600})
}
