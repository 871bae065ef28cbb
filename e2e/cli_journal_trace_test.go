package e2e

import (
	"strings"
	"testing"
)

// TestCLIJournalTrace: --trace takes a unique prefix, says when nothing
// matched and lists the traces an ambiguous prefix fits.
func TestCLIJournalTrace(t *testing.T) {
	e, _ := newCLIEnv(t)
	e.ok("agents", "connect", "one")
	e.ok("agents", "connect", "two")
	var traces []string
	for _, a := range e.journalLines("--type", "agent.connected") {
		traces = append(traces, a.TraceID)
	}
	if len(traces) != 2 || traces[0] == traces[1] {
		t.Fatalf("agent.connected traces = %q, want two different ones", traces)
	}
	common := 0
	for common < len(traces[0]) && traces[0][common] == traces[1][common] {
		common++
	}

	t.Run("OK", func(t *testing.T) {
		e := e.with(t)
		r := e.ok("journal", "--trace", traces[1][:common+1])
		lines := strings.Split(strings.TrimSpace(r.stdout), "\n")
		if len(lines) != 2 || !strings.Contains(lines[0], "TRACE ID") || !strings.Contains(lines[1], traces[1]) ||
			strings.Contains(r.stdout, traces[0]) {
			t.Errorf("the header and trace %s's one row, got:\n%s", traces[1], r)
		}
	})
	t.Run("ErrNoMatch", func(t *testing.T) {
		r := e.with(t).run("journal", "--trace", "ZZZZ")
		if r.code != exitError || !strings.Contains(r.stderr, `no journal row has a trace id starting with "ZZZZ"`) || r.stdout != "" {
			t.Errorf("%s", r)
		}
	})
	t.Run("ErrAmbiguous", func(t *testing.T) {
		r := e.with(t).run("journal", "--trace", traces[0][:common])
		if r.code != exitUsage || !strings.Contains(r.stderr, "is ambiguous") ||
			!strings.Contains(r.stderr, traces[0]) || !strings.Contains(r.stderr, traces[1]) {
			t.Errorf("%s", r)
		}
	})
}
