package planexe

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"os"
	"path"
	"sort"
	"strings"
	"time"
	"unicode/utf8"
)

// uriPrefix starts every artifact URI: planexe://sessions/<id>/out/<path>.
const uriPrefix = "planexe://sessions/"

func outputDirURI(sessionID string) string { return uriPrefix + sessionID + "/out" }

func artifactURI(sessionID, p string) string { return outputDirURI(sessionID) + "/" + p }

// parseArtifactURI splits an artifact URI into its session id and its path
// relative to the session's output root. It works on the raw string and never
// percent-decodes: this server never issues an escaped URI, so any escape is
// refused rather than interpreted (a decoded %2e%2e%2f is how traversal
// slips past a check made before decoding).
func parseArtifactURI(uri string) (sessionID, rel string, err error) {
	refuse := func(reason string) (string, string, error) {
		return "", "", newError(CodeInvalidArtifactURI, map[string]any{"artifact_uri": clip(uri), "reason": reason},
			"artifact_uri %q is not an artifact URI of this server: %s", clip(uri), reason)
	}
	if len(uri) > 2048 {
		return refuse("too long")
	}
	rest, ok := strings.CutPrefix(uri, uriPrefix)
	if !ok {
		return refuse("must start with " + uriPrefix)
	}
	sessionID, rest, ok = strings.Cut(rest, "/")
	if !ok || !validSessionSegment(sessionID) {
		return refuse("malformed session id")
	}
	rel, ok = strings.CutPrefix(rest, "out/")
	if !ok {
		return refuse("must name a file under /out/")
	}
	if reason := checkPath(rel); reason != "" {
		return refuse(reason)
	}
	return sessionID, rel, nil
}

// validSessionSegment accepts what a session id may look like, so that a
// lookup never sees separators or escapes.
func validSessionSegment(s string) bool {
	if s == "" || len(s) > 64 {
		return false
	}
	for _, r := range s {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '_' || r == '-') {
			return false
		}
	}
	return true
}

// checkPath returns why p is not an acceptable artifact path, or "". The
// rules are deliberately narrower than a filesystem's: relative, slash
// separated, segments of [A-Za-z0-9._-] that are neither "." nor ".." nor
// start with "." (dot names are the server's temporary files). So no
// absolute path, drive letter, backslash, escape, NUL or traversal reaches
// the filesystem at all; os.Root then confines what remains, symlinks
// included.
func checkPath(p string) string {
	switch {
	case p == "":
		return "empty path"
	case len(p) > 1024:
		return "path too long"
	case strings.HasPrefix(p, "/"):
		return "absolute path"
	}
	segs := strings.Split(p, "/")
	if len(segs) > 16 {
		return "path too deep"
	}
	for _, seg := range segs {
		switch {
		case seg == "":
			return "empty path segment"
		case seg == "." || seg == "..":
			return "dot segment"
		case strings.HasPrefix(seg, "."):
			return "hidden name"
		case len(seg) > 255:
			return "path segment too long"
		}
		for _, r := range seg {
			if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '.' || r == '_' || r == '-') {
				return fmt.Sprintf("character %q not allowed", r)
			}
		}
	}
	return ""
}

// clip bounds a caller-chosen string echoed back in an error.
func clip(s string) string {
	if len(s) > 200 {
		return s[:200] + "…"
	}
	return s
}

// statRegular returns the info of the regular file at rel, refusing
// symlinks (as the file or as any folder on the way to it), folders, and
// anything os.Root will not resolve inside the root. os.Root alone would
// follow a symlink that stays inside the root; refusing every symlink keeps
// one artifact path naming one file.
func statRegular(root *os.Root, uri, rel string) (fs.FileInfo, error) {
	if err := checkFolders(root, uri, path.Dir(rel)); err != nil {
		return nil, err
	}
	fi, err := root.Lstat(rel)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, &Error{Code: CodeInvalidArtifactURI, Message: fmt.Sprintf("no artifact at %s", uri),
			Details: map[string]any{"artifact_uri": uri, "reason": "not found"}}
	}
	if err != nil {
		return nil, &Error{Code: CodeInvalidArtifactURI, Message: fmt.Sprintf("%s cannot be resolved inside the session", uri),
			Details: map[string]any{"artifact_uri": uri, "reason": "outside the session"}, Err: err}
	}
	if !fi.Mode().IsRegular() {
		return nil, &Error{Code: CodeInvalidArtifactURI, Message: fmt.Sprintf("%s is not a regular file", uri),
			Details: map[string]any{"artifact_uri": uri, "reason": "not a regular file"}}
	}
	return fi, nil
}

