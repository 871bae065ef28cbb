package auth

import (
	"encoding/json"
	"errors"
	"slices"
	"testing"

	"github.com/plexus-gw/plexus"
)

func pathC(allow ...string) *plexus.ScopeConstraint {
	return &plexus.ScopeConstraint{PathPrefix: &plexus.PathPrefixConstraint{Field: "path", Allow: allow}}
}

func matchC(ms ...plexus.ScopeMatch) *plexus.ScopeConstraint {
	return &plexus.ScopeConstraint{Match: ms}
}

// decode turns JSON into an input map the way the HTTP edge does.
func decode(t testing.TB, s string) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal([]byte(s), &m); err != nil {
		t.Fatal(err)
	}
	return m
}

func TestValidateConstraint(t *testing.T) {
	tests := []struct {
		name string
		c    *plexus.ScopeConstraint
		ok   bool
	}{
		{"Nil", nil, true},
		{"Empty", &plexus.ScopeConstraint{}, false},
		{"PathOK", pathC("Inbox/", "Notes/2026"), true},
		{"PathRoot", pathC("."), true},
		{"PathNoField", &plexus.ScopeConstraint{PathPrefix: &plexus.PathPrefixConstraint{Allow: []string{"a"}}}, false},
		{"PathNoAllow", pathC(), false},
		{"PathEmptyAllow", pathC(""), false},
		{"PathAbsoluteAllow", pathC("/etc"), false},
		{"PathDotDotAllow", pathC("Inbox/../.."), false},
		{"PathBackslashAllow", pathC(`Inbox\x`), false},
		{"AllowOK", &plexus.ScopeConstraint{Allow: &plexus.AllowConstraint{Field: "repo", Values: []string{"a/b"}}}, true},
		{"AllowNoValues", &plexus.ScopeConstraint{Allow: &plexus.AllowConstraint{Field: "repo"}}, false},
		{"AllowNoField", &plexus.ScopeConstraint{Allow: &plexus.AllowConstraint{Values: []string{"x"}}}, false},
		{"MatchEq", matchC(plexus.ScopeMatch{Field: "a.b", Op: "eq", Value: 3}), true},
		{"MatchEqNil", matchC(plexus.ScopeMatch{Field: "a", Op: "eq"}), false},
		{"MatchEqObject", matchC(plexus.ScopeMatch{Field: "a", Op: "eq", Value: map[string]any{}}), false},
		{"MatchPrefix", matchC(plexus.ScopeMatch{Field: "a", Op: "prefix", Value: "x"}), true},
		{"MatchPrefixEmpty", matchC(plexus.ScopeMatch{Field: "a", Op: "prefix", Value: ""}), false},
		{"MatchPrefixNumber", matchC(plexus.ScopeMatch{Field: "a", Op: "prefix", Value: 1.0}), false},
		{"MatchIn", matchC(plexus.ScopeMatch{Field: "a", Op: "in", Values: []any{"x", 2.0, true}}), true},
		{"MatchInEmpty", matchC(plexus.ScopeMatch{Field: "a", Op: "in"}), false},
		{"MatchRegexReserved", matchC(plexus.ScopeMatch{Field: "a", Op: "regex", Pattern: ".*"}), false},
		{"MatchUnknownOp", matchC(plexus.ScopeMatch{Field: "a", Op: "ne", Value: "x"}), false},
		{"MatchBadField", matchC(plexus.ScopeMatch{Field: "a..b", Op: "eq", Value: "x"}), false},
		{"MatchNoField", matchC(plexus.ScopeMatch{Op: "eq", Value: "x"}), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := ValidateConstraint(tt.c)
			if (err == nil) != tt.ok {
				t.Errorf("ValidateConstraint = %v, want ok %v", err, tt.ok)
			}
		})
	}
}

