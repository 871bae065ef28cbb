package mcpserver

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/plexus-gw/plexus"
)

func TestGlobMatch(t *testing.T) {
	for _, tc := range []struct {
		p, s string
		want bool
	}{
		{"mcp.github.*", "mcp.github.get_issue", true},
		{"mcp.github.*", "mcp.github.prompt.review", true},
		{"mcp.github.*", "mcp.githubx.get_issue", false},
		{"mcp.github.*", "mcp.github", false},
		{"portal.docs.read", "portal.docs.read", true},
		{"portal.docs.read", "portal.docs.readme", false},
		{"*", "anything", true},
		{"*.read", "portal.docs.read", true},
		{"mcp.*.lookup", "mcp.lib.lookup", true},
		{"mcp.*.lookup", "mcp.lib.lookup2", false},
		{"a*b*c", "abc", true},
		{"a*b*c", "ac", false},
		{"ab*ba", "aba", false},
	} {
		if got := globMatch(tc.p, tc.s); got != tc.want {
			t.Errorf("globMatch(%q, %q) = %v, want %v", tc.p, tc.s, got, tc.want)
		}
	}
}

func TestViewValidate(t *testing.T) {
	for name, tc := range map[string]struct {
		v  View
		ok bool
	}{
		"Zero":                {View{}, true},
		"OnlyAndSearch":       {View{Only: []string{"mcp.github.*"}, Mode: ModeSearch, SearchAbove: 10}, true},
		"Original":            {View{Only: []string{"mcp.github.*", "mcp.github.get_issue"}, Names: NamesOriginal}, true},
		"ErrOriginalNoOnly":   {View{Names: NamesOriginal}, false},
		"ErrOriginalTwo":      {View{Only: []string{"mcp.a.*", "mcp.b.*"}, Names: NamesOriginal}, false},
		"ErrOriginalWildSrv":  {View{Only: []string{"mcp.*"}, Names: NamesOriginal}, false},
		"ErrOriginalStarSrv":  {View{Only: []string{"mcp.git*.x"}, Names: NamesOriginal}, false},
		"ErrOriginalNotMCP":   {View{Only: []string{"portal.docs.read"}, Names: NamesOriginal}, false},
		"ErrNames":            {View{Names: "pretty"}, false},
		"ErrMode":             {View{Mode: "all"}, false},
		"ErrNegativeSearch":   {View{SearchAbove: -1}, false},
		"ErrEmptyOnlyPattern": {View{Only: []string{" "}}, false},
	} {
		t.Run(name, func(t *testing.T) {
			err := tc.v.Validate()
			if tc.ok != (err == nil) || err != nil && !errors.Is(err, ErrView) {
				t.Errorf("Validate(%+v) = %v, want ok %v", tc.v, err, tc.ok)
			}
		})
	}
}

func TestSearching(t *testing.T) {
	for _, tc := range []struct {
		v    View
		n    int
		want bool
	}{
		{View{}, 50, false}, {View{}, 51, true},
		{View{Mode: ModeTools}, 500, false}, {View{Mode: ModeSearch}, 1, true},
		{View{Mode: ModeAuto, SearchAbove: 5}, 6, true}, {View{SearchAbove: 5}, 5, false},
	} {
		if got := tc.v.searching(tc.n); got != tc.want {
			t.Errorf("%+v.searching(%d) = %v, want %v", tc.v, tc.n, got, tc.want)
		}
	}
}

