package registry

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/plexus-gw/plexus"
)

// FuzzManifest feeds bytes through the path a manifest takes from a file or
// a request: ParseManifest, ValidateManifest (offline and against a
// gateway), then materialization. Properties:
//   - every refusal is a *ManifestError naming at least one field;
//   - what parses re-encodes to a fixed point (encode, parse, encode gives
//     the same bytes), so the manifest stored is the manifest read;
//   - validation is deterministic, and a manifest valid against a gateway is
//     valid offline (the offline check only leaves more unjudged);
//   - a valid manifest materializes: one entry per declaration, each id
//     under the source's slug and distinct, never fewer verbs than declared,
//     skill back-links only to the source's own skills.
func FuzzManifest(f *testing.F) {
	for _, glob := range []string{"testdata/*.json", "../examples/extensions/*.json"} {
		names, err := filepath.Glob(glob)
		if err != nil {
			f.Fatal(err)
		}
		for _, name := range names {
			b, err := os.ReadFile(name)
			if err != nil {
				f.Fatal(err)
			}
			f.Add(b)
		}
	}
	for _, s := range []string{
		``, `{}`, `null`, `[]`, `{} {}`, `{"manifest": "plexus-extension/0.1", "capabilites": []}`,
		`{"manifest":"plexus-extension/0.1","source":"a","label":"A","transport":"cli","capabilities":[{"name":"x.run","kind":"capability","label":"X","describe":"d","grants":["read"],"route":{"bin":"sh","args":["-c","{p}"]},"io":{"input":{"$ref":"http://example.com/s.json"}}}]}`,
		`{"manifest":"plexus-extension/0.1","source":"a","label":"A","transport":"workflow","capabilities":[{"name":"w.run","kind":"workflow","label":"W","describe":"d","grants":["read"],"members":[{"id":"a.w.run","verbs":["read"]}]}]}`,
		`{"manifest":"plexus-extension/0.1","source":"a:b","label":"A","transport":"local-rest","secrets":[{"name":"k","attach":"header"}],"capabilities":[{"name":"x.read","kind":"capability","label":"X","describe":"d","grants":["read"],"route":{"secret":{"name":"k"},"attachSkills":["x.read"]}}]}`,
	} {
		f.Add([]byte(s))
	}
	none := func(string) (plexus.Entry, bool) { return plexus.Entry{}, false }
	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := ParseManifest(b)
		if err != nil {
			requireProblems(t, "ParseManifest", err)
			return
		}
		requireFixedPoint(t, m)

		offline, online := ValidateManifest(m, nil), ValidateManifest(m, none)
		requireProblems(t, "ValidateManifest offline", offline)
		requireProblems(t, "ValidateManifest online", online)
		if again := ValidateManifest(m, none); errString(again) != errString(online) {
			t.Fatalf("ValidateManifest is not deterministic: %v, then %v", online, again)
		}
		if online == nil && offline != nil {
			t.Fatalf("valid against a gateway but not offline: %v", offline)
		}
		if online != nil {
			if _, err := NewExtensionSource(m, plexus.ProvenanceExtension, none, nil); err == nil {
				t.Fatalf("an invalid manifest materialized: %v", online)
			}
			return
		}
		requireMaterializes(t, m, none)
	})
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

// requireProblems fails unless err is nil or a *ManifestError naming at
// least one field and problem.
func requireProblems(t *testing.T, op string, err error) {
	t.Helper()
	if err == nil {
		return
	}
	var me *ManifestError
	if !errors.As(err, &me) || len(me.Problems) == 0 {
		t.Fatalf("%s: %v (%T) is not a *ManifestError with problems", op, err, err)
	}
	for _, p := range me.Problems {
		if p.Field == "" || p.Problem == "" {
			t.Fatalf("%s: a problem without a field or text: %+v", op, p)
		}
	}
}

// requireFixedPoint checks that m encodes, parses back and encodes again to
// the same bytes.
func requireFixedPoint(t *testing.T, m plexus.ExtensionManifest) {
	t.Helper()
	b1, err := json.Marshal(m)
	if err != nil {
		t.Fatalf("a parsed manifest does not encode: %v", err)
	}
	m2, err := ParseManifest(b1)
	if err != nil {
		t.Fatalf("ParseManifest refuses the encoding of what it parsed: %v\n%s", err, b1)
	}
	b2, err := json.Marshal(m2)
	if err != nil {
		t.Fatal(err)
	}
	if string(b1) != string(b2) {
		t.Fatalf("encoding is not a fixed point:\n%s\n%s", b1, b2)
	}
}

// requireMaterializes checks the entries a valid manifest becomes.
func requireMaterializes(t *testing.T, m plexus.ExtensionManifest, present func(string) (plexus.Entry, bool)) {
	t.Helper()
	src, err := NewExtensionSource(m, plexus.ProvenanceExtension, present, nil)
	if err != nil {
		t.Fatalf("a valid manifest does not materialize: %v", err)
	}
	entries, err := src.Scan(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != len(m.Capabilities) {
		t.Fatalf("%d declarations became %d entries", len(m.Capabilities), len(entries))
	}
	seen := map[string]plexus.Entry{}
	for _, e := range entries {
		if !strings.HasPrefix(e.ID, SourceSlug(m.Source)+".") || e.Source != m.Source {
			t.Fatalf("entry %s (source %s) is not under source %s", e.ID, e.Source, m.Source)
		}
		if _, dup := seen[e.ID]; dup {
			t.Fatalf("two entries share the id %s", e.ID)
		}
		seen[e.ID] = e
	}
	for i, d := range m.Capabilities {
		e := entries[i]
		if !plexus.CoversVerbs(e.Grants, d.Grants) {
			t.Fatalf("entry %s requires %v, fewer than the declared %v", e.ID, e.Grants, d.Grants)
		}
		for _, sk := range e.Skills {
			if target, ok := seen[sk.ID]; !ok || target.Kind != plexus.KindSkill {
				t.Fatalf("entry %s links %s, which is not a skill of this source", e.ID, sk.ID)
			}
		}
		if e.Kind == plexus.KindSkill && !slices.Equal(e.Grants, []plexus.Verb{}) {
			t.Fatalf("skill %s requires verbs %v", e.ID, e.Grants)
		}
	}
}

// TestValidateManifestDeterministic: a schema breaking several metaschema
// rules is refused in the same words every time (found by FuzzManifest: the
// schema library gathers the causes in map order).
func TestValidateManifestDeterministic(t *testing.T) {
	m, err := ParseManifest([]byte(`{"capabilities": [{"kind": "capability",
		"io": {"input": {"type": "", "required": ["a", "a"], "properties": {"x": {"type": 1}, "y": {"minimum": "z"}}}}}]}`))
	if err != nil {
		t.Fatal(err)
	}
	first := errString(ValidateManifest(m, nil))
	for range 50 {
		if got := errString(ValidateManifest(m, nil)); got != first {
			t.Fatalf("ValidateManifest changed its words:\n%s\n%s", first, got)
		}
	}
}