func TestSatisfied(t *testing.T) {
	inbox := pathC("Inbox/")
	repo := &plexus.ScopeConstraint{Allow: &plexus.AllowConstraint{Field: "repo", Values: []string{"me/notes", "me/site"}}}
	tests := []struct {
		name  string
		c     *plexus.ScopeConstraint
		input string
		want  bool
	}{
		{"NilConstraint", nil, `{}`, true},
		{"NilConstraintNilInput", nil, `null`, true},
		{"EmptyConstraintFailsClosed", &plexus.ScopeConstraint{}, `{"path":"x"}`, false},

		{"PathUnder", inbox, `{"path":"Inbox/today.md"}`, true},
		{"PathDeep", inbox, `{"path":"Inbox/a/b/c.md"}`, true},
		{"PathEqualsPrefix", inbox, `{"path":"Inbox"}`, true},
		{"PathTrailingSlash", inbox, `{"path":"Inbox/"}`, true},
		{"PathDotSlash", inbox, `{"path":"./Inbox/x"}`, true},
		{"PathDoubleSlash", inbox, `{"path":"Inbox//x"}`, true},
		{"PathSiblingPrefix", inbox, `{"path":"Inboxer/a"}`, false},
		{"PathTraversal", inbox, `{"path":"Inbox/../secret"}`, false},
		{"PathTraversalBackIn", inbox, `{"path":"Inbox/../Inbox/x"}`, false},
		{"PathDotDotDot", inbox, `{"path":"Inbox/./../x"}`, false},
		{"PathLeadingDotDot", inbox, `{"path":"../Inbox/x"}`, false},
		{"PathTrailingDotDot", inbox, `{"path":"Inbox/.."}`, false},
		{"PathAbsolute", inbox, `{"path":"/etc/passwd"}`, false},
		{"PathAbsoluteInbox", inbox, `{"path":"/Inbox/x"}`, false},
		{"PathBackslash", inbox, `{"path":"Inbox\\..\\secret"}`, false},
		{"PathBackslashPlain", inbox, `{"path":"Inbox\\x"}`, false},
		{"PathDrive", inbox, `{"path":"C:/Inbox/x"}`, false},
		{"PathEncodedDots", inbox, `{"path":"Inbox/%2e%2e/secret"}`, false},
		{"PathEncodedSlash", inbox, `{"path":"Inbox%2f..%2fsecret"}`, false},
		{"PathNUL", inbox, `{"path":"Inbox/x\u0000.md"}`, false},
		{"PathNewline", inbox, `{"path":"Inbox/x\n"}`, false},
		{"PathEmpty", inbox, `{"path":""}`, false},
		{"PathDot", inbox, `{"path":"."}`, false},
		{"PathRootAdmitsAll", pathC("."), `{"path":"a/b"}`, true},
		{"PathRootRefusesEscape", pathC("."), `{"path":"../b"}`, false},
		{"PathSecondPrefix", pathC("Inbox", "Notes/2026"), `{"path":"Notes/2026/x"}`, true},
		{"PathPrefixSegments", pathC("Notes/2026"), `{"path":"Notes/20261/x"}`, false},
		{"PathMissing", inbox, `{"file":"Inbox/x"}`, false},
		{"PathNotString", inbox, `{"path":["Inbox/x"]}`, false},
		{"PathNumber", inbox, `{"path":7}`, false},
		{"PathNull", inbox, `{"path":null}`, false},
		{"PathNilInput", inbox, `null`, false},
		{"PathInvalidAllowFailsClosed", pathC("Inbox", "/"), `{"path":"Inbox/x"}`, false},

		{"AllowHit", repo, `{"repo":"me/site"}`, true},
		{"AllowMiss", repo, `{"repo":"me/sites"}`, false},
		{"AllowCase", repo, `{"repo":"Me/site"}`, false},
		{"AllowMissing", repo, `{}`, false},
		{"AllowWrongType", repo, `{"repo":{"name":"me/site"}}`, false},

		{"EqString", matchC(plexus.ScopeMatch{Field: "mode", Op: "eq", Value: "draft"}), `{"mode":"draft"}`, true},
		{"EqStringMiss", matchC(plexus.ScopeMatch{Field: "mode", Op: "eq", Value: "draft"}), `{"mode":"publish"}`, false},
		{"EqIntVsFloat", matchC(plexus.ScopeMatch{Field: "n", Op: "eq", Value: 5}), `{"n":5.0}`, true},
		{"EqNumberVsString", matchC(plexus.ScopeMatch{Field: "n", Op: "eq", Value: 5}), `{"n":"5"}`, false},
		{"EqBool", matchC(plexus.ScopeMatch{Field: "dry", Op: "eq", Value: true}), `{"dry":true}`, true},
		{"EqBoolVsString", matchC(plexus.ScopeMatch{Field: "dry", Op: "eq", Value: true}), `{"dry":"true"}`, false},
		{"EqJSONNumber", matchC(plexus.ScopeMatch{Field: "n", Op: "eq", Value: json.Number("2.5")}), `{"n":2.5}`, true},
		{"EqNull", matchC(plexus.ScopeMatch{Field: "n", Op: "eq", Value: "x"}), `{"n":null}`, false},
		{"NestedMatch", matchC(plexus.ScopeMatch{Field: "repo.owner", Op: "eq", Value: "me"}), `{"repo":{"owner":"me","name":"x"}}`, true},
		{"NestedMiss", matchC(plexus.ScopeMatch{Field: "repo.owner", Op: "eq", Value: "me"}), `{"repo":{"owner":"you"}}`, false},
		{"NestedMissingParent", matchC(plexus.ScopeMatch{Field: "repo.owner", Op: "eq", Value: "me"}), `{"owner":"me"}`, false},
		{"NestedThroughString", matchC(plexus.ScopeMatch{Field: "repo.owner", Op: "eq", Value: "me"}), `{"repo":"me"}`, false},
		{"NestedThroughArray", matchC(plexus.ScopeMatch{Field: "repo.0", Op: "eq", Value: "me"}), `{"repo":["me"]}`, false},
		{"DottedKeyIsNotNested", matchC(plexus.ScopeMatch{Field: "repo.owner", Op: "eq", Value: "me"}), `{"repo.owner":"me"}`, false},
		{"Prefix", matchC(plexus.ScopeMatch{Field: "title", Op: "prefix", Value: "[bot]"}), `{"title":"[bot] fix"}`, true},
		{"PrefixMiss", matchC(plexus.ScopeMatch{Field: "title", Op: "prefix", Value: "[bot]"}), `{"title":"fix [bot]"}`, false},
		{"PrefixNotString", matchC(plexus.ScopeMatch{Field: "title", Op: "prefix", Value: "1"}), `{"title":12}`, false},
		{"In", matchC(plexus.ScopeMatch{Field: "lvl", Op: "in", Values: []any{"a", 2, false}}), `{"lvl":2}`, true},
		{"InBool", matchC(plexus.ScopeMatch{Field: "lvl", Op: "in", Values: []any{"a", 2, false}}), `{"lvl":false}`, true},
		{"InMiss", matchC(plexus.ScopeMatch{Field: "lvl", Op: "in", Values: []any{"a", 2}}), `{"lvl":"b"}`, false},
		{"InArrayInput", matchC(plexus.ScopeMatch{Field: "lvl", Op: "in", Values: []any{"a"}}), `{"lvl":["a"]}`, false},
		{"Regex", matchC(plexus.ScopeMatch{Field: "x", Op: "regex", Pattern: ".*"}), `{"x":"anything"}`, false},
		{"UnknownOp", matchC(plexus.ScopeMatch{Field: "x", Op: "ne", Value: "y"}), `{"x":"z"}`, false},
		{"MissingField", matchC(plexus.ScopeMatch{Field: "x", Op: "eq", Value: "y"}), `{}`, false},

		{"AndAllHold", &plexus.ScopeConstraint{
			PathPrefix: &plexus.PathPrefixConstraint{Field: "path", Allow: []string{"Inbox"}},
			Allow:      &plexus.AllowConstraint{Field: "mode", Values: []string{"append"}},
			Match:      []plexus.ScopeMatch{{Field: "meta.tag", Op: "eq", Value: "x"}},
		}, `{"path":"Inbox/a","mode":"append","meta":{"tag":"x"}}`, true},
		{"AndOneFails", &plexus.ScopeConstraint{
			PathPrefix: &plexus.PathPrefixConstraint{Field: "path", Allow: []string{"Inbox"}},
			Allow:      &plexus.AllowConstraint{Field: "mode", Values: []string{"append"}},
		}, `{"path":"Inbox/a","mode":"overwrite"}`, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := SatisfiedResolved(tt.c, decode(t, tt.input), nil); got != tt.want {
				t.Errorf("Satisfied(%s) = %v, want %v", tt.input, got, tt.want)
			}
		})
	}
}

