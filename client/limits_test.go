package client

import (
	"bytes"
	"strings"
	"testing"

	"github.com/plexus-gw/plexus"
)

func TestWriteStatusLimits(t *testing.T) {
	tests := []struct {
		name   string
		limits *plexus.Limits
		want   []string
		not    []string
	}{
		{"Defaults", &plexus.Limits{Rate: plexus.RateLimit{CallsPerSecond: 50, Burst: 200},
			FailedCredentials: plexus.CredentialThrottle{MaxFailures: 5, WindowMs: 900_000, BackoffMs: 1000, MaxBackoffMs: 60_000}},
			[]string{"50 calls/s, burst 200 per agent", "blocked after 5 failures within 15m0s, back-off 1s doubling to 1m0s"},
			[]string{"WARNING"}},
		{"OverridesAndOff", &plexus.Limits{Rate: plexus.RateLimit{},
			Agents: map[string]plexus.RateLimit{"bench": {}, "slow": {CallsPerSecond: 0.5, Burst: 2}}},
			[]string{"rate limit:", "off per agent", "agent bench:", "agent slow:", "0.5 calls/s, burst 2", "not throttled (off)"}, nil},
		{"NotApplied", &plexus.Limits{Rate: plexus.RateLimit{CallsPerSecond: 1, Burst: 4}, Error: "rateLimit.burst is -1"},
			[]string{"WARNING: the last edit of auth-config.json was not applied: rateLimit.burst is -1", "1 calls/s, burst 4"}, nil},
		{"OldGateway", nil, nil, []string{"rate limit", "WARNING"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var buf bytes.Buffer
			if err := WriteStatus(&buf, plexus.StatusResponse{Limits: tt.limits}); err != nil {
				t.Fatal(err)
			}
			out := buf.String()
			for _, w := range tt.want {
				if !strings.Contains(out, w) {
					t.Errorf("status lacks %q:\n%s", w, out)
				}
			}
			for _, n := range tt.not {
				if strings.Contains(out, n) {
					t.Errorf("status holds %q:\n%s", n, out)
				}
			}
		})
	}
}

// TestWriteStatusRestarts: a source that re-established its session says
// how many times; one that never did says nothing of it.
func TestWriteStatusRestarts(t *testing.T) {
	var buf bytes.Buffer
	st := plexus.StatusResponse{Sources: []plexus.SourceStatus{
		{ID: "mcp:flaky", Entries: 2, Health: plexus.Health{Status: plexus.HealthOK, Restarts: 3}},
		{ID: "portal:notes", Entries: 4, Health: plexus.Health{Status: plexus.HealthOK}},
	}}
	if err := WriteStatus(&buf, st); err != nil {
		t.Fatal(err)
	}
	out := buf.String()
	if !strings.Contains(out, "ok, restarted 3×") || strings.Count(out, "restarted") != 1 {
		t.Errorf("status =\n%s\nwant mcp:flaky alone to say it restarted 3×", out)
	}
}
