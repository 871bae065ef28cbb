package cliexec

import (
	"errors"
	"slices"
	"strings"
	"testing"
)

func TestExpand(t *testing.T) {
	input := map[string]any{
		"path": "notes/a b.md",
		"n":    7,
		"a":    map[string]any{"b": map[string]any{"c": "deep"}},
		"list": []any{"x", 1.5},
	}
	for _, tc := range []struct {
		tmpl, want string
	}{
		{"plain", "plain"},
		{"", ""},
		{"{path}", "notes/a b.md"},
		{"--file={path}", "--file=notes/a b.md"},
		{"{path}:{n}", "notes/a b.md:7"},
		{"{a.b.c}", "deep"},
		{"{a.b}", `{"c":"deep"}`},
		{"{list}", `["x",1.5]`},
		{"{{path}}", "{path}"},
		{"{{{path}}}", "{notes/a b.md}"},
		{"}}{{", "}{"},
		{"{{}}", "{}"},
		{"ünï{n}cødé", "ünï7cødé"},
	} {
		tmpl, err := parseTemplate(tc.tmpl)
		if err != nil {
			t.Errorf("parseTemplate(%q): %v", tc.tmpl, err)
			continue
		}
		got, err := tmpl.expand(input)
		if err != nil || got != tc.want {
			t.Errorf("expand(%q) = %q, %v; want %q", tc.tmpl, got, err, tc.want)
		}
	}
}

func TestParseTemplateErrors(t *testing.T) {
	for _, tc := range []struct{ tmpl, want string }{
		{"{", `unclosed "{" at byte 0`},
		{"a{b", `unclosed "{" at byte 1`},
		{"{a{b}}", `unclosed "{" at byte 0`},
		{"}", `lone "}" at byte 0`},
		{"{a}}", `lone "}" at byte 3`},
		{"{}", `placeholder "{}" at byte 0 names no field`},
		{"{.a}", "names no field"},
		{"{a.}", "names no field"},
		{"{a..b}", "names no field"},
	} {
		_, err := parseTemplate(tc.tmpl)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("parseTemplate(%q) = %v, want an error containing %q", tc.tmpl, err, tc.want)
		}
	}
}

// FuzzTemplate: a parsed template expands to exactly one argument and
// never panics, and escaping any text gives a template that expands back to
// that text.
func FuzzTemplate(f *testing.F) {
	for _, s := range []string{"--file={path}", "{{x}}", "{a.b}", "; rm -rf ~", "}{", "{"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if tmpl, err := parseTemplate(s); err == nil {
			_, _ = tmpl.expand(map[string]any{"path": "p", "a": map[string]any{"b": 1}})
		}
		escaped := strings.NewReplacer("{", "{{", "}", "}}").Replace(s)
		tmpl, err := parseTemplate(escaped)
		if err != nil {
			t.Fatalf("parseTemplate(%q): %v", escaped, err)
		}
		if got, err := tmpl.expand(nil); err != nil || got != s {
			t.Fatalf("escaped %q expands to %q, %v", s, got, err)
		}
	})
}

// TestExpandArgvOptions: input never starts an argument with "-" unless a
// literal "--" came first; text before a placeholder keeps it a value.
func TestExpandArgvOptions(t *testing.T) {
	for _, tc := range []struct {
		name  string
		args  []string
		input map[string]any
		want  []string // nil: refused as an option
	}{
		{"Plain", []string{"read", "{p}"}, map[string]any{"p": "notes/a.md"}, []string{"read", "notes/a.md"}},
		{"Dash", []string{"read", "{p}"}, map[string]any{"p": "-rf"}, nil},
		{"DoubleDash", []string{"{p}"}, map[string]any{"p": "--output=/tmp/x"}, nil},
		{"NegativeNumber", []string{"{n}"}, map[string]any{"n": -3}, nil},
		{"EmptyThenDash", []string{"{a}{b}"}, map[string]any{"a": "", "b": "-x"}, nil},
		{"AfterDoubleDash", []string{"read", "--", "{p}"}, map[string]any{"p": "-rf"}, []string{"read", "--", "-rf"}},
		{"LiteralPrefix", []string{"--file={p}"}, map[string]any{"p": "-rf"}, []string{"--file=-rf"}},
		{"TextPrefix", []string{"x{p}"}, map[string]any{"p": "-rf"}, []string{"x-rf"}},
		{"DashDashFromInputIsNotEnd", []string{"{a}", "{b}"}, map[string]any{"a": "--", "b": "-x"}, nil},
		{"LiteralDashArg", []string{"-n", "{p}"}, map[string]any{"p": "5"}, []string{"-n", "5"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var tmpls []template
			for _, a := range tc.args {
				tm, err := parseTemplate(a)
				if err != nil {
					t.Fatal(err)
				}
				tmpls = append(tmpls, tm)
			}
			got, err := expandArgv(tmpls, tc.input)
			var opt *errOption
			switch {
			case tc.want == nil && !errors.As(err, &opt):
				t.Fatalf("expandArgv(%q) = %q, %v; want an option error", tc.args, got, err)
			case tc.want != nil && (err != nil || !slices.Equal(got, tc.want)):
				t.Fatalf("expandArgv(%q) = %q, %v; want %q", tc.args, got, err, tc.want)
			}
		})
	}
}