// checkFolders refuses dir (a folder path under root, "." for the root)
// if any existing part of it is not a real folder.
func checkFolders(root *os.Root, uri, dir string) error {
	if dir == "." {
		return nil
	}
	segs := strings.Split(dir, "/")
	for i := range segs {
		p := strings.Join(segs[:i+1], "/")
		fi, err := root.Lstat(p)
		if errors.Is(err, fs.ErrNotExist) {
			return nil // nothing further exists; a write creates real folders
		}
		if err != nil || !fi.IsDir() {
			return &Error{Code: CodeInvalidArtifactURI, Message: fmt.Sprintf("%s: %s is not a folder of the session", uri, p),
				Details: map[string]any{"artifact_uri": uri, "reason": "not a folder: " + p}, Err: err}
		}
	}
	return nil
}

// readRange reads the whole file at rel once, hashing all of it and keeping
// the bytes of [start, start+length). One pass over one open file makes the
// hash and the content agree even if the file is replaced meanwhile (the
// server replaces artifacts by rename, never in place).
func readRange(root *os.Root, rel string, start, length int64) (part []byte, sum string, size int64, err error) {
	f, err := root.Open(rel)
	if err != nil {
		return nil, "", 0, fmt.Errorf("open artifact: %w", err)
	}
	defer f.Close()
	h := sha256.New()
	buf := make([]byte, 64<<10)
	var off int64
	for {
		n, rerr := f.Read(buf)
		chunk := buf[:n]
		h.Write(chunk)
		lo, hi := max(start, off), min(start+length, off+int64(n))
		if lo < hi {
			part = append(part, chunk[lo-off:hi-off]...)
		}
		off += int64(n)
		if rerr == io.EOF {
			break
		}
		if rerr != nil {
			return nil, "", 0, fmt.Errorf("read artifact: %w", rerr)
		}
	}
	return part, hex.EncodeToString(h.Sum(nil)), off, nil
}

// fileSHA256 hashes the file at rel; ok is false if there is no regular file.
func fileSHA256(root *os.Root, rel string) (sum string, ok bool, err error) {
	fi, err := root.Lstat(rel)
	if errors.Is(err, fs.ErrNotExist) {
		return "", false, nil
	}
	if err != nil {
		return "", false, fmt.Errorf("stat %s: %w", rel, err)
	}
	if !fi.Mode().IsRegular() {
		return "", false, nil
	}
	_, sum, _, err = readRange(root, rel, 0, 0)
	return sum, err == nil, err
}

// writeAtomic replaces the file at rel with data by writing a hidden
// temporary file beside it and renaming it over rel, so a reader sees the
// old or the new bytes, never a mix, and a stopped run never leaves half an
// artifact. The file's mtime is set to mtime so that updated_at follows the
// engine's clock.
func writeAtomic(root *os.Root, rel string, data []byte, mtime time.Time, durable bool) error {
	dir := path.Dir(rel)
	if dir != "." {
		if err := root.MkdirAll(dir, 0o755); err != nil {
			return fmt.Errorf("create folder %s: %w", dir, err)
		}
	}
	var rnd [6]byte
	if _, err := rand.Read(rnd[:]); err != nil {
		return fmt.Errorf("temporary name: %w", err)
	}
	tmp := path.Join(dir, ".tmp-"+hex.EncodeToString(rnd[:]))
	f, err := root.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return fmt.Errorf("create temporary file: %w", err)
	}
	_, err = f.Write(data)
	if err == nil && durable {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = root.Chtimes(tmp, mtime, mtime)
	}
	if err == nil {
		err = root.Rename(tmp, rel)
	}
	if err != nil {
		_ = root.Remove(tmp) // best effort: the write already failed
		return fmt.Errorf("write %s: %w", rel, err)
	}
	return nil
}

// appendLine appends line to the file at rel, creating it.
func appendLine(root *os.Root, rel string, line []byte) error {
	f, err := root.OpenFile(rel, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		return fmt.Errorf("open %s: %w", rel, err)
	}
	_, err = f.Write(line)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("append to %s: %w", rel, err)
	}
	return nil
}

