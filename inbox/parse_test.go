package inbox

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/plexus-gw/plexus"
)

// minimal is the least a decision file can say.
const minimal = "---\nplexus: decision/1\nid: " + pendID + "\n---\n"

func mustRender(tb testing.TB, p plexus.Pending, opts RenderOptions) string {
	tb.Helper()
	b, err := Render(p, opts)
	if err != nil {
		tb.Fatal(err)
	}
	return string(b)
}

func TestParseErrors(t *testing.T) {
	grant := mustRender(t, grantFixture(), RenderOptions{})
	for _, tt := range []struct {
		name  string
		in    string
		field string
		line  int
	}{
		{"Empty", "", "frontmatter", 1},
		{"NoFrontmatter", "# Approve me\n\nplexus: decision/1\n", "frontmatter", 1},
		{"TOMLFrontmatter", "+++\nplexus = \"decision/1\"\n+++\n", "frontmatter", 1},
		{"Unclosed", "\n---\nplexus: decision/1\nid: " + pendID + "\n", "frontmatter", 2},
		{"BadYAML", "---\nplexus: decision/1\nid: [unclosed\n---\n", "frontmatter", 0},
		{"BadIndent", "---\nplexus: decision/1\n  id: x\n bad: y\n---\n", "frontmatter", 0},
		{"NotAMapping", "---\n- plexus\n- decision/1\n---\n", "frontmatter", 2},
		{"EmptyFrontmatter", "---\n---\n", "plexus", 0},
		{"MissingMarker", "---\nid: " + pendID + "\n---\n", "plexus", 0},
		{"LaterFormat", "---\nplexus: decision/2\nid: " + pendID + "\n---\n", "plexus", 0},
		{"MissingID", "---\nplexus: decision/1\ntype: grant\n---\n", "id", 0},
		{"BadID", "---\nplexus: decision/1\nid: pend_../../x\n---\n", "id", 0},
		{"IDList", "---\nplexus: decision/1\nid: [a]\n---\n", "id", 3},
		{"RepeatedKey", minimal[:len(minimal)-4] + "id: " + pendID + "\n---\n", "id", 4},
		{"BadTime", "---\nplexus: decision/1\nid: " + pendID + "\ncreated: yesterday\n---\n", "created", 4},
		{"BadBool", "---\nplexus: decision/1\nid: " + pendID + "\nsame_user: yes\n---\n", "same_user", 4},
		{"CapabilitiesNotList", minimal[:len(minimal)-4] + "capabilities: all\n---\n", "capabilities", 4},
		{"BadWindow", strings.Replace(grant, "window: 7d", "window: 2x", 1), "capabilities[0].window", 14},
		{"ZeroWindow", strings.Replace(grant, "window: 7d", "window: 0s", 1), "capabilities[0].window", 14},
		{"NegativeWindow", strings.Replace(grant, "window: 7d", "window: -1h", 1), "capabilities[0].window", 14},
		{"MissingWindow", strings.Replace(grant, "    window: 7d\n", "", 1), "capabilities[0].window", 0},
		{"BadVerb", strings.Replace(grant, "verbs: [read]", "verbs: [read, admin]", 1), "capabilities[0].verbs", 13},
		{"NoVerbs", strings.Replace(grant, "verbs: [read]", "verbs: []", 1), "capabilities[0].verbs", 13},
		{"MissingCapabilityID", strings.Replace(grant, "  - id: portal.notes.read\n    verbs", "  - verbs", 1), "capabilities[0].id", 0},
		{"TwiceListed", strings.Replace(grant, "reason:", "  - {id: portal.notes.read, verbs: [read], window: 1d}\nreason:", 1), "capabilities[1].id", 0},
		{"BadConstraint", strings.Replace(grant, "    window: 7d\n", "    window: 7d\n    constraint: {pathprefix: {field: path, allow: [a]}}\n", 1), "capabilities[0].constraint", 15},
		{"EmptyConstraint", strings.Replace(grant, "    window: 7d\n", "    window: 7d\n    constraint: {}\n", 1), "capabilities[0].constraint", 15},
		{"Alias", "---\nplexus: &p decision/1\nid: " + pendID + "\nx: *p\n---\n", "frontmatter", 0},
		{"NotUTF8", "---\nplexus: decision/1\nid: " + pendID + "\nagent: \xff\n---\n", "", 0},
		{"Oversize", minimal + strings.Repeat("x", MaxFileSize), "", 0},
	} {
		t.Run(tt.name, func(t *testing.T) {
			f, err := Parse([]byte(tt.in))
			var pe *ParseError
			if !errors.As(err, &pe) {
				t.Fatalf("Parse = %+v, %v; want a *ParseError", f, err)
			}
			if pe.Field != tt.field {
				t.Errorf("Field = %q, want %q (%v)", pe.Field, tt.field, err)
			}
			if tt.line != 0 && pe.Line != tt.line {
				t.Errorf("Line = %d, want %d (%v)", pe.Line, tt.line, err)
			}
			if pe.Problem == "" {
				t.Errorf("no Problem: %v", err)
			}
		})
	}
}