func TestNarrows(t *testing.T) {
	m1 := plexus.ScopeMatch{Field: "mode", Op: "eq", Value: "draft"}
	m2 := plexus.ScopeMatch{Field: "repo.owner", Op: "eq", Value: "me"}
	allowAB := &plexus.ScopeConstraint{Allow: &plexus.AllowConstraint{Field: "repo", Values: []string{"a", "b"}}}
	tests := []struct {
		name                string
		approved, requested *plexus.ScopeConstraint
		want                bool
	}{
		{"BothNil", nil, nil, true},
		{"AddToUnconstrained", pathC("Inbox"), nil, true},
		{"InvalidAddToUnconstrained", matchC(plexus.ScopeMatch{Field: "x", Op: "regex"}), nil, false},
		{"RemoveConstraint", nil, pathC("Inbox"), false},
		{"Equal", pathC("Inbox"), pathC("Inbox"), true},
		{"EqualNumbersAcrossTypes", matchC(plexus.ScopeMatch{Field: "n", Op: "eq", Value: 1}), matchC(plexus.ScopeMatch{Field: "n", Op: "eq", Value: 1.0}), true},
		{"AddMatch", &plexus.ScopeConstraint{PathPrefix: pathC("Inbox").PathPrefix, Match: []plexus.ScopeMatch{m1}}, pathC("Inbox"), true},
		{"AddAllow", &plexus.ScopeConstraint{PathPrefix: pathC("Inbox").PathPrefix, Allow: allowAB.Allow}, pathC("Inbox"), true},
		{"KeepMatchesAddOne", matchC(m2, m1), matchC(m1), true},
		{"DropMatch", matchC(m1), matchC(m1, m2), false},
		{"ChangeMatch", matchC(plexus.ScopeMatch{Field: "mode", Op: "eq", Value: "publish"}), matchC(m1), false},
		{"DropPathPrefix", matchC(m1), &plexus.ScopeConstraint{PathPrefix: pathC("Inbox").PathPrefix, Match: []plexus.ScopeMatch{m1}}, false},
		{"ShrinkPathPrefix", pathC("Inbox/today"), pathC("Inbox"), true},
		{"ShrinkToOnePrefix", pathC("Notes"), pathC("Inbox", "Notes"), true},
		{"WidenPathPrefix", pathC("Inbox", "Secrets"), pathC("Inbox"), false},
		{"SiblingPathPrefix", pathC("Inboxer"), pathC("Inbox"), false},
		{"ParentPathPrefix", pathC("."), pathC("Inbox"), false},
		{"PathPrefixOtherField", &plexus.ScopeConstraint{PathPrefix: &plexus.PathPrefixConstraint{Field: "dest", Allow: []string{"Inbox"}}}, pathC("Inbox"), false},
		{"ShrinkAllow", &plexus.ScopeConstraint{Allow: &plexus.AllowConstraint{Field: "repo", Values: []string{"a"}}}, allowAB, true},
		{"WidenAllow", &plexus.ScopeConstraint{Allow: &plexus.AllowConstraint{Field: "repo", Values: []string{"a", "c"}}}, allowAB, false},
		{"AllowOtherField", &plexus.ScopeConstraint{Allow: &plexus.AllowConstraint{Field: "org", Values: []string{"a"}}}, allowAB, false},
		{"InvalidApproved", &plexus.ScopeConstraint{}, pathC("Inbox"), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Narrows(tt.approved, tt.requested); got != tt.want {
				t.Errorf("Narrows = %v, want %v", got, tt.want)
			}
		})
	}
}