func formatTime(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return t.UTC().Format(time.RFC3339Nano)
}

// List lists the folder req.Path of a session's output root (§6.6), one
// level deep, files and folders sorted by path. Symlinks and the server's
// hidden temporary files are never listed.
func (e *Engine) List(_ context.Context, user string, req ListRequest) (ListResponse, error) {
	s, err := e.lookup(req.SessionID, user)
	if err != nil {
		return ListResponse{}, err
	}
	dir := "."
	if req.Path != "" {
		if reason := checkPath(strings.TrimSuffix(req.Path, "/")); reason != "" {
			return ListResponse{}, newError(CodeInvalidArtifactURI, map[string]any{"path": clip(req.Path), "reason": reason},
				"path %q is not a folder of the session: %s", clip(req.Path), reason)
		}
		dir = strings.TrimSuffix(req.Path, "/")
		if err := checkFolders(s.out, req.Path, path.Dir(dir)); err != nil {
			return ListResponse{}, err
		}
		fi, err := s.out.Lstat(dir)
		if err != nil || !fi.IsDir() {
			return ListResponse{}, &Error{Code: CodeInvalidArtifactURI, Message: fmt.Sprintf("no folder %q in the session", dir),
				Details: map[string]any{"path": dir, "reason": "not a folder"}, Err: err}
		}
	}
	withMeta := req.IncludeMetadata == nil || *req.IncludeMetadata
	f, err := s.out.Open(dir)
	if err != nil {
		return ListResponse{}, internalError("open a folder", err)
	}
	ents, err := f.ReadDir(-1)
	f.Close()
	if err != nil {
		return ListResponse{}, internalError("read a folder", err)
	}
	s.mu.Lock()
	prov := maps.Clone(s.provenance)
	s.mu.Unlock()
	resp := ListResponse{Entries: []Entry{}}
	for _, ent := range ents {
		name := ent.Name()
		if strings.HasPrefix(name, ".") || checkPath(name) != "" {
			continue
		}
		rel := path.Join(dir, name)
		switch {
		case ent.IsDir():
			resp.Entries = append(resp.Entries, Entry{Type: "dir", Path: rel, ArtifactURI: artifactURI(s.id, rel)})
		case ent.Type().IsRegular():
			en := Entry{Type: "file", Path: rel, ArtifactURI: artifactURI(s.id, rel)}
			if withMeta {
				fi, err := ent.Info()
				if err != nil {
					continue // removed since ReadDir
				}
				_, sum, _, err := readRange(s.out, rel, 0, 0)
				if err != nil {
					continue
				}
				size := fi.Size()
				en.Size, en.UpdatedAt, en.SHA256 = &size, formatTime(fi.ModTime()), sum
				en.ContentType, en.Kind = contentTypeOf(rel), e.pipe.kindOf(rel)
				if pv := prov[rel]; pv != nil && pv.SHA256 == sum {
					en.Task, en.RunID, en.EditReason = pv.Task, pv.RunID, pv.EditReason
				}
			}
			resp.Entries = append(resp.Entries, en)
		}
	}
	sort.Slice(resp.Entries, func(i, j int) bool { return resp.Entries[i].Path < resp.Entries[j].Path })
	return resp, nil
}

// Read reads an artifact, or a byte range of it (§6.7, §13.3).
func (e *Engine) Read(_ context.Context, user string, req ReadRequest) (ReadResponse, error) {
	sid, rel, err := parseArtifactURI(req.ArtifactURI)
	if err != nil {
		return ReadResponse{}, err
	}
	var start, length int64
	if req.Range != nil {
		start, length = req.Range.Start, req.Range.Length
	}
	if start < 0 || length < 0 {
		return ReadResponse{}, newError(CodeInvalidArgument, map[string]any{"field": "range"}, "range start and length must not be negative")
	}
	if length == 0 || length > e.opts.MaxReadBytes {
		length = e.opts.MaxReadBytes
	}
	s, err := e.lookup(sid, user)
	if err != nil {
		return ReadResponse{}, err
	}
	if _, err := statRegular(s.out, req.ArtifactURI, rel); err != nil {
		return ReadResponse{}, err
	}
	part, sum, size, err := readRange(s.out, rel, start, length)
	if err != nil {
		return ReadResponse{}, internalError("read an artifact", err)
	}
	resp := ReadResponse{ArtifactURI: req.ArtifactURI, ContentType: contentTypeOf(rel), SHA256: sum, Size: size,
		Range: Range{Start: start, Length: int64(len(part))}, EOF: start+int64(len(part)) >= size}
	// JSON strings carry text: bytes that are not UTF-8 (a binary file, or
	// a range that splits a character) would be silently replaced, so they
	// travel as base64 and say so.
	if utf8.Valid(part) {
		resp.Content = string(part)
	} else {
		resp.Content, resp.ContentEncoding = base64.StdEncoding.EncodeToString(part), "base64"
	}
	return resp, nil
}