func TestParseLenient(t *testing.T) {
	grant := mustRender(t, grantFixture(), RenderOptions{})
	want, err := Parse([]byte(grant))
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		name string
		in   string
	}{
		// The owner's notes, at the top and in a capability, are ignored.
		{"UnknownKeys", strings.Replace(strings.Replace(grant, "type: grant\n", "type: grant\nmy_note: looked at this on Monday\n", 1),
			"    window: 7d\n", "    window: 7d\n    note: [fine, by, me]\n", 1)},
		{"ByteOrderMark", "\ufeff" + grant},
		{"CRLF", strings.ReplaceAll(grant, "\n", "\r\n")},
		{"LeadingBlankLines", "\n\n" + grant},
		{"BlockVerbs", strings.Replace(grant, "verbs: [read]", "verbs:\n      - read", 1)},
		{"ScalarVerb", strings.Replace(grant, "verbs: [read]", "verbs: READ", 1)},
		{"QuotedWindow", strings.Replace(grant, "window: 7d", "window: ' 7D'", 1)},
		{"WindowAsHours", strings.Replace(grant, "window: 7d", "window: 168h", 1)},
		{"NoBody", grant[:strings.Index(grant, "\n---\n")+5]},
		{"NoFinalNewline", grant[:strings.Index(grant, "\n---\n")+4]},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Parse([]byte(tt.in))
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(want, got, cmpopts.IgnoreFields(File{}, "Notes")); diff != "" {
				t.Errorf("Parse (-want +got):\n%s", diff)
			}
		})
	}
}

func TestParseMinimal(t *testing.T) {
	got, err := Parse([]byte(minimal))
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(&File{Format: Format, ID: pendID}, got); diff != "" {
		t.Errorf("Parse (-want +got):\n%s", diff)
	}
}

func TestParseErrorLineInFile(t *testing.T) {
	// Lines count from the top of the file, blank lines before the
	// frontmatter included, so the owner's editor can jump to them.
	in := "\n\n---\nplexus: decision/1\nid: " + pendID + "\ncapabilities:\n  - id: a\n    verbs: [fly]\n    window: 1d\n---\n"
	_, err := Parse([]byte(in))
	var pe *ParseError
	if !errors.As(err, &pe) || pe.Line != 8 || pe.Field != "capabilities[0].verbs" {
		t.Fatalf("Parse = %v, want capabilities[0].verbs at line 8", err)
	}
	if want := `decision file: capabilities[0].verbs (line 8): "fly" is not a verb: want read, write or execute`; err.Error() != want {
		t.Errorf("Error() = %q, want %q", err, want)
	}
}

// FuzzParse checks that Parse never panics, that it refuses only with a
// *ParseError, and that whatever it accepts renders again, parses back the
// same and shows no narrowing against itself.
func FuzzParse(f *testing.F) {
	for _, tt := range goldens {
		f.Add([]byte(mustRender(f, tt.p(), tt.opts)))
	}
	files, _ := filepath.Glob(filepath.Join("testdata", "*.md"))
	for _, name := range files {
		if b, err := os.ReadFile(name); err == nil {
			f.Add(b)
		}
	}
	f.Add([]byte(minimal))
	f.Add([]byte("---\nplexus: decision/1\nid: " + pendID + "\ncapabilities: [{id: x, verbs: write, window: 1d12h30m, constraint: {allow: {field: f, values: [a]}}}]\n---\n"))
	f.Add([]byte("---\n---\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		file, err := Parse(b)
		if err != nil {
			var pe *ParseError
			if !errors.As(err, &pe) {
				t.Fatalf("Parse error %v (%T) is not a *ParseError", err, err)
			}
			return
		}
		p := file.Pending()
		b1, err := Render(p, file.Options())
		if err != nil {
			t.Fatalf("Parse accepted a file Render refuses: %v", err)
		}
		f2, err := Parse(b1)
		if err != nil {
			t.Fatalf("Parse refuses what Render wrote: %v\n%s", err, b1)
		}
		b2, err := Render(f2.Pending(), f2.Options())
		if err != nil {
			t.Fatal(err)
		}
		if string(b1) != string(b2) {
			t.Fatalf("render is not a fixed point:\n%s", cmp.Diff(string(b1), string(b2)))
		}
		if n, err := Changes(p, f2); err != nil || n.Narrowed() {
			t.Fatalf("Changes against itself = %+v, %v", n, err)
		}
	})
}
