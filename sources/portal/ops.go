package portal

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/plexus-gw/plexus"
)

// ListEntry is one line of a listing. Type is file, dir, symlink (a link
// that cannot be followed inside the folder) or other (a device, socket or
// FIFO). A symlink that resolves inside the folder is shown as its target's
// type and size.
type ListEntry struct {
	Name    string    `json:"name"`
	Path    string    `json:"path"`
	Type    string    `json:"type"`
	Size    int64     `json:"size"`
	ModTime time.Time `json:"modTime"`
}

// ListResult is the output of list. Truncated is set past 10,000 entries.
type ListResult struct {
	Path      string      `json:"path"`
	Entries   []ListEntry `json:"entries"`
	Truncated bool        `json:"truncated"`
}

// ReadResult is the output of read. Encoding is "base64" when the file is
// not valid UTF-8 (Content is then base64); Size is the whole file's size.
type ReadResult struct {
	Path      string `json:"path"`
	Content   string `json:"content"`
	Encoding  string `json:"encoding,omitempty"`
	Size      int64  `json:"size"`
	Truncated bool   `json:"truncated"`
}

// Match is one search hit. Line is 1-based; 0 means the name matched and
// Text is the name.
type Match struct {
	Path string `json:"path"`
	Line int    `json:"line"`
	Text string `json:"text"`
}

// SearchResult is the output of search. Truncated is set when the limit
// was reached or the walk stopped at its file budget.
type SearchResult struct {
	Matches   []Match `json:"matches"`
	Truncated bool    `json:"truncated"`
}

// WriteResult is the output of write.
type WriteResult struct {
	Path  string `json:"path"`
	Bytes int    `json:"bytes"`
}

// openRead opens name for reading without blocking on a FIFO or device
// (see nonblock), and returns its info from the open descriptor, so what
// was checked is what is read.
func openRead(r *os.Root, name string) (*os.File, fs.FileInfo, error) {
	f, err := r.OpenFile(name, os.O_RDONLY|nonblock, 0)
	if err != nil {
		return nil, nil, err
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, nil, err
	}
	return f, fi, nil
}

func list(ctx context.Context, r *os.Root, a listArgs) (any, *plexus.Error) {
	f, fi, err := openRead(r, a.path)
	if err != nil {
		return nil, fsError(err, a.path)
	}
	defer f.Close()
	if !fi.IsDir() {
		return nil, plexus.Errorf(plexus.CodeTransportError, "%s is not a folder", quote(slashPath(a.path)))
	}
	des, err := f.ReadDir(maxListEntries + 1)
	if err != nil && !errors.Is(err, io.EOF) {
		return nil, fsError(err, a.path)
	}
	res := ListResult{Path: slashPath(a.path), Entries: make([]ListEntry, 0, len(des))}
	if len(des) > maxListEntries {
		des, res.Truncated = des[:maxListEntries], true
	}
	for i, de := range des {
		if i%256 == 0 && ctx.Err() != nil {
			return nil, plexus.WrapError(plexus.CodeTransportError, ctx.Err(), "list cancelled")
		}
		rel := filepath.Join(a.path, de.Name())
		e := ListEntry{Name: de.Name(), Path: slashPath(rel)}
		info, err := de.Info()
		if err != nil {
			continue // vanished since the directory was read
		}
		if info.Mode()&fs.ModeSymlink != 0 {
			// Follow inside the root only; a link out stays a "symlink".
			if target, err := r.Stat(rel); err == nil {
				info = target
			}
		}
		e.Type, e.Size, e.ModTime = fileType(info.Mode()), info.Size(), info.ModTime().UTC()
		res.Entries = append(res.Entries, e)
	}
	slices.SortFunc(res.Entries, func(x, y ListEntry) int { return strings.Compare(x.Name, y.Name) })
	return res, nil
}

func fileType(m fs.FileMode) string {
	switch {
	case m.IsDir():
		return "dir"
	case m.IsRegular():
		return "file"
	case m&fs.ModeSymlink != 0:
		return "symlink"
	}
	return "other"
}

