package platform

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/plexus-gw/plexus"
)

// Secrets live one per file in PLEXUS_HOME/secrets (the scaffold's
// DirSecrets; adapters do not import each other). A file holds the value
// followed by one newline, so a value written by hand with `echo` reads the
// same as one stored by [Services.SetSecret].
const secretsDir = "secrets"

// MaxSecretSize is the largest secret value, in bytes.
const MaxSecretSize = 64 << 10

// Modes of the secrets folder and files.
const (
	secretDirMode  fs.FileMode = 0o700
	secretFileMode fs.FileMode = 0o600
)

// ErrSecretName is wrapped by the error for a name that is not a valid
// secret name (see [ValidSecretName]).
var ErrSecretName = errors.New("invalid secret name")

// ValidSecretName reports whether name may name a secret: 1 to 64 of a-z,
// 0-9, '.', '_' and '-', starting with a letter or a digit. A name is a file
// name under secrets/, so it can hold no path separator and cannot be "." or
// "..", and it cannot collide with the store's hidden temporary files.
func ValidSecretName(name string) bool {
	if len(name) == 0 || len(name) > 64 {
		return false
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		switch {
		case 'a' <= c && c <= 'z', '0' <= c && c <= '9':
		case i > 0 && (c == '.' || c == '_' || c == '-'):
		default:
			return false
		}
	}
	return true
}

func checkName(name string) error {
	if !ValidSecretName(name) {
		return fmt.Errorf("%w %q: use 1 to 64 of a-z, 0-9, '.', '_' and '-', starting with a letter or a digit", ErrSecretName, name)
	}
	return nil
}

// PermissionError is a secrets folder or file whose kind or mode would let
// someone other than the owner read or swap a secret: a folder or file
// group or others can use, a symbolic link, something not a regular file.
// It says how to fix it; it never holds a value. It wraps fs.ErrPermission.
type PermissionError struct {
	Path    string
	Problem string // "is mode 0644 (group or others can read it)"
	Fix     string // "run: chmod 600 '/home/me/.plexus/secrets/x'"
}

func (e *PermissionError) Error() string { return e.Path + " " + e.Problem + "; " + e.Fix }

func (e *PermissionError) Unwrap() error { return fs.ErrPermission }

func (s *Services) secretsDir() string { return filepath.Join(s.home, secretsDir) }

// notSet is the error for a secret that is not there.
func notSet(name, dir string) error {
	return fmt.Errorf("secret %q: %w in %s; run: plexus secrets set %s", name, plexus.ErrNotFound, dir, name)
}

// Secret returns the value of the secret name, without its one trailing
// newline. It is meant to be called at dispatch, by the transport that
// presents the secret, and its result given to nothing else. It refuses,
// with a [*PermissionError], a secrets folder or a secret file that group
// or others can use, a symbolic link (it is never followed) and anything
// not a regular file. A secret not set is an error wrapping
// [plexus.ErrNotFound] that says how to set it. No error holds the value.
func (s *Services) Secret(name string) (string, error) {
	if err := checkName(name); err != nil {
		return "", err
	}
	dir := s.secretsDir()
	if err := checkDir(dir); errors.Is(err, fs.ErrNotExist) {
		return "", notSet(name, dir)
	} else if err != nil {
		return "", fmt.Errorf("secret %q: %w", name, err)
	}
	p := filepath.Join(dir, name)
	// O_NOFOLLOW: a link in place of the file is refused, not followed, and
	// the checks below are made on what was opened, so nothing can be
	// swapped in between. O_NONBLOCK: a FIFO cannot make dispatch hang.
	f, err := os.OpenFile(p, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return "", notSet(name, dir)
	case errors.Is(err, syscall.ELOOP):
		return "", fmt.Errorf("secret %q: %w", name, &PermissionError{Path: p, Problem: "is a symbolic link (never followed)",
			Fix: "remove it, then run: plexus secrets set " + name})
	case err != nil:
		return "", fmt.Errorf("secret %q: %w", name, err)
	}
	defer f.Close()
	if err := checkFile(f, p, name); err != nil {
		return "", fmt.Errorf("secret %q: %w", name, err)
	}
	// One byte beyond the largest value and its newline tells too long.
	b, err := io.ReadAll(io.LimitReader(f, MaxSecretSize+2))
	if err != nil {
		return "", fmt.Errorf("secret %q: %w", name, err)
	}
	v := strings.TrimSuffix(string(b), "\n")
	switch {
	case len(v) > MaxSecretSize:
		return "", fmt.Errorf("secret %q: %s holds more than %d bytes", name, p, MaxSecretSize)
	case v == "":
		return "", fmt.Errorf("secret %q: %s is empty; run: plexus secrets set %s", name, p, name)
	}
	return v, nil
}

