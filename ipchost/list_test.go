package ipchost

import (
	"slices"
	"testing"

	"github.com/plexus-gw/plexus"
)

// TestRows checks the rows' order (the file's providers sorted, then the
// running ones gone from it) and the state of one the daemon does not run.
func TestRows(t *testing.T) {
	configs := map[string]plexus.ProviderConfig{
		"b": {Command: "b-prov", Env: map[string]string{"Z": "1", "A": "2"}},
		"a": {Command: "a-prov"},
	}
	live := map[string]plexus.ProviderStatus{
		"a":    {ID: "a", State: "running"},
		"gone": {ID: "gone", State: "running"},
	}
	tests := []struct {
		name      string
		live      map[string]plexus.ProviderStatus
		running   bool
		wantIDs   []string
		wantState map[string]string
	}{
		{name: "no daemon", wantIDs: []string{"a", "b"},
			wantState: map[string]string{"a": "not running", "b": "not running"}},
		{name: "daemon", live: live, running: true, wantIDs: []string{"a", "b", "gone"},
			wantState: map[string]string{"a": "running", "b": "not loaded", "gone": "running"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rows := Rows(configs, tt.live, tt.running)
			var ids []string
			for _, r := range rows {
				ids = append(ids, r.ID)
				if r.State != tt.wantState[r.ID] {
					t.Errorf("%s: state %q, want %q", r.ID, r.State, tt.wantState[r.ID])
				}
				if _, ok := tt.live[r.ID]; r.Running != ok {
					t.Errorf("%s: running %v, want %v", r.ID, r.Running, ok)
				}
				if r.ID == "b" && !slices.Equal(r.EnvNames, []string{"A", "Z"}) {
					t.Errorf("b: env names %v, want [A Z]", r.EnvNames)
				}
			}
			if !slices.Equal(ids, tt.wantIDs) {
				t.Errorf("ids %v, want %v", ids, tt.wantIDs)
			}
		})
	}
}
