package gateway

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/plexus-gw/plexus"
	"github.com/plexus-gw/plexus/internal/plexustest"
	"github.com/plexus-gw/plexus/journal"
)

// TestCallAbandoned: the row of a call that never ran is the session's
// agent's invoke.failed, in the trace of the decision it waited on when
// that decision is its session's; a session the journal does not hold
// writes nothing.
func TestCallAbandoned(t *testing.T) {
	clk := plexustest.NewClock(time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC))
	home := plexustest.TempHome(t)
	db := plexustest.MustOpenHomeJournal(t, home, clk.Now)
	g := mustGateway(t, home, db, clk.Now, nil)
	now := clk.Now()
	mustUpdate(t, db, func(tx plexus.StateTx) error {
		if err := tx.PutAgent(&plexus.Agent{ID: "claude", CreatedAt: now}); err != nil {
			return err
		}
		for _, id := range []string{"sess_a", "sess_b"} {
			if err := tx.PutSession(&plexus.Session{ID: id, AgentID: "claude", Kind: plexus.SessionAgent, CreatedAt: now, ExpiresAt: now.Add(time.Hour)}); err != nil {
				return err
			}
		}
		return tx.PutPending(&plexus.Pending{ID: "pend_1", Kind: "grant", AgentID: "claude", SessionID: "sess_a", State: plexus.StatePending,
			CreatedAt: now, ExpiresAt: now.Add(time.Hour), TraceID: "trace_1"})
	})
	call := AbandonedCall{ID: "portal.docs.write", Verbs: []plexus.Verb{plexus.VerbWrite}, PendingID: "pend_1",
		Waited: 1500 * time.Millisecond, Reason: "the caller went"}
	if err := g.CallAbandoned(t.Context(), Credentials{SessionID: "sess_gone"}, call); err == nil {
		t.Error("a session the journal does not hold: no error")
	}
	for _, tc := range []struct{ session, trace string }{{"sess_a", "trace_1"}, {"sess_b", ""}} {
		if err := g.CallAbandoned(t.Context(), Credentials{SessionID: tc.session}, call); err != nil {
			t.Fatal(err)
		}
		rows, err := db.Activity(context.Background(), journal.Filter{Type: plexus.ActionInvokeFailed})
		if err != nil {
			t.Fatal(err)
		}
		r := rows[len(rows)-1]
		p := r.Payload
		if r.Actor != "claude" || r.AgentID != "claude" || r.Target != call.ID || r.TraceID != tc.trace ||
			p["sessionId"] != tc.session || p["pendingId"] != "pend_1" || p["errorCode"] != "transport_error" ||
			p["reason"] != call.Reason || fmt.Sprint(p["durationMs"]) != "1500" {
			t.Errorf("%s: row = %+v", tc.session, r)
		}
	}
	if rows, err := db.Activity(context.Background(), journal.Filter{Type: "invoke."}); err != nil || len(rows) != 2 {
		t.Errorf("invoke rows = %d, %v; want the two sessions' only", len(rows), err)
	}
}
