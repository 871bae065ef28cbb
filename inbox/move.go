package inbox

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/plexus-gw/plexus"
	"github.com/plexus-gw/plexus/platform"
)

// ExistsError is [Move] refusing to replace the decision's file already in
// the destination folder: two copies of a decision are the owner's to sort
// out.
type ExistsError struct {
	ID, Folder string
}

func (e *ExistsError) Error() string {
	return fmt.Sprintf("%s/%s already exists", e.Folder, FileName(e.ID))
}

// Locate finds decision id's file under home, looking in inbox/, active/,
// rejected/ and archive/ in that order: the folder holding it ("" when none
// does) and its bytes. Only a regular file is read ([ReadFile]): anything
// else under the decision's name is never followed or opened, and the error
// wraps *[platform.NotRegularError], with the folder it is in returned.
func Locate(home, id string) (string, []byte, error) {
	for _, f := range []string{plexus.FolderInbox, plexus.FolderActive, plexus.FolderRejected, plexus.FolderArchive} {
		b, err := ReadFile(filepath.Join(home, f, FileName(id)))
		switch {
		case err == nil:
			return f, b, nil
		case !errors.Is(err, fs.ErrNotExist):
			return f, nil, err
		}
	}
	return "", nil, nil
}

// Move writes stamped over decision id's file in home's inbox/ and moves
// it into folder, the same rename a person makes. It never replaces a file
// already in folder: that is an *[ExistsError].
func Move(home, id, folder string, stamped []byte) error {
	dst := filepath.Join(home, folder, FileName(id))
	if _, err := os.Lstat(dst); err == nil {
		return &ExistsError{ID: id, Folder: folder}
	} else if !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	if err := WriteAtomic(filepath.Join(home, plexus.FolderInbox), FileName(id), stamped); err != nil {
		return err
	}
	// The check above gives the plain answer; RenameNoReplace keeps a file
	// that appears in the destination meanwhile from being replaced.
	err := platform.RenameNoReplace(filepath.Join(home, plexus.FolderInbox, FileName(id)), dst)
	if errors.Is(err, fs.ErrExist) {
		return &ExistsError{ID: id, Folder: folder}
	} else if err != nil {
		return fmt.Errorf("move %s to %s/: %w", FileName(id), folder, err)
	}
	return nil
}