func FuzzSatisfied(f *testing.F) {
	f.Add(`{"pathPrefix":{"field":"path","allow":["Inbox/"]}}`, `{"path":"Inbox/../x"}`)
	f.Add(`{"allow":{"field":"a.b","values":["x"]}}`, `{"a":{"b":"x"}}`)
	f.Add(`{"match":[{"field":"n","op":"eq","value":1}]}`, `{"n":1}`)
	f.Add(`{"match":[{"field":"n","op":"in","values":[1,"x",true,null]}]}`, `{"n":null}`)
	f.Add(`{"match":[{"field":"t","op":"prefix","value":"a"}]}`, `{"t":["a"]}`)
	f.Add(`{"match":[{"field":"..","op":"regex","pattern":"("}]}`, `[]`)
	f.Add(`{}`, `{}`)
	f.Fuzz(func(t *testing.T, constraint, input string) {
		var c plexus.ScopeConstraint
		if json.Unmarshal([]byte(constraint), &c) != nil {
			return
		}
		var in map[string]any
		_ = json.Unmarshal([]byte(input), &in)
		got := SatisfiedResolved(&c, in, nil)
		if got && ValidateConstraint(&c) != nil {
			t.Fatalf("Satisfied admitted input under an invalid constraint %s", constraint)
		}
		if got && c.PathPrefix != nil {
			v, _ := lookup(in, c.PathPrefix.Field)
			p, _ := v.(string)
			if _, ok := cleanRelPath(p); !ok {
				t.Fatalf("Satisfied admitted unsafe path %q", p)
			}
		}
		if !Narrows(&c, &c) && ValidateConstraint(&c) == nil {
			t.Fatalf("a valid constraint does not narrow itself: %s", constraint)
		}
	})
}

