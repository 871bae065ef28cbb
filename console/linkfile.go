package console

import (
	"bytes"
	"encoding/hex"
	"errors"
	"fmt"
	"html/template"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
	"time"
)

// linkDir is the folder under PLEXUS_HOME where `plexus console` leaves
// the page that forwards the browser to its one-time sign-in link: the
// link is handed to the desktop's opener as this page's path, never on a
// command line, which every local user can read (/proc/<pid>/cmdline, ps).
const linkDir = "console-links"

// linkPage forwards to the link by a meta refresh (a file:// page runs no
// script the console's CSP would allow, and needs none), and says where it
// goes should the browser not follow.
var linkPage = template.Must(template.New("link").Parse(`<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="referrer" content="no-referrer">
<meta http-equiv="refresh" content="0; url={{.}}">
<title>Plexus console</title></head>
<body><p><a href="{{.}}">Open the Plexus console</a> (this sign-in link works once).</p></body></html>
`))

// LinkFile writes a page that forwards to sign-in link, 0600 in a private
// (0700) folder of home, and returns its path. Pages of links that have
// expired by now are removed first.
func LinkFile(home, link string, now time.Time) (string, error) {
	u, err := url.Parse(link)
	if err != nil || u.Query().Get("code") == "" {
		return "", fmt.Errorf("sign-in link %q has no code", link)
	}
	dir := filepath.Join(home, linkDir)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", fmt.Errorf("sign-in page folder: %w", err)
	}
	// MkdirAll keeps a folder that was there: make it private again.
	if err := os.Chmod(dir, 0o700); err != nil {
		return "", fmt.Errorf("sign-in page folder: %w", err)
	}
	if err := removeLinkFiles(home, now.Add(-DefaultLinkTTL)); err != nil {
		return "", err
	}
	var b bytes.Buffer
	if err := linkPage.Execute(&b, link); err != nil {
		return "", fmt.Errorf("sign-in page: %w", err)
	}
	path := linkFilePath(home, u.Query().Get("code"))
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return "", fmt.Errorf("sign-in page: %w", err)
	}
	if _, err := f.Write(b.Bytes()); err != nil {
		return "", errors.Join(fmt.Errorf("sign-in page: %w", err), f.Close(), os.Remove(path))
	}
	if err := f.Close(); err != nil {
		return "", fmt.Errorf("sign-in page: %w", err)
	}
	return path, nil
}

// linkFilePath is where the page of the link with code lies: named by the
// code's hash, as the console keeps it, so that redeeming the code removes
// the page.
func linkFilePath(home, code string) string {
	h := sum(code)
	return filepath.Join(home, linkDir, "signin-"+hex.EncodeToString(h[:16])+".html")
}

// removeLinkFiles removes the sign-in pages written before cutoff.
func removeLinkFiles(home string, cutoff time.Time) error {
	dir := filepath.Join(home, linkDir)
	ents, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("sign-in pages: %w", err)
	}
	for _, e := range ents {
		info, err := e.Info()
		if err != nil || !info.ModTime().Before(cutoff) {
			continue
		}
		if err := os.Remove(filepath.Join(dir, e.Name())); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("sign-in pages: %w", err)
		}
	}
	return nil
}

// dropLinkFile removes the page of the link with code, once its code is
// presented, and the pages of links that have expired.
func (c *Console) dropLinkFile(code string) {
	err := os.Remove(linkFilePath(c.opts.Home, code))
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		c.log.Warn("console: remove sign-in page", "err", err)
	}
	if err := removeLinkFiles(c.opts.Home, c.opts.Clock().Add(-c.opts.LinkTTL)); err != nil {
		c.log.Warn("console: remove sign-in pages", "err", err)
	}
}
