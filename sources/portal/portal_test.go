package portal_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/plexus-gw/plexus"
	"github.com/plexus-gw/plexus/sources/portal"
)

const secret = "TOPSECRET outside the portal"

// fixture is a portal over base/root with a sibling base/outside that no
// operation may read or change.
type fixture struct {
	base, root, outside string
	src                 *portal.Source
	entries             map[string]plexus.Entry // by op
	tr                  *portal.Transport
}

func mustWrite(tb testing.TB, path, content string) {
	tb.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		tb.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		tb.Fatal(err)
	}
}

func newFixture(tb testing.TB) *fixture {
	tb.Helper()
	base := tb.TempDir()
	fx := &fixture{base: base, root: filepath.Join(base, "root"), outside: filepath.Join(base, "outside"), tr: portal.NewTransport()}
	mustWrite(tb, filepath.Join(fx.outside, "secret.txt"), secret)
	mustWrite(tb, filepath.Join(fx.root, "hello.txt"), "Hello World\nsecond line\n")
	mustWrite(tb, filepath.Join(fx.root, "sub", "notes.md"), "# Notes\nremember the needle\n")
	mustWrite(tb, filepath.Join(fx.root, "sub", "deep", "x.txt"), "deep\n")
	mustWrite(tb, filepath.Join(fx.root, "bin.dat"), "needle\x00\x01\x02")
	for name, target := range map[string]string{
		"escape-file": filepath.Join(fx.outside, "secret.txt"),
		"escape-dir":  fx.outside,
		"rel-escape":  "../outside/secret.txt",
		"inside-link": "hello.txt",
	} {
		if err := os.Symlink(target, filepath.Join(fx.root, name)); err != nil {
			tb.Fatal(err)
		}
	}
	src, err := portal.NewSource("docs", fx.root)
	if err != nil {
		tb.Fatal(err)
	}
	es, err := src.Scan(context.Background())
	if err != nil {
		tb.Fatal(err)
	}
	fx.src, fx.entries = src, map[string]plexus.Entry{}
	for _, e := range es {
		fx.entries[strings.TrimPrefix(e.ID, "portal.docs.")] = e
	}
	return fx
}

func (fx *fixture) call(op string, input map[string]any) plexus.TransportResult {
	return fx.tr.Dispatch(context.Background(), fx.entries[op], input, plexus.DispatchContext{})
}

// outsideState snapshots everything next to the root: the sibling folder's
// files and the names in base.
func (fx *fixture) outsideState(tb testing.TB) map[string]string {
	tb.Helper()
	st := map[string]string{}
	names, err := os.ReadDir(fx.base)
	if err != nil {
		tb.Fatal(err)
	}
	for _, n := range names {
		st["base/"+n.Name()] = n.Type().String()
	}
	filepath.WalkDir(fx.outside, func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			b, _ := os.ReadFile(p)
			st[p] = string(b)
		} else if err == nil {
			st[p] = "dir"
		}
		return nil
	})
	return st
}

func wantOK(tb testing.TB, res plexus.TransportResult) {
	tb.Helper()
	if !res.OK {
		tb.Fatalf("result not ok: %v", res.Error)
	}
}

func wantCode(tb testing.TB, res plexus.TransportResult, code plexus.ErrorCode, msgPart string) {
	tb.Helper()
	if res.OK || res.Error == nil {
		tb.Fatalf("result ok (%+v), want %s", res.Data, code)
	}
	if res.Error.Code != code || !strings.Contains(res.Error.Message, msgPart) {
		tb.Fatalf("error = %s: %q, want %s containing %q", res.Error.Code, res.Error.Message, code, msgPart)
	}
	if strings.Contains(res.Error.Message, "TOPSECRET") {
		tb.Fatalf("error message echoes file contents: %q", res.Error.Message)
	}
}

func TestNewSource(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "f")
	mustWrite(t, file, "x")
	for _, alias := range []string{"", "Docs", "-docs", "a_b", "docs!", strings.Repeat("a", 33)} {
		if _, err := portal.NewSource(alias, dir); err == nil {
			t.Errorf("NewSource(%q) accepted a bad alias", alias)
		}
	}
	for _, root := range []string{filepath.Join(dir, "missing"), file} {
		if _, err := portal.NewSource("docs", root); err == nil {
			t.Errorf("NewSource(docs, %s) accepted a root that is not a directory", root)
		}
	}
	link := filepath.Join(t.TempDir(), "link")
	if err := os.Symlink(dir, link); err != nil {
		t.Fatal(err)
	}
	src, err := portal.NewSource("my-docs-2", link)
	if err != nil {
		t.Fatal(err)
	}
	real, _ := filepath.EvalSymlinks(dir)
	if src.Root() != real || src.ID() != "portal:my-docs-2" || src.Provenance() != plexus.ProvenanceFirstParty {
		t.Errorf("got root %s id %s provenance %s", src.Root(), src.ID(), src.Provenance())
	}
}