func read(_ context.Context, r *os.Root, a readArgs) (any, *plexus.Error) {
	f, fi, err := openRead(r, a.path)
	if err != nil {
		return nil, fsError(err, a.path)
	}
	defer f.Close()
	q := quote(slashPath(a.path))
	if fi.IsDir() {
		return nil, plexus.Errorf(plexus.CodeTransportError, "%s is a folder; use list", q)
	}
	if !fi.Mode().IsRegular() {
		return nil, plexus.Errorf(plexus.CodeTransportError, "%s is not a regular file", q)
	}
	buf, err := io.ReadAll(io.LimitReader(f, a.maxBytes+1))
	if err != nil {
		return nil, fsError(err, a.path)
	}
	res := ReadResult{Path: slashPath(a.path), Size: fi.Size()}
	if int64(len(buf)) > a.maxBytes {
		buf, res.Truncated = buf[:a.maxBytes], true
		// Do not let a cut through the last character turn text into base64.
		for k := 1; k <= 3 && k < len(buf) && !utf8.Valid(buf); k++ {
			if utf8.Valid(buf[:len(buf)-k]) {
				buf = buf[:len(buf)-k]
			}
		}
	}
	if utf8.Valid(buf) {
		res.Content = string(buf)
	} else {
		res.Content, res.Encoding = base64.StdEncoding.EncodeToString(buf), "base64"
	}
	return res, nil
}

// errStop ends a search walk early without an error.
var errStop = errors.New("stop")

func search(ctx context.Context, r *os.Root, a searchArgs) (any, *plexus.Error) {
	q := strings.ToLower(a.query)
	res := SearchResult{Matches: []Match{}}
	add := func(m Match) error {
		if len(res.Matches) == a.limit {
			res.Truncated = true
			return errStop
		}
		res.Matches = append(res.Matches, m)
		return nil
	}
	start := filepath.ToSlash(a.path)
	files := 0
	err := fs.WalkDir(r.FS(), start, func(p string, d fs.DirEntry, err error) error {
		if cerr := ctx.Err(); cerr != nil {
			return cerr
		}
		if err != nil {
			if p == start {
				return err
			}
			return nil // an unreadable subfolder is skipped, not fatal
		}
		if !(p == start && d.IsDir()) && strings.Contains(strings.ToLower(d.Name()), q) {
			if err := add(Match{Path: p, Line: 0, Text: d.Name()}); err != nil {
				return err
			}
		}
		// Only regular files are read: a symlink is not followed (it may
		// lead anywhere in the folder, or loop) and a FIFO would block.
		if !d.Type().IsRegular() {
			return nil
		}
		if files++; files > maxSearchFiles {
			res.Truncated = true
			return errStop
		}
		return searchFile(ctx, r, p, q, add)
	})
	switch {
	case err == nil || errors.Is(err, errStop):
		return res, nil
	case ctx.Err() != nil:
		return nil, plexus.WrapError(plexus.CodeTransportError, ctx.Err(), "search cancelled")
	}
	return nil, fsError(err, a.path)
}

// searchFile adds the lines of file p that contain q (lower case). Large,
// binary and unreadable files are skipped silently.
func searchFile(ctx context.Context, r *os.Root, p, q string, add func(Match) error) error {
	f, fi, err := openRead(r, filepath.FromSlash(p))
	if err != nil {
		return nil
	}
	defer f.Close()
	if !fi.Mode().IsRegular() || fi.Size() > MaxSearchFileSize {
		return nil
	}
	data, err := io.ReadAll(io.LimitReader(f, MaxSearchFileSize+1))
	if err != nil || len(data) > MaxSearchFileSize || bytes.IndexByte(data, 0) >= 0 || !utf8.Valid(data) {
		return nil
	}
	line := 0
	for len(data) > 0 {
		line++
		if line%1024 == 0 && ctx.Err() != nil {
			return ctx.Err()
		}
		var l []byte
		if i := bytes.IndexByte(data, '\n'); i >= 0 {
			l, data = data[:i], data[i+1:]
		} else {
			l, data = data, nil
		}
		text := strings.TrimRight(string(l), "\r")
		if strings.Contains(strings.ToLower(text), q) {
			if err := add(Match{Path: p, Line: line, Text: clip(text, 300)}); err != nil {
				return err
			}
		}
	}
	return nil
}