// checkDir checks the secrets folder: a real folder (not a link to one) that
// only the owner can use. A missing folder is an error wrapping
// fs.ErrNotExist.
func checkDir(dir string) error {
	fi, err := os.Lstat(dir)
	switch {
	case err != nil:
		return err
	case fi.Mode()&fs.ModeSymlink != 0:
		return &PermissionError{Path: dir, Problem: "is a symbolic link (never followed)",
			Fix: "replace it with a folder: mv " + shq(dir) + " elsewhere, then mkdir -m 700 " + shq(dir)}
	case !fi.IsDir():
		return &PermissionError{Path: dir, Problem: "is not a directory", Fix: "move it aside; plexus secrets set creates the folder"}
	case fi.Mode().Perm()&0o077 != 0:
		return &PermissionError{Path: dir, Problem: fmt.Sprintf("is mode %04o (group or others can enter it)", fi.Mode().Perm()),
			Fix: "run: chmod 700 " + shq(dir)}
	}
	return nil
}

// checkFile checks an open secret file: regular, and only the owner can
// read it.
func checkFile(f *os.File, p, name string) error {
	fi, err := f.Stat()
	switch {
	case err != nil:
		return err
	case !fi.Mode().IsRegular():
		return &PermissionError{Path: p, Problem: "is not a regular file", Fix: "remove it, then run: plexus secrets set " + name}
	case fi.Mode().Perm()&0o077 != 0:
		return &PermissionError{Path: p, Problem: fmt.Sprintf("is mode %04o (group or others can read it)", fi.Mode().Perm()),
			Fix: "run: chmod 600 " + shq(p)}
	}
	return nil
}

// SetSecret stores value under name, replacing any value it had. The file
// is written 0600 under a temporary name, synced and renamed into place,
// so a reader sees the old value or the new one, never a part; the secrets
// folder is created 0700 if missing (PLEXUS_HOME itself must exist). An
// empty value and one over [MaxSecretSize] are refused.
func (s *Services) SetSecret(name string, value []byte) error {
	if err := checkName(name); err != nil {
		return err
	}
	switch {
	case len(value) == 0:
		return fmt.Errorf("secret %q: the value is empty", name)
	case len(value) > MaxSecretSize:
		return fmt.Errorf("secret %q: the value is %d bytes; at most %d", name, len(value), MaxSecretSize)
	}
	dir, err := s.ensureSecretsDir()
	if err != nil {
		return fmt.Errorf("secret %q: %w", name, err)
	}
	data := append(value[:len(value):len(value)], '\n')
	if err := WriteFileAtomic(filepath.Join(dir, name), data, WriteOptions{Mode: secretFileMode}); err != nil {
		return fmt.Errorf("secret %q: %w", name, err)
	}
	return nil
}

// ensureSecretsDir returns the secrets folder, checked, after creating it
// 0700 when it is missing.
func (s *Services) ensureSecretsDir() (string, error) {
	dir := s.secretsDir()
	err := checkDir(dir)
	if !errors.Is(err, fs.ErrNotExist) {
		return dir, err
	}
	if fi, err := os.Stat(s.home); err != nil || !fi.IsDir() {
		return "", fmt.Errorf("no Plexus home at %s: run plexus init, or pass --home", s.home)
	}
	if err := os.Mkdir(dir, secretDirMode); err != nil && !errors.Is(err, fs.ErrExist) {
		return "", err
	} else if err == nil {
		// The umask may have narrowed the mode; make it exactly 0700.
		if err := os.Chmod(dir, secretDirMode); err != nil {
			return "", err
		}
		if err := SyncDir(s.home); err != nil {
			return "", err
		}
	}
	return dir, checkDir(dir)
}