// Write writes an artifact (§6.8) under the strict policy of §10.2: refused
// while a run is running, so the UI flow is Stop → Edit → Resume. With a
// lock, the write happens only if the artifact's sha256 is the expected one
// (§10.3), whatever the content. A write of the content the artifact
// already holds changes nothing and answers updated: false.
func (e *Engine) Write(_ context.Context, user string, req WriteRequest) (WriteResponse, error) {
	sid, rel, err := parseArtifactURI(req.ArtifactURI)
	if err != nil {
		return WriteResponse{}, err
	}
	if int64(len(req.Content)) > e.opts.MaxWriteBytes {
		return WriteResponse{}, newError(CodeInvalidArgument, map[string]any{"field": "content", "max_bytes": e.opts.MaxWriteBytes},
			"content is larger than %d bytes", e.opts.MaxWriteBytes)
	}
	s, err := e.lookup(sid, user)
	if err != nil {
		return WriteResponse{}, err
	}
	if serverManaged(rel) {
		return WriteResponse{}, newError(CodePermissionDenied, map[string]any{"artifact_uri": req.ArtifactURI},
			"%s is written by the server only", rel)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.active != nil {
		return WriteResponse{}, newError(CodeRunningReadonly, map[string]any{"run_id": s.active.rec.ID},
			"artifacts are read-only while %s is running; stop it first", s.active.rec.ID)
	}
	var current string
	existed := false
	if _, err := statRegular(s.out, req.ArtifactURI, rel); err == nil {
		if _, current, _, err = readRange(s.out, rel, 0, 0); err != nil {
			return WriteResponse{}, internalError("hash an artifact", err)
		}
		existed = true
	} else if pe := (*Error)(nil); errors.As(err, &pe) && pe.Details["reason"] != "not found" {
		return WriteResponse{}, err
	}
	if req.Lock != nil && req.Lock.ExpectedSHA256 != "" && req.Lock.ExpectedSHA256 != current {
		details := map[string]any{"artifact_uri": req.ArtifactURI, "expected_sha256": clip(req.Lock.ExpectedSHA256), "current_sha256": nil}
		if existed {
			details["current_sha256"] = current
		}
		return WriteResponse{}, newError(CodeConflict, details, "%s changed since it was read (sha256 mismatch)", rel)
	}
	sum := sha256Hex([]byte(req.Content))
	if existed && current == sum {
		updatedAt := ""
		if fi, err := s.out.Lstat(rel); err == nil {
			updatedAt = formatTime(fi.ModTime())
		}
		return WriteResponse{Updated: false, SHA256: sum, UpdatedAt: updatedAt}, nil
	}
	now := e.now()
	if err := writeAtomic(s.out, rel, []byte(req.Content), now, false); err != nil {
		return WriteResponse{}, internalError("write an artifact", err)
	}
	reason := req.EditReason
	if reason == "" {
		reason = "user_edit"
	}
	s.provenance[rel] = &provenance{EditReason: reason, SHA256: sum, UpdatedAt: now}
	// §6.8: writing must emit artifact_updated, also when it creates the file.
	data := map[string]any{"path": rel, "artifact_uri": artifactURI(s.id, rel), "kind": e.pipe.kindOf(rel),
		"sha256": sum, "edit_reason": reason, "created": !existed}
	if existed {
		data["previous_sha256"] = current
	}
	if deps := e.pipe.dependents([]string{rel}); len(deps) > 0 {
		data["stale_tasks"] = sortedKeys(deps)
	}
	e.emit(s, "artifact_updated", data)
	if err := s.save(); err != nil {
		e.opts.Logger.Error("planexe: record a write", "session_id", s.id, "err", err)
	}
	return WriteResponse{Updated: true, SHA256: sum, UpdatedAt: formatTime(now)}, nil
}