// clip bounds a matched line to max runes.
func clip(s string, max int) string {
	if utf8.RuneCountInString(s) <= max {
		return s
	}
	return string([]rune(s)[:max]) + "…"
}

// newFilePerm is the mode of a file write creates (before the umask). A
// portal is an ordinary owner folder, so files are created as an editor
// would create them; an existing file keeps its permission bits.
const newFilePerm = 0o644

// write replaces a.path atomically: the content goes to a temporary file in
// the same folder, is synced, and is renamed over the target, so a reader
// (or a crash) sees the old file or the new one, never a mix.
func write(ctx context.Context, r *os.Root, a writeArgs) (any, *plexus.Error) {
	dir, base := filepath.Dir(a.path), filepath.Base(a.path)
	if perr := ensureFolder(r, dir, a.createDirs); perr != nil {
		return nil, perr
	}
	perm, keepPerm, perr := targetPerm(r, a.path)
	if perr != nil {
		return nil, perr
	}

	tmp := filepath.Join(dir, tempName(base))
	f, err := r.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, perm)
	if err != nil {
		return nil, fsError(err, a.path)
	}
	committed := false
	defer func() {
		if !committed {
			r.Remove(tmp)
		}
	}()
	_, err = io.WriteString(f, a.content)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil && keepPerm {
		err = r.Chmod(tmp, perm) // the umask may have narrowed it
	}
	if err != nil {
		return nil, fsError(err, a.path)
	}
	if err := ctx.Err(); err != nil {
		return nil, plexus.WrapError(plexus.CodeTransportError, err, "write cancelled; the file is unchanged")
	}
	if err := r.Rename(tmp, a.path); err != nil {
		return nil, fsError(err, a.path)
	}
	committed = true
	// Make the rename itself durable. The new content is in place whether
	// or not this succeeds, so a failure here is not reported.
	if d, err := r.Open(dir); err == nil {
		d.Sync()
		d.Close()
	}
	return WriteResult{Path: slashPath(a.path), Bytes: len(a.content)}, nil
}

// ensureFolder makes sure the folder dir of a write exists: created when
// createDirs asks for it, else it must already be a folder.
func ensureFolder(r *os.Root, dir string, createDirs bool) *plexus.Error {
	if createDirs && dir != "." {
		if err := r.MkdirAll(dir, 0o755); err != nil {
			return fsError(err, dir)
		}
		return nil
	}
	fi, err := r.Stat(dir)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return plexus.Errorf(plexus.CodeTransportError, "folder %s does not exist; set createDirs to create it", quote(slashPath(dir)))
	case err != nil:
		return fsError(err, dir)
	case !fi.IsDir():
		return plexus.Errorf(plexus.CodeTransportError, "%s is not a folder", quote(slashPath(dir)))
	}
	return nil
}

// targetPerm is the mode the written file gets: an existing regular file's
// own bits (keep is true), newFilePerm for a new one. A link, a folder or
// anything else not a regular file at path is refused.
func targetPerm(r *os.Root, path string) (perm os.FileMode, keep bool, perr *plexus.Error) {
	fi, err := r.Lstat(path)
	q := quote(slashPath(path))
	switch {
	case err == nil && fi.Mode()&fs.ModeSymlink != 0:
		return 0, false, plexus.Errorf(plexus.CodeTransportError, "%s is a symbolic link; a write never goes through or replaces a link", q)
	case err == nil && fi.IsDir():
		return 0, false, plexus.Errorf(plexus.CodeTransportError, "%s is a folder", q)
	case err == nil && !fi.Mode().IsRegular():
		return 0, false, plexus.Errorf(plexus.CodeTransportError, "%s is not a regular file", q)
	case err == nil:
		return fi.Mode().Perm(), true, nil
	case !errors.Is(err, fs.ErrNotExist):
		return 0, false, fsError(err, path)
	}
	return newFilePerm, false, nil
}

// tempName is a hidden, unique sibling name for base, kept under the usual
// 255-byte name limit.
func tempName(base string) string {
	var b [8]byte
	rand.Read(b[:])
	if len(base) > 200 {
		base = base[:200]
	}
	return "." + base + ".plexus-" + hex.EncodeToString(b[:]) + ".tmp"
}
