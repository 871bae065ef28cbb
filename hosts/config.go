package hosts

import (
	"bytes"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"

	"github.com/aymanbagabas/go-udiff"
	"github.com/plexus-gw/plexus/platform"
)

// MaxFile bounds what is read of a host's file. Claude Code's ~/.claude.json
// keeps per-project history and grows to megabytes; 16 MiB is far past any
// real one, and a planted /dev/zero link is refused before it is read.
const MaxFile = 16 << 20

// ParseError is a host's file that cannot be read as its format says:
// nothing is written. Line and Column are 1-based, 0 when unknown.
type ParseError struct {
	Path         string
	Line, Column int
	Problem      string
}

func (e *ParseError) Error() string {
	at := e.Path
	if e.Line > 0 {
		at = fmt.Sprintf("%s:%d:%d", e.Path, e.Line, e.Column)
	}
	return fmt.Sprintf("%s: %s (nothing was written)", at, e.Problem)
}

// ConflictError is a write refused because the file changed on disk since
// it was read (the owner, or the host itself, saved it meanwhile): writing
// would lose that change. Nothing was written.
type ConflictError struct{ Path string }

func (e *ConflictError) Error() string {
	return e.Path + " changed on disk since Plexus read it; nothing was written: run the command again"
}

// document is one format's parsed file.
type document interface {
	// entries lists the servers' names in the file's order, and their
	// decoded entries.
	entries() ([]string, map[string]any, error)
	upsert(name string, entry object) ([]byte, error)
	remove(name string) ([]byte, bool, error)
}

// Config is a host's file as read.
type Config struct {
	Host    Host
	Path    string
	data    []byte
	existed bool
	mode    fs.FileMode
	doc     document
}

// Read reads h's file at path. A missing file is an empty one (Exists
// says which). Only a regular file is read: a symlink, FIFO, device or
// folder under the name is an error wrapping *[platform.NotRegularError],
// never followed or waited on. Plexus does not follow a link to edit what
// it points to: a host's file linked from a dotfiles repository is edited
// by passing the target itself (--config).
func Read(h Host, path string) (*Config, error) {
	c := &Config{Host: h, Path: path, mode: 0o600}
	b, fi, err := readBounded(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
	case err != nil:
		var nr *platform.NotRegularError
		if errors.As(err, &nr) && nr.Kind == "symlink" {
			if target, lerr := filepath.EvalSymlinks(path); lerr == nil && isRegular(target) {
				return nil, fmt.Errorf("%w; Plexus does not edit through a link: pass --config %s to edit the file it points to", err, target)
			}
		}
		return nil, err
	default:
		c.data, c.existed, c.mode = b, true, fi.Mode().Perm()
	}
	doc, err := parse(h, path, c.data)
	if err != nil {
		return nil, err
	}
	c.doc = doc
	return c, nil
}

func isRegular(path string) bool {
	fi, err := os.Stat(path)
	return err == nil && fi.Mode().IsRegular()
}

// readBounded reads the regular file at path, up to MaxFile bytes.
func readBounded(path string) ([]byte, fs.FileInfo, error) {
	f, err := platform.OpenRegular(path)
	if err != nil {
		return nil, nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, nil, err
	}
	b, err := io.ReadAll(io.LimitReader(f, MaxFile+1))
	if err != nil {
		return nil, nil, fmt.Errorf("read %s: %w", path, err)
	}
	if len(b) > MaxFile {
		return nil, nil, &ParseError{Path: path, Problem: fmt.Sprintf("larger than %d MiB, more than any host's file", MaxFile>>20)}
	}
	return b, fi, nil
}

func parse(h Host, path string, b []byte) (document, error) {
	if h.Format == FormatCodexTOML {
		return parseTOML(path, b)
	}
	return parseJSON(path, b, h.container())
}

// Exists reports whether the file was there.
func (c *Config) Exists() bool { return c.existed }

// Servers lists the servers the file configures, in its order (Codex's by
// name), Plexus's own entry included.
func (c *Config) Servers() ([]Server, error) {
	names, entries, err := c.doc.entries()
	if err != nil {
		return nil, err
	}
	out := make([]Server, 0, len(names))
	for _, n := range names {
		out = append(out, c.Host.readServer(n, entries[n]))
	}
	return out, nil
}

// Plexus returns the entry named "plexus", read as a server.
func (c *Config) Plexus() (Server, bool) {
	_, entries, err := c.doc.entries()
	if err != nil {
		return Server{}, false
	}
	raw, ok := entries[EntryName]
	if !ok {
		return Server{}, false
	}
	return c.Host.readServer(EntryName, raw), true
}

// Has reports whether the "plexus" entry says exactly what e says.
func (c *Config) Has(e Entry) bool {
	want, err := c.Host.shape(e)
	if err != nil {
		return false
	}
	_, entries, err := c.doc.entries()
	if err != nil {
		return false
	}
	raw, ok := entries[EntryName]
	return ok && sameEntry(raw, want)
}

// Upsert plans the "plexus" entry set to e: added after the other servers,
// or its value replaced where it is. An entry that already says e changes
// nothing.
func (c *Config) Upsert(e Entry) (*Edit, error) {
	want, err := c.Host.shape(e)
	if err != nil {
		return nil, err
	}
	out, err := c.doc.upsert(EntryName, want)
	if err != nil {
		return nil, err
	}
	return c.edit(out)
}

