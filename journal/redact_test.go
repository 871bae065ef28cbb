package journal

import (
	"encoding/json"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/plexus-gw/plexus"
)

const jwt = "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJhZ2VudDEifQ.c2lnbmF0dXJl"

type carrier struct {
	Name  string `json:"name"`
	Token string `json:"token"`
	Note  string `json:"note"`
}

func TestRedact(t *testing.T) {
	for _, tc := range []struct {
		name string
		in   map[string]any
		want map[string]any
	}{
		{"Nil", nil, nil},
		{"Clean", map[string]any{"capabilityId": "fs.read", "verbs": []any{"read"}, "n": 3, "ok": true},
			map[string]any{"capabilityId": "fs.read", "verbs": []any{"read"}, "n": 3, "ok": true}},
		{"TopLevelKeys",
			map[string]any{"input": map[string]any{"path": "/etc"}, "output": "x", "token": "t", "pat": "p", "reason": "fine"},
			map[string]any{"input": Redacted, "output": Redacted, "token": Redacted, "pat": Redacted, "reason": "fine"}},
		{"CaseAndSeparators",
			map[string]any{"AccessToken": 1, "access_token": 2, "CONNECTION-KEY": 3, "rawInput": 4, "Authorization": "Basic x"},
			map[string]any{"AccessToken": Redacted, "access_token": Redacted, "CONNECTION-KEY": Redacted, "rawInput": Redacted, "Authorization": Redacted}},
		{"Nested",
			map[string]any{"call": map[string]any{"args": []any{"rm", "-rf"}, "meta": map[string]any{"secret": "s", "id": "c1"}},
				"list": []any{map[string]any{"password": "hunter2", "user": "me"}}},
			map[string]any{"call": map[string]any{"args": Redacted, "meta": map[string]any{"secret": Redacted, "id": "c1"}},
				"list": []any{map[string]any{"password": Redacted, "user": "me"}}}},
		{"CredentialPrefixes",
			map[string]any{"a": "plx_live_abc", "b": "Bearer plx_agent_xyz", "c": "use plx_enroll_123 now", "d": "plx_other"},
			map[string]any{"a": Redacted, "b": Redacted, "c": Redacted, "d": "plx_other"}},
		{"JWT",
			map[string]any{"a": jwt, "b": "Bearer " + jwt, "c": "eyJhbGciOiJub25lIn0.eyJzdWIiOiJ4In0.", "d": "eyJust.a word", "e": "eyJ"},
			map[string]any{"a": Redacted, "b": Redacted, "c": Redacted, "d": "eyJust.a word", "e": "eyJ"}},
		{"StringsInsideLists",
			map[string]any{"headers": []string{"x", jwt}, "env": map[string]string{"API_KEY": "k", "HOME": "/home/me", "TOKEN_FILE": "plx_live_1"}},
			map[string]any{"headers": []string{"x", Redacted}, "env": map[string]string{"API_KEY": Redacted, "HOME": "/home/me", "TOKEN_FILE": Redacted}}},
		{"StructsThroughJSON",
			map[string]any{"c": carrier{Name: "n", Token: "t", Note: jwt}, "raw": json.RawMessage(`{"key":"k","v":1}`)},
			map[string]any{"c": map[string]any{"name": "n", "token": Redacted, "note": Redacted},
				"raw": map[string]any{"key": Redacted, "v": json.Number("1")}}},
		{"Unencodable", map[string]any{"f": func() {}}, map[string]any{"f": Redacted}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := Redact(tc.in)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("Redact (-want +got):\n%s", diff)
			}
		})
	}
}

func TestRedactDoesNotModifyInput(t *testing.T) {
	in := map[string]any{"token": "t", "nested": map[string]any{"secret": "s"}, "list": []any{"plx_live_x"}}
	Redact(in)
	want := map[string]any{"token": "t", "nested": map[string]any{"secret": "s"}, "list": []any{"plx_live_x"}}
	if diff := cmp.Diff(want, in); diff != "" {
		t.Errorf("Redact modified its input (-want +got):\n%s", diff)
	}
}

// TestRedactionPolicyIsEnforced holds the published policy and the code
// that enforces it equal: every key and prefix the docs cite is redacted.
func TestRedactionPolicyIsEnforced(t *testing.T) {
	p := RedactionPolicy()
	for _, k := range p.Keys {
		if got := Redact(map[string]any{k: "v"})[k]; got != Redacted {
			t.Errorf("policy key %q: value kept as %v", k, got)
		}
	}
	for _, pre := range p.Prefixes {
		if got := redactString("x " + pre + "abc"); got != Redacted {
			t.Errorf("policy prefix %q: value kept as %q", pre, got)
		}
	}
	// And RedactionPolicy hands out copies.
	p.Keys[0] = "changed"
	if RedactionPolicy().Keys[0] == "changed" {
		t.Error("RedactionPolicy returned shared state")
	}
}

type (
	testVerb    string
	testVerbs   []testVerb
	loudString  string
	loudStrings []string
)

func (s loudString) MarshalText() ([]byte, error)  { return []byte("LOUD " + string(s)), nil }
func (s loudStrings) MarshalJSON() ([]byte, error) { return []byte(`"joined"`), nil }

// TestRedactNamedStrings: named strings and slices of them skip the JSON
// round trip, and must come out exactly as it would have made them.
func TestRedactNamedStrings(t *testing.T) {
	roundTrip := func(v any) any {
		b, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		g, err := decodeJSON(b)
		if err != nil {
			t.Fatal(err)
		}
		return redactValue(g)
	}
	for _, v := range []any{
		testVerb("read"), testVerb(jwt), []testVerb{"read", "write"}, []testVerb{"plx_live_x"}, []testVerb{},
		[]testVerb(nil), testVerbs{"execute"}, loudString("x"), []loudString{"a"}, loudStrings{"a", "b"},
		[]plexus.Verb{plexus.VerbRead, plexus.VerbWrite}, []plexus.Verb{"plx_agent_x"}, []plexus.Verb{}, []plexus.Verb(nil),
	} {
		if diff := cmp.Diff(roundTrip(v), redactValue(v)); diff != "" {
			t.Errorf("redactValue(%#v) (-round trip +got):\n%s", v, diff)
		}
	}
}

// TestSensitiveKey: keys are matched case-insensitively and ignoring '_' and
// '-' whatever their length or alphabet, and looking at an ordinary key
// allocates nothing (it runs for every key of every row).
func TestSensitiveKey(t *testing.T) {
	for _, tc := range []struct {
		key  string
		want bool
	}{
		{"inputHash", false}, {"sessionId", false}, {"durationMs", false}, {"", false},
		{"Input", true}, {"API_KEY", true}, {"Connection-Key", true}, {"raw_input", true},
		{"a_u_t_h_o_r_i_z_a_t_i_o_n", true}, {"authorizations", false}, {"xauthorization", false},
		{"\u212Aey", true}, // the Kelvin sign lowers to k
		{"clé", false}, {"ТOKEN", false},
	} {
		if got := sensitiveKey(tc.key); got != tc.want {
			t.Errorf("sensitiveKey(%q) = %v, want %v", tc.key, got, tc.want)
		}
	}
	if n := testing.AllocsPerRun(100, func() { sensitiveKey("inputHash") }); n != 0 {
		t.Errorf("sensitiveKey of an ordinary key allocates %v times, want 0", n)
	}
}
