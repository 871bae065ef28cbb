package journal

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/plexus-gw/plexus"
)

// recordN records n rows, one transaction each, alternating traces, types
// and agents so that the filters have something to tell apart.
func recordN(t *testing.T, td *testDB, n int) []plexus.Activity {
	t.Helper()
	types := []string{"grant.requested", "grant.approved", "token.minted", "invoke.denied"}
	var out []plexus.Activity
	for i := range n {
		a := plexus.Activity{
			TS:         t0.Add(time.Duration(i) * time.Second),
			TraceID:    fmt.Sprintf("tr%d", i%3),
			Actor:      plexus.ActorSystem,
			AgentID:    fmt.Sprintf("agent%d", i%2),
			ActionType: types[i%len(types)],
			Target:     fmt.Sprintf("cap.%d", i),
			Payload:    map[string]any{"n": i, "note": "<ok> & fine"},
		}
		mustUpdate(t, td.DB, func(tx plexus.StateTx) error { return tx.Record(&a) })
		out = append(out, a)
	}
	return out
}

func TestRecord(t *testing.T) {
	t.Run("Chain", func(t *testing.T) {
		td := mustOpen(t)
		rows := recordN(t, td, 5)
		prev := ""
		for i, a := range rows {
			if a.ID != int64(i+1) {
				t.Errorf("row %d: ID = %d", i, a.ID)
			}
			if a.PrevHash != prev {
				t.Errorf("row %d: PrevHash = %q, want %q", a.ID, a.PrevHash, prev)
			}
			prev = a.Hash
		}
		rep, err := td.Verify(context.Background(), td.vopts())
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(VerifyReport{Rows: 5, OK: true}, rep); diff != "" {
			t.Errorf("Verify (-want +got):\n%s", diff)
		}
	})

	// The hash is documented so that scripts holding the key can check
	// it: recompute it here from the raw columns exactly as docs say.
	t.Run("HashIsDocumented", func(t *testing.T) {
		td := mustOpen(t)
		recordN(t, td, 2)
		raw := rawDB(t, td.path)
		var ts, trace, actor, agent, typ, target, payload, prev, hash string
		err := raw.QueryRow(`SELECT ts, trace_id, actor, agent_id, action_type, target, payload, prev_hash, hash
			FROM activity WHERE id = 2`).Scan(&ts, &trace, &actor, &agent, &typ, &target, &payload, &prev, &hash)
		if err != nil {
			t.Fatal(err)
		}
		canonical := fmt.Sprintf(`{"ts":%q,"trace_id":%q,"actor":%q,"agent_id":%q,"action_type":%q,"target":%q,"payload":%s}`,
			ts, trace, actor, agent, typ, target, payload)
		mac := hmac.New(sha256.New, testKey)
		mac.Write([]byte(prev + canonical))
		if got := hex.EncodeToString(mac.Sum(nil)); got != hash {
			t.Errorf("documented hash = %s, stored %s (canonical %s)", got, hash, canonical)
		}
		if want := "2025-03-14T15:09:27.535897932Z"; ts != want {
			t.Errorf("ts = %q, want %q", ts, want)
		}
	})

	t.Run("DefaultsAndRedaction", func(t *testing.T) {
		td := mustOpen(t)
		a := plexus.Activity{
			Actor: "agent1", ActionType: "invoke.ok", Target: "fs.read",
			Payload: map[string]any{"input": map[string]any{"path": "/x"}, "big": int64(1) << 60},
		}
		mustUpdate(t, td.DB, func(tx plexus.StateTx) error { return tx.Record(&a) })
		if !a.TS.Equal(t0) {
			t.Errorf("TS = %v, want the clock's %v", a.TS, t0)
		}
		got, err := td.Activity(context.Background(), Filter{})
		if err != nil || len(got) != 1 {
			t.Fatalf("Activity = %v, %v", got, err)
		}
		want := map[string]any{"input": Redacted, "big": json.Number("1152921504606846976")}
		if diff := cmp.Diff(want, got[0].Payload); diff != "" {
			t.Errorf("stored payload (-want +got):\n%s", diff)
		}
		if diff := cmp.Diff(map[string]any{"input": Redacted, "big": int64(1) << 60}, a.Payload); diff != "" {
			t.Errorf("a.Payload after Record (-want +got):\n%s", diff)
		}
	})

	t.Run("SeveralInOneTx", func(t *testing.T) {
		td := mustOpen(t)
		mustUpdate(t, td.DB, func(tx plexus.StateTx) error {
			for i := range 3 {
				if err := tx.Record(&plexus.Activity{Actor: plexus.ActorSystem, ActionType: fmt.Sprintf("t.%d", i)}); err != nil {
					return err
				}
			}
			return nil
		})
		if rep, err := td.Verify(context.Background(), td.vopts()); err != nil || !rep.OK || rep.Rows != 3 {
			t.Errorf("Verify = %+v, %v; want 3 rows OK", rep, err)
		}
	})
}

