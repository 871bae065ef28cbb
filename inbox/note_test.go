package inbox

import (
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestAnnotate(t *testing.T) {
	grant := mustRender(t, grantFixture(), RenderOptions{})
	fm := grant[:strings.Index(grant, "\n---\n")+5]
	note := "capabilities[0].window (line 14): \"2x\" is not a window"
	block := "> " + NoteHeading + " capabilities\\[0\\].window (line 14): \"2x\" is not a window\n"
	for _, tt := range []struct {
		name, in, want string
	}{
		{"AfterFrontmatter", fm + "\n# Title\n", fm + "\n" + block + "\n# Title\n"},
		{"NoBody", fm, fm + "\n" + block},
		{"NoFinalNewline", strings.TrimSuffix(fm, "\n"), fm + "\n" + block},
		{"NoFrontmatter", "just some notes\n", block + "\njust some notes\n"},
		{"Unclosed", "---\nplexus: decision/1\n", block + "\n---\nplexus: decision/1\n"},
		{"Empty", "", block},
		{"ReplacesItsOwn", fm + "\n> " + NoteHeading + " old\n>\n> - older\n\n# Title\n", fm + "\n" + block + "\n# Title\n"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got := string(Annotate([]byte(tt.in), note))
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("Annotate (-want +got):\n%s", diff)
			}
			if again := string(Annotate([]byte(got), note)); again != got {
				t.Errorf("annotating twice differs from once:\n%s", cmp.Diff(got, again))
			}
		})
	}
}

// TestAnnotateKeepsFileReadable checks that a note never stops a file from
// parsing: once the owner fixes what it names, the file reads as before.
func TestAnnotateKeepsFileReadable(t *testing.T) {
	grant := mustRender(t, grantFixture(), RenderOptions{})
	want, err := Parse([]byte(grant))
	if err != nil {
		t.Fatal(err)
	}
	// A rendered file with a note parses the same.
	if got, err := Parse(Annotate([]byte(grant), "x")); err != nil || !cmp.Equal(want, got) {
		t.Errorf("Parse(Annotate(file)) = %v, %v", got, err)
	}
	// A broken file gets its note at the top; fixed under it, it parses,
	// and line numbers still count from the top of the file.
	broken := strings.Replace(grant, "---\n", "--\n", 1)
	annotated := Annotate([]byte(broken), "no frontmatter")
	if !strings.HasPrefix(string(annotated), "> "+NoteHeading) {
		t.Fatalf("note not at the top:\n%s", annotated)
	}
	fixed := strings.Replace(string(annotated), "\n--\n", "\n---\n", 1)
	if got, err := Parse([]byte(fixed)); err != nil || !cmp.Equal(want, got) {
		t.Errorf("Parse(fixed) = %v, %v", got, err)
	}
	_, err = Parse([]byte(strings.Replace(fixed, "window: 7d", "window: 2x", 1)))
	var pe *ParseError
	if !errors.As(err, &pe) || pe.Line != 16 {
		t.Errorf("Parse error under a note = %v, want line 16", err)
	}
}
