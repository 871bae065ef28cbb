package portal

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/plexus-gw/plexus"
)

// Transport dispatches portal entries. It holds no state: each call opens
// the entry's folder as an [os.Root] and closes it when done, so a folder
// that is replaced or unmounted is seen at the next call. Safe for
// concurrent use.
type Transport struct{}

var _ plexus.Transport = (*Transport)(nil)

// NewTransport returns the portal transport.
func NewTransport() *Transport { return &Transport{} }

// Kind returns [plexus.TransportPortal].
func (*Transport) Kind() plexus.TransportKind { return plexus.TransportPortal }

// Dispatch performs the entry's operation on its folder. Every failure is a
// result with OK false: malformed input is schema_validation_failed, a
// folder that cannot be opened is source_unavailable, and everything else
// (paths leading outside, missing files, a file where a folder is needed,
// cancellation) is transport_error. Messages name the folder-relative path
// at most, never the folder's absolute path or file contents.
func (t *Transport) Dispatch(ctx context.Context, entry plexus.Entry, input map[string]any, _ plexus.DispatchContext) plexus.TransportResult {
	data, perr := t.dispatch(ctx, entry, input)
	return plexus.DispatchResult(entry.ID, data, perr)
}

func (t *Transport) dispatch(ctx context.Context, entry plexus.Entry, input map[string]any) (any, *plexus.Error) {
	var rt route
	if err := json.Unmarshal(entry.Route, &rt); err != nil || !filepath.IsAbs(rt.Root) {
		return nil, &plexus.Error{Code: plexus.CodeTransportError, Message: "portal entry has an invalid route", Err: err}
	}
	// Parse and check the whole input before the file system is touched.
	var run func(*os.Root) (any, *plexus.Error)
	switch rt.Op {
	case OpList:
		a, perr := parseList(input)
		if perr != nil {
			return nil, perr
		}
		run = func(r *os.Root) (any, *plexus.Error) { return list(ctx, r, a) }
	case OpRead:
		a, perr := parseRead(input)
		if perr != nil {
			return nil, perr
		}
		run = func(r *os.Root) (any, *plexus.Error) { return read(ctx, r, a) }
	case OpSearch:
		a, perr := parseSearch(input)
		if perr != nil {
			return nil, perr
		}
		run = func(r *os.Root) (any, *plexus.Error) { return search(ctx, r, a) }
	case OpWrite:
		a, perr := parseWrite(input)
		if perr != nil {
			return nil, perr
		}
		run = func(r *os.Root) (any, *plexus.Error) { return write(ctx, r, a) }
	default:
		return nil, plexus.Errorf(plexus.CodeTransportError, "portal entry has an unknown operation %q", rt.Op)
	}
	if err := ctx.Err(); err != nil {
		return nil, plexus.WrapError(plexus.CodeTransportError, err, "call cancelled")
	}
	root, err := os.OpenRoot(rt.Root)
	if err != nil {
		return nil, plexus.WrapError(plexus.CodeSourceUnavailable, err, "the portal folder is unavailable")
	}
	defer root.Close()
	return run(root)
}

// Operation arguments, parsed and checked. Paths are cleaned OS paths
// relative to the root ("." for the root itself).
type (
	listArgs struct{ path string }
	readArgs struct {
		path     string
		maxBytes int64
	}
	searchArgs struct {
		query, path string
		limit       int
	}
	writeArgs struct {
		path, content string
		createDirs    bool
	}
)

// Limits of the read and search operations.
const (
	DefaultReadBytes  = 1 << 20
	MaxReadBytes      = 8 << 20
	DefaultSearchHits = 50
	MaxSearchHits     = 500
	// MaxSearchFileSize is the largest file whose contents search reads.
	MaxSearchFileSize = 1 << 20
	// maxSearchFiles bounds how many files one search visits.
	maxSearchFiles = 20000
	// maxListEntries bounds one listing.
	maxListEntries = 10000
)

func parseList(in map[string]any) (listArgs, *plexus.Error) {
	p, _, perr := stringArg(in, "path", false)
	if perr != nil {
		return listArgs{}, perr
	}
	p2, perr := cleanPath(p)
	return listArgs{path: p2}, perr
}

func parseRead(in map[string]any) (readArgs, *plexus.Error) {
	p, _, perr := stringArg(in, "path", true)
	if perr != nil {
		return readArgs{}, perr
	}
	a := readArgs{maxBytes: DefaultReadBytes}
	if a.path, perr = cleanPath(p); perr != nil {
		return a, perr
	}
	n, ok, perr := intArg(in, "maxBytes")
	switch {
	case perr != nil:
		return a, perr
	case ok && n < 1:
		return a, plexus.Errorf(plexus.CodeSchemaValidationFailed, "input.maxBytes must be at least 1")
	case ok:
		a.maxBytes = min(n, MaxReadBytes)
	}
	return a, nil
}

