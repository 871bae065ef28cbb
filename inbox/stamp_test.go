package inbox

import (
	"errors"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/plexus-gw/plexus"
)

func window(k plexus.TrustWindowKind) *plexus.TrustWindow { return &plexus.TrustWindow{Kind: k} }

// replaceOnce replaces old, which must occur in s exactly once.
func replaceOnce(tb testing.TB, s, old, new string) string {
	tb.Helper()
	if n := strings.Count(s, old); n != 1 {
		tb.Fatalf("%q occurs %d times, want once", old, n)
	}
	return strings.Replace(s, old, new, 1)
}

func TestStamp(t *testing.T) {
	const by = "owner@example.com"
	stamped := "reason: \"\"\ndecided_by: " + by + "\nvia: cli\n"
	grant := mustRender(t, grantFixture(), RenderOptions{})
	bundle := mustRender(t, bundleFixture(), RenderOptions{})
	execute := mustRender(t, executeFixture(), RenderOptions{})
	mixed := executeFixture()
	mixed.Items = append(mixed.Items, grantFixture().Items...)
	mixedFile := mustRender(t, mixed, RenderOptions{})
	problem, err := os.ReadFile("testdata/problem.md")
	if err != nil {
		t.Fatal(err)
	}

	for _, tt := range []struct {
		name string
		in   string
		opts StampOptions
		want func(in string) string
	}{
		{"Approve", grant, StampOptions{DecidedBy: by}, func(in string) string {
			return replaceOnce(t, in, "reason: \"\"\n", stamped)
		}},
		{"Reject", grant, StampOptions{DecidedBy: by, Reason: "not now"}, func(in string) string {
			return replaceOnce(t, in, "reason: \"\"\n", "reason: not now\ndecided_by: "+by+"\nvia: cli\n")
		}},
		{"ReasonOnTwoLines", grant, StampOptions{DecidedBy: by, Reason: "not now;\n---\nask Monday"}, func(in string) string {
			return replaceOnce(t, in, "reason: \"\"\n", "reason: \"not now;\\n---\\nask Monday\"\ndecided_by: "+by+"\nvia: cli\n")
		}},
		{"TextThatReadsAsAnother", grant, StampOptions{DecidedBy: "1234", Reason: "true"}, func(in string) string {
			return replaceOnce(t, in, "reason: \"\"\n", "reason: \"true\"\ndecided_by: \"1234\"\nvia: cli\n")
		}},
		{"DeciderCleaned", grant, StampOptions{DecidedBy: " Ann\n\tOwner\u202e "}, func(in string) string {
			return replaceOnce(t, in, "reason: \"\"\n", "reason: \"\"\ndecided_by: Ann Owner\nvia: cli\n")
		}},
		{"WindowShorter", grant, StampOptions{DecidedBy: by, Window: window(plexus.Window1h)}, func(in string) string {
			in = replaceOnce(t, in, "window: 7d\n", "window: 1h\n")
			return replaceOnce(t, in, "reason: \"\"\n", stamped)
		}},
		{"WindowSame", grant, StampOptions{DecidedBy: by, Window: &plexus.TrustWindow{Kind: plexus.WindowCustom, Ms: (168 * time.Hour).Milliseconds()}}, func(in string) string {
			return replaceOnce(t, in, "reason: \"\"\n", stamped)
		}},
		{"WindowCustom", grant, StampOptions{DecidedBy: by, Window: &plexus.TrustWindow{Kind: plexus.WindowCustom, Ms: (36 * time.Hour).Milliseconds()}}, func(in string) string {
			in = replaceOnce(t, in, "window: 7d\n", "window: 1d12h\n")
			return replaceOnce(t, in, "reason: \"\"\n", stamped)
		}},
		// Each capability whose window is longer takes the new one; the rest
		// keep theirs.
		{"WindowPerCapability", bundle, StampOptions{DecidedBy: by, Window: window(plexus.Window1d)}, func(in string) string {
			in = replaceOnce(t, in, "window: 7d\n", "window: 1d\n")
			in = replaceOnce(t, in, "window: 1d12h\n", "window: 1d\n")
			return replaceOnce(t, in, "reason: \"\"\n", stamped)
		}},
		{"ExecuteKeepsOnce", mixedFile, StampOptions{DecidedBy: by, Window: window(plexus.Window1h)}, func(in string) string {
			in = replaceOnce(t, in, "window: 7d\n", "window: 1h\n")
			return replaceOnce(t, in, "reason: \"\"\n", stamped)
		}},
		{"OnceOnExecute", execute, StampOptions{DecidedBy: by, Window: window(plexus.WindowOnce)}, func(in string) string {
			return replaceOnce(t, in, "reason: \"\"\n", stamped)
		}},
		// Stamping again (or a file a person stamped) replaces the fields in
		// place.
		{"AlreadyStamped", replaceOnce(t, grant, "reason: \"\"\n", "reason: later\ndecided_by: someone\nvia: file\n"),
			StampOptions{DecidedBy: by}, func(in string) string {
				return replaceOnce(t, in, "decided_by: someone\nvia: file\n", "decided_by: "+by+"\nvia: cli\n")
			}},
		// The owner's notes, comments and order stay; a new key goes after
		// the last of the keys Render writes before it.
		{"OwnersNotes",
			replaceOnce(t, replaceOnce(t, grant, "reason: \"\"\n", "# ask Bob first\nmy_note: keep me # really\n"),
				"state: pending\n", "state: pending\nreason: \"\"\n"),
			StampOptions{DecidedBy: by, Reason: "ok"}, func(in string) string {
				in = replaceOnce(t, in, "reason: \"\"\n", "reason: ok\n")
				return replaceOnce(t, in, "# ask Bob first\n", "decided_by: "+by+"\nvia: cli\n# ask Bob first\n")
			}},
		// A text on several lines is written on one, as Render writes it, so
		// that no line of it can read "---" and end the frontmatter.
		{"OwnersBlockScalar", replaceOnce(t, grant, "reason: \"\"\n", "reason: \"\"\nmy_note: |\n  a\n  b\n"),
			StampOptions{DecidedBy: by}, func(in string) string {
				return replaceOnce(t, in, "reason: \"\"\nmy_note: |\n  a\n  b\n", stamped+"my_note: \"a\\nb\\n\"\n")
			}},
		{"NoReasonKey", replaceOnce(t, grant, "reason: \"\"\n", ""), StampOptions{DecidedBy: by, Reason: "no"}, func(in string) string {
			return replaceOnce(t, in, "---\n\n", "reason: no\ndecided_by: "+by+"\nvia: cli\n---\n\n")
		}},
		// A byte-order mark, a problem note before the frontmatter, and the
		// body after it are kept byte for byte.
		{"Surroundings", "\ufeff" + string(Annotate([]byte(strings.Replace(grant, "---\n", "---  \n", 1)), "x")),
			StampOptions{DecidedBy: by}, func(in string) string {
				return replaceOnce(t, in, "reason: \"\"\n", stamped)
			}},
		{"ProblemFile", string(problem), StampOptions{DecidedBy: by}, func(in string) string {
			return replaceOnce(t, in, "reason: \"\"\n", stamped)
		}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Stamp([]byte(tt.in), tt.opts)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want(tt.in), string(got)); diff != "" {
				t.Errorf("Stamp (-want +got):\n%s", diff)
			}
			f, err := Parse(got)
			if err != nil {
				t.Fatalf("the stamped file does not parse: %v", err)
			}
			if f.Via != plexus.ViaCLI || f.DecidedBy == "" {
				t.Errorf("parsed via %q, decided_by %q", f.Via, f.DecidedBy)
			}
		})
	}
}

