package scaffold

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"path/filepath"
	"strings"

	"github.com/plexus-gw/plexus/platform"
)

// FileScrapeToken holds the owner's scrape token, when there is one: a
// secret (0600, git-ignored) that lets a Prometheus scraper read /metrics and
// nothing else. It is not in auth-config.json, which an owner may commit.
const FileScrapeToken = "scrape-token"

// maxScrapeTokenFile bounds what is read of the file: a token is a line.
const maxScrapeTokenFile = 4096

// ScrapeTokenError is what is wrong with home's scrape-token file, with
// the fix. It never holds the token.
type ScrapeTokenError struct {
	Path string
	What string
	Fix  string
}

func (e *ScrapeTokenError) Error() string { return e.Path + ": " + e.What + "; " + e.Fix }

// ReadScrapeToken reads home's scrape token: "" and no error when the file
// does not exist (no scrape token: only the connection-key reads /metrics).
// The file must be a regular file (never followed through a link), readable
// by the owner alone, holding MinScrapeTokenLen characters or more that are
// not a plx_ credential. The daemon calls it at each scrape, so an edit
// takes effect at the next one.
func ReadScrapeToken(home string) (string, error) {
	path := filepath.Join(home, FileScrapeToken)
	f, err := platform.OpenRegular(path)
	if errors.Is(err, fs.ErrNotExist) {
		return "", nil
	}
	bad := func(what, fix string) (string, error) { return "", &ScrapeTokenError{Path: path, What: what, Fix: fix} }
	if err != nil {
		return bad(FileScrapeToken+" cannot be read: "+errText(err), "make it a regular file of yours, or remove it")
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return bad(FileScrapeToken+" cannot be read: "+errText(err), "check its permissions")
	}
	if perm := fi.Mode().Perm(); perm&0o077 != 0 {
		return bad(fmt.Sprintf("%s is mode %04o (group or others can read it)", FileScrapeToken, perm), "run: chmod 600 "+shq(path))
	}
	b, err := io.ReadAll(io.LimitReader(f, maxScrapeTokenFile+1))
	if err != nil {
		return bad(FileScrapeToken+" cannot be read: "+errText(err), "check its permissions")
	}
	tok := strings.TrimSpace(string(b))
	if len(b) > maxScrapeTokenFile || len(tok) < MinScrapeTokenLen || strings.HasPrefix(tok, "plx_") || strings.ContainsAny(tok, " \t\r\n") {
		return bad(FileScrapeToken+" does not hold a scrape token (too short, more than one word, or a Plexus credential)",
			fmt.Sprintf("write %d or more random characters into it (openssl rand -hex 32 > %s), or remove it", MinScrapeTokenLen, shq(path)))
	}
	return tok, nil
}

// scrapeToken checks home's scrape-token file for Load.
func (v *verifier) scrapeToken() {
	if _, err := ReadScrapeToken(v.home); err != nil {
		var se *ScrapeTokenError
		if errors.As(err, &se) {
			v.add(se.Path, se.What, se.Fix)
			return
		}
		v.add(filepath.Join(v.home, FileScrapeToken), err.Error(), "check it")
	}
}
