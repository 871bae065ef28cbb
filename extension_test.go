package plexus

import (
	"testing"
	"time"
)

func TestRouteTimeout(t *testing.T) {
	tests := []struct {
		ms   int64
		want time.Duration
		ok   bool
	}{
		{1, time.Millisecond, true},
		{1500, 1500 * time.Millisecond, true},
		{600_000, 10 * time.Minute, true},
		{600_001, 10 * time.Minute, true}, // cut to the ceiling
		{1 << 62, 10 * time.Minute, true}, // no overflow
		{0, 0, false},
		{-5, 0, false},
	}
	for _, tt := range tests {
		got, perr := RouteTimeout(tt.ms, 10*time.Minute)
		switch {
		case tt.ok && (perr != nil || got != tt.want):
			t.Errorf("RouteTimeout(%d) = %v, %v; want %v", tt.ms, got, perr, tt.want)
		case !tt.ok && (perr == nil || perr.Code != CodeTransportError):
			t.Errorf("RouteTimeout(%d) = %v, %v; want a transport_error", tt.ms, got, perr)
		}
	}
}
