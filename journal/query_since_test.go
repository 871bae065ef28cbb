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

// TestParseSince checks the forms a person gives --since in.
func TestParseSince(t *testing.T) {
	now := time.Date(2026, 6, 23, 10, 0, 0, 0, time.UTC)
	for _, tt := range []struct {
		in   string
		want time.Time
		ok   bool
	}{
		{"90m", now.Add(-90 * time.Minute), true},
		{"3d", now.Add(-72 * time.Hour), true},
		{"0d", now, true},
		{"2026-06-01T00:00:00Z", time.Date(2026, 6, 1, 0, 0, 0, 0, time.UTC), true},
		{"-1h", time.Time{}, false},
		{"-2d", time.Time{}, false},
		{"yesterday", time.Time{}, false},
	} {
		got, err := ParseSince(tt.in, now)
		if (err == nil) != tt.ok || !got.Equal(tt.want) {
			t.Errorf("ParseSince(%q) = %v, %v; want %v (ok %v)", tt.in, got, err, tt.want, tt.ok)
		}
	}
}

// recordAt records one row at each of the given offsets from t0, in order
// (ids 1, 2, …), the clock set to each first.
func recordAt(t *testing.T, td *testDB, offsets ...time.Duration) {
	t.Helper()
	for _, d := range offsets {
		td.clock.Set(t0.Add(d))
		mustUpdate(t, td.DB, func(tx plexus.StateTx) error {
			return tx.Record(&plexus.Activity{Actor: plexus.ActorSystem, ActionType: "invoke.ok", Target: "fs.read"})
		})
	}
}

// TestFirstAtOrAfter checks the binary search that stands in for the ts
// index since schema version 8, on whole ranges and on ranges with gaps (a
// pruned prefix, deleted rows).
func TestFirstAtOrAfter(t *testing.T) {
	ctx := context.Background()
	empty := mustOpen(t)
	if got, err := firstAtOrAfter(ctx, empty.r, fmtTime(t0)); err != nil || got != 0 {
		t.Errorf("empty journal: firstAtOrAfter = %d, %v; want 0", got, err)
	}

	whole := mustOpen(t)
	gaps := mustOpen(t)
	for _, td := range []*testDB{whole, gaps} {
		for i := 1; i <= 10; i++ {
			recordAt(t, td, time.Duration(i)*time.Second)
		}
	}
	// ids 1–3 pruned, 6 and 7 deleted: rows 4, 5, 8, 9, 10 stay.
	mustExec(t, gaps.w, `DELETE FROM activity WHERE id <= 3 OR id IN (6, 7)`)

	sec := func(s float64) string { return fmtTime(t0.Add(time.Duration(s * float64(time.Second)))) }
	for _, tc := range []struct {
		name string
		td   *testDB
		ts   string
		want int64
	}{
		{"BeforeAll", whole, sec(0), 1},
		{"First", whole, sec(1), 1},
		{"Exact", whole, sec(4), 4},
		{"Between", whole, sec(4.5), 5},
		{"Last", whole, sec(10), 10},
		{"AfterAll", whole, sec(11), 11},
		{"PrunedBeforeAll", gaps, sec(1), 4},
		{"IntoGap", gaps, sec(5.5), 8},
		{"GapExact", gaps, sec(6), 8},
		{"GapsAfterAll", gaps, sec(10.5), 11},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := firstAtOrAfter(ctx, tc.td.r, tc.ts)
			if err != nil {
				t.Fatal(err)
			}
			// Inside a gap any id up to the next row is the same bound.
			var next, below sql.NullInt64
			mustScan(t, tc.td.r.QueryRow(`SELECT MIN(id) FROM activity WHERE id >= ?`, got), &next)
			mustScan(t, tc.td.r.QueryRow(`SELECT MAX(id) FROM activity WHERE id < ?`, got), &below)
			if next.Valid && next.Int64 != tc.want || !next.Valid && got != tc.want || below.Valid && below.Int64 >= tc.want {
				t.Errorf("firstAtOrAfter(%s) = %d (next row %v, row below %v); want the bound of row %d", tc.ts, got, next, below, tc.want)
			}
		})
	}
}

// TestActivitySinceByID checks that a Since query with nothing else to
// narrow it reads from the first row in its window by id (no scan of the
// older rows, which the dropped ts index used to spare), and that a clock
// set back while rows were written never lets a row before Since through.
func TestActivitySinceByID(t *testing.T) {
	ctx := context.Background()
	td := mustOpen(t)
	// The clock is set back after the fourth row.
	recordAt(t, td, 1*time.Second, 2*time.Second, 3*time.Second, 9*time.Second, 4*time.Second, 5*time.Second, 6*time.Second)
	for _, tc := range []struct {
		name string
		f    Filter
		want []int64
	}{
		{"InOrder", Filter{Since: t0.Add(2 * time.Second)}, []int64{2, 3, 4, 5, 6, 7}},
		{"AfterStep", Filter{Since: t0.Add(5 * time.Second)}, []int64{4, 6, 7}},
		{"Desc", Filter{Since: t0.Add(5 * time.Second), Desc: true, Limit: 2}, []int64{7, 6}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rows, err := td.Activity(ctx, tc.f)
			if err != nil {
				t.Fatal(err)
			}
			var got []int64
			for _, r := range rows {
				if r.TS.Before(tc.f.Since) {
					t.Errorf("row %d at %s is before Since %s", r.ID, r.TS, tc.f.Since)
				}
				got = append(got, r.ID)
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("ids = %v, want %v", got, tc.want)
			}
		})
	}

	plan := queryPlan(t, td.r, `SELECT id FROM activity WHERE id >= ? AND ts >= ? ORDER BY id`, 3, fmtTime(t0))
	if !strings.Contains(plan, "INTEGER PRIMARY KEY") {
		t.Errorf("a Since query does not start from its first id:\n%s", plan)
	}
}

// queryPlan is SQLite's EXPLAIN QUERY PLAN of q, one step a line.
func queryPlan(t *testing.T, db *sql.DB, q string, args ...any) string {
	t.Helper()
	rows, err := db.Query("EXPLAIN QUERY PLAN "+q, args...)
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
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return plan.String()
}

func mustScan(t *testing.T, row *sql.Row, dest ...any) {
	t.Helper()
	if err := row.Scan(dest...); err != nil {
		t.Fatal(err)
	}
}