func TestVerify(t *testing.T) {
	for _, tc := range []struct {
		name   string
		tamper string
		want   []Problem
	}{
		{
			name:   "Edited",
			tamper: `UPDATE activity SET payload = '{"n":99}' WHERE id = 3`,
			// The mirror, written at commit, still has the row as it was.
			want: []Problem{{ID: 3, Kind: ProblemEdited}, {ID: 3, Kind: ProblemMirror}},
		},
		{
			name:   "EditedWithHash",
			tamper: `UPDATE activity SET target = 'x', hash = 'f00d' WHERE id = 3`,
			// Row 4's broken link to row 3 is the same problem, not a second.
			want: []Problem{{ID: 3, Kind: ProblemEdited}, {ID: 3, Kind: ProblemMirror}},
		},
		{
			name:   "Deleted",
			tamper: `DELETE FROM activity WHERE id = 3`,
			want:   []Problem{{ID: 3, Kind: ProblemDeleted}, {ID: 3, Kind: ProblemMirror}},
		},
		{
			name:   "DeletedFirst",
			tamper: `DELETE FROM activity WHERE id = 1`,
			want:   []Problem{{ID: 1, Kind: ProblemDeleted}, {ID: 1, Kind: ProblemMirror}},
		},
		{
			name:   "DeletedLast",
			tamper: `DELETE FROM activity WHERE id = 5`,
			// sqlite_sequence, the anchor and the mirror each notice.
			want: []Problem{{ID: 5, Kind: ProblemDeleted}, {ID: 5, Kind: ProblemTruncated}, {ID: 5, Kind: ProblemMirror}},
		},
		{
			name: "Reordered",
			tamper: `UPDATE activity SET id = 100 WHERE id = 3;
				UPDATE activity SET id = 3 WHERE id = 4;
				UPDATE activity SET id = 4 WHERE id = 100;`,
			// Row 5 is intact, but what now precedes it is not what it followed.
			want: []Problem{{ID: 3, Kind: ProblemReordered}, {ID: 3, Kind: ProblemMirror}, {ID: 4, Kind: ProblemReordered}, {ID: 5, Kind: ProblemReordered}},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			td := mustOpen(t)
			recordN(t, td, 5)
			raw := rawDB(t, td.path)
			if _, err := raw.Exec(tc.tamper); err != nil {
				t.Fatal(err)
			}
			rep, err := td.Verify(context.Background(), td.vopts())
			if err != nil {
				t.Fatal(err)
			}
			if rep.OK {
				t.Fatalf("Verify OK after tampering: %+v", rep)
			}
			var got []Problem
			for _, p := range rep.Problems {
				if p.Detail == "" {
					t.Errorf("problem %+v has no detail", p)
				}
				got = append(got, Problem{ID: p.ID, Kind: p.Kind})
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("problems (-want +got):\n%s\nfull report: %+v", diff, rep)
			}
		})
	}

	t.Run("Empty", func(t *testing.T) {
		td := mustOpen(t)
		rep, err := td.Verify(context.Background(), td.vopts())
		if err != nil || !rep.OK || rep.Rows != 0 {
			t.Errorf("Verify on an empty journal = %+v, %v", rep, err)
		}
	})

	t.Run("RollbackLeavesNoGap", func(t *testing.T) {
		td := mustOpen(t)
		recordN(t, td, 2)
		td.Update(context.Background(), false, func(tx plexus.StateTx) error {
			tx.Record(&plexus.Activity{Actor: plexus.ActorSystem, ActionType: "x"})
			return errBoom
		})
		recordN(t, td, 1)
		if rep, err := td.Verify(context.Background(), td.vopts()); err != nil || !rep.OK {
			t.Errorf("Verify after a rolled-back Record = %+v, %v; want OK", rep, err)
		}
	})
}