func parseSearch(in map[string]any) (searchArgs, *plexus.Error) {
	q, _, perr := stringArg(in, "query", true)
	if perr != nil {
		return searchArgs{}, perr
	}
	if q == "" {
		return searchArgs{}, plexus.Errorf(plexus.CodeSchemaValidationFailed, "input.query must not be empty")
	}
	if strings.ContainsRune(q, 0) {
		return searchArgs{}, plexus.Errorf(plexus.CodeSchemaValidationFailed, "input.query contains a NUL byte")
	}
	p, _, perr := stringArg(in, "path", false)
	if perr != nil {
		return searchArgs{}, perr
	}
	a := searchArgs{query: q, limit: DefaultSearchHits}
	if a.path, perr = cleanPath(p); perr != nil {
		return a, perr
	}
	n, ok, perr := intArg(in, "limit")
	switch {
	case perr != nil:
		return a, perr
	case ok && n < 1:
		return a, plexus.Errorf(plexus.CodeSchemaValidationFailed, "input.limit must be at least 1")
	case ok:
		a.limit = int(min(n, MaxSearchHits))
	}
	return a, nil
}

func parseWrite(in map[string]any) (writeArgs, *plexus.Error) {
	p, _, perr := stringArg(in, "path", true)
	if perr != nil {
		return writeArgs{}, perr
	}
	var a writeArgs
	if a.path, perr = cleanPath(p); perr != nil {
		return a, perr
	}
	if a.path == "." {
		return a, plexus.Errorf(plexus.CodeTransportError, "path must name a file, not the folder itself")
	}
	if a.content, _, perr = stringArg(in, "content", true); perr != nil {
		return a, perr
	}
	if v, ok := in["createDirs"]; ok && v != nil {
		b, isBool := v.(bool)
		if !isBool {
			return a, plexus.Errorf(plexus.CodeSchemaValidationFailed, "input.createDirs must be a boolean")
		}
		a.createDirs = b
	}
	return a, nil
}

func stringArg(in map[string]any, key string, required bool) (string, bool, *plexus.Error) {
	v, ok := in[key]
	if !ok || v == nil {
		if required {
			return "", false, plexus.Errorf(plexus.CodeSchemaValidationFailed, "input.%s is required", key)
		}
		return "", false, nil
	}
	s, isString := v.(string)
	if !isString {
		return "", false, plexus.Errorf(plexus.CodeSchemaValidationFailed, "input.%s must be a string", key)
	}
	return s, true, nil
}

// intArg reads an integer however the JSON decoder delivered it.
func intArg(in map[string]any, key string) (int64, bool, *plexus.Error) {
	v, ok := in[key]
	if !ok || v == nil {
		return 0, false, nil
	}
	bad := plexus.Errorf(plexus.CodeSchemaValidationFailed, "input.%s must be an integer", key)
	switch n := v.(type) {
	case float64:
		if n != math.Trunc(n) || math.IsInf(n, 0) || math.Abs(n) > 1<<53 {
			return 0, false, bad
		}
		return int64(n), true, nil
	case json.Number:
		i, err := n.Int64()
		if err != nil {
			return 0, false, bad
		}
		return i, true, nil
	case int:
		return int64(n), true, nil
	case int64:
		return n, true, nil
	}
	return 0, false, bad
}

// cleanPath checks an agent-supplied path lexically, before any file system
// call, and returns it cleaned. The os.Root behind every operation is the
// real guard (it also refuses symlinks leading out); this check refuses
// what can be refused without looking and gives it a clear message.
func cleanPath(p string) (string, *plexus.Error) {
	if strings.ContainsRune(p, 0) {
		return "", plexus.Errorf(plexus.CodeTransportError, "path contains a NUL byte")
	}
	if p == "" || p == "." {
		return ".", nil
	}
	if filepath.IsAbs(p) || strings.HasPrefix(p, "/") || filepath.VolumeName(p) != "" {
		return "", plexus.Errorf(plexus.CodeTransportError, "absolute path %s refused: give a path relative to the folder", quote(p))
	}
	c := filepath.Clean(filepath.FromSlash(p))
	if c == "." {
		return ".", nil
	}
	if !filepath.IsLocal(c) {
		return "", plexus.Errorf(plexus.CodeTransportError, "path %s leads outside the folder", quote(p))
	}
	return c, nil
}

// slashPath is the folder-relative path as results show it.
func slashPath(p string) string { return filepath.ToSlash(p) }

// quote renders an agent-supplied path for a message, bounded.
func quote(p string) string {
	const max = 200
	if len(p) > max {
		p = p[:max] + "…"
	}
	return fmt.Sprintf("%q", p)
}

// fsError turns a file-system error on rel into a transport_error whose
// message names the folder-relative path only. The underlying error is kept
// in Err for logs; it names relative paths too, since os.Root reports
// names as given.
func fsError(err error, rel string) *plexus.Error {
	q := quote(slashPath(rel))
	var msg string
	switch {
	case errors.Is(err, fs.ErrNotExist):
		msg = "no such file or folder: " + q
	case isEscape(err):
		msg = q + " leads outside the folder through a symbolic link"
	case errors.Is(err, syscall.ELOOP):
		msg = q + " involves too many symbolic links"
	case errors.Is(err, syscall.ENOTDIR):
		msg = "a parent of " + q + " is not a folder"
	case errors.Is(err, fs.ErrPermission):
		msg = "permission denied: " + q
	case errors.Is(err, fs.ErrExist):
		msg = q + " already exists"
	default:
		msg = "cannot access " + q
	}
	return plexus.WrapError(plexus.CodeTransportError, err, msg)
}

// isEscape reports whether err is os.Root refusing a path that leaves the
// root. The standard library does not export that error, so its text is
// matched; anything unrecognized still fails, only with a vaguer message.
func isEscape(err error) bool {
	return err != nil && strings.Contains(err.Error(), "path escapes from parent")
}
