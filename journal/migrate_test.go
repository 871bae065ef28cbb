package journal

import (
	"context"
	"database/sql"
	"slices"
	"strings"
	"testing"

	"github.com/plexus-gw/plexus"
)

// TestMigrateV6 takes a journal as schema version 5 left it (the activity
// indexes of versions 1 and 5) through the step to version 6: its rows,
// chain and anchor stay valid, and the agent and agent-with-type queries
// are served by the one index that replaced two. (The later steps run too:
// the rewind drops what they add.)
func TestMigrateV6(t *testing.T) {
	ctx := context.Background()
	td := mustOpen(t)
	for i, a := range []struct{ agent, typ string }{
		{"a1", "invoke.ok"}, {"a2", "invoke.ok"}, {"a1", "grant.approved"}, {"a1", "invoke.failed"}, {"a2", "token.minted"},
	} {
		mustUpdate(t, td.DB, func(tx plexus.StateTx) error {
			return tx.Record(&plexus.Activity{Actor: a.agent, AgentID: a.agent, ActionType: a.typ,
				Target: "fs.read", Payload: map[string]any{"n": i}})
		})
	}
	if err := td.Close(); err != nil {
		t.Fatal(err)
	}
	raw := rawDB(t, td.path)
	mustExec(t, raw, `DROP INDEX activity_agent_type;
		CREATE INDEX activity_type ON activity(action_type);
		CREATE INDEX activity_agent ON activity(agent_id);
		CREATE INDEX activity_ts ON activity(ts);
		ALTER TABLE pending DROP COLUMN signin;
		PRAGMA user_version = 5`)
	if err := raw.Close(); err != nil {
		t.Fatal(err)
	}

	db := mustOpenAt(t, td.path, Options{AuditDir: td.audit, AnchorPath: td.anchor, Clock: td.clock.Now})
	var v int
	if err := db.r.QueryRowContext(ctx, "PRAGMA user_version").Scan(&v); err != nil {
		t.Fatal(err)
	}
	if v != len(migrations()) {
		t.Errorf("user_version = %d, want %d", v, len(migrations()))
	}
	if got, want := activityIndexes(t, db.r), []string{"activity_agent_type", "activity_idem", "activity_trace"}; !slices.Equal(got, want) {
		t.Errorf("activity indexes = %v, want %v", got, want)
	}
	rep, err := db.Verify(ctx, VerifyOptions{Key: testKey, AnchorPath: td.anchor, AuditDir: td.audit})
	if err != nil || !rep.OK || rep.Rows != 5 {
		t.Fatalf("Verify after migration = %+v, %v; want 5 rows, ok", rep, err)
	}
	for _, c := range []struct {
		f    Filter
		want int
	}{
		{Filter{AgentID: "a1"}, 3},
		{Filter{AgentID: "a1", Type: "invoke."}, 2},
		{Filter{AgentID: "a2", Type: "token.minted"}, 1},
		{Filter{Type: "invoke."}, 3},
	} {
		rows, err := db.Activity(ctx, c.f)
		if err != nil || len(rows) != c.want {
			t.Errorf("Activity(%+v) = %d rows, %v; want %d", c.f, len(rows), err, c.want)
		}
	}
	var plan strings.Builder
	rows, err := db.r.QueryContext(ctx, `EXPLAIN QUERY PLAN SELECT id FROM activity
		WHERE agent_id = ? AND action_type >= ? AND action_type < ? ORDER BY id DESC LIMIT 1`, "a1", "invoke.", "invoke/")
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	for rows.Next() {
		var id, parent, unused int
		var detail string
		if err := rows.Scan(&id, &parent, &unused, &detail); err != nil {
			t.Fatal(err)
		}
		plan.WriteString(detail + "\n")
	}
	if !strings.Contains(plan.String(), "activity_agent_type") {
		t.Errorf("an agent's newest call is not looked up by activity_agent_type:\n%s", plan.String())
	}
}

// activityIndexes lists the activity table's indexes by name.
func activityIndexes(t *testing.T, q *sql.DB) []string {
	t.Helper()
	rows, err := q.Query(`SELECT name FROM sqlite_master WHERE type = 'index' AND tbl_name = 'activity' AND sql IS NOT NULL ORDER BY name`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var names []string
	for rows.Next() {
		var n string
		if err := rows.Scan(&n); err != nil {
			t.Fatal(err)
		}
		names = append(names, n)
	}
	return names
}