func TestStampRefused(t *testing.T) {
	grant := mustRender(t, grantFixture(), RenderOptions{})
	execute := mustRender(t, executeFixture(), RenderOptions{})
	t.Run("ErrParse", func(t *testing.T) {
		for _, in := range []string{"", "# notes\n", replaceOnce(t, grant, "window: 7d", "window: 2x"), "---\nplexus: decision/2\nid: " + pendID + "\n---\n"} {
			_, err := Stamp([]byte(in), StampOptions{DecidedBy: "me"})
			var pe *ParseError
			if !errors.As(err, &pe) {
				t.Errorf("Stamp(%q) = %v, want a *ParseError", in, err)
			}
		}
	})
	t.Run("ErrWindowLonger", func(t *testing.T) {
		for _, tt := range []struct {
			in     string
			window *plexus.TrustWindow
			want   string
		}{
			{grant, &plexus.TrustWindow{Kind: plexus.WindowCustom, Ms: (30 * 24 * time.Hour).Milliseconds()}, "window 30d is longer than the request asks (portal.notes.read 7d)"},
			{grant, window(plexus.WindowUntilRevoked), "window until-revoked is longer"},
			{execute, window(plexus.Window1h), "window 1h is longer than the request asks (shell.run once)"},
		} {
			_, err := Stamp([]byte(tt.in), StampOptions{DecidedBy: "me", Window: tt.window})
			var we *WindowError
			if !errors.As(err, &we) || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("Stamp with window %+v = %v, want a *WindowError saying %q", tt.window, err, tt.want)
			}
		}
	})
	t.Run("ErrInvalidWindow", func(t *testing.T) {
		if _, err := Stamp([]byte(grant), StampOptions{DecidedBy: "me", Window: &plexus.TrustWindow{Kind: "fortnight"}}); err == nil {
			t.Error("an invalid window was written")
		}
	})
	t.Run("ErrNoDecider", func(t *testing.T) {
		for _, by := range []string{"", " \n\t", "\u202e"} {
			if _, err := Stamp([]byte(grant), StampOptions{DecidedBy: by}); err == nil {
				t.Errorf("Stamp with decider %q stamped", by)
			}
		}
	})
}