func TestScan(t *testing.T) {
	fx := newFixture(t)
	want := map[string]plexus.Verb{"list": plexus.VerbRead, "read": plexus.VerbRead, "search": plexus.VerbRead, "write": plexus.VerbWrite}
	if len(fx.entries) != len(want) {
		t.Fatalf("Scan returned %d entries, want 4", len(fx.entries))
	}
	for op, verb := range want {
		e, ok := fx.entries[op]
		if !ok {
			t.Fatalf("no entry portal.docs.%s", op)
		}
		if e.Source != "portal:docs" || e.Kind != plexus.KindCapability || e.Transport != plexus.TransportPortal {
			t.Errorf("%s: source %s kind %s transport %s", e.ID, e.Source, e.Kind, e.Transport)
		}
		if diff := cmp.Diff([]plexus.Verb{verb}, e.Grants); diff != "" {
			t.Errorf("%s grants (-want +got):\n%s", e.ID, diff)
		}
		if !strings.Contains(e.Describe, "docs folder") || !strings.Contains(e.Describe, "Use when") {
			t.Errorf("%s: describe %q", e.ID, e.Describe)
		}
		var rt struct{ Root, Op string }
		if err := json.Unmarshal(e.Route, &rt); err != nil || rt.Root != fx.src.Root() || rt.Op != op {
			t.Errorf("%s: route %s (%v)", e.ID, e.Route, err)
		}
		for _, s := range []json.RawMessage{e.IO.Input, e.IO.Output} {
			var v map[string]any
			if err := json.Unmarshal(s, &v); err != nil || v["type"] != "object" {
				t.Errorf("%s: schema %s is not an object schema (%v)", e.ID, s, err)
			}
		}
		// The route never reaches an agent.
		b, _ := json.Marshal(e)
		if bytes.Contains(b, []byte(fx.root)) {
			t.Errorf("%s: serialized entry contains the root path", e.ID)
		}
	}
}

func TestList(t *testing.T) {
	fx := newFixture(t)
	res := fx.call("list", map[string]any{})
	wantOK(t, res)
	got := map[string]string{}
	var names []string
	for _, e := range res.Data.(portal.ListResult).Entries {
		got[e.Name] = e.Type
		names = append(names, e.Name)
	}
	want := map[string]string{
		"bin.dat": "file", "hello.txt": "file", "sub": "dir", "inside-link": "file",
		"escape-file": "symlink", "escape-dir": "symlink", "rel-escape": "symlink",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("types (-want +got):\n%s", diff)
	}
	if !slices.IsSorted(names) {
		t.Errorf("entries not sorted: %v", names)
	}

	res = fx.call("list", map[string]any{"path": "sub/"})
	wantOK(t, res)
	lr := res.Data.(portal.ListResult)
	if len(lr.Entries) != 2 || lr.Entries[0].Path != "sub/deep" || lr.Entries[1].Path != "sub/notes.md" || lr.Entries[1].Size != 28 {
		t.Errorf("list sub = %+v", lr)
	}
	wantCode(t, fx.call("list", map[string]any{"path": "hello.txt"}), plexus.CodeTransportError, "is not a folder")
	wantCode(t, fx.call("list", map[string]any{"path": "nope"}), plexus.CodeTransportError, "no such file or folder")
	wantCode(t, fx.call("list", map[string]any{"path": 3}), plexus.CodeSchemaValidationFailed, "must be a string")
}

