package plexus

import "testing"

// TestReachOf: the reach recorded for an entry is found by its id; a
// narration of the entry without a reach, or no narration of it, is nil.
func TestReachOf(t *testing.T) {
	r := &Reach{Transport: TransportCLI, Bin: "git"}
	narration := []PendingNarration{{ID: "a"}, {ID: "b", Reach: r}, {ID: "a", Reach: r}}
	tests := []struct {
		id   string
		want *Reach
	}{
		{id: "b", want: r},
		{id: "a", want: r}, // the first narration of a has no reach; the second has
		{id: "c"},
	}
	for _, tc := range tests {
		if got := ReachOf(narration, tc.id); got != tc.want {
			t.Errorf("ReachOf(%q) = %v; want %v", tc.id, got, tc.want)
		}
	}
	if got := ReachOf([]PendingNarration{{ID: "a"}}, "a"); got != nil {
		t.Errorf("ReachOf of a narration without a reach = %v; want nil", got)
	}
}
