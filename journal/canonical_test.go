package journal

import (
	"bytes"
	"encoding/json"
	"math"
	"testing"
	"time"
)

// TestCanonicalMatchesEncodingJSON holds the hand-written appenders of the
// audit write path byte-identical to encodeCanonical (encoding/json, HTML
// escaping off), which is what the documented hash and the mirror lines
// are defined by.
func TestCanonicalMatchesEncodingJSON(t *testing.T) {
	strs := []string{
		"", "plain", "<ok> & fine", `quote " and \ backslash`, "tab\tnew\nline\rcr",
		"\x00\x01\x1f\x7f", "\b\f", "héllo wörld", "日本語", "emoji 🙂", "bad \xff utf8", "\xc3",
		"line\u2028sep\u2029", "</script>", "a\u00a0b",
	}
	t.Run("Strings", func(t *testing.T) {
		for _, s := range strs {
			want, err := encodeCanonical(s)
			if err != nil {
				t.Fatal(err)
			}
			if got := appendJSONString(nil, s); !bytes.Equal(got, want) {
				t.Errorf("appendJSONString(%q) = %s, want %s", s, got, want)
			}
		}
	})

	t.Run("Payloads", func(t *testing.T) {
		payloads := []map[string]any{
			{},
			{"jti": "tok_1", "sessionId": "ses_1", "verbs": []any{"read"}, "durationMs": int64(3), "inputHash": "abcd"},
			{"n": 1, "i32": int32(-7), "u64": uint64(math.MaxUint64), "i64": int64(math.MinInt64), "ok": true, "no": false, "nil": nil},
			{"f": 1.5, "f0": 0.0, "fbig": 1e21, "fsmall": 1e-7, "f32": float32(0.1), "num": json.Number("12345678901234567890")},
			{"nested": map[string]any{"z": 1, "a": []any{"x", map[string]any{"b": nil}}, "A": "upper", "é": "accent", "_": "u"}},
			{"strs": []string{"a", "<b>", "c\"d"}, "nilstrs": []string(nil), "empty": []any{}, "nilany": []any(nil),
				"nilmap": map[string]any(nil), "smap": map[string]string{"b": "2", "a": "1"}},
			{"u8": uint8(3), "i8": int8(-3), "u": uint(7), "ts": time.Date(2026, 1, 2, 3, 4, 5, 6, time.UTC)},
		}
		for _, s := range strs {
			payloads = append(payloads, map[string]any{s: s, "k" + s: []any{s}})
		}
		for _, p := range payloads {
			want, err := encodeCanonical(p)
			if err != nil {
				t.Fatal(err)
			}
			got, err := appendPayloadJSON(nil, p)
			if err != nil {
				t.Fatalf("appendPayloadJSON(%v): %v", p, err)
			}
			if !bytes.Equal(got, want) {
				t.Errorf("appendPayloadJSON = %s\nwant                %s", got, want)
			}
		}
		if _, err := appendPayloadJSON(nil, map[string]any{"nan": math.NaN()}); err == nil {
			t.Error("appendPayloadJSON(NaN): no error, want encoding/json's")
		}
	})

	t.Run("RowsAndMirrorLines", func(t *testing.T) {
		for _, s := range strs {
			r := mirrorRow{ID: 42, TS: "2026-11-22T03:19:10.123456789Z", TraceID: s, Actor: "agent" + s,
				AgentID: s, ActionType: "invoke.ok", Target: s, Payload: json.RawMessage(`{"k":"<v>"}`), PrevHash: s, Hash: "ff" + s}
			want, err := encodeCanonical(canonicalRow{TS: r.TS, TraceID: r.TraceID, Actor: r.Actor, AgentID: r.AgentID,
				ActionType: r.ActionType, Target: r.Target, Payload: r.Payload})
			if err != nil {
				t.Fatal(err)
			}
			r.canonical = appendCanonicalRow(nil, &r)
			if !bytes.Equal(r.canonical, want) {
				t.Errorf("appendCanonicalRow = %s\nwant                %s", r.canonical, want)
			}
			wantLine, err := encodeCanonical(r)
			if err != nil {
				t.Fatal(err)
			}
			line, err := appendMirrorLine(nil, &r)
			if err != nil || !bytes.Equal(line, wantLine) {
				t.Errorf("appendMirrorLine = %s, %v\nwant              %s", line, err, wantLine)
			}
			if c, err := canonicalOf(&r); err != nil || !bytes.Equal(c, r.canonical) {
				t.Errorf("canonicalOf = %s, %v; Record's %s", c, err, r.canonical)
			}
		}
	})
}