// TestSatisfiedResolved: a pathPrefix admits a call only when both the path
// it names and the path that reaches (the transport's resolution) are under
// the prefix; a resolution that fails admits nothing.
func TestSatisfiedResolved(t *testing.T) {
	links := map[string]string{
		"public/link":           "private/secret.txt",
		"public/linkdir/x.txt":  "private/x.txt",
		"public/same":           "public/readme.txt",
		"public/readme.txt":     "public/readme.txt",
		"public/new/a.txt":      "public/new/a.txt",
		"private/secret.txt":    "private/secret.txt",
		"public/to-public-only": "public",
	}
	resolve := func(p string) (string, error) {
		if r, ok := links[p]; ok {
			return r, nil
		}
		return "", errors.New("leads outside the folder")
	}
	var asked []string
	recording := func(p string) (string, error) {
		asked = append(asked, p)
		return resolve(p)
	}
	tests := []struct {
		name  string
		c     *plexus.ScopeConstraint
		input string
		want  bool
	}{
		{"PlainFile", pathC("public"), `{"path":"public/readme.txt"}`, true},
		{"NewFile", pathC("public"), `{"path":"public/new/a.txt"}`, true},
		{"LinkInsidePrefix", pathC("public"), `{"path":"public/same"}`, true},
		{"LinkToPrefixItself", pathC("public"), `{"path":"public/to-public-only"}`, true},
		{"LinkElsewhere", pathC("public"), `{"path":"public/link"}`, false},
		{"ThroughLinkedFolder", pathC("public"), `{"path":"public/linkdir/x.txt"}`, false},
		{"ResolutionFails", pathC("public"), `{"path":"public/unresolvable"}`, false},
		{"NamedOutsideEvenIfReachingInside", pathC("private"), `{"path":"public/link"}`, false},
		{"TwoPrefixes", pathC("public", "private"), `{"path":"public/link"}`, true},
		{"NoPathPrefix", matchC(plexus.ScopeMatch{Field: "path", Op: OpPrefix, Value: "public/"}), `{"path":"public/link"}`, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := SatisfiedResolved(tt.c, decode(t, tt.input), resolve); got != tt.want {
				t.Errorf("SatisfiedResolved(%s) = %v, want %v", tt.input, got, tt.want)
			}
		})
	}
	t.Run("NilResolveIsSatisfied", func(t *testing.T) {
		if !SatisfiedResolved(pathC("public"), decode(t, `{"path":"public/link"}`), nil) {
			t.Error("without a resolver the path as named decides")
		}
	})
	t.Run("ResolvesOnlyAdmittedCleanPaths", func(t *testing.T) {
		asked = nil
		SatisfiedResolved(pathC("public"), decode(t, `{"path":"other/x"}`), recording)
		SatisfiedResolved(pathC("public"), decode(t, `{"path":"public/./a/../readme.txt"}`), recording)
		SatisfiedResolved(pathC("public"), decode(t, `{"path":"public//readme.txt"}`), recording)
		if want := []string{"public/readme.txt"}; !slices.Equal(asked, want) {
			t.Errorf("resolver asked %q, want %q (a path the prefix refuses as named is never resolved)", asked, want)
		}
	})
}