func TestRead(t *testing.T) {
	fx := newFixture(t)
	read := func(in map[string]any) portal.ReadResult {
		t.Helper()
		res := fx.call("read", in)
		wantOK(t, res)
		return res.Data.(portal.ReadResult)
	}
	t.Run("OK", func(t *testing.T) {
		want := portal.ReadResult{Path: "hello.txt", Content: "Hello World\nsecond line\n", Size: 24}
		if diff := cmp.Diff(want, read(map[string]any{"path": "hello.txt"})); diff != "" {
			t.Errorf("(-want +got):\n%s", diff)
		}
		if got := read(map[string]any{"path": "inside-link"}); got.Content != want.Content {
			t.Errorf("a symlink inside the folder was not followed: %+v", got)
		}
	})
	t.Run("Truncated", func(t *testing.T) {
		want := portal.ReadResult{Path: "hello.txt", Content: "Hello", Size: 24, Truncated: true}
		if diff := cmp.Diff(want, read(map[string]any{"path": "hello.txt", "maxBytes": float64(5)})); diff != "" {
			t.Errorf("(-want +got):\n%s", diff)
		}
		mustWrite(t, filepath.Join(fx.root, "accent.txt"), "héllo")
		if got := read(map[string]any{"path": "accent.txt", "maxBytes": json.Number("2")}); got.Content != "h" || got.Encoding != "" {
			t.Errorf("cut inside a character: %+v, want text \"h\"", got)
		}
	})
	t.Run("HardCap", func(t *testing.T) {
		mustWrite(t, filepath.Join(fx.root, "huge.txt"), strings.Repeat("a", portal.MaxReadBytes+10))
		got := read(map[string]any{"path": "huge.txt", "maxBytes": float64(1 << 30)})
		if len(got.Content) != portal.MaxReadBytes || !got.Truncated || got.Size != portal.MaxReadBytes+10 {
			t.Errorf("got %d bytes truncated=%v size=%d", len(got.Content), got.Truncated, got.Size)
		}
		got = read(map[string]any{"path": "huge.txt"})
		if len(got.Content) != portal.DefaultReadBytes || !got.Truncated {
			t.Errorf("default cap: got %d bytes truncated=%v", len(got.Content), got.Truncated)
		}
	})
	t.Run("Errors", func(t *testing.T) {
		wantCode(t, fx.call("read", map[string]any{"path": "nope.txt"}), plexus.CodeTransportError, "no such file")
		wantCode(t, fx.call("read", map[string]any{"path": "sub"}), plexus.CodeTransportError, "is a folder")
		wantCode(t, fx.call("read", map[string]any{}), plexus.CodeSchemaValidationFailed, "input.path is required")
		wantCode(t, fx.call("read", map[string]any{"path": "hello.txt", "maxBytes": float64(0)}), plexus.CodeSchemaValidationFailed, "at least 1")
		wantCode(t, fx.call("read", map[string]any{"path": "hello.txt", "maxBytes": 1.5}), plexus.CodeSchemaValidationFailed, "must be an integer")
	})
}

func TestReadBinaryBase64(t *testing.T) {
	fx := newFixture(t)
	mustWrite(t, filepath.Join(fx.root, "latin1.txt"), "caf\xe9")
	res := fx.call("read", map[string]any{"path": "latin1.txt"})
	wantOK(t, res)
	got := res.Data.(portal.ReadResult)
	if raw, _ := base64.StdEncoding.DecodeString(got.Content); got.Encoding != "base64" || string(raw) != "caf\xe9" {
		t.Errorf("invalid UTF-8: %+v, want base64", got)
	}
}

func TestSearch(t *testing.T) {
	fx := newFixture(t)
	search := func(in map[string]any) portal.SearchResult {
		t.Helper()
		res := fx.call("search", in)
		wantOK(t, res)
		return res.Data.(portal.SearchResult)
	}
	t.Run("NamesAndContents", func(t *testing.T) {
		want := portal.SearchResult{Matches: []portal.Match{
			{Path: "hello.txt", Line: 0, Text: "hello.txt"},
			{Path: "hello.txt", Line: 1, Text: "Hello World"},
		}}
		if diff := cmp.Diff(want, search(map[string]any{"query": "HELLO"})); diff != "" {
			t.Errorf("(-want +got):\n%s", diff)
		}
	})
	t.Run("SkipsBinaryLargeAndLinks", func(t *testing.T) {
		mustWrite(t, filepath.Join(fx.root, "big.txt"), strings.Repeat("x", portal.MaxSearchFileSize)+"needle")
		want := portal.SearchResult{Matches: []portal.Match{{Path: "sub/notes.md", Line: 2, Text: "remember the needle"}}}
		if diff := cmp.Diff(want, search(map[string]any{"query": "needle"})); diff != "" {
			t.Errorf("(-want +got):\n%s", diff)
		}
		if got := search(map[string]any{"query": "topsecret"}); len(got.Matches) != 0 {
			t.Errorf("search followed a link out of the folder: %+v", got)
		}
	})
	t.Run("Path", func(t *testing.T) {
		got := search(map[string]any{"query": "e", "path": "sub/deep"})
		for _, m := range got.Matches {
			if !strings.HasPrefix(m.Path, "sub/deep/") {
				t.Errorf("match %+v outside the searched path", m)
			}
		}
		if len(got.Matches) == 0 {
			t.Error("no matches under sub/deep")
		}
	})
	t.Run("Limit", func(t *testing.T) {
		for i := range 20 {
			mustWrite(t, filepath.Join(fx.root, "many", string(rune('a'+i))+".txt"), "common\ncommon\n")
		}
		got := search(map[string]any{"query": "COMMON", "limit": float64(5)})
		if len(got.Matches) != 5 || !got.Truncated {
			t.Errorf("limit 5: %d matches, truncated=%v", len(got.Matches), got.Truncated)
		}
		got = search(map[string]any{"query": "common"})
		if len(got.Matches) != 40 || got.Truncated {
			t.Errorf("default limit: %d matches, truncated=%v; want 40, false", len(got.Matches), got.Truncated)
		}
	})
	t.Run("Errors", func(t *testing.T) {
		wantCode(t, fx.call("search", map[string]any{"query": ""}), plexus.CodeSchemaValidationFailed, "must not be empty")
		wantCode(t, fx.call("search", map[string]any{"query": "x", "limit": float64(-1)}), plexus.CodeSchemaValidationFailed, "at least 1")
		wantCode(t, fx.call("search", map[string]any{"query": "x", "path": "nope"}), plexus.CodeTransportError, "no such file")
	})
	t.Run("Cancelled", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		res := fx.tr.Dispatch(ctx, fx.entries["search"], map[string]any{"query": "x"}, plexus.DispatchContext{})
		wantCode(t, res, plexus.CodeTransportError, "cancelled")
	})
}

