// Package portal is Plexus's first-party folder source and its transport: an
// owner-chosen folder exposed to agents as four entries (list, read and
// search are read; write is write) reached over the "portal" transport.
//
// Confinement is the point of the package. Every file operation goes through
// an [os.Root] opened on the folder, so the operating system refuses `..`,
// absolute paths and symbolic links that lead outside it; absolute paths and
// NUL bytes are refused before the file system is touched at all. The package
// must never open a path outside that root, follow a symlink out of it,
// block on a FIFO or device, or put file contents into an error message.
package portal

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"

	"github.com/plexus-gw/plexus"
)

// SourcePrefix prefixes the source id of every portal: "portal:<alias>".
const SourcePrefix = "portal:"

// The four operations a portal offers; each is one entry and the "op" of
// its route.
const (
	OpList   = "list"
	OpRead   = "read"
	OpSearch = "search"
	OpWrite  = "write"
)

var aliasRE = regexp.MustCompile(`^[a-z0-9][a-z0-9-]{0,31}$`)

// Source is one portal: an alias and the folder it exposes. It is immutable
// and safe for concurrent use.
type Source struct {
	alias string
	root  string // absolute, symlinks resolved
}

var _ plexus.Source = (*Source)(nil)

// NewSource returns the portal alias over the folder root. The alias must
// match ^[a-z0-9][a-z0-9-]{0,31}$ (it becomes part of entry ids); root must
// be an existing directory, and is stored absolute with symlinks resolved so
// that later changes to a symlink on the way cannot move the portal.
func NewSource(alias, root string) (*Source, error) {
	if !aliasRE.MatchString(alias) {
		return nil, fmt.Errorf("portal alias %q: want 1-32 characters of a-z, 0-9 and -, starting with a letter or digit", alias)
	}
	abs, err := filepath.Abs(root)
	if err != nil {
		return nil, fmt.Errorf("portal %s: %w", alias, err)
	}
	resolved, err := filepath.EvalSymlinks(abs)
	if err != nil {
		return nil, fmt.Errorf("portal %s: %w", alias, err)
	}
	fi, err := os.Stat(resolved)
	if err != nil {
		return nil, fmt.Errorf("portal %s: %w", alias, err)
	}
	if !fi.IsDir() {
		return nil, fmt.Errorf("portal %s: %s is not a directory", alias, resolved)
	}
	return &Source{alias: alias, root: resolved}, nil
}

// ID returns "portal:<alias>".
func (s *Source) ID() string { return SourcePrefix + s.alias }

// Alias returns the portal's alias.
func (s *Source) Alias() string { return s.alias }

// Root returns the absolute, symlink-resolved folder path.
func (s *Source) Root() string { return s.root }

// Provenance is first-party: a portal is configured by the owner.
func (s *Source) Provenance() plexus.Provenance { return plexus.ProvenanceFirstParty }

// EntryID returns the id of a portal entry: portal.<alias>.<op>.
func EntryID(alias, op string) string { return "portal." + alias + "." + op }

// Scan returns the portal's four entries. It does not touch the folder: a
// missing folder shows in Health and at dispatch, not as a scan failure, so
// the entries stay put while the owner's drive is unmounted.
func (s *Source) Scan(ctx context.Context) ([]plexus.Entry, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	a := s.alias
	specs := []struct {
		op, label, describe string
		verb                plexus.Verb
		in, out             string
	}{
		{OpList, "List files in " + a,
			"List files and folders under a path in the " + a + " folder. Use when you need to see what the folder holds before reading, searching or writing; paths are relative to the folder, and an empty path or \".\" is the folder itself. Entries come back sorted by name with type (file, dir, symlink or other), size in bytes and modification time.",
			plexus.VerbRead, listInput, listOutput},
		{OpRead, "Read a file in " + a,
			"Read a file from the " + a + " folder. Use when you know the file's path (from list or search) and need its contents. Text is returned as is; a file that is not valid UTF-8 comes back base64-encoded with encoding \"base64\". At most maxBytes bytes are returned (default 1 MiB, at most 8 MiB) and truncated says whether the file was longer.",
			plexus.VerbRead, readInput, readOutput},
		{OpSearch, "Search in " + a,
			"Search file names and text file contents in the " + a + " folder for a case-insensitive substring. Use when you know what a file is called or contains but not where it is. Returns matching paths with line numbers (line 0 means the name matched), at most limit matches (default 50, at most 500); files over 1 MiB and binary files are not searched.",
			plexus.VerbRead, searchInput, searchOutput},
		{OpWrite, "Write a file in " + a,
			"Create or replace a file in the " + a + " folder with the given text. Use when the owner asked you to save or change a file. The write is atomic (readers see the old or the new file, never a mix); missing parent folders are created only when createDirs is true, and a symbolic link is never written through.",
			plexus.VerbWrite, writeInput, writeOutput},
	}
	out := make([]plexus.Entry, 0, len(specs))
	for _, sp := range specs {
		rt, err := json.Marshal(route{Root: s.root, Op: sp.op})
		if err != nil {
			return nil, err
		}
		out = append(out, plexus.Entry{
			ID:        EntryID(a, sp.op),
			Source:    s.ID(),
			Kind:      plexus.KindCapability,
			Label:     sp.label,
			Describe:  sp.describe,
			IO:        &plexus.IOSchema{Input: json.RawMessage(sp.in), Output: json.RawMessage(sp.out)},
			Grants:    []plexus.Verb{sp.verb},
			Transport: plexus.TransportPortal,
			Route:     rt,
		})
	}
	return out, nil
}