// Secrets returns the names of the stored secrets, sorted; never a value.
// No secrets folder means none.
func (s *Services) Secrets() ([]string, error) {
	dir := s.secretsDir()
	if err := checkDir(dir); errors.Is(err, fs.ErrNotExist) {
		return []string{}, nil
	} else if err != nil {
		return nil, fmt.Errorf("secrets: %w", err)
	}
	entries, err := os.ReadDir(dir) // sorted by name
	if err != nil {
		return nil, fmt.Errorf("secrets: %w", err)
	}
	names := []string{}
	for _, e := range entries {
		if !e.IsDir() && ValidSecretName(e.Name()) {
			names = append(names, e.Name())
		}
	}
	return names, nil
}

// RemoveSecret deletes the secret name. One not set is an error wrapping
// [plexus.ErrNotFound].
func (s *Services) RemoveSecret(name string) error {
	if err := checkName(name); err != nil {
		return err
	}
	dir := s.secretsDir()
	if err := checkDir(dir); errors.Is(err, fs.ErrNotExist) {
		return notSet(name, dir)
	} else if err != nil {
		return fmt.Errorf("secret %q: %w", name, err)
	}
	p := filepath.Join(dir, name)
	fi, err := os.Lstat(p)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return notSet(name, dir)
	case err != nil:
		return fmt.Errorf("secret %q: %w", name, err)
	case fi.IsDir():
		return fmt.Errorf("secret %q: %s is a directory, not a secret", name, p)
	}
	if err := os.Remove(p); err != nil {
		return fmt.Errorf("secret %q: %w", name, err)
	}
	if err := SyncDir(dir); err != nil {
		return fmt.Errorf("secret %q: %w", name, err)
	}
	return nil
}

// shq quotes p for a POSIX shell when it needs quoting.
func shq(p string) string {
	if p != "" && strings.Trim(p, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789/._-+:@%") == "" {
		return p
	}
	return "'" + strings.ReplaceAll(p, "'", `'\''`) + "'"
}

// ErrSecretFromDevice is [ReadSecretValue] refusing a terminal or another
// device, where a typed value would show.
var ErrSecretFromDevice = errors.New("stdin is a terminal (or another device), where a typed value would show")

// SecretValueError is a value read for a secret that cannot be stored: it
// is empty, or over [MaxSecretSize].
type SecretValueError struct{ Empty bool }

func (e *SecretValueError) Error() string {
	if e.Empty {
		return "stdin was empty: nothing stored"
	}
	return fmt.Sprintf("the value on stdin is over %d bytes: nothing stored", MaxSecretSize)
}

// ReadSecretValue reads a secret's value from r, the way `plexus secrets
// set` takes it on stdin (never as an argument, which ps and the shell's
// history keep): a pipe or a file, not a terminal or another device
// ([ErrSecretFromDevice]), with one trailing newline dropped.
func ReadSecretValue(r io.Reader) ([]byte, error) {
	if f, ok := r.(*os.File); ok {
		if fi, err := f.Stat(); err == nil && fi.Mode()&os.ModeCharDevice != 0 {
			return nil, ErrSecretFromDevice
		}
	}
	// One byte beyond the largest value and its newline tells too long.
	b, err := io.ReadAll(io.LimitReader(r, MaxSecretSize+2))
	if err != nil {
		return nil, fmt.Errorf("read the value from stdin: %w", err)
	}
	if n := len(b); n > 0 && b[n-1] == '\n' {
		b = b[:n-1]
	}
	switch {
	case len(b) == 0:
		return nil, &SecretValueError{Empty: true}
	case len(b) > MaxSecretSize:
		return nil, &SecretValueError{}
	}
	return b, nil
}