func TestWrite(t *testing.T) {
	fx := newFixture(t)
	noTemps := func(t *testing.T) {
		t.Helper()
		filepath.WalkDir(fx.root, func(p string, d fs.DirEntry, err error) error {
			if err == nil && strings.Contains(d.Name(), ".plexus-") {
				t.Errorf("temporary file left behind: %s", p)
			}
			return nil
		})
	}
	t.Run("New", func(t *testing.T) {
		res := fx.call("write", map[string]any{"path": "new.txt", "content": "fresh"})
		wantOK(t, res)
		if diff := cmp.Diff(portal.WriteResult{Path: "new.txt", Bytes: 5}, res.Data); diff != "" {
			t.Errorf("(-want +got):\n%s", diff)
		}
		fi, err := os.Stat(filepath.Join(fx.root, "new.txt"))
		if err != nil || fi.Mode().Perm()&^0o644 != 0 {
			t.Errorf("new file mode %v (%v), want at most 0644", fi.Mode(), err)
		}
		noTemps(t)
	})
	t.Run("ReplaceKeepsMode", func(t *testing.T) {
		p := filepath.Join(fx.root, "private.txt")
		mustWrite(t, p, "old")
		os.Chmod(p, 0o600)
		wantOK(t, fx.call("write", map[string]any{"path": "private.txt", "content": "new"}))
		b, _ := os.ReadFile(p)
		fi, _ := os.Stat(p)
		if string(b) != "new" || fi.Mode().Perm() != 0o600 {
			t.Errorf("content %q mode %v, want new 0600", b, fi.Mode().Perm())
		}
	})
	t.Run("CreateDirsOnlyWhenAsked", func(t *testing.T) {
		wantCode(t, fx.call("write", map[string]any{"path": "a/b/c.txt", "content": "x"}), plexus.CodeTransportError, "set createDirs")
		if _, err := os.Stat(filepath.Join(fx.root, "a")); !os.IsNotExist(err) {
			t.Errorf("a/ exists after a refused write (%v)", err)
		}
		wantOK(t, fx.call("write", map[string]any{"path": "a/b/c.txt", "content": "x", "createDirs": true}))
		if b, _ := os.ReadFile(filepath.Join(fx.root, "a", "b", "c.txt")); string(b) != "x" {
			t.Errorf("a/b/c.txt = %q", b)
		}
		noTemps(t)
	})
	t.Run("Refusals", func(t *testing.T) {
		wantCode(t, fx.call("write", map[string]any{"path": "sub", "content": "x"}), plexus.CodeTransportError, "is a folder")
		wantCode(t, fx.call("write", map[string]any{"path": "inside-link", "content": "x"}), plexus.CodeTransportError, "symbolic link")
		wantCode(t, fx.call("write", map[string]any{"path": "hello.txt/x", "content": "x"}), plexus.CodeTransportError, "not a folder")
		wantCode(t, fx.call("write", map[string]any{"path": ".", "content": "x"}), plexus.CodeTransportError, "must name a file")
		wantCode(t, fx.call("write", map[string]any{"path": "x.txt"}), plexus.CodeSchemaValidationFailed, "input.content is required")
		wantCode(t, fx.call("write", map[string]any{"path": "x.txt", "content": "x", "createDirs": "yes"}), plexus.CodeSchemaValidationFailed, "boolean")
		if l, err := os.Readlink(filepath.Join(fx.root, "inside-link")); err != nil || l != "hello.txt" {
			t.Errorf("inside-link changed: %q %v", l, err)
		}
	})
	t.Run("Atomic", func(t *testing.T) {
		// A reader racing a writer sees one whole version or the other.
		a, b := strings.Repeat("A", 256<<10), strings.Repeat("B", 256<<10)
		wantOK(t, fx.call("write", map[string]any{"path": "race.txt", "content": a}))
		var wg sync.WaitGroup
		stop := make(chan struct{})
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				got, err := os.ReadFile(filepath.Join(fx.root, "race.txt"))
				if err != nil || (string(got) != a && string(got) != b) {
					t.Errorf("reader saw %d bytes (err %v), neither version", len(got), err)
					return
				}
			}
		})
		for i := range 40 {
			wantOK(t, fx.call("write", map[string]any{"path": "race.txt", "content": []string{a, b}[i%2]}))
		}
		close(stop)
		wg.Wait()
		noTemps(t)
	})
}

