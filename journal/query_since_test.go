package journal

import (
	"testing"
	"time"
)

// TestParseSince checks the forms a person gives --since in.
func TestParseSince(t *testing.T) {
	now := time.Date(2026, 6, 23, 10, 0, 0, 0, time.UTC)
	for _, tt := range []struct {
		in   string
		want time.Time
		ok   bool
	}{
		{"90m", now.Add(-90 * time.Minute), true},
		{"3d", now.Add(-72 * time.Hour), true},
		{"0d", now, true},
		{"2026-06-01T00:00:00Z", time.Date(2026, 6, 1, 0, 0, 0, 0, time.UTC), true},
		{"-1h", time.Time{}, false},
		{"-2d", time.Time{}, false},
		{"yesterday", time.Time{}, false},
	} {
		got, err := ParseSince(tt.in, now)
		if (err == nil) != tt.ok || !got.Equal(tt.want) {
			t.Errorf("ParseSince(%q) = %v, %v; want %v (ok %v)", tt.in, got, err, tt.want, tt.ok)
		}
	}
}
