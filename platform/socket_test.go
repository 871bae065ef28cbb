package platform

import (
	"net/netip"
	"testing"
)

func TestParseProcAddr(t *testing.T) {
	tests := []struct {
		in   string
		want string
	}{
		{"0100007F:1F90", "127.0.0.1:8080"},
		{"00000000000000000000000001000000:0050", "[::1]:80"},
		{"0000000000000000FFFF00000100007F:1F90", "[::ffff:127.0.0.1]:8080"},
	}
	for _, tt := range tests {
		got, err := ParseProcAddr(tt.in)
		if err != nil || got != netip.MustParseAddrPort(tt.want) {
			t.Errorf("ParseProcAddr(%q) = %v, %v; want %s", tt.in, got, err, tt.want)
		}
	}
	for _, bad := range []string{"", "0100007F", "zz:1F90", "0100007F:zz", "01007F:0050"} {
		if _, err := ParseProcAddr(bad); err == nil {
			t.Errorf("ParseProcAddr(%q) accepted", bad)
		}
	}
}
