package scaffold

import (
	"bytes"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"slices"

	"github.com/plexus-gw/plexus/platform"
)

// OwnerFile is one of the owner's JSON files under PLEXUS_HOME (mcp.json,
// providers.json) as read: a JSON object whose one key (Key) holds an object
// of named entries. The CLI edits it entry by entry and the daemon reads
// it; both go through OwnerFile, so an edit changes only the entry it names:
// the file's other top-level keys and every other entry are written back as
// they were, with the same indentation.
//
// What the caller checks in an entry (its shape, its rules) is the caller's:
// OwnerFile only knows the envelope.
type OwnerFile struct {
	path    string
	key     string
	top     map[string]json.RawMessage
	entries map[string]json.RawMessage
	// existed and sum are what was on disk at read: Save refuses to
	// replace a file that changed since (a hand edit saved meanwhile).
	existed bool
	sum     [sha256.Size]byte
}

// OwnerFileProblem says what is wrong with an owner's file as a whole.
type OwnerFileProblem int

const (
	// ProblemTooLarge: the file is over the bound the caller set.
	ProblemTooLarge OwnerFileProblem = iota + 1
	// ProblemNotObject: the file is not a JSON object.
	ProblemNotObject
	// ProblemEntriesNotObject: the entries' key does not hold an object.
	ProblemEntriesNotObject
)

// OwnerFileError is an owner's file that cannot be read as one: each caller
// words it in its own file's terms. Err is the JSON error where there is one.
type OwnerFileError struct {
	Path    string
	Problem OwnerFileProblem
	Err     error
}

func (e *OwnerFileError) Error() string {
	switch e.Problem {
	case ProblemTooLarge:
		return e.Path + ": too large"
	case ProblemNotObject:
		return e.Path + ": not a JSON object"
	default:
		return e.Path + ": the entries are not an object"
	}
}

func (e *OwnerFileError) Unwrap() error { return e.Err }

// EditConflictError is a Save refused because the file changed on disk
// since it was read (the owner saved it by hand meanwhile): writing would
// lose that edit. Nothing was written; read the file again and redo the
// edit.
type EditConflictError struct {
	Path string
}

func (e *EditConflictError) Error() string {
	return fmt.Sprintf("%s changed on disk since it was read; nothing was written: run the command again", e.Path)
}

// ReadOwnerFile reads path, whose entries are under key. A missing or blank
// file is an empty one. max bounds what is read (0: 8 MiB). An error
// reading the file is returned as the os package gives it (each caller
// words it); a file that is not one is an [*OwnerFileError].
func ReadOwnerFile(path, key string, max int64) (*OwnerFile, error) {
	f := &OwnerFile{path: path, key: key, top: map[string]json.RawMessage{}, entries: map[string]json.RawMessage{}}
	b, existed, err := readBounded(path, max)
	if err != nil {
		return nil, err
	}
	f.existed, f.sum = existed, sha256.Sum256(b)
	if len(bytes.TrimSpace(b)) == 0 {
		return f, nil
	}
	if err := json.Unmarshal(b, &f.top); err != nil || f.top == nil {
		return nil, &OwnerFileError{Path: path, Problem: ProblemNotObject, Err: err}
	}
	if raw, ok := f.top[key]; ok && string(bytes.TrimSpace(raw)) != "null" {
		if err := json.Unmarshal(raw, &f.entries); err != nil || f.entries == nil {
			return nil, &OwnerFileError{Path: path, Problem: ProblemEntriesNotObject, Err: err}
		}
	}
	return f, nil
}

// maxOwnerFile bounds what is read of an owner's JSON file when its caller
// sets no tighter bound: far more than any hand-written config, and a
// planted /dev/zero link is refused anyway.
const maxOwnerFile = 8 << 20

// readBounded reads path whole, up to max bytes (maxOwnerFile when max is
// 0); a missing file reads as nothing. Only a regular file is read: a link,
// FIFO or device under the name is an error wrapping
// *[platform.NotRegularError], never followed or waited on.
func readBounded(path string, max int64) ([]byte, bool, error) {
	if max <= 0 {
		max = maxOwnerFile
	}
	b, err := platform.ReadRegular(path, max+1)
	if errors.Is(err, os.ErrNotExist) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, err
	}
	if int64(len(b)) > max {
		return nil, true, &OwnerFileError{Path: path, Problem: ProblemTooLarge}
	}
	return b, true, nil
}

// Path is the file's path.
func (f *OwnerFile) Path() string { return f.path }

// Names lists the entries' names, sorted.
func (f *OwnerFile) Names() []string {
	out := make([]string, 0, len(f.entries))
	for n := range f.entries {
		out = append(out, n)
	}
	slices.Sort(out)
	return out
}

// Entry returns entry name as written.
func (f *OwnerFile) Entry(name string) (json.RawMessage, bool) {
	raw, ok := f.entries[name]
	return raw, ok
}

// Put sets entry name to raw (a new entry, or a replacement).
func (f *OwnerFile) Put(name string, raw json.RawMessage) { f.entries[name] = raw }

// Remove drops entry name; false when there was none.
func (f *OwnerFile) Remove(name string) bool {
	if _, ok := f.entries[name]; !ok {
		return false
	}
	delete(f.entries, name)
	return true
}

// Save replaces the file atomically (a synced temporary file renamed over
// it, SecretMode: env values may be secrets an owner wrote in plain),
// keeping every other top-level key. It refuses with an
// [EditConflictError] when the file on disk is no longer what was read:
// the check runs right before the rename, which cannot itself be
// conditional, so the window left is the rename's.
func (f *OwnerFile) Save() error {
	entries, err := json.Marshal(f.entries)
	if err != nil {
		return fmt.Errorf("write %s: %w", f.path, err)
	}
	f.top[f.key] = entries
	b, err := json.MarshalIndent(f.top, "", "  ")
	if err != nil {
		return fmt.Errorf("write %s: %w", f.path, err)
	}
	b = append(b, '\n')
	// WriteFileAtomic's own errors name the path; f.unchanged's conflict
	// comes back as it is.
	if err := platform.WriteFileAtomic(f.path, b, platform.WriteOptions{Mode: SecretMode, Check: f.unchanged}); err != nil {
		return err
	}
	f.existed, f.sum = true, sha256.Sum256(b)
	return nil
}

// unchanged checks that the file on disk is the one read.
func (f *OwnerFile) unchanged() error {
	b, existed, err := readBounded(f.path, 0)
	var tooLarge *OwnerFileError
	if errors.As(err, &tooLarge) {
		return &EditConflictError{Path: f.path} // grown past any bound since it was read
	} else if err != nil {
		return fmt.Errorf("write %s: %w", f.path, err)
	}
	if existed != f.existed || sha256.Sum256(b) != f.sum {
		return &EditConflictError{Path: f.path}
	}
	return nil
}