// TestViewFileRoundTrip: SetView changes only the agent it names (other
// agents and unknown top-level keys stay as written), the zero view
// removes the entry, and a misspelt setting is refused rather than
// dropped.
func TestViewFileRoundTrip(t *testing.T) {
	path := filepath.Join(t.TempDir(), ViewFileName)
	if err := os.WriteFile(path, []byte(`{"note":"mine","agents":{"cursor":{"mode":"tools"}}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	want := View{Only: []string{"mcp.github.*"}, Names: NamesOriginal}
	if err := SetView(path, "claude", want); err != nil {
		t.Fatal(err)
	}
	vf, err := LoadViewFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want, vf.View("claude")); diff != "" {
		t.Errorf("claude's view (-want +got):\n%s", diff)
	}
	if got := vf.View("cursor"); got.Mode != ModeTools {
		t.Errorf("cursor's view = %+v, want it kept", got)
	}
	if err := SetView(path, "claude", View{}); err != nil {
		t.Fatal(err)
	}
	if v, err := ReadView(path, "claude"); err != nil || !v.isZero() {
		t.Errorf("after clearing: %+v, %v", v, err)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if s := string(b); !contains(s, `"note"`) || !contains(s, `"cursor"`) || contains(s, `"claude"`) {
		t.Errorf("file = %s, want the note and cursor kept, claude gone", s)
	}
	if err := os.WriteFile(path, []byte(`{"agents":{"claude":{"onyl":["x"]}}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := vf.Reload(); err == nil {
		t.Error("a misspelt setting was accepted")
	}
	if got := vf.View("cursor"); got.Mode != ModeTools {
		t.Errorf("after a refused reload cursor's view = %+v, want the one read before", got)
	}
}

func contains(s, sub string) bool { return strings.Contains(s, sub) }

// TestScore: the exact id or name wins, then name words, then title and
// description words.
func TestScore(t *testing.T) {
	issue := plexus.Entry{ID: "mcp.github.get_issue", Label: "Get issue", Describe: "Fetch one issue of a repository",
		MCP: &plexus.MCPPassthrough{OriginName: "get_issue"}}
	pr := plexus.Entry{ID: "mcp.github.list_pulls", Label: "List pull requests", Describe: "Lists the pull requests of a repository, with their issue links"}
	for _, tc := range []struct {
		q         string
		hi, lo    plexus.Entry
		hiAtLeast int
	}{
		{"get_issue", issue, pr, 100},
		{"mcp.github.get_issue", issue, pr, 100},
		{"issue", issue, pr, 3},
		{"pull", pr, issue, 2},
	} {
		hi, lo := score(tc.q, tc.hi, ToolName(tc.hi.ID)), score(tc.q, tc.lo, ToolName(tc.lo.ID))
		if hi < tc.hiAtLeast || hi <= lo {
			t.Errorf("score(%q): %s %d, %s %d; want the first ahead with at least %d", tc.q, tc.hi.ID, hi, tc.lo.ID, lo, tc.hiAtLeast)
		}
	}
	if s := score("  ", issue, "x"); s != 0 {
		t.Errorf("an empty query scores %d", s)
	}
	if s := score("zebra", issue, "x"); s != 0 {
		t.Errorf("an unrelated query scores %d", s)
	}
}

// TestReloadSaysWhoChanged: Reload names exactly the agents whose view the
// file changed since the last read — added, edited, removed — and none for
// a rewrite that changes nothing (the daemon journals one row per name).
func TestReloadSaysWhoChanged(t *testing.T) {
	path := filepath.Join(t.TempDir(), ViewFileName)
	write := func(s string) {
		t.Helper()
		if err := os.WriteFile(path, []byte(s), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write(`{"agents":{"a":{"mode":"tools"},"b":{"only":["x.*"]}}}`)
	vf, err := LoadViewFile(path)
	if err != nil {
		t.Fatal(err)
	}
	for _, step := range []struct {
		file string
		want []string
	}{
		{`{"agents":{"a":{"mode":"tools"},"b":{"only":["x.*"]}}}`, nil},
		{`{"agents": {"b": {"only": ["x.*"]}, "a": {"mode": "tools"}}, "note": "reordered"}`, nil},
		{`{"agents":{"a":{"mode":"search"},"b":{"only":["x.*"]}}}`, []string{"a"}},
		{`{"agents":{"a":{"mode":"search"},"b":{"only":["x.*","y"]},"c":{"names":"safe"}}}`, []string{"b", "c"}},
		{`{"agents":{"c":{"names":"safe"}}}`, []string{"a", "b"}},
		{`{"agents":{"c":{"names":"safe"},"d":{}}}`, nil},
	} {
		write(step.file)
		got, err := vf.Reload()
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(step.want, got); diff != "" {
			t.Errorf("after %s, changed (-want +got):\n%s", step.file, diff)
		}
	}
}