// narrowWindows writes the shorter window only on the capabilities that
// asked longer, spelled as the file reads it back, and refuses a window
// that narrows none.
func TestNarrowWindows(t *testing.T) {
	custom := func(d time.Duration) plexus.TrustWindow {
		return plexus.TrustWindow{Kind: plexus.WindowCustom, Ms: d.Milliseconds()}
	}
	caps := func() []FileCapability {
		return []FileCapability{
			{ID: "a.week", Window: *window(plexus.Window7d)},
			{ID: "a.hour", Window: *window(plexus.Window1h)},
		}
	}
	for _, tt := range []struct {
		name       string
		window     plexus.TrustWindow
		wantNarrow map[string]string
		wantWeek   plexus.TrustWindow
		wantErr    bool
	}{
		{"OneOfTwo", *window(plexus.Window1d), map[string]string{"a.week": "1d"}, *window(plexus.Window1d), false},
		{"CustomAsLongAsANameReadsAsTheName", custom(24 * time.Hour), map[string]string{"a.week": "1d"}, *window(plexus.Window1d), false},
		{"Custom", custom(36 * time.Hour), map[string]string{"a.week": "1d12h"}, custom(36 * time.Hour), false},
		{"Both", *window(plexus.WindowOnce), map[string]string{"a.week": "once", "a.hour": "once"}, *window(plexus.WindowOnce), false},
		{"ErrWidensAll", *window(plexus.WindowUntilRevoked), nil, *window(plexus.Window7d), true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			cs := caps()
			got, err := narrowWindows(cs, tt.window)
			var we *WindowError
			if tt.wantErr != errors.As(err, &we) {
				t.Fatalf("err = %v, want a WindowError: %v", err, tt.wantErr)
			}
			if diff := cmp.Diff(tt.wantNarrow, got); diff != "" {
				t.Errorf("narrowed (-want +got):\n%s", diff)
			}
			if !tt.wantErr && cs[0].Window != tt.wantWeek {
				t.Errorf("a.week's window = %+v, want %+v", cs[0].Window, tt.wantWeek)
			}
		})
	}
}

// TestStampNarrow: the console narrows to fewer capabilities and verbs
// and stamps `via: console`; what reads back is exactly the narrowed
// request, and a narrowing that names what the file lacks, or leaves
// nothing, is refused.
func TestStampNarrow(t *testing.T) {
	const by = "owner@example.com"
	bundle := []byte(mustRender(t, bundleFixture(), RenderOptions{}))
	t.Run("OK", func(t *testing.T) {
		out, err := Stamp(bundle, StampOptions{DecidedBy: by, Via: plexus.ViaConsole,
			Keep:  []string{"portal.notes.write", "tidy.weekly"},
			Verbs: map[string][]plexus.Verb{"portal.notes.write": {plexus.VerbWrite}}})
		if err != nil {
			t.Fatal(err)
		}
		f, err := Parse(out)
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, c := range f.Capabilities {
			got = append(got, c.ID+" "+verbList(c.Verbs))
		}
		want := []string{"portal.notes.write write", "tidy.weekly read"}
		if diff := cmp.Diff(want, got); diff != "" || f.Via != plexus.ViaConsole || f.DecidedBy != by {
			t.Errorf("capabilities (-want +got):\n%s\nvia %q by %q", diff, f.Via, f.DecidedBy)
		}
		if f.Capabilities[0].Constraint == nil {
			t.Error("the kept capability lost its constraint")
		}
	})
	for _, tt := range []struct {
		name string
		opts StampOptions
	}{
		{"ErrUnknownCapability", StampOptions{Keep: []string{"portal.notes.delete"}}},
		{"ErrNoCapability", StampOptions{Keep: []string{}}},
		{"ErrWiderVerb", StampOptions{Verbs: map[string][]plexus.Verb{"portal.notes.read": {plexus.VerbWrite}}}},
		{"ErrNoVerb", StampOptions{Verbs: map[string][]plexus.Verb{"portal.notes.read": {}}}},
		{"ErrVerbsOfUnknown", StampOptions{Verbs: map[string][]plexus.Verb{"portal.x": {plexus.VerbRead}}}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			tt.opts.DecidedBy = by
			_, err := Stamp(bundle, tt.opts)
			var ne *NarrowError
			if !errors.As(err, &ne) {
				t.Fatalf("Stamp: %v, want a *NarrowError", err)
			}
		})
	}
}

// TestStampDefinition: a decision with no capabilities (a changed
// definition) stamps as it is: nothing to narrow, and it reads back.
func TestStampDefinition(t *testing.T) {
	b, err := os.ReadFile("testdata/definition.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, via := range []string{"", plexus.ViaConsole} {
		out, err := Stamp(b, StampOptions{DecidedBy: "owner@example.com", Via: via})
		if err != nil {
			t.Fatalf("via %q: %v", via, err)
		}
		if f, err := Parse(out); err != nil || f.Via != (StampOptions{Via: via}).via() {
			t.Errorf("via %q: %+v, %v", via, f, err)
		}
	}
}
