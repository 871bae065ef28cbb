package journal

import (
	"context"
	"database/sql"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/plexus-gw/plexus"
)

// TestMigrateV6 takes a journal as schema version 5 left it (the activity
// indexes of versions 1 and 5) through the step to version 6: its rows,
// chain and anchor stay valid, and the agent and agent-with-type queries
// return their rows. (The later steps run too: the rewind drops what they
// add, and version 9 replaces version 6's index; TestMigrateV9 checks the
// plans.)
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
	// activity_agent, over agent_id, is both version 1's index and version 9's.
	mustExec(t, raw, `CREATE INDEX activity_type ON activity(action_type);
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
	if got, want := activityIndexes(t, db.r), []string{"activity_agent", "activity_idem", "activity_trace"}; !slices.Equal(got, want) {
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
}

// TestMigrateV9 takes a journal as schema version 8 left it (the agent index
// over agent_id and action_type) through the step to version 9: its rows,
// chain and anchor stay valid, the agent index is over agent_id alone, and
// each agent query the journal makes reads its rows in id order from it,
// without sorting them, while a trace is still read from the trace index.
func TestMigrateV9(t *testing.T) {
	ctx := context.Background()
	td := mustOpen(t)
	for i, a := range []struct{ agent, typ, trace string }{
		{"a1", "invoke.ok", "t1"}, {"a2", "invoke.ok", "t2"}, {"a1", "grant.approved", "t3"},
		{"a1", "invoke.failed", "t3"}, {"a2", "token.minted", "t4"}, {"", "manifest.changed", ""},
	} {
		td.clock.Set(t0.Add(time.Duration(i) * time.Minute))
		mustUpdate(t, td.DB, func(tx plexus.StateTx) error {
			return tx.Record(&plexus.Activity{Actor: a.agent, AgentID: a.agent, ActionType: a.typ,
				TraceID: a.trace, Target: "fs.read", Payload: map[string]any{"n": i}})
		})
	}
	if err := td.Close(); err != nil {
		t.Fatal(err)
	}
	raw := rawDB(t, td.path)
	mustExec(t, raw, `DROP INDEX activity_agent;
		CREATE INDEX activity_agent_type ON activity(agent_id, action_type);
		PRAGMA user_version = 8`)
	if err := raw.Close(); err != nil {
		t.Fatal(err)
	}

	db := mustOpenAt(t, td.path, Options{AuditDir: td.audit, AnchorPath: td.anchor, Clock: td.clock.Now})
	if got, want := activityIndexes(t, db.r), []string{"activity_agent", "activity_idem", "activity_trace"}; !slices.Equal(got, want) {
		t.Errorf("activity indexes = %v, want %v", got, want)
	}
	rep, err := db.Verify(ctx, td.vopts())
	if err != nil || !rep.OK || rep.Rows != 6 {
		t.Fatalf("Verify after migration = %+v, %v; want 6 rows, ok", rep, err)
	}
	for _, c := range []struct {
		f    Filter
		want []int64
	}{
		{Filter{AgentID: "a1", Desc: true}, []int64{4, 3, 1}},
		{Filter{AgentID: "a1", Type: "invoke.", Limit: 1, Desc: true}, []int64{4}},
		{Filter{AgentID: "a1", Since: t0.Add(2 * time.Minute)}, []int64{3, 4}},
		{Filter{AgentID: "a2", Type: "token.minted"}, []int64{5}},
		{Filter{TraceID: "t3", AgentID: "a1"}, []int64{3, 4}},
		{Filter{AgentID: "nobody", Desc: true, Limit: 1}, nil},
	} {
		rows, err := db.Activity(ctx, c.f)
		if err != nil {
			t.Fatalf("Activity(%+v): %v", c.f, err)
		}
		var got []int64
		for _, r := range rows {
			got = append(got, r.ID)
		}
		if !slices.Equal(got, c.want) {
			t.Errorf("Activity(%+v) = ids %v, want %v", c.f, got, c.want)
		}
	}
	for _, c := range []struct {
		name  string
		f     Filter
		index string
	}{
		{"newest of an agent", Filter{AgentID: "a1", Desc: true, Limit: 100}, "activity_agent (agent_id=?)"},
		{"last call of an agent", Filter{AgentID: "a1", Type: "invoke.", Desc: true, Limit: 1}, "activity_agent (agent_id=?)"},
		{"an agent's last day", Filter{AgentID: "a1", Since: t0.Add(2 * time.Minute), Desc: true, Limit: 500},
			"activity_agent (agent_id=? AND rowid>?)"},
		{"a trace with an agent", Filter{TraceID: "t3", AgentID: "a1"}, "activity_trace (trace_id=?)"},
	} {
		query, args, err := db.activityQuery(ctx, c.f)
		if err != nil {
			t.Fatal(err)
		}
		plan := queryPlan(t, db.r, query, args...)
		if !strings.Contains(plan, c.index) || strings.Contains(plan, "TEMP B-TREE") {
			t.Errorf("%s: plan\n%s\nwant a search of %s and no sort", c.name, plan, c.index)
		}
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
