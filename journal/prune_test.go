package journal

import (
	"context"
	"database/sql"
	"errors"
	"strconv"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/plexus-gw/plexus"
)

// recordDays writes n rows a day for days days from t0, advancing the
// clock, and leaves it after the last.
func recordDays(t *testing.T, td *testDB, days, n int) {
	t.Helper()
	for d := range days {
		for i := range n {
			td.clock.Set(t0.Add(time.Duration(d)*24*time.Hour + time.Duration(i)*time.Minute))
			mustUpdate(t, td.DB, func(tx plexus.StateTx) error {
				return tx.Record(&plexus.Activity{Actor: "a", ActionType: "invoke.ok", Target: "x", Payload: map[string]any{"n": d*n + i}})
			})
		}
	}
}

// prunedDB is a journal of 3 days × 4 rows with the first two days pruned
// (rows 1..8), the checkpoint recorded as row 13.
func prunedDB(t *testing.T) *testDB {
	t.Helper()
	td := mustOpen(t)
	recordDays(t, td, 3, 4)
	td.clock.Set(t0.Add(72 * time.Hour))
	got, err := td.PruneActivity(context.Background(), PruneRequest{Before: t0.Add(48 * time.Hour), Now: td.clock.Now(), By: plexus.ActorHuman})
	if err != nil {
		t.Fatal(err)
	}
	if want := (ActivityPruned{Rows: 8, Through: 8, Checkpoint: 13}); !cmp.Equal(got, want) {
		t.Fatalf("PruneActivity = %+v, want %+v", got, want)
	}
	return td
}

// TestPruneActivityVerifies: after pruning a prefix, verify passes from the
// checkpoint (with the key, the anchor and the audit mirror, which still
// holds the pruned rows); pruning again up to the same day writes nothing;
// a later prune moves the checkpoint on and still verifies.
func TestPruneActivityVerifies(t *testing.T) {
	td := prunedDB(t)
	rep := mustVerify(t, td.DB, td.vopts())
	if !rep.OK || rep.Rows != 5 || rep.PrunedThrough != 8 {
		t.Fatalf("verify after prune = %+v, want ok over 5 rows from row 8", rep)
	}
	again, err := td.PruneActivity(context.Background(), PruneRequest{Before: t0.Add(48 * time.Hour), Now: td.clock.Now(), By: plexus.ActorHuman})
	if err != nil || !cmp.Equal(again, ActivityPruned{}) {
		t.Fatalf("second prune = %+v, %v; want nothing done", again, err)
	}
	td.clock.Set(t0.Add(5 * 24 * time.Hour))
	more, err := td.PruneActivity(context.Background(), PruneRequest{Before: t0.Add(4 * 24 * time.Hour), Now: td.clock.Now(), By: plexus.ActorSystem})
	if err != nil || more.Rows != 5 || more.Through != 13 {
		t.Fatalf("prune of the rest = %+v, %v", more, err)
	}
	if rep := mustVerify(t, td.DB, td.vopts()); !rep.OK || rep.Rows != 1 {
		t.Fatalf("verify after the second prune = %+v", rep)
	}
	// The journal reopens (the anchor check at start) without a mismatch.
	if err := td.Close(); err != nil {
		t.Fatal(err)
	}
	td.DB = mustOpenAt(t, td.path, Options{AuditDir: td.audit, AnchorPath: td.anchor, Clock: td.clock.Now})
	if rep := mustVerify(t, td.DB, td.vopts()); !rep.OK {
		t.Fatalf("verify after reopening = %+v", rep)
	}
}

// TestPruneActivityRefusesRecent: a cut-off in the future, or less than a
// day ago (calls the gateway still looks up), is refused and changes
// nothing.
func TestPruneActivityRefusesRecent(t *testing.T) {
	td := mustOpen(t)
	recordDays(t, td, 1, 3)
	now := td.clock.Now()
	for _, before := range []time.Time{now.Add(time.Hour), now, now.Add(-MinActivityAge + time.Second)} {
		if _, err := td.PruneActivity(context.Background(), PruneRequest{Before: before, Now: now, By: plexus.ActorHuman}); !errors.Is(err, ErrPruneTooRecent) {
			t.Fatalf("prune before %s (now %s): err = %v, want ErrPruneTooRecent", before, now, err)
		}
	}
	if rep := mustVerify(t, td.DB, td.vopts()); !rep.OK || rep.Rows != 3 {
		t.Fatalf("verify = %+v, want the 3 rows untouched", rep)
	}
}

// TestPruneActivityOutOfOrder: a row stamped before the cut-off but
// written after a newer one is kept with everything after it: only a
// prefix is ever pruned.
func TestPruneActivityOutOfOrder(t *testing.T) {
	td := mustOpen(t)
	for _, ts := range []time.Duration{0, time.Hour, 3 * time.Hour, 2 * time.Hour} {
		td.clock.Set(t0.Add(ts))
		mustUpdate(t, td.DB, func(tx plexus.StateTx) error {
			return tx.Record(&plexus.Activity{Actor: "a", ActionType: "invoke.ok"})
		})
	}
	got, err := td.PruneActivity(context.Background(), PruneRequest{Before: t0.Add(150 * time.Minute), Now: t0.Add(48 * time.Hour), By: plexus.ActorHuman})
	if err != nil || got.Through != 2 {
		t.Fatalf("prune = %+v, %v; want rows 1..2", got, err)
	}
}