// Health is ok while the folder exists and is a directory. The detail never
// names the folder's path: health is stamped onto entries agents read.
func (s *Source) Health(ctx context.Context) plexus.Health {
	fi, err := os.Stat(s.root)
	switch {
	case errors.Is(err, os.ErrNotExist):
		return plexus.Health{Status: plexus.HealthUnavailable, Detail: "the folder does not exist"}
	case err != nil:
		return plexus.Health{Status: plexus.HealthUnavailable, Detail: "the folder cannot be accessed"}
	case !fi.IsDir():
		return plexus.Health{Status: plexus.HealthUnavailable, Detail: "the folder path is not a directory"}
	}
	return plexus.Health{Status: plexus.HealthOK}
}

// route is the transport-private configuration of a portal entry.
type route struct {
	Root string `json:"root"`
	Op   string `json:"op"`
}

// The entries' JSON Schemas. Paths are folder-relative with "/" separators.
const (
	pathProp = `"path":{"type":"string","description":"Path relative to the folder, with / separators; \"\" or \".\" is the folder itself. Absolute paths and .. leading outside are refused."}`

	listInput  = `{"type":"object","properties":{` + pathProp + `},"additionalProperties":false}`
	listOutput = `{"type":"object","properties":{"path":{"type":"string"},"entries":{"type":"array","items":{"type":"object","properties":{"name":{"type":"string"},"path":{"type":"string"},"type":{"type":"string","enum":["file","dir","symlink","other"]},"size":{"type":"integer"},"modTime":{"type":"string","format":"date-time"}},"required":["name","path","type","size","modTime"]}},"truncated":{"type":"boolean"}},"required":["path","entries","truncated"]}`

	readInput  = `{"type":"object","properties":{` + pathProp + `,"maxBytes":{"type":"integer","minimum":1,"maximum":8388608,"description":"Return at most this many bytes (default 1048576)."}},"required":["path"],"additionalProperties":false}`
	readOutput = `{"type":"object","properties":{"path":{"type":"string"},"content":{"type":"string"},"encoding":{"type":"string","enum":["base64"],"description":"Present when content is base64 because the file is not valid UTF-8."},"size":{"type":"integer","description":"The file's full size in bytes."},"truncated":{"type":"boolean"}},"required":["path","content","size","truncated"]}`

	searchInput  = `{"type":"object","properties":{"query":{"type":"string","minLength":1,"description":"Case-insensitive substring to find in file names and text contents."},` + pathProp + `,"limit":{"type":"integer","minimum":1,"maximum":500,"description":"Maximum number of matches (default 50)."}},"required":["query"],"additionalProperties":false}`
	searchOutput = `{"type":"object","properties":{"matches":{"type":"array","items":{"type":"object","properties":{"path":{"type":"string"},"line":{"type":"integer","description":"1-based line number; 0 when the name matched."},"text":{"type":"string"}},"required":["path","line","text"]}},"truncated":{"type":"boolean"}},"required":["matches","truncated"]}`

	writeInput  = `{"type":"object","properties":{` + pathProp + `,"content":{"type":"string","description":"The complete new text of the file."},"createDirs":{"type":"boolean","description":"Create missing parent folders (default false)."}},"required":["path","content"],"additionalProperties":false}`
	writeOutput = `{"type":"object","properties":{"path":{"type":"string"},"bytes":{"type":"integer"}},"required":["path","bytes"]}`
)

// Kind is the kind of an owner-configured portal source.
const Kind = "portal"

// Config is the Config of a portal source as the owner adds it and the
// daemon reads it back: the folder and its alias.
type Config struct {
	Path  string `json:"path"`
	Alias string `json:"alias"`
}