func TestActivityQuery(t *testing.T) {
	td := mustOpen(t)
	all := recordN(t, td, 12)
	ids := func(as []plexus.Activity) []int64 {
		var out []int64
		for _, a := range as {
			out = append(out, a.ID)
		}
		return out
	}
	for _, tc := range []struct {
		name string
		f    Filter
		want []int64
	}{
		{"All", Filter{}, ids(all)},
		{"Trace", Filter{TraceID: "tr1"}, []int64{2, 5, 8, 11}},
		{"TypeExact", Filter{Type: "grant.approved"}, []int64{2, 6, 10}},
		{"TypeExactNoPrefix", Filter{Type: "grant"}, nil},
		{"TypePrefixDot", Filter{Type: "grant."}, []int64{1, 2, 5, 6, 9, 10}},
		{"TypePrefixStar", Filter{Type: "tok*"}, []int64{3, 7, 11}},
		{"TypeStarAll", Filter{Type: "*"}, ids(all)},
		{"Agent", Filter{AgentID: "agent0"}, []int64{1, 3, 5, 7, 9, 11}},
		{"Since", Filter{Since: t0.Add(9 * time.Second)}, []int64{10, 11, 12}},
		{"AfterID", Filter{AfterID: 10}, []int64{11, 12}},
		{"Limit", Filter{Limit: 2}, []int64{1, 2}},
		{"DescLimit", Filter{Desc: true, Limit: 3}, []int64{12, 11, 10}},
		{"Combined", Filter{TraceID: "tr2", Type: "grant.", AgentID: "agent1"}, []int64{6}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := td.Activity(context.Background(), tc.f)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, ids(got)); diff != "" {
				t.Errorf("ids (-want +got):\n%s", diff)
			}
		})
	}

	t.Run("RowContent", func(t *testing.T) {
		got, err := td.Activity(context.Background(), Filter{AfterID: 3, Limit: 1})
		if err != nil || len(got) != 1 {
			t.Fatalf("Activity = %v, %v", got, err)
		}
		want := all[3]
		want.Payload = map[string]any{"n": json.Number("3"), "note": "<ok> & fine"}
		if diff := cmp.Diff(want, got[0]); diff != "" {
			t.Errorf("row 4 (-want +got):\n%s", diff)
		}
	})

	t.Run("UsesTraceIndex", func(t *testing.T) {
		rows, err := td.r.Query(`EXPLAIN QUERY PLAN SELECT id FROM activity WHERE trace_id = ? ORDER BY id`, "tr1")
		if err != nil {
			t.Fatal(err)
		}
		defer rows.Close()
		var plan string
		for rows.Next() {
			var id, parent, unused int
			var detail string
			if err := rows.Scan(&id, &parent, &unused, &detail); err != nil {
				t.Fatal(err)
			}
			plan += detail + "\n"
		}
		if !strings.Contains(plan, "activity_trace") {
			t.Errorf("trace query does not use the trace_id index:\n%s", plan)
		}
	})
}
