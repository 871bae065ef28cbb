package portal

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"

	"github.com/plexus-gw/plexus"
)

// maxLinks bounds the symbolic links one resolution follows, as the kernel
// bounds a lookup (a loop is an error, not a hang).
const maxLinks = 40

// errOutside is a link that leads out of the folder, or an absolute one
// (which [os.Root] never follows either).
var errOutside = errors.New("a symbolic link on the way leads outside the folder")

// ResolvePath returns the folder-relative path p reaches in entry's folder
// ("/"-separated, "." for the folder itself): p with every symbolic link on
// the way followed the way the call would follow it, inside the folder
// only. A part that does not exist (a file a write would create) is kept as
// named. The gateway checks a grant's path-prefix constraint on this path as
// well as on p, so that "public/link" → "../private/secret.txt" is checked
// as "private/secret.txt". A link out of the folder, a link loop, or a
// folder that cannot be opened is an error, and the constraint then admits
// nothing.
//
// The call itself opens p again, later: a link changed in between is
// followed as it then is. Only someone who can already change links in the
// folder can win that race, and the write operation never creates a link.
func (t *Transport) ResolvePath(entry plexus.Entry, p string) (string, error) {
	var rt route
	if err := json.Unmarshal(entry.Route, &rt); err != nil || !filepath.IsAbs(rt.Root) {
		return "", fmt.Errorf("portal entry %s has an invalid route", entry.ID)
	}
	root, err := os.OpenRoot(rt.Root)
	if err != nil {
		return "", fmt.Errorf("portal folder: %w", err)
	}
	defer root.Close()
	return resolveIn(root, p)
}

// resolveIn resolves the "/"-separated relative path p inside r (see
// [Transport.ResolvePath]).
func resolveIn(r *os.Root, p string) (string, error) {
	if path.IsAbs(p) {
		return "", errOutside
	}
	var done []string // resolved: no links, no "..", each part found in r (until missing)
	todo := strings.Split(p, "/")
	missing, links := false, 0
	for len(todo) > 0 {
		part := todo[0]
		todo = todo[1:]
		switch part {
		case "", ".":
			continue
		case "..":
			if len(done) == 0 {
				return "", errOutside
			}
			done = done[:len(done)-1]
			continue
		}
		done = append(done, part)
		if missing {
			continue // below a missing part nothing exists to follow
		}
		cur := filepath.Join(done...)
		fi, err := r.Lstat(cur)
		switch {
		case errors.Is(err, fs.ErrNotExist):
			missing = true
			continue
		case err != nil:
			return "", err
		case fi.Mode()&fs.ModeSymlink == 0:
			continue
		}
		if links++; links > maxLinks {
			return "", fmt.Errorf("more than %d symbolic links on the way (a loop?)", maxLinks)
		}
		target, err := r.Readlink(cur)
		if err != nil {
			return "", err
		}
		target = filepath.ToSlash(target)
		if path.IsAbs(target) {
			return "", errOutside
		}
		// The link's target replaces it, relative to the folder holding it.
		done = done[:len(done)-1]
		todo = append(strings.Split(target, "/"), todo...)
	}
	if len(done) == 0 {
		return ".", nil
	}
	return strings.Join(done, "/"), nil
}
