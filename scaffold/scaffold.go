// Package scaffold owns the PLEXUS_HOME layout: the folders of the
// files-as-API contract, the keys, the two JSON configs, and the
// permissions that keep them private. [Init] creates what is missing,
// [Verify] checks everything at start-up and says how to fix what is wrong,
// and [Load] reads the values the daemon needs.
//
// It must never overwrite an existing file (except the connection-key, and
// only through [WriteConnectionKey] when the owner rotates it), never loosen
// a permission, never read $HOME or the environment (cmd chooses the home),
// and never put a key into an error message or a log.
package scaffold

import (
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/plexus-gw/plexus"
	"github.com/plexus-gw/plexus/platform"
)

// Names inside PLEXUS_HOME.
const (
	DirInbox    = "inbox"
	DirActive   = "active"
	DirRejected = "rejected"
	DirArchive  = "archive"
	DirAudit    = "audit"
	DirSecrets  = "secrets"

	FileConnectionKey = "connection-key"
	FileSigningKey    = "signing-key"
	FileHashKey       = "hash-key"
	FileChainKey      = "chain-key"
	FileTokenKey      = "token-key"
	FileAnchor        = "journal.anchor"
	FileAuthConfig    = "auth-config.json"
	FileNetwork       = "network.json"
	FileGitignore     = ".gitignore"
	FileReadme        = "README.md"
	FileJournal       = "journal.db"
	FileMCPConfig     = "mcp.json"
	FileProviders     = "providers.json"
	// DirRun holds the unix sockets of ipc tool providers. Init does not
	// create it; the ipc transport creates it 0700 when it first listens.
	DirRun = "run"
)

// Dirs are the folders Init creates, each 0700.
var Dirs = []string{DirInbox, DirActive, DirRejected, DirArchive, DirAudit, DirSecrets}

// Modes of what Init creates. Secrets and configs are owner-only; the
// README and .gitignore hold nothing private but live in a 0700 folder.
const (
	DirMode    fs.FileMode = 0o700
	SecretMode fs.FileMode = 0o600
	PublicMode fs.FileMode = 0o644
)

// keyBytes is the size of every generated key; Verify rejects shorter ones.
const keyBytes = 32

// InitOptions configures Init. The zero value is usable.
type InitOptions struct {
	// NewConnectionKey generates the connection-key (cmd passes the auth
	// package's generator). Nil uses "plx_live_" and 32 random bytes in
	// unpadded base64url, the same format.
	NewConnectionKey func() (string, error)
}

// Result lists what Init created, as paths under the home, in creation
// order. It is empty when the home was already complete.
type Result struct {
	Home    string
	Created []string
}

// Init creates whatever of the layout is missing under home: the home
// itself and its folders (0700), the connection-key, signing-key, hash-key,
// chain-key and token-key (0600, fresh random values), auth-config.json and network.json
// with defaults (0600), a .gitignore that keeps keys, secrets, the audit
// mirror and the database out of a repository, and a README. Existing
// files and folders are left exactly as they are, even when wrong: Verify
// reports those. Running Init twice changes nothing the second time.
func Init(home string, opts InitOptions) (Result, error) {
	if home == "" {
		return Result{}, errors.New("init: empty home path")
	}
	res := Result{Home: home}
	if err := ensureDir(home, &res); err != nil {
		return res, err
	}
	for _, d := range Dirs {
		if err := ensureDir(filepath.Join(home, d), &res); err != nil {
			return res, err
		}
	}
	newKey := opts.NewConnectionKey
	if newKey == nil {
		newKey = newConnectionKey
	}
	files := []struct {
		name string
		mode fs.FileMode
		gen  func() ([]byte, error)
	}{
		{FileConnectionKey, SecretMode, func() ([]byte, error) {
			k, err := newKey()
			if err != nil {
				return nil, err
			}
			if _, err := parseConnectionKey(k); err != nil {
				return nil, fmt.Errorf("generated connection-key: %w", err)
			}
			return []byte(k + "\n"), nil
		}},
		{FileSigningKey, SecretMode, newHexKey},
		{FileHashKey, SecretMode, newHexKey},
		// An existing home gets its chain-key on the first start of a build
		// that keys the journal's chain (the journal migrates then).
		{FileChainKey, SecretMode, newHexKey},
		// Likewise the token-key, which seals the OAuth sign-ins in secrets/:
		// blobs written before it are read as they are and sealed when next
		// written.
		{FileTokenKey, SecretMode, newHexKey},
		{FileAuthConfig, SecretMode, func() ([]byte, error) { return marshalConfig(DefaultAuthConfig()) }},
		{FileNetwork, SecretMode, func() ([]byte, error) { return marshalConfig(DefaultNetwork()) }},
		{FileGitignore, PublicMode, func() ([]byte, error) { return []byte(gitignore), nil }},
		{FileReadme, PublicMode, func() ([]byte, error) { return []byte(readme), nil }},
	}
	for _, f := range files {
		p := filepath.Join(home, f.name)
		if _, err := os.Lstat(p); err == nil {
			continue
		} else if !errors.Is(err, fs.ErrNotExist) {
			return res, fmt.Errorf("init: %w", err)
		}
		data, err := f.gen()
		if err != nil {
			return res, fmt.Errorf("init %s: %w", f.name, err)
		}
		created, err := createExclusive(p, data, f.mode)
		if err != nil {
			return res, fmt.Errorf("init: %w", err)
		}
		if created {
			res.Created = append(res.Created, p)
		}
	}
	return res, nil
}

