package platform

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/plexus-gw/plexus"
)

// pathListSeparator joins PATH on Linux and macOS.
const pathListSeparator = string(os.PathListSeparator)

// extraDirs are the directories searched after the given PATH, in order.
// A daemon started by a desktop session, launchd or systemd gets a short
// PATH (on macOS /usr/bin:/bin:/usr/sbin:/sbin) that misses where people
// install their tools: their own bin folders, the language package
// managers' (go, cargo, npm's global prefix, bun), snap, Homebrew and
// MacPorts. "~/" is the owner's home. Versioned folders (Python's
// ~/Library/Python/3.x/bin, nvm's node versions) are left out: which version
// is meant is the owner's PATH's business.
func extraDirs(goos string) []string {
	if goos == "darwin" {
		return []string{
			"/opt/homebrew/bin", // Homebrew on Apple silicon
			"/usr/local/bin",    // Homebrew on Intel, most installers
			"/opt/local/bin",    // MacPorts
			"/usr/bin", "/bin", "/usr/sbin", "/sbin",
			"~/.local/bin", "~/bin",
			"~/go/bin", "~/.cargo/bin", "~/.npm-global/bin", "~/.bun/bin",
		}
	}
	return []string{
		"~/.local/bin", "~/bin",
		"/usr/local/bin", "/usr/bin", "/bin",
		"/snap/bin",
		"~/go/bin", "~/.cargo/bin", "~/.npm-global/bin", "~/.bun/bin",
		"/home/linuxbrew/.linuxbrew/bin",
	}
}

// enrichPath returns the directories to search: those of path, then
// [extraDirs], each once (compared cleaned), in that order. Empty and
// relative entries of path are dropped: they name the daemon's working
// directory, which is no place to find a binary an agent may run. "~/"
// directories are dropped when userHome is not an absolute path.
func enrichPath(path, userHome, goos string) []string {
	var dirs []string
	add := func(d string) {
		if d == "" || !filepath.IsAbs(d) {
			return
		}
		d = filepath.Clean(d)
		if !slices.Contains(dirs, d) {
			dirs = append(dirs, d)
		}
	}
	for d := range strings.SplitSeq(path, pathListSeparator) {
		add(d)
	}
	for _, d := range extraDirs(goos) {
		if rest, ok := strings.CutPrefix(d, "~/"); ok {
			if !filepath.IsAbs(userHome) {
				continue
			}
			d = filepath.Join(userHome, rest)
		}
		add(d)
	}
	return dirs
}

// Path returns the enriched PATH, as children get it.
func (s *Services) Path() string { return strings.Join(s.dirs, pathListSeparator) }

// Resolve returns the absolute path of the executable name: the first
// regular file with an execute bit in the directories of the enriched PATH
// ([Services.Path]), following symbolic links (tools are often linked into a
// bin folder). An absolute name is checked as it is; any other name holding
// a path separator is refused, so a manifest cannot point a transport at a
// file relative to the daemon's working directory. A name found nowhere is
// an error wrapping [plexus.ErrNotFound].
func (s *Services) Resolve(name string) (string, error) {
	switch {
	case name == "" || name == "." || name == "..":
		return "", fmt.Errorf("resolve %q: not a binary name", name)
	case strings.ContainsRune(name, os.PathSeparator):
		if !filepath.IsAbs(name) {
			return "", fmt.Errorf("resolve %q: a path must be absolute; give a bare name to search the PATH", name)
		}
		p := filepath.Clean(name)
		if err := executable(p); err != nil {
			return "", fmt.Errorf("resolve %q: %w", name, err)
		}
		return p, nil
	}
	var skipped string // the first match that was not executable, for the message
	for _, d := range s.dirs {
		p := filepath.Join(d, name)
		err := executable(p)
		if err == nil {
			return p, nil
		}
		if skipped == "" && !errors.Is(err, fs.ErrNotExist) {
			skipped = err.Error()
		}
	}
	if skipped != "" {
		skipped = " (" + skipped + ")"
	}
	return "", fmt.Errorf("resolve %q: %w on the PATH %s%s", name, plexus.ErrNotFound, s.Path(), skipped)
}

// executable reports why p is not a regular file with an execute bit, or
// nil; a missing p is an error wrapping fs.ErrNotExist.
func executable(p string) error {
	fi, err := os.Stat(p)
	switch {
	case err != nil:
		return err
	case !fi.Mode().IsRegular():
		return fmt.Errorf("%s is not a regular file", p)
	case fi.Mode().Perm()&0o111 == 0:
		return fmt.Errorf("%s is not executable (mode %04o)", p, fi.Mode().Perm())
	}
	return nil
}

// lookupEnv returns the value of key in env; the last entry wins, as it
// does for os/exec.
func lookupEnv(env []string, key string) string {
	for _, kv := range slices.Backward(env) {
		if v, ok := strings.CutPrefix(kv, key+"="); ok {
			return v
		}
	}
	return ""
}
