package jsonenc

import (
	"bytes"
	"encoding/json"
	"math"
	"strings"
	"testing"
)

// stdlib is what encoding/json writes for v: json.Marshal with escapeHTML,
// an Encoder without it (its newline dropped).
func stdlib(t testing.TB, v any, escapeHTML bool) []byte {
	t.Helper()
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(escapeHTML)
	if err := enc.Encode(v); err != nil {
		t.Fatalf("encoding/json refused %#v: %v", v, err)
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n"))
}

func TestAppendMatchesEncodingJSON(t *testing.T) {
	deep := any("leaf")
	for range 200 {
		deep = map[string]any{"k": []any{deep}}
	}
	tests := map[string]any{
		"nil":            nil,
		"empty object":   map[string]any{},
		"nil map":        map[string]any(nil),
		"nil slice":      []any(nil),
		"empty array":    []any{},
		"bools":          []any{true, false},
		"sorted keys":    map[string]any{"b": 1.0, "a": 2.0, "A": 3.0, "": 4.0, "aa": 5.0, "é": 6.0},
		"html":           map[string]any{"<k>": "<script>alert('x & y')</script>", "&": ">"},
		"non-ASCII":      "héllo wörld, 日本語, emoji 😀, Ω",
		"separators":     "a\u2028b\u2029c",
		"invalid UTF-8":  "bad \xff\xfe bytes and a cut \xe6\x97",
		"controls":       "\x00\x01\b\f\n\r\t\x1f\x7f \"quoted\" back\\slash /",
		"integers":       []any{0.0, 1.0, -1.0, 42.0, 1e20, 123456789012345.0, float64(math.MaxInt64)},
		"fractions":      []any{0.1, -0.5, 1.5e-6, 3.14159, 1.0 / 3},
		"exponents":      []any{1e21, 1e-7, -1e-7, 1e300, 5e-324, math.MaxFloat64, 1.2345e-10},
		"negative zero":  math.Copysign(0, -1),
		"nested":         map[string]any{"a": []any{map[string]any{"x": nil, "y": []any{"z", 1.0, true}}}, "b": map[string]any{}},
		"deep":           deep,
		"many keys":      manyKeys(40),
		"echo bench":     map[string]any{"msg": "hello, plexus", "n": 42.0},
		"key needs care": map[string]any{"\n\"<>": "v"},
	}
	for name, v := range tests {
		for _, esc := range []bool{true, false} {
			got, ok := Append([]byte("prefix"), v, esc)
			if !ok {
				t.Fatalf("%s (escapeHTML %v): refused", name, esc)
			}
			if want := append([]byte("prefix"), stdlib(t, v, esc)...); !bytes.Equal(got, want) {
				t.Errorf("%s (escapeHTML %v):\n got %s\nwant %s", name, esc, got, want)
			}
		}
	}
}

func manyKeys(n int) map[string]any {
	m := map[string]any{}
	for i := range n {
		m[strings.Repeat("k", i%7)+string(rune('a'+i%26))+strings.Repeat("z", i/26)] = float64(i)
	}
	return m
}

// TestAppendRefuses: what encoding/json would encode otherwise (or refuse)
// is left to it, and dst comes back as it was.
func TestAppendRefuses(t *testing.T) {
	cyclic := map[string]any{}
	cyclic["self"] = cyclic
	tests := map[string]any{
		"int":             42,
		"struct":          struct{ A int }{1},
		"json.Number":     json.Number("1.50"),
		"raw message":     json.RawMessage(`{"a":1}`),
		"typed map":       map[string]string{"a": "b"},
		"nested int":      map[string]any{"ok": "x", "bad": []any{1}},
		"infinity":        math.Inf(1),
		"NaN in an array": []any{1.0, math.NaN()},
		"cycle":           cyclic,
	}
	for name, v := range tests {
		dst := []byte("prefix")
		got, ok := Append(dst, v, false)
		if ok {
			t.Errorf("%s: encoded as %s, want refused", name, got)
		}
		if string(got) != "prefix" {
			t.Errorf("%s: dst is %q after a refusal, want it as it was", name, got)
		}
	}
}

// FuzzAppend: any JSON text decoded into an any encodes as encoding/json
// encodes it.
func FuzzAppend(f *testing.F) {
	for _, s := range []string{`{"msg":"hello, plexus","n":42}`, `[1,2.5,-0,1e-7,1e21,"<&>"]`,
		`{"a":{"b":[null,true,false,"\u2028\ud800"]}}`, `"\u00e9\u0000"`, `{"":"","A":1,"a":2}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		var v any
		if json.Unmarshal(data, &v) != nil {
			return
		}
		for _, esc := range []bool{true, false} {
			got, ok := Append(nil, v, esc)
			if !ok {
				t.Fatalf("refused %s", data)
			}
			if want := stdlib(t, v, esc); !bytes.Equal(got, want) {
				t.Fatalf("escapeHTML %v, input %s:\n got %s\nwant %s", esc, data, got, want)
			}
		}
	})
}

func TestAppendAllocations(t *testing.T) {
	v := map[string]any{"msg": "hello, plexus", "n": 42.0, "list": []any{"a", true, nil}}
	buf := make([]byte, 0, 256)
	if n := testing.AllocsPerRun(100, func() { buf, _ = Append(buf[:0], v, true) }); n != 0 {
		t.Errorf("Append allocated %v times per run, want 0", n)
	}
}
