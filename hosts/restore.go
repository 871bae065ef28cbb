package hosts

import (
	"cmp"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
)

// backupSuffix is what [Backup] appends to a file's name: .plexus-backup,
// then .plexus-backup.N for N from 1 to 999.
var backupSuffix = regexp.MustCompile(`^\.plexus-backup(?:\.([1-9][0-9]{0,2}))?$`)

// BackupFile is one copy of a host's file that Plexus kept beside it.
type BackupFile struct {
	Path string    `json:"path"`
	Time time.Time `json:"time"` // when it was written
	Size int64     `json:"size"`
	n    int       // the copy's number: 0 for .plexus-backup
}

// BackupError is a backup refused for a restore: not one Plexus wrote for
// that file. Nothing was written.
type BackupError struct {
	Path, For string
	Problem   string
}

func (e *BackupError) Error() string {
	return fmt.Sprintf("%s is not a backup Plexus kept of %s: %s (nothing was written)", e.Path, e.For, e.Problem)
}

// ErrNoBackup is a restore asked of a file Plexus kept no backup of.
var ErrNoBackup = errors.New("no backup")

// backupNumber is the copy number of name as a backup of path, false when
// name is not one: it must sit in path's folder and be path's name with a
// backup suffix.
func backupNumber(path, name string) (int, bool) {
	if filepath.Dir(name) != filepath.Dir(path) {
		return 0, false
	}
	rest, ok := strings.CutPrefix(filepath.Base(name), filepath.Base(path))
	if !ok {
		return 0, false
	}
	m := backupSuffix.FindStringSubmatch(rest)
	if m == nil {
		return 0, false
	}
	if m[1] == "" {
		return 0, true
	}
	n, err := strconv.Atoi(m[1])
	return n, err == nil
}

// Backups lists the backups Plexus kept of path, newest first. Only
// regular files count: a link or folder under a backup's name is no copy
// Plexus wrote, and is neither listed nor restored.
func Backups(path string) ([]BackupFile, error) {
	des, err := os.ReadDir(filepath.Dir(path))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("list the backups of %s: %w", path, err)
	}
	var out []BackupFile
	for _, de := range des {
		name := filepath.Join(filepath.Dir(path), de.Name())
		n, ok := backupNumber(path, name)
		if !ok || !de.Type().IsRegular() {
			continue
		}
		fi, err := de.Info()
		if err != nil {
			continue // removed since the listing: not a backup any more
		}
		out = append(out, BackupFile{Path: name, Time: fi.ModTime(), Size: fi.Size(), n: n})
	}
	slices.SortFunc(out, func(a, b BackupFile) int {
		return cmp.Or(b.Time.Compare(a.Time), cmp.Compare(b.n, a.n))
	})
	return out, nil
}

// Restore plans the file put back as backup says: backup must be a copy
// [Backup] wrote of this very file (beside it, under its name), a regular
// file that parses as the host's format. Applying the edit keeps the file
// as it is now as a new backup, so a restore can itself be undone.
func (c *Config) Restore(backup string) (*Edit, error) {
	abs, err := filepath.Abs(backup)
	if err != nil {
		return nil, fmt.Errorf("restore %s: %w", backup, err)
	}
	if _, ok := backupNumber(filepath.Clean(c.Path), abs); !ok {
		return nil, &BackupError{Path: backup, For: c.Path, Problem: "a backup is named <file>.plexus-backup[.N] and sits beside the file"}
	}
	b, _, err := readBounded(abs)
	if err != nil {
		return nil, &BackupError{Path: backup, For: c.Path, Problem: err.Error()}
	}
	if _, err := parse(c.Host, abs, b); err != nil {
		return nil, &BackupError{Path: backup, For: c.Path, Problem: "it does not parse as " + string(c.Host.Format) + ": " + err.Error()}
	}
	return c.edit(b)
}

// RestoreFile puts backup back as cfg's file, the newest of its backups
// when backup is "": it prints the diff with pats redacted and, unless
// dryRun, writes the file, telling w where the file as it was went.
func RestoreFile(w io.Writer, cfg *Config, backup string, dryRun bool, pats ...string) error {
	if backup == "" {
		list, err := Backups(cfg.Path)
		if err != nil {
			return err
		}
		if len(list) == 0 {
			return fmt.Errorf("%s: %w of it kept by Plexus (plexus clients connect, disconnect and mcp import --replace-in-host keep one beside it)", cfg.Path, ErrNoBackup)
		}
		backup = list[0].Path
	}
	ed, err := cfg.Restore(backup)
	if err != nil {
		return err
	}
	if !ed.Changed() {
		fmt.Fprintf(w, "%s already says what %s says; nothing to restore.\n", cfg.Path, backup)
		return nil
	}
	fmt.Fprintf(w, "Restoring %s from %s:\n", cfg.Path, backup)
	fmt.Fprint(w, ed.Diff(pats...))
	if dryRun {
		fmt.Fprintln(w, "Dry run: nothing written.")
		return nil
	}
	return applyEdit(w, ed)
}

// WriteBackups prints backups as a table for a person, newest first.
func WriteBackups(w io.Writer, path string, backups []BackupFile) error {
	if len(backups) == 0 {
		fmt.Fprintf(w, "Plexus kept no backup of %s.\n", path)
		return nil
	}
	t := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(t, "WRITTEN\tSIZE\tBACKUP")
	for _, b := range backups {
		fmt.Fprintf(t, "%s\t%d\t%s\n", b.Time.Local().Format("2006-01-02 15:04:05"), b.Size, b.Path)
	}
	return t.Flush()
}