// TestVerifyAfterPruneAttacks: pruning does not open a way to hide
// tampering: a row deleted after the checkpoint, a prefix cut further with
// the checkpoint moved to match, a checkpoint removed, and an edited
// journal.pruned row are each caught.
func TestVerifyAfterPruneAttacks(t *testing.T) {
	for _, tc := range []struct {
		name   string
		tamper func(t *testing.T, td *testDB, raw *sql.DB)
		want   []Problem
	}{
		{
			name:   "DeletedAfterCheckpoint",
			tamper: func(t *testing.T, td *testDB, raw *sql.DB) { mustExec(t, raw, `DELETE FROM activity WHERE id = 10`) },
			want:   []Problem{{ID: 10, Kind: ProblemDeleted}, {ID: 10, Kind: ProblemMirror}},
		},
		{
			name: "PrefixCutFurtherCheckpointMoved",
			tamper: func(t *testing.T, td *testDB, raw *sql.DB) {
				var h string
				if err := raw.QueryRow(`SELECT hash FROM activity WHERE id = 10`).Scan(&h); err != nil {
					t.Fatal(err)
				}
				mustExec(t, raw, `DELETE FROM activity WHERE id <= 10`)
				mustExec(t, raw, `UPDATE meta SET value = '10' WHERE key = '`+metaPrunedThrough+`'`)
				mustExec(t, raw, `UPDATE meta SET value = '`+h+`' WHERE key = '`+metaPrunedHead+`'`)
			},
			want: []Problem{{ID: 9, Kind: ProblemMirror}, {ID: 13, Kind: ProblemDeleted}},
		},
		{
			name: "CheckpointRemoved",
			tamper: func(t *testing.T, td *testDB, raw *sql.DB) {
				mustExec(t, raw, `DELETE FROM meta WHERE key IN ('`+metaPrunedThrough+`', '`+metaPrunedHead+`')`)
			},
			want: []Problem{{ID: 1, Kind: ProblemDeleted}, {ID: 13, Kind: ProblemDeleted}},
		},
		{
			name: "PrunedRowEdited",
			tamper: func(t *testing.T, td *testDB, raw *sql.DB) {
				mustExec(t, raw, `UPDATE activity SET payload = replace(payload, '"throughId":8', '"throughId":10') WHERE id = 13`)
			},
			want: []Problem{{ID: 1, Kind: ProblemMirror}, {ID: 8, Kind: ProblemDeleted}, {ID: 13, Kind: ProblemEdited}, {ID: 13, Kind: ProblemMirror}},
		},
		{
			name: "CheckpointWithoutPruneRow",
			tamper: func(t *testing.T, td *testDB, raw *sql.DB) {
				mustExec(t, raw, `DELETE FROM activity WHERE id = 13; UPDATE sqlite_sequence SET seq = 12 WHERE name = 'activity'`)
			},
			want: []Problem{{ID: 1, Kind: ProblemMirror}, {ID: 8, Kind: ProblemDeleted}, {ID: 13, Kind: ProblemTruncated}, {ID: 13, Kind: ProblemMirror}},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			td := prunedDB(t)
			tc.tamper(t, td, rawDB(t, td.path))
			rep := mustVerify(t, td.DB, td.vopts())
			if diff := cmp.Diff(tc.want, kinds(rep.Problems)); diff != "" {
				t.Errorf("problems (-want +got):\n%s\n%s", diff, rep)
			}
		})
	}
}

// TestPruneState: tokens, sessions, enrollment codes and events are pruned
// once they ended longer ago than their grace; what is live, or ended
// recently, stays; activity is never touched.
func TestPruneState(t *testing.T) {
	td := mustOpen(t)
	now := t0.Add(72 * time.Hour)
	old, recent := now.Add(-48*time.Hour), now.Add(-time.Hour)
	mustUpdate(t, td.DB, func(tx plexus.StateTx) error {
		for i, exp := range []time.Time{old, recent, now.Add(time.Hour)} {
			id := strconv.Itoa(i)
			if err := tx.PutAgent(&plexus.Agent{ID: "agent" + id, CreatedAt: t0}); err != nil {
				return err
			}
			if err := tx.PutToken(&plexus.TokenRecord{JTI: "jti" + id, AgentID: "agent" + id, IssuedAt: t0, ExpiresAt: exp, GrantExpiresAt: exp,
				Scopes: []plexus.TokenScope{{ID: "cap"}}}); err != nil {
				return err
			}
			if err := tx.PutSession(&plexus.Session{ID: "sess" + id, Kind: plexus.SessionAgent, CreatedAt: t0, ExpiresAt: exp}); err != nil {
				return err
			}
			if err := tx.PutEnrollCode(&plexus.EnrollCode{Hash: []byte("code" + id), AgentID: "agent" + id, CreatedAt: t0, ExpiresAt: exp}); err != nil {
				return err
			}
		}
		return tx.Record(&plexus.Activity{Actor: "a", ActionType: "invoke.ok"})
	})
	for _, at := range []time.Time{old, recent} {
		td.clock.Set(at)
		mustUpdate(t, td.DB, func(tx plexus.StateTx) error { return tx.Publish(&plexus.Event{Type: "ping"}) })
	}
	got, err := td.PruneState(context.Background(), now, StateRetention{})
	if err != nil {
		t.Fatal(err)
	}
	if want := (StatePruned{Tokens: 1, Sessions: 1, Events: 1, EnrollCodes: 1}); got != want {
		t.Errorf("PruneState = %+v, want %+v", got, want)
	}
	raw := rawDB(t, td.path)
	for table, want := range map[string]int{"tokens": 2, "token_scopes": 2, "sessions": 2, "enroll_codes": 2, "events": 1, "activity": 1} {
		var n int
		if err := raw.QueryRow(`SELECT count(*) FROM ` + table).Scan(&n); err != nil {
			t.Fatal(err)
		}
		if n != want {
			t.Errorf("%s holds %d rows, want %d", table, n, want)
		}
	}
}
