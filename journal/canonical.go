package journal

import (
	"slices"
	"strconv"
	"unicode/utf8"
)

// Hand-written appenders for the audit write path. Record runs once per
// /invoke inside the single writer's critical section, where encoding the
// same values with encoding/json's reflection three times over (payload,
// canonical row, mirror line) was a large share of the time. These produce
// exactly what [encodeCanonical] produces (compact, no HTML escaping, map
// keys sorted); anything outside their fast cases is handed to
// encodeCanonical itself, so the bytes never depend on which path ran.
// TestCanonicalMatchesEncodingJSON holds them equal.

// appendJSONString appends s as a JSON string. Printable ASCII other than
// '"' and '\\' is copied as is (what encoding/json does with HTML escaping
// off); any other byte sends the whole string through encoding/json, which
// knows its escapes (\u00XX, \ufffd for bad UTF-8, \u2028, …).
func appendJSONString(dst []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c == '"' || c == '\\' || c >= utf8.RuneSelf {
			b, err := encodeCanonical(s)
			if err != nil { // cannot happen for a string
				panic(err)
			}
			return append(dst, b...)
		}
	}
	dst = append(dst, '"')
	dst = append(dst, s...)
	return append(dst, '"')
}

// appendPayloadJSON appends the canonical JSON of a redacted payload value.
func appendPayloadJSON(dst []byte, v any) ([]byte, error) {
	switch v := v.(type) {
	case nil:
		return append(dst, "null"...), nil
	case bool:
		return strconv.AppendBool(dst, v), nil
	case string:
		return appendJSONString(dst, v), nil
	case int:
		return strconv.AppendInt(dst, int64(v), 10), nil
	case int64:
		return strconv.AppendInt(dst, v, 10), nil
	case int32:
		return strconv.AppendInt(dst, int64(v), 10), nil
	case uint64:
		return strconv.AppendUint(dst, v, 10), nil
	case map[string]any:
		if v == nil {
			return append(dst, "null"...), nil
		}
		return appendPayloadObject(dst, v)
	case []any:
		if v == nil {
			return append(dst, "null"...), nil
		}
		return appendPayloadArray(dst, v)
	case []string:
		if v == nil {
			return append(dst, "null"...), nil
		}
		dst = append(dst, '[')
		for i, e := range v {
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = appendJSONString(dst, e)
		}
		return append(dst, ']'), nil
	}
	// Floats (encoding/json's formatting rules), json.Number (validated),
	// map[string]string and anything rarer: encoding/json's own bytes.
	b, err := encodeCanonical(v)
	if err != nil {
		return nil, err
	}
	return append(dst, b...), nil
}

// appendPayloadObject appends the canonical JSON of a payload object, its
// keys in encoding/json's order (byte-wise).
func appendPayloadObject(dst []byte, v map[string]any) ([]byte, error) {
	keys := make([]string, 0, len(v))
	for k := range v {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	dst = append(dst, '{')
	for i, k := range keys {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = appendJSONString(dst, k)
		dst = append(dst, ':')
		var err error
		if dst, err = appendPayloadJSON(dst, v[k]); err != nil {
			return nil, err
		}
	}
	return append(dst, '}'), nil
}

// appendPayloadArray appends the canonical JSON of a payload array.
func appendPayloadArray(dst []byte, v []any) ([]byte, error) {
	dst = append(dst, '[')
	for i, e := range v {
		if i > 0 {
			dst = append(dst, ',')
		}
		var err error
		if dst, err = appendPayloadJSON(dst, e); err != nil {
			return nil, err
		}
	}
	return append(dst, ']'), nil
}

// appendCanonicalRow appends the hashed content of r (docs/journal.md):
// {"ts":…,"trace_id":…,"actor":…,"agent_id":…,"action_type":…,"target":…,"payload":…}
// with payload the stored column text verbatim. It equals
// encodeCanonical(canonicalRow{…}) for a compact payload, which the payload
// column always is when Record wrote it.
func appendCanonicalRow(dst []byte, r *mirrorRow) []byte {
	dst = appendCanonicalHead(dst, r)
	dst = append(dst, r.Payload...)
	return append(dst, '}')
}

// appendCanonicalHead appends the canonical row of r up to its payload
// (`{"ts":…,"target":…,"payload":`): Record encodes the payload in place
// after it, so the column text and the hashed row share one buffer.
func appendCanonicalHead(dst []byte, r *mirrorRow) []byte {
	dst = append(dst, `{"ts":`...)
	dst = appendJSONString(dst, r.TS)
	dst = append(dst, `,"trace_id":`...)
	dst = appendJSONString(dst, r.TraceID)
	dst = append(dst, `,"actor":`...)
	dst = appendJSONString(dst, r.Actor)
	dst = append(dst, `,"agent_id":`...)
	dst = appendJSONString(dst, r.AgentID)
	dst = append(dst, `,"action_type":`...)
	dst = appendJSONString(dst, r.ActionType)
	dst = append(dst, `,"target":`...)
	dst = appendJSONString(dst, r.Target)
	return append(dst, `,"payload":`...)
}

// appendMirrorLine appends r as one audit mirror line (without the newline):
// encodeCanonical(r), built from the canonical row Record already encoded,
// which holds the same fields in the same order between "id" and
// "prev_hash".
func appendMirrorLine(dst []byte, r *mirrorRow) ([]byte, error) {
	canon := r.canonical
	if len(canon) < 2 {
		b, err := encodeCanonical(r)
		if err != nil {
			return nil, err
		}
		return append(dst, b...), nil
	}
	dst = append(dst, `{"id":`...)
	dst = strconv.AppendInt(dst, r.ID, 10)
	dst = append(dst, ',')
	dst = append(dst, canon[1:len(canon)-1]...)
	dst = append(dst, `,"prev_hash":`...)
	dst = appendJSONString(dst, r.PrevHash)
	dst = append(dst, `,"hash":`...)
	dst = appendJSONString(dst, r.Hash)
	return append(dst, '}'), nil
}
