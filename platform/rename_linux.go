package platform

import (
	"errors"
	"os"

	"golang.org/x/sys/unix"
)

// RenameNoReplace renames src to dst unless something is at dst: then it
// fails with an error wrapping fs.ErrExist and both stay as they were. The
// check and the rename are one step (renameat2 RENAME_NOREPLACE), so a file
// that appears at dst meanwhile is never replaced. A file system without
// that flag falls back to a check, then a rename.
func RenameNoReplace(src, dst string) error {
	err := unix.Renameat2(unix.AT_FDCWD, src, unix.AT_FDCWD, dst, unix.RENAME_NOREPLACE)
	if errors.Is(err, unix.EINVAL) || errors.Is(err, unix.ENOSYS) {
		return renameChecked(src, dst)
	}
	if err != nil {
		return &os.LinkError{Op: "rename", Old: src, New: dst, Err: err}
	}
	return nil
}