// TestConfinement is the matrix of ways out of the folder: each is refused
// with transport_error on every operation, and nothing outside changes.
func TestConfinement(t *testing.T) {
	fx := newFixture(t)
	before := fx.outsideState(t)
	paths := []struct{ path, msg string }{
		{"../x", "leads outside the folder"},
		{"a/../../x", "leads outside the folder"},
		{"../outside/secret.txt", "leads outside the folder"},
		{"/etc/passwd", "absolute path"},
		{filepath.Join(fx.outside, "secret.txt"), "absolute path"},
		{"escape-file", "symbolic link"},
		{"rel-escape", "symbolic link"},
		{"escape-dir", "symbolic link"},
		{"escape-dir/secret.txt", "symbolic link"},
		{"escape-dir/new.txt", "symbolic link"},
		{"sub/\x00/x", "NUL byte"},
	}
	for _, p := range paths {
		inputs := map[string]map[string]any{
			"list":   {"path": p.path},
			"read":   {"path": p.path},
			"search": {"query": "e", "path": p.path},
			"write":  {"path": p.path, "content": "pwned", "createDirs": true},
		}
		for op, in := range inputs {
			t.Run(op+"/"+strings.ReplaceAll(p.path, "/", "|"), func(t *testing.T) {
				wantCode(t, fx.call(op, in), plexus.CodeTransportError, p.msg)
			})
		}
	}
	if diff := cmp.Diff(before, fx.outsideState(t)); diff != "" {
		t.Errorf("outside the folder changed (-before +after):\n%s", diff)
	}
}

func TestMissingRoot(t *testing.T) {
	fx := newFixture(t)
	if h := fx.src.Health(context.Background()); h.Status != plexus.HealthOK {
		t.Fatalf("health = %+v, want ok", h)
	}
	if err := os.RemoveAll(fx.root); err != nil {
		t.Fatal(err)
	}
	h := fx.src.Health(context.Background())
	if h.Status != plexus.HealthUnavailable || strings.Contains(h.Detail, fx.root) {
		t.Errorf("health = %+v, want unavailable without the path", h)
	}
	res := fx.call("list", map[string]any{})
	wantCode(t, res, plexus.CodeSourceUnavailable, "unavailable")
	if strings.Contains(res.Error.Message, fx.root) {
		t.Errorf("message names the root: %q", res.Error.Message)
	}
	if es, err := fx.src.Scan(context.Background()); err != nil || len(es) != 4 {
		t.Errorf("Scan of a missing folder = %d entries, %v; want the 4 entries", len(es), err)
	}
	mustWrite(t, fx.root, "now a file")
	if h := fx.src.Health(context.Background()); h.Status != plexus.HealthUnavailable {
		t.Errorf("health with a file at the root = %+v", h)
	}
	wantCode(t, fx.call("write", map[string]any{"path": "x", "content": "y"}), plexus.CodeSourceUnavailable, "")
}

func TestBadRoute(t *testing.T) {
	tr := portal.NewTransport()
	for _, rt := range []string{``, `{"root":"relative","op":"list"}`, `{"root":"/tmp","op":"delete"}`} {
		e := plexus.Entry{ID: "portal.x.list", Route: json.RawMessage(rt)}
		res := tr.Dispatch(context.Background(), e, nil, plexus.DispatchContext{})
		if res.OK || res.Error.Code != plexus.CodeTransportError || res.Error.CapabilityID != "portal.x.list" {
			t.Errorf("route %q: %+v", rt, res.Error)
		}
	}
}