// Remove plans the "plexus" entry removed, and only it.
func (c *Config) Remove() (*Edit, error) {
	out, _, err := c.doc.remove(EntryName)
	if err != nil {
		return nil, err
	}
	return c.edit(out)
}

// ReplaceAll plans every server entry removed and the "plexus" entry set
// to e: the host then reaches its servers through Plexus only.
func (c *Config) ReplaceAll(e Entry) (*Edit, error) {
	names, _, err := c.doc.entries()
	if err != nil {
		return nil, err
	}
	doc, cur := c.doc, c.data
	for _, n := range names {
		if n == EntryName {
			continue
		}
		if cur, _, err = doc.remove(n); err != nil {
			return nil, err
		}
		if doc, err = parse(c.Host, c.Path, cur); err != nil {
			return nil, fmt.Errorf("%s: removing %q left a file that does not parse: %w", c.Path, n, err)
		}
	}
	next := &Config{Host: c.Host, Path: c.Path, data: cur, existed: c.existed, mode: c.mode, doc: doc}
	ed, err := next.Upsert(e)
	if err != nil {
		return nil, err
	}
	ed.Old, ed.sum = c.data, sha256.Sum256(c.data) // what is on disk is what c read
	return ed, nil
}

// edit checks that out still parses and returns the planned edit.
func (c *Config) edit(out []byte) (*Edit, error) {
	if _, err := parse(c.Host, c.Path, out); err != nil {
		return nil, fmt.Errorf("%s: the edit would leave a file that does not parse (a bug; nothing was written): %w", c.Path, err)
	}
	return &Edit{Path: c.Path, Old: c.data, New: out, format: c.Host.Format, existed: c.existed, mode: c.mode, sum: sha256.Sum256(c.data)}, nil
}

// Edit is a planned change of a host's file: the bytes read and the bytes
// to write.
type Edit struct {
	Path     string
	Old, New []byte
	format   Format
	existed  bool
	mode     fs.FileMode
	sum      [sha256.Size]byte
}

// Changed reports whether applying e writes anything.
func (e *Edit) Changed() bool { return !e.existed || !bytes.Equal(e.Old, e.New) }

// patPattern matches a Plexus PAT, so that a diff never shows one.
var patPattern = regexp.MustCompile(`plx_[a-z]+_[A-Za-z0-9_-]+`)

// Diff is the change as a unified diff for a person to read: every secret
// in secrets, anything shaped like a Plexus credential, every value under
// an env or headers key and the userinfo and query of every URL shown as
// <redacted>, whichever server's. The other servers' lines show too (as
// context, or removed by ReplaceAll), and a printed diff ends up in
// terminals, logs and issue reports.
func (e *Edit) Diff(secrets ...string) string {
	redact := func(b []byte) string {
		s := redactText(e.format, string(b))
		for _, sec := range secrets {
			if sec != "" {
				s = strings.ReplaceAll(s, sec, "<redacted>")
			}
		}
		return patPattern.ReplaceAllString(s, "<redacted>")
	}
	from := e.Path
	if !e.existed {
		from = "/dev/null"
	}
	return udiff.Unified(from, e.Path, redact(e.Old), redact(e.New))
}

// Apply writes the edit: the file as read is first copied beside it
// (Backup names the copy), then the new content replaces it atomically
// with the same permissions (0600 for a new file, in a new 0700 folder).
// A file that changed on disk since it was read is left alone: a
// [*ConflictError], and the copy removed.
func (e *Edit) Apply() (backup string, err error) {
	if !e.Changed() {
		return "", nil
	}
	if e.existed {
		if backup, err = Backup(e.Path, e.Old); err != nil {
			return "", err
		}
	} else if err := os.MkdirAll(filepath.Dir(e.Path), 0o700); err != nil {
		return "", fmt.Errorf("create the folder of %s: %w", e.Path, err)
	}
	err = platform.WriteFileAtomic(e.Path, e.New, platform.WriteOptions{Mode: e.mode, Check: e.unchanged})
	if err != nil {
		if backup != "" {
			if rerr := os.Remove(backup); rerr != nil {
				err = errors.Join(err, rerr)
			}
		}
		return "", err
	}
	return backup, nil
}

// unchanged checks that the file on disk is still the one read.
func (e *Edit) unchanged() error {
	b, _, err := readBounded(e.Path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		if e.existed {
			return &ConflictError{Path: e.Path}
		}
		return nil
	case err != nil:
		var pe *ParseError
		if errors.As(err, &pe) {
			return &ConflictError{Path: e.Path} // grown past the bound since
		}
		return err
	}
	if !e.existed || sha256.Sum256(b) != e.sum {
		return &ConflictError{Path: e.Path}
	}
	return nil
}

// Backup copies data, the content of path, to a new file beside it:
// <path>.plexus-backup, or <path>.plexus-backup.N (N from 1) when earlier
// copies exist; an earlier copy is never replaced. The copy is 0600: a
// host's file often holds other servers' tokens.
func Backup(path string, data []byte) (string, error) {
	for i := 0; i < 1000; i++ {
		name := path + ".plexus-backup"
		if i > 0 {
			name = fmt.Sprintf("%s.%d", name, i)
		}
		err := platform.WriteFileAtomic(name, data, platform.WriteOptions{Mode: 0o600, NoReplace: true})
		if errors.Is(err, fs.ErrExist) {
			continue
		}
		if err != nil {
			return "", fmt.Errorf("back up %s: %w", path, err)
		}
		return name, nil
	}
	return "", fmt.Errorf("back up %s: 1000 backups exist beside it; remove old ones", path)
}
