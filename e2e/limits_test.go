package e2e

import (
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/plexus-gw/plexus"
	"github.com/plexus-gw/plexus/daemon"
)

// TestLimitsFollowAuthConfig: the owner edits auth-config.json while the
// daemon runs, and the agent's calls stop being 429 when its limit is
// turned off, start being 429 when it is turned on again, and a bad edit
// changes nothing but says why in the status. The failed-credential
// throttle follows the same file. The clock is fake: no bucket refills.
func TestLimitsFollowAuthConfig(t *testing.T) {
	clk := newFakeClock()
	td := startTestDaemon(t, daemon.Options{Clock: clk.Now})
	t.Cleanup(http.DefaultClient.CloseIdleConnections)
	addEcho(t, td, "test", "")
	_, sid := enrolledAgent(t, td, "claude")
	tok := grantOK(t, td, sid, map[string]any{"test.echo.read": "allow"})
	calls := func(n int) (limited int) {
		t.Helper()
		for range n {
			st, resp, raw := td.invoke(t, tok.Token, plexus.InvokeRequest{ID: "test.echo.read", Input: map[string]any{"msg": "x"}})
			switch {
			case st == http.StatusTooManyRequests && resp.Error != nil && resp.Error.Code == plexus.CodeRateLimited:
				limited++
			case st != http.StatusOK || !resp.OK:
				t.Fatalf("invoke: %d %s", st, raw)
			}
		}
		return limited
	}
	status := func() plexus.Limits {
		t.Helper()
		var st plexus.StatusResponse
		if code := td.call(t, "GET", "/admin/api/status", td.admin(), nil, &st); code != http.StatusOK || st.Limits == nil {
			t.Fatalf("status: %d, limits %v", code, st.Limits)
		}
		return *st.Limits
	}
	edit := func(body string, applied func(plexus.Limits) bool) {
		t.Helper()
		if err := os.WriteFile(filepath.Join(td.Home().Dir, "auth-config.json"), []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		waitFor(t, 10*time.Second, "the edit of auth-config.json in the status", holds(func() bool { return applied(status()) }))
	}

	if l := status(); l.Rate != (plexus.RateLimit{CallsPerSecond: 50, Burst: 200}) || l.FailedCredentials.MaxFailures != 5 {
		t.Fatalf("limits at start = %+v, want the defaults", l)
	}
	edit(`{"rateLimit": {"callsPerSecond": 1, "burst": 2}}`, func(l plexus.Limits) bool { return l.Rate.Burst == 2 })
	if got := calls(5); got != 3 {
		t.Fatalf("with 1/s burst 2: %d of 5 calls rate_limited, want 3", got)
	}

	t.Run("TurnedOff", func(t *testing.T) {
		edit(`{"rateLimit": {"callsPerSecond": 1, "burst": 2, "agents": {"claude": {"callsPerSecond": 0}}}}`,
			func(l plexus.Limits) bool { _, ok := l.Agents["claude"]; return ok })
		if got := calls(50); got != 0 {
			t.Errorf("with the agent's limit off: %d of 50 calls rate_limited, want none", got)
		}
	})
	t.Run("BadEditChangesNothing", func(t *testing.T) {
		edit(`{"rateLimit": {"callsPerSecond": 1, "burst": -4}}`, func(l plexus.Limits) bool { return l.Error != "" })
		l := status()
		if !strings.Contains(l.Error, "rateLimit.burst is -4") || !l.Agents["claude"].Off() || l.Rate.Burst != 2 {
			t.Errorf("after a bad edit, limits = %+v; want the old ones and the problem named", l)
		}
		if got := calls(20); got != 0 {
			t.Errorf("after a bad edit: %d of 20 calls rate_limited, want the old limit (off) to stay", got)
		}
	})
	t.Run("TurnedOn", func(t *testing.T) {
		edit(`{"rateLimit": {"callsPerSecond": 1, "burst": 2, "agents": {"claude": {"callsPerSecond": 1, "burst": 1}}}}`,
			func(l plexus.Limits) bool { return l.Error == "" && l.Agents["claude"].Burst == 1 })
		if got := calls(4); got != 3 {
			t.Errorf("with the agent's limit back on (burst 1): %d of 4 calls rate_limited, want 3", got)
		}
	})
	t.Run("ThrottleOff", func(t *testing.T) {
		bad := bearer("plx_pat_" + strings.Repeat("x", 43))
		guess := func() int {
			return td.call(t, "POST", "/link/handshake", bad, plexus.HandshakeRequest{}, nil)
		}
		for range 5 {
			guess()
		}
		if st := guess(); st != http.StatusTooManyRequests {
			t.Fatalf("6th guess of one PAT: status %d, want 429 (throttled)", st)
		}
		edit(`{"failedCredentials": {"maxFailures": 0}}`, func(l plexus.Limits) bool { return l.FailedCredentials.Off() })
		for range 10 {
			if st := guess(); st != http.StatusUnauthorized {
				t.Fatalf("a guess with the throttle off: status %d, want 401", st)
			}
		}
	})
}
