package platform

import "testing"

func TestParseStat(t *testing.T) {
	// Fields 3 to 22 after the command: state, ppid, pgrp, session, then 15
	// fields, then the start time.
	tail := " S 1 4242 4200 0 -1 0 0 0 0 0 0 0 0 0 20 0 1 0 987654 0 0"
	for _, tt := range []struct {
		name, line string
		want       procInfo
		ok         bool
	}{
		{"Plain", "4242 (sleep)" + tail, procInfo{pgid: 4242, sid: 4200, start: 987654}, true},
		{"CommandWithSpacesAndParens", "4242 (a) (b c)" + tail, procInfo{pgid: 4242, sid: 4200, start: 987654}, true},
		{"Zombie", "4242 (sleep) Z 1 4242 4200 0 -1 0 0 0 0 0 0 0 0 0 20 0 1 0 987654 0 0", procInfo{pgid: 4242, sid: 4200, start: 987654, zombie: true}, true},
		{"ErrNoParen", "4242 sleep" + tail, procInfo{}, false},
		{"ErrShort", "4242 (sleep) S 1 4242", procInfo{}, false},
		{"ErrNotANumber", "4242 (sleep) S 1 x 4200 0 -1 0 0 0 0 0 0 0 0 0 20 0 1 0 987654", procInfo{}, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got, err := parseStat([]byte(tt.line))
			if (err == nil) != tt.ok || got != tt.want {
				t.Errorf("parseStat(%q) = %+v, %v; want %+v, ok %v", tt.line, got, err, tt.want, tt.ok)
			}
		})
	}
}
