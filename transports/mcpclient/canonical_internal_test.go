package mcpclient

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"testing"
)

// referenceHash is canonicalHash as it was first written (the definition
// of the canonical form): decode into a map with UseNumber, drop the
// top-level _meta, marshal without HTML escaping.
func referenceHash(raw json.RawMessage) (string, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var obj map[string]any
	if err := dec.Decode(&obj); err != nil {
		return "", err
	}
	if obj == nil {
		return "", errors.New("null is not an object")
	}
	delete(obj, "_meta")
	b, err := marshalNoEscape(obj)
	if err != nil {
		return "", err
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:]), nil
}

var canonicalCases = []string{
	`{}`, ` { } `, `{"a":{}}`, `{"a":[]}`, `{"a":[ ]}`, `{"_meta":1}`, `{"a":{"_meta":1}}`,
	`{"b":1,"a":2,"c":{"z":[1,{"y":null,"x":true}],"m":false}}`,
	`{"a":1,"a":2}`, `{"a":{"x":1},"a":{"y":2}}`, `{"_meta":1,"_meta":2,"k":3}`,
	`{"n":[0,-0,1.50,2e10,2E+10,-3.25e-7,100]}`,
	`{"s":"<>&","t":"\u003c\u00fc\/","u":"\ud83d\ude00","v":"\ud800","w":"a\u2028b\u2029","x":"\b\f\n\r\t\u0001\u007f"}`,
	"{\"raw\":\"\u2028 \u2029 ü \x7f\"}",
	"{\"bad\":\"\xff\xfe\"}", "{\"\xffkey\":1}", `{"\u00fc":1,"ü":2,"z":3}`,
	`{"esc\"key":1,"esc\\key":2}`,
	"{\n\t\"pretty\" : [ 1 , 2 ] ,\r\n \"x\" : { } \n}",
	`{"a":1} trailing`, `{"a":1}{"b":2}`,
	`{`, `{"a"`, `{"a":`, `{"a":1`, `{"a":1,}`, `{,}`, `{"a" 1}`, `{"a":01}`, `{"a":-}`, `{"a":1.}`, `{"a":1e}`,
	`{"a":.5}`, `{"a":+1}`, `{"a":tru}`, `{"a":truex}`, `{"a":nul}`, `{"a":[1,]}`, `{"a":[,1]}`, `{"a":"x\qy"}`,
	`{"a":"\u12"}`, "{\"a\":\"tab\tin\"}", `{1:2}`, `null`, `[]`, `"x"`, `1`, ``, ` `, `nullx`,
}

// TestCanonicalHashReference checks the one-pass writer against the
// definition on odd inputs and on realistic tools: same hash, or both fail.
func TestCanonicalHashReference(t *testing.T) {
	inputs := canonicalCases
	for _, raw := range realisticTools(t, 96) {
		inputs = append(inputs, string(raw))
	}
	for _, in := range inputs {
		want, wantErr := referenceHash(json.RawMessage(in))
		got, err := canonicalHash(json.RawMessage(in))
		if got != want || (err == nil) != (wantErr == nil) {
			t.Errorf("canonicalHash(%q) = %q, %v; the reference gives %q, %v", in, got, err, want, wantErr)
		}
	}
}

func FuzzCanonicalHash(f *testing.F) {
	for _, in := range canonicalCases {
		f.Add(in)
	}
	f.Fuzz(func(t *testing.T, in string) {
		want, wantErr := referenceHash(json.RawMessage(in))
		got, err := canonicalHash(json.RawMessage(in))
		if got != want || (err == nil) != (wantErr == nil) {
			t.Errorf("canonicalHash(%q) = %q, %v; the reference gives %q, %v", in, got, err, want, wantErr)
		}
	})
}
