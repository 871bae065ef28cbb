package journal

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/plexus-gw/plexus"
)

func TestInvocation(t *testing.T) {
	td := mustOpen(t)
	rec := func(at time.Time, action, hash string, extra map[string]any) int64 {
		t.Helper()
		p := map[string]any{"jti": "j1"}
		if hash != "" {
			p["idemHash"] = hash
		}
		for k, v := range extra {
			p[k] = v
		}
		a := &plexus.Activity{TS: at, Actor: "agent1", ActionType: action, Target: "cap.write", Payload: p}
		mustUpdate(t, td.DB, func(tx plexus.StateTx) error { return tx.Record(a) })
		return a.ID
	}
	// h-unknown: started, never ended. h-ok / h-failed: ended. h-old: started
	// outside the window. h-again: ran, and ran again after the window.
	unknown := rec(t0, plexus.ActionInvokeStarted, "h-unknown", nil)
	okStart := rec(t0, plexus.ActionInvokeStarted, "h-ok", nil)
	rec(t0, plexus.ActionInvokeStarted, "", nil) // a call without a key
	rec(t0, plexus.ActionInvokeDenied, "h-ok", nil)
	okEnd := rec(t0, plexus.ActionInvokeOK, "h-ok", nil)
	failStart := rec(t0, plexus.ActionInvokeStarted, "h-failed", nil)
	failEnd := rec(t0, plexus.ActionInvokeFailed, "h-failed", map[string]any{"errorCode": "transport_error"})
	rec(t0.Add(-2*time.Hour), plexus.ActionInvokeStarted, "h-old", nil)
	rec(t0.Add(-2*time.Hour), plexus.ActionInvokeStarted, "h-again", nil)
	rec(t0.Add(-2*time.Hour), plexus.ActionInvokeOK, "h-again", nil)
	againStart := rec(t0, plexus.ActionInvokeStarted, "h-again", nil)

	since := t0.Add(-time.Hour)
	tests := []struct {
		hash string
		want *plexus.Invocation
	}{
		{"h-unknown", &plexus.Invocation{StartedID: unknown}},
		{"h-ok", &plexus.Invocation{StartedID: okStart, OutcomeID: okEnd, OK: true}},
		{"h-failed", &plexus.Invocation{StartedID: failStart, OutcomeID: failEnd, ErrorCode: plexus.CodeTransportError}},
		{"h-again", &plexus.Invocation{StartedID: againStart}},
		{"h-old", nil},
		{"h-none", nil},
	}
	for _, tc := range tests {
		t.Run(tc.hash, func(t *testing.T) {
			var got *plexus.Invocation
			var err error
			mustView(t, td.DB, func(tx plexus.StateTx) error {
				got, err = tx.Invocation(tc.hash, since)
				return nil
			})
			if tc.want == nil {
				if !errors.Is(err, plexus.ErrNotFound) {
					t.Fatalf("Invocation(%s) = %+v, %v; want ErrNotFound", tc.hash, got, err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("Invocation(%s) (-want +got):\n%s", tc.hash, diff)
			}
		})
	}

	// The lookup runs before every keyed dispatch: it must not scan.
	t.Run("UsesIdemIndex", func(t *testing.T) {
		rows, err := td.r.Query("EXPLAIN QUERY PLAN "+invocationQuery, "h", fmtTime(since))
		if err != nil {
			t.Fatal(err)
		}
		defer rows.Close()
		var plan strings.Builder
		for rows.Next() {
			var id, parent, unused int
			var detail string
			if err := rows.Scan(&id, &parent, &unused, &detail); err != nil {
				t.Fatal(err)
			}
			plan.WriteString(detail + "\n")
		}
		if !strings.Contains(plan.String(), "activity_idem") {
			t.Errorf("the idempotency lookup does not use activity_idem:\n%s", plan.String())
		}
	})
}
