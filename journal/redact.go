package journal

import (
	"bytes"
	"encoding"
	"encoding/json"
	"reflect"
	"strings"
	"unicode/utf8"

	"github.com/plexus-gw/plexus"
)

// Redacted replaces every value the redaction policy removes.
const Redacted = "[redacted]"

// AuditRedactionPolicy is what [Redact] removes from every activity payload
// and persisted event body before it reaches journal.db or the audit mirror.
// docs/ cites it; [RedactionPolicy] is the one source of truth.
type AuditRedactionPolicy struct {
	// Keys are object keys whose values are replaced wholesale, at any
	// depth. Matching ignores case, '_' and '-' (accessToken, access_token
	// and ACCESS-TOKEN are one key).
	Keys []string
	// Prefixes are credential prefixes: a string value containing one
	// anywhere is replaced.
	Prefixes []string
	// JWT: a string value containing something shaped like a JWT (three
	// base64url segments, the first starting "eyJ") is replaced.
	JWT bool
}

// RedactionPolicy returns the policy [Redact] enforces. It returns a fresh
// copy; changing it changes nothing.
func RedactionPolicy() AuditRedactionPolicy {
	return AuditRedactionPolicy{
		Keys: []string{
			"input", "rawInput", "arguments", "args", "output",
			"token", "accessToken", "pat", "code", "enrollCode",
			"connectionKey", "key", "apiKey", "secret", "password",
			"authorization", "bearer",
		},
		Prefixes: []string{"plx_live_", "plx_agent_", "plx_enroll_"},
		JWT:      true,
	}
}

// sensitiveKey reports whether k names a value the policy removes. It must
// list exactly RedactionPolicy().Keys, normalized (a test holds them equal).
// It runs for every key of every payload, so it normalizes into a stack
// buffer instead of allocating a lowered copy of each key.
func sensitiveKey(k string) bool {
	var buf [maxSensitiveKey]byte
	n, ok := normKey(k, buf[:])
	if !ok {
		return false
	}
	switch string(buf[:n]) {
	case "input", "rawinput", "arguments", "args", "output",
		"token", "accesstoken", "pat", "code", "enrollcode",
		"connectionkey", "key", "apikey", "secret", "password",
		"authorization", "bearer":
		return true
	}
	return false
}

// maxSensitiveKey is the length of the longest normalized sensitive key
// ("authorization", "connectionkey").
const maxSensitiveKey = 13

// normKey writes k lowercased and without '_' and '-' into buf and returns
// its length; ok is false when it does not fit, so k is no sensitive key. A
// key with a non-ASCII byte takes the slow path through strings.ToLower,
// which maps some of them to ASCII (the Kelvin sign to k): "\u212Aey" is a
// key.
func normKey(k string, buf []byte) (n int, ok bool) {
	for i := 0; i < len(k); i++ {
		c := k[i]
		switch {
		case c >= utf8.RuneSelf:
			return normKeyUnicode(k, buf)
		case c == '_' || c == '-':
			continue
		case 'A' <= c && c <= 'Z':
			c += 'a' - 'A'
		}
		if n == len(buf) {
			return 0, false
		}
		buf[n] = c
		n++
	}
	return n, true
}

func normKeyUnicode(k string, buf []byte) (n int, ok bool) {
	k = strings.NewReplacer("_", "", "-", "").Replace(strings.ToLower(k))
	if len(k) > len(buf) {
		return 0, false
	}
	return copy(buf, k), true
}

// Redact returns a redacted deep copy of payload; payload is not modified.
// Values of unfamiliar Go types are inspected through their JSON encoding,
// and one that cannot be encoded is replaced, so nothing escapes unexamined.
func Redact(payload map[string]any) map[string]any {
	if payload == nil {
		return nil
	}
	return redactMap(payload)
}

func redactMap(m map[string]any) map[string]any {
	out := make(map[string]any, len(m))
	for k, v := range m {
		if sensitiveKey(k) {
			out[k] = Redacted
			continue
		}
		out[k] = redactValue(v)
	}
	return out
}

