package portal_test

import (
	"encoding/base64"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/plexus-gw/plexus/sources/portal"
)

// FuzzPath throws arbitrary paths at every operation. Whatever the path,
// nothing outside the folder changes and no operation returns the secret
// that lives next to it.
func FuzzPath(f *testing.F) {
	for _, s := range []string{
		"", ".", "x.txt", "sub/new.txt", "../x", "a/../../x", "/tmp/x", "escape-file",
		"escape-dir/x", "rel-escape", "sub/../../outside/x", "x\x00y", "./../outside",
		"inside-link", "sub/deep/../../..", "//x", "sub//x", "sub/./x", "\\..\\x", "...",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, path string) {
		fx := newFixture(t)
		before := fx.outsideState(t)
		for op, in := range map[string]map[string]any{
			"write":  {"path": path, "content": "fuzz", "createDirs": true},
			"read":   {"path": path},
			"list":   {"path": path},
			"search": {"query": "topsecret", "path": path},
		} {
			res := fx.call(op, in)
			if !res.OK {
				continue
			}
			switch d := res.Data.(type) {
			case portal.ReadResult:
				raw, _ := base64.StdEncoding.DecodeString(d.Content)
				if strings.Contains(d.Content, "TOPSECRET") || strings.Contains(string(raw), "TOPSECRET") {
					t.Fatalf("read %q returned the outside secret", path)
				}
			case portal.SearchResult:
				if len(d.Matches) > 0 {
					t.Fatalf("search under %q found the outside secret: %+v", path, d.Matches)
				}
			}
		}
		if diff := cmp.Diff(before, fx.outsideState(t)); diff != "" {
			t.Fatalf("path %q changed things outside the folder (-before +after):\n%s", path, diff)
		}
	})
}
