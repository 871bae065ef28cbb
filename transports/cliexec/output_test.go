package cliexec

import (
	"bytes"
	"strings"
	"testing"
	"unicode/utf8"
)

func TestExcerpt(t *testing.T) {
	const secret = "hunter2-secret"
	for _, tc := range []struct {
		name, stderr string
		truncated    bool
		want         string
	}{
		{"Empty", "", false, ""},
		{"Trimmed", "  boom\n\n", false, "boom"},
		{"Secret", "auth hunter2-secret failed; again hunter2-secret\n", false, "auth [redacted] failed; again [redacted]"},
		{"Credentials", "pat=plx_agent_Ab-9_z, key=plx_live_Q, code plx_enroll_", false, "pat=[redacted], key=[redacted], code [redacted]"},
		{"InvalidUTF8", "bad \xff byte", false, "bad \uFFFD byte"},
		{"TailMarked", "end", true, "…end"},
		{"Long", strings.Repeat("é", 1000) + "hunter2-secret!", false, "…" + strings.Repeat("é", 506) + "[redacted]!"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := excerpt([]byte(tc.stderr), tc.truncated, secret)
			if got != tc.want {
				t.Errorf("excerpt = %q, want %q", got, tc.want)
			}
			if !utf8.ValidString(got) {
				t.Errorf("excerpt is not valid UTF-8: %q", got)
			}
		})
	}
}

func TestTailBuffer(t *testing.T) {
	var all bytes.Buffer
	b := &tailBuffer{max: 10}
	for _, p := range []string{"abc", "defgh", "ijklmnopqrstu", "v", "wx", "yz0123", "4"} {
		b.Write([]byte(p))
		all.WriteString(p)
		want := all.Bytes()
		if len(want) > 10 {
			want = want[len(want)-10:]
		}
		if !bytes.Equal(b.bytes(), want) {
			t.Fatalf("after %q: tail %q, want %q", p, b.bytes(), want)
		}
		if b.truncated() != (all.Len() > 10) {
			t.Fatalf("after %q: truncated %v", p, b.truncated())
		}
	}
}