// ensureDir creates dir 0700 when it is missing (with any missing parents)
// and leaves an existing one alone.
func ensureDir(dir string, res *Result) error {
	fi, err := os.Stat(dir)
	switch {
	case err == nil && fi.IsDir():
		return nil
	case err == nil:
		return fmt.Errorf("init: %s exists and is not a directory", dir)
	case !errors.Is(err, fs.ErrNotExist):
		return fmt.Errorf("init: %w", err)
	}
	if err := os.MkdirAll(dir, DirMode); err != nil {
		return fmt.Errorf("init: %w", err)
	}
	// The umask may have narrowed the mode; make it exactly 0700.
	if err := os.Chmod(dir, DirMode); err != nil {
		return fmt.Errorf("init: %w", err)
	}
	res.Created = append(res.Created, dir)
	return nil
}

// createExclusive writes data to path only if nothing is there. The data is
// written and synced under a temporary name first and then hard-linked into
// place, which fails if path appeared meanwhile, so a crash never leaves a
// half-written key and a concurrent Init never overwrites one.
func createExclusive(path string, data []byte, mode fs.FileMode) (bool, error) {
	err := platform.WriteFileAtomic(path, data, platform.WriteOptions{Mode: mode, NoReplace: true})
	if errors.Is(err, fs.ErrExist) {
		return false, nil
	}
	return err == nil, err
}

// ReadConnectionKey reads the owner's connection-key from home, as a
// client of the daemon presents it. Its format is the daemon's to check.
func ReadConnectionKey(home string) (string, error) {
	path := filepath.Join(home, FileConnectionKey)
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return "", fmt.Errorf("no connection-key at %s: is Plexus initialised there? (plexus init, or pass --home)", path)
	}
	if err != nil {
		return "", fmt.Errorf("read connection-key: %w", err)
	}
	key := strings.TrimSpace(string(b))
	if key == "" {
		return "", fmt.Errorf("read connection-key: %s is empty", path)
	}
	return key, nil
}

// WriteConnectionKey replaces the connection-key atomically (temporary
// file, fsync, rename, 0600): a crash leaves the old key or the new one,
// never a torn file. The key must have the connection-key format.
func WriteConnectionKey(home, key string) error {
	if _, err := parseConnectionKey(key); err != nil {
		return fmt.Errorf("write connection-key: %w", err)
	}
	p := filepath.Join(home, FileConnectionKey)
	if err := platform.WriteFileAtomic(p, []byte(key+"\n"), platform.WriteOptions{Mode: SecretMode}); err != nil {
		return fmt.Errorf("write connection-key: %w", err)
	}
	return nil
}

// newConnectionKey is the stdlib default generator: "plx_live_" and 32
// random bytes in unpadded base64url, as auth.NewConnectionKey makes it.
func newConnectionKey() (string, error) {
	b := make([]byte, keyBytes)
	if _, err := rand.Read(b); err != nil {
		return "", err
	}
	return plexus.PrefixConnectionKey + base64.RawURLEncoding.EncodeToString(b), nil
}

// newHexKey returns 32 random bytes, hex-encoded, with a trailing newline.
func newHexKey() ([]byte, error) {
	b := make([]byte, keyBytes)
	if _, err := rand.Read(b); err != nil {
		return nil, err
	}
	return []byte(hex.EncodeToString(b) + "\n"), nil
}

func marshalConfig(v any) ([]byte, error) {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return nil, err
	}
	return append(b, '\n'), nil
}

const gitignore = `# Written by plexus init: keeps keys, secrets, the audit mirror and the
# database out of any repository this folder is put in.
connection-key
signing-key
hash-key
chain-key
token-key
scrape-token
secrets/
journal.db*
journal.anchor*
audit/
run/
daemon.addr
`

const readme = `# PLEXUS_HOME

Every decision waiting for you is a markdown file in inbox/.
- Approve: move it into active/ (or run: plexus approve <id>).
- Deny: move it into rejected/; a "reason:" you add to its frontmatter is kept.
- Withdraw: delete it from inbox/.
- Narrow before approving: edit the file to a shorter window, fewer verbs or
  fewer capabilities (widening edits are refused, with the reason written back
  into the file).
- Revoke a standing grant: delete its file from active/ or move it to archive/.
archive/ holds what ended (expired, used once, revoked, withdrawn). Plexus
never overwrites a file you edited. audit/ is the daily
redacted JSONL mirror; journal.db (SQLite) records every transition.
Keep connection-key, signing-key, hash-key, chain-key, token-key and secrets/
private (0600/0700). chain-key keys journal.db's hash chain and journal.anchor
holds its head: plexus journal verify needs both. token-key seals the OAuth
sign-ins in secrets/oauth.*: without it they must be signed in to again.
`