func redactValue(orig any) any {
	switch v := orig.(type) {
	case nil, bool, json.Number,
		int, int8, int16, int32, int64,
		uint, uint8, uint16, uint32, uint64,
		float32, float64:
		return v
	case string:
		if redactString(v) == v {
			return orig // the same string: boxing it again would allocate
		}
		return Redacted
	case map[string]any:
		return redactMap(v)
	case []any:
		out := make([]any, len(v))
		for i, e := range v {
			out[i] = redactValue(e)
		}
		return out
	case []string:
		out := make([]string, len(v))
		for i, e := range v {
			out[i] = redactString(e)
		}
		return out
	case []plexus.Verb:
		// Every invoke row carries one: what the reflection below makes of
		// it, without the reflection (a fifth of Record's Go time).
		if v == nil {
			return nil
		}
		out := make([]any, len(v))
		for i, e := range v {
			out[i] = redactString(string(e))
		}
		return out
	case map[string]string:
		out := make(map[string]string, len(v))
		for k, e := range v {
			if sensitiveKey(k) {
				out[k] = Redacted
			} else {
				out[k] = redactString(e)
			}
		}
		return out
	}
	// Named strings and slices of them (plexus.Via, []plexus.Verb: every
	// invoke row carries one) are stored as plain JSON strings; redact them
	// as strings without the JSON round trip below, producing what it
	// would (a string, or []any of strings).
	if rv := reflect.ValueOf(orig); plainJSONString(rv.Type()) {
		return redactString(rv.String())
	} else if rv.Kind() == reflect.Slice && plainJSONString(rv.Type().Elem()) && !customJSON(rv.Type()) {
		if rv.IsNil() {
			return nil // encodes as null, decodes as nil
		}
		out := make([]any, rv.Len())
		for i := range out {
			out[i] = redactString(rv.Index(i).String())
		}
		return out
	}
	// Structs, pointers, typed slices and maps, json.RawMessage: look at
	// them the way they will be stored.
	b, err := json.Marshal(orig)
	if err != nil {
		return Redacted
	}
	generic, err := decodeJSON(b)
	if err != nil {
		return Redacted
	}
	return redactValue(generic)
}

var (
	jsonMarshaler = reflect.TypeFor[json.Marshaler]()
	textMarshaler = reflect.TypeFor[encoding.TextMarshaler]()
)

// customJSON reports whether t (or *t) encodes itself rather than as its
// kind says.
func customJSON(t reflect.Type) bool {
	pt := reflect.PointerTo(t)
	return t.Implements(jsonMarshaler) || t.Implements(textMarshaler) ||
		pt.Implements(jsonMarshaler) || pt.Implements(textMarshaler)
}

// plainJSONString reports whether encoding/json writes values of t as a
// JSON string holding their text.
func plainJSONString(t reflect.Type) bool {
	return t.Kind() == reflect.String && !customJSON(t)
}

// decodeJSON decodes b keeping numbers exact (json.Number), so redaction
// never rounds an int64 through float64.
func decodeJSON(b []byte) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, err
	}
	return v, nil
}

func redactString(s string) string {
	if strings.Contains(s, "plx_live_") || strings.Contains(s, "plx_agent_") ||
		strings.Contains(s, "plx_enroll_") || containsJWT(s) {
		return Redacted
	}
	return s
}

// containsJWT reports whether s contains header.payload.signature with a
// base64url header starting "eyJ" (the encoding of `{"`). The signature may
// be empty: an alg:none token is still a credential worth hiding.
func containsJWT(s string) bool {
	for {
		i := strings.Index(s, "eyJ")
		if i < 0 {
			return false
		}
		s = s[i:]
		if jwtAt(s) {
			return true
		}
		s = s[3:]
	}
}

func jwtAt(s string) bool {
	n := b64urlRun(s)
	if n < 4 || n >= len(s) || s[n] != '.' {
		return false
	}
	s = s[n+1:]
	n = b64urlRun(s)
	return n >= 2 && n < len(s) && s[n] == '.'
}

func b64urlRun(s string) int {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '-' || c == '_') {
			return i
		}
	}
	return len(s)
}
