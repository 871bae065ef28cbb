package client

import (
	"fmt"
	"io"
	"maps"
	"slices"
	"time"

	"github.com/plexus-gw/plexus"
)

// writeLimits adds the limits in force to the status table: the default
// rate, each agent's override, and the failed-credential throttle.
func writeLimits(t io.Writer, l plexus.Limits) {
	fmt.Fprintf(t, "rate limit:\t%s per agent\n", rateString(l.Rate))
	for _, id := range slices.Sorted(maps.Keys(l.Agents)) {
		fmt.Fprintf(t, "  agent %s:\t%s\n", id, rateString(l.Agents[id]))
	}
	c := l.FailedCredentials
	if c.Off() {
		fmt.Fprintf(t, "failed credentials:\tnot throttled (off)\n")
		return
	}
	ms := func(n int64) time.Duration { return time.Duration(n) * time.Millisecond }
	fmt.Fprintf(t, "failed credentials:\tblocked after %d failures within %s, back-off %s doubling to %s\n",
		c.MaxFailures, ms(c.WindowMs), ms(c.BackoffMs), ms(c.MaxBackoffMs))
}

func rateString(r plexus.RateLimit) string {
	if r.Off() {
		return "off"
	}
	return fmt.Sprintf("%g calls/s, burst %d", r.CallsPerSecond, r.Burst)
}

// writeLimitsError warns that the owner's last edit of the limits was not
// applied.
func writeLimitsError(w io.Writer, l *plexus.Limits) {
	if l == nil || l.Error == "" {
		return
	}
	fmt.Fprintf(w, "\nWARNING: the last edit of auth-config.json was not applied: %s\n", l.Error)
	fmt.Fprintln(w, "The limits above are the ones read before it. Fix the file; it is read again when saved.")
}
