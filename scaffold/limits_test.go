package scaffold_test

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/plexus-gw/plexus"
	"github.com/plexus-gw/plexus/scaffold"
)

func TestAuthConfigLimits(t *testing.T) {
	home := mustInit(t)
	tests := []struct {
		name string
		body string
		want plexus.Limits
	}{
		{"Defaults", `{}`, plexus.Limits{Rate: plexus.RateLimit{CallsPerSecond: 50},
			FailedCredentials: plexus.CredentialThrottle{MaxFailures: 5}}},
		{"Off", `{"rateLimit": {"callsPerSecond": 0}, "failedCredentials": {"maxFailures": 0}}`, plexus.Limits{}},
		{"Overrides", `{"rateLimit": {"callsPerSecond": 10, "burst": 20, "agents": {
				"bench": {"callsPerSecond": 0}, "fast": {"callsPerSecond": 500}, "bursty": {"burst": 90}, "same": {}}}}`,
			plexus.Limits{Rate: plexus.RateLimit{CallsPerSecond: 10, Burst: 20},
				Agents: map[string]plexus.RateLimit{"bench": {}, "fast": {CallsPerSecond: 500},
					"bursty": {CallsPerSecond: 10, Burst: 90}, "same": {CallsPerSecond: 10, Burst: 20}},
				FailedCredentials: plexus.CredentialThrottle{MaxFailures: 5}}},
		{"Throttle", `{"failedCredentials": {"maxFailures": 3, "windowMs": 1000, "backoffMs": 10, "maxBackoffMs": 20}}`,
			plexus.Limits{Rate: plexus.RateLimit{CallsPerSecond: 50},
				FailedCredentials: plexus.CredentialThrottle{MaxFailures: 3, WindowMs: 1000, BackoffMs: 10, MaxBackoffMs: 20}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			writeAuthConfig(t, home, tt.body)
			a, err := scaffold.ReadAuthConfig(home)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, a.Limits()); diff != "" {
				t.Errorf("Limits() (-want +got):\n%s", diff)
			}
		})
	}
}

func TestAuthConfigLimitsInvalid(t *testing.T) {
	home := mustInit(t)
	tests := []struct{ body, want string }{
		{`{"rateLimit": {"callsPerSecond": -1}}`, "rateLimit.callsPerSecond is -1"},
		{`{"rateLimit": {"burst": -3}}`, "rateLimit.burst is -3"},
		{`{"rateLimit": {"agents": {"bench": {"callsPerSecond": -2}}}}`, `rateLimit.agents."bench".callsPerSecond is -2`},
		{`{"rateLimit": {"agents": {"bench": {"burst": -2}}}}`, `rateLimit.agents."bench".burst is -2`},
		{`{"rateLimit": {"callsPerSecond": "fast"}}`, "cannot unmarshal string"},
		{`{"rateLimit": {"perSecond": 5}}`, "unknown field"},
		{`{"failedCredentials": {"maxFailures": -1}}`, "failedCredentials.maxFailures is -1"},
		{`{"failedCredentials": {"windowMs": -1}}`, "failedCredentials.windowMs is -1"},
		{`{"failedCredentials": {"backoffMs": 5000, "maxBackoffMs": 10}}`, "failedCredentials.maxBackoffMs is 10"},
		// Above 30 days the milliseconds overflowed and turned the throttle off.
		{`{"failedCredentials": {"maxFailures": 3, "maxBackoffMs": 9223372036854775807}}`, "failedCredentials.maxBackoffMs is 9223372036854775807"},
		{`{"failedCredentials": {"windowMs": 2592000001}}`, "failedCredentials.windowMs is 2592000001"},
		{`{"failedCredentials": {"backoffMs": 10000000000000}}`, "up to 2592000000 (30 days)"},
	}
	for _, tt := range tests {
		t.Run(tt.want, func(t *testing.T) {
			writeAuthConfig(t, home, tt.body)
			_, err := scaffold.ReadAuthConfig(home)
			var le *scaffold.LayoutError
			if !errors.As(err, &le) || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("ReadAuthConfig = %v, want a *LayoutError saying %q", err, tt.want)
			}
			if _, err := scaffold.Load(home); err == nil {
				t.Error("Load accepted it")
			}
		})
	}
}

func writeAuthConfig(t *testing.T, home, body string) {
	t.Helper()
	if err := os.WriteFile(filepath.Join(home, "auth-config.json"), []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
}
