// Package jsonenc appends the JSON of the values encoding/json decodes into
// an any (map[string]any, []any, string, float64, bool, nil) byte for byte
// as encoding/json writes them, without reflection: a call's input (hashed
// for its audit row) and its echoed output are such trees, and encoding them
// through encoding/json's map encoder costs an allocation per key and value.
//
// It must never write anything encoding/json would not: every type it does
// not know, a non-finite number and a nesting deeper than encoding/json's
// cycle check starts are refused (ok false), and the caller falls back to
// encoding/json. The tests compare the two over tables and a fuzz corpus.
package jsonenc

import (
	"math"
	"slices"
	"strconv"
	"unicode/utf8"
)

// maxDepth is where encoding/json starts looking for cycles (its
// startDetectingCyclesAfter); deeper values are left to it, so a cyclic map
// from a transport is its error, not a stack overflow here.
const maxDepth = 1000

// Append appends the JSON of v to dst as encoding/json (json.Marshal when
// escapeHTML, an Encoder with SetEscapeHTML(false) otherwise) would, without
// the Encoder's trailing newline. It reports false, with dst as it was, when
// v holds anything but the types encoding/json decodes into an any.
func Append(dst []byte, v any, escapeHTML bool) ([]byte, bool) {
	out, ok := appendValue(dst, v, escapeHTML, 0)
	if !ok {
		return dst, false
	}
	return out, true
}

func appendValue(dst []byte, v any, escapeHTML bool, depth int) ([]byte, bool) {
	switch v := v.(type) {
	case nil:
		return append(dst, "null"...), true
	case string:
		return AppendString(dst, v, escapeHTML), true
	case bool:
		return strconv.AppendBool(dst, v), true
	case float64:
		return appendFloat(dst, v)
	case map[string]any:
		return appendObject(dst, v, escapeHTML, depth+1)
	case []any:
		return appendArray(dst, v, escapeHTML, depth+1)
	}
	return dst, false
}

func appendObject(dst []byte, m map[string]any, escapeHTML bool, depth int) ([]byte, bool) {
	if m == nil {
		return append(dst, "null"...), true
	}
	if depth > maxDepth {
		return dst, false
	}
	var small [16]string // keys of a usual input stay on the stack
	keys := small[:0]
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys) // encoding/json sorts by strings.Compare too
	dst = append(dst, '{')
	for i, k := range keys {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = AppendString(dst, k, escapeHTML)
		dst = append(dst, ':')
		var ok bool
		if dst, ok = appendValue(dst, m[k], escapeHTML, depth); !ok {
			return dst, false
		}
	}
	return append(dst, '}'), true
}

func appendArray(dst []byte, a []any, escapeHTML bool, depth int) ([]byte, bool) {
	if a == nil {
		return append(dst, "null"...), true
	}
	if depth > maxDepth {
		return dst, false
	}
	dst = append(dst, '[')
	for i, e := range a {
		if i > 0 {
			dst = append(dst, ',')
		}
		var ok bool
		if dst, ok = appendValue(dst, e, escapeHTML, depth); !ok {
			return dst, false
		}
	}
	return append(dst, ']'), true
}

// appendFloat writes f as encoding/json's float64 encoder does: ES6 number
// formatting, exponents unpadded. Infinities and NaN are its error.
func appendFloat(dst []byte, f float64) ([]byte, bool) {
	if math.IsInf(f, 0) || math.IsNaN(f) {
		return dst, false
	}
	format := byte('f')
	if abs := math.Abs(f); abs != 0 && (abs < 1e-6 || abs >= 1e21) {
		format = 'e'
	}
	dst = strconv.AppendFloat(dst, f, format, -1, 64)
	if format == 'e' {
		if n := len(dst); n >= 4 && dst[n-4] == 'e' && dst[n-3] == '-' && dst[n-2] == '0' {
			dst[n-2] = dst[n-1] // e-09 → e-9
			dst = dst[:n-1]
		}
	}
	return dst, true
}

const hexDigits = "0123456789abcdef"

// AppendString appends s as a JSON string the way encoding/json does:
// control characters, '"' and '\\' escaped, '<', '>' and '&' too when
// escapeHTML, invalid UTF-8 as U+FFFD and U+2028, U+2029 always escaped.
func AppendString(dst []byte, s string, escapeHTML bool) []byte {
	dst = append(dst, '"')
	start := 0
	for i := 0; i < len(s); {
		b := s[i]
		if b < utf8.RuneSelf {
			if b >= 0x20 && b != '"' && b != '\\' && (!escapeHTML || b != '<' && b != '>' && b != '&') {
				i++
				continue
			}
			dst = append(dst, s[start:i]...)
			switch b {
			case '\\', '"':
				dst = append(dst, '\\', b)
			case '\b':
				dst = append(dst, '\\', 'b')
			case '\f':
				dst = append(dst, '\\', 'f')
			case '\n':
				dst = append(dst, '\\', 'n')
			case '\r':
				dst = append(dst, '\\', 'r')
			case '\t':
				dst = append(dst, '\\', 't')
			default:
				dst = append(dst, '\\', 'u', '0', '0', hexDigits[b>>4], hexDigits[b&0xF])
			}
			i++
			start = i
			continue
		}
		c, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case c == utf8.RuneError && size == 1:
			dst = append(dst, s[start:i]...)
			dst = append(dst, `\ufffd`...)
		case c == '\u2028' || c == '\u2029':
			dst = append(dst, s[start:i]...)
			dst = append(dst, '\\', 'u', '2', '0', '2', hexDigits[c&0xF])
		default:
			i += size
			continue
		}
		i += size
		start = i
	}
	dst = append(dst, s[start:]...)
	return append(dst, '"')
}
