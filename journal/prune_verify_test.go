package journal

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/plexus-gw/plexus"
)

// TestPruneActivityBatches: a prune of more than a batch deletes in
// transactions of at most pruneBatch rows, each recording its own keyed
// checkpoint (so the daemon's writes go between them), and verify passes
// from the last.
func TestPruneActivityBatches(t *testing.T) {
	td := mustOpen(t)
	const n = 2*pruneBatch + 500
	mustUpdate(t, td.DB, func(tx plexus.StateTx) error {
		for i := range n {
			if err := tx.Record(&plexus.Activity{Actor: "a", ActionType: "invoke.ok", Target: "x", Payload: map[string]any{"n": i}}); err != nil {
				return err
			}
		}
		return nil
	})
	td.clock.Set(t0.Add(72 * time.Hour))
	got, err := td.PruneActivity(context.Background(), PruneRequest{Before: t0.Add(time.Hour), Now: td.clock.Now(), By: plexus.ActorHuman})
	if err != nil {
		t.Fatal(err)
	}
	if want := (ActivityPruned{Rows: n, Through: n, Checkpoint: n + 3}); !cmp.Equal(got, want) {
		t.Fatalf("PruneActivity = %+v, want %+v", got, want)
	}
	rows, err := td.Activity(context.Background(), Filter{Type: ActionPruned})
	if err != nil {
		t.Fatal(err)
	}
	var spans [][2]string
	for _, r := range rows {
		spans = append(spans, [2]string{fmt.Sprint(r.Payload["fromId"]), fmt.Sprint(r.Payload["throughId"])})
	}
	want := [][2]string{{"1", "1000"}, {"1001", "2000"}, {"2001", "2500"}}
	if diff := cmp.Diff(want, spans); diff != "" {
		t.Fatalf("journal.pruned rows (fromId, throughId) (-want +got):\n%s", diff)
	}
	if rep := mustVerify(t, td.DB, td.vopts()); !rep.OK || rep.PrunedThrough != n {
		t.Fatalf("verify after a batched prune: %s", rep)
	}
}

// TestPruneRefusesUnverifiedPrefix: a prune whose rows do not verify (one
// deleted from the middle, one edited) is refused with a *PrefixError
// naming the problem, and prunes nothing; forced, it prunes, its
// journal.pruned row records prefixVerified false and the problems, and
// verify keeps reporting them.
func TestPruneRefusesUnverifiedPrefix(t *testing.T) {
	for _, tc := range []struct {
		name   string
		tamper string
		want   []Problem
	}{
		{"RowDeleted", `DELETE FROM activity WHERE id = 3`, []Problem{{ID: 3, Kind: ProblemDeleted}, {ID: 3, Kind: ProblemMirror}}},
		{"RowEdited", `UPDATE activity SET target = 'y' WHERE id = 2`, []Problem{{ID: 2, Kind: ProblemEdited}, {ID: 2, Kind: ProblemMirror}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			td := mustOpen(t)
			recordDays(t, td, 3, 4)
			mustExec(t, rawDB(t, td.path), tc.tamper)
			td.clock.Set(t0.Add(72 * time.Hour))
			req := PruneRequest{Before: t0.Add(48 * time.Hour), Now: td.clock.Now(), By: plexus.ActorHuman}
			before := mustVerify(t, td.DB, td.vopts())

			_, err := td.PruneActivity(context.Background(), req)
			var pe *PrefixError
			if !errors.Is(err, ErrPrefixUnverified) || !errors.As(err, &pe) {
				t.Fatalf("prune of a prefix that does not verify: err = %v, want a *PrefixError", err)
			}
			if diff := cmp.Diff(tc.want, kinds(pe.Problems)); diff != "" {
				t.Errorf("the refusal's problems (-want +got):\n%s", diff)
			}
			if after := mustVerify(t, td.DB, td.vopts()); !cmp.Equal(before, after) {
				t.Fatalf("a refused prune changed the journal:\nbefore %s\nafter %s", before, after)
			}

			req.Force = true
			got, err := td.PruneActivity(context.Background(), req)
			if err != nil || got.Through != 8 || !cmp.Equal(kinds(got.Unverified), tc.want) {
				t.Fatalf("forced prune = %+v, %v", got, err)
			}
			a := lastPruned(t, td.DB)
			if v, ok := a.Payload["prefixVerified"].(bool); !ok || v || a.Payload["problems"] == nil {
				t.Errorf("the forced prune's row records %v, want prefixVerified false and the problems", a.Payload)
			}
			rep := mustVerify(t, td.DB, td.vopts())
			if diff := cmp.Diff([]Problem{{ID: got.Checkpoint, Kind: ProblemUnverifiedPrune}}, kinds(rep.Problems)); diff != "" {
				t.Errorf("verify after the forced prune (-want +got):\n%s\n%s", diff, rep)
			}
		})
	}
}

// TestVerifyChecksPrunedMirror: after a prune the audit mirror holds the
// only copy of the pruned rows, and verify still checks their lines: an
// edit there, a line whose hash was recomputed without the key, and a
// replaced last pruned row are each reported.
func TestVerifyChecksPrunedMirror(t *testing.T) {
	for _, tc := range []struct {
		name string
		edit func(t *testing.T, line map[string]any)
		want []Problem
	}{
		{"ContentEdited", func(t *testing.T, l map[string]any) { l["target"] = "portal.weather.read" },
			[]Problem{{ID: 6, Kind: ProblemMirror}}},
		{"ChainRecomputed", func(t *testing.T, l map[string]any) {
			l["target"] = "y"
			r := mirrorRowOf(t, l)
			c, err := canonicalOf(&r)
			if err != nil {
				t.Fatal(err)
			}
			l["hash"] = legacyHash(r.PrevHash, c)
		}, []Problem{{ID: 6, Kind: ProblemMirror}, {ID: 7, Kind: ProblemMirror}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			td := prunedDB(t)
			editMirrorLine(t, td.audit, 6, tc.edit)
			rep := mustVerify(t, td.DB, td.vopts())
			if diff := cmp.Diff(tc.want, kinds(rep.Problems)); diff != "" {
				t.Errorf("problems (-want +got):\n%s\n%s", diff, rep)
			}
		})
	}
	t.Run("LastPrunedReplaced", func(t *testing.T) {
		td := prunedDB(t)
		editMirrorLine(t, td.audit, 8, func(t *testing.T, l map[string]any) {
			l["target"] = "y"
			r := mirrorRowOf(t, l)
			c, err := canonicalOf(&r)
			if err != nil {
				t.Fatal(err)
			}
			ch, err := newChainer(testKey)
			if err != nil {
				t.Fatal(err)
			}
			l["hash"] = ch.rowHash(r.PrevHash, c) // only the key holder could; the checkpoint still differs
		})
		rep := mustVerify(t, td.DB, td.vopts())
		if diff := cmp.Diff([]Problem{{ID: 8, Kind: ProblemMirror}}, kinds(rep.Problems)); diff != "" {
			t.Errorf("problems (-want +got):\n%s\n%s", diff, rep)
		}
	})
}

// editMirrorLine rewrites row id's line in the audit mirror with edit.
func editMirrorLine(t *testing.T, dir string, id int64, edit func(t *testing.T, line map[string]any)) {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, "*.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		lines := bytes.Split(b, []byte("\n"))
		for i, ln := range lines {
			var l map[string]any
			if json.Unmarshal(ln, &l) != nil || l["id"] != float64(id) {
				continue
			}
			edit(t, l)
			if lines[i], err = json.Marshal(l); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(f, bytes.Join(lines, []byte("\n")), 0o600); err != nil {
				t.Fatal(err)
			}
			return
		}
	}
	t.Fatalf("row %d is not in the audit mirror", id)
}

func mirrorRowOf(t *testing.T, l map[string]any) mirrorRow {
	t.Helper()
	b, err := json.Marshal(l)
	if err != nil {
		t.Fatal(err)
	}
	var r mirrorRow
	if err := json.Unmarshal(b, &r); err != nil {
		t.Fatal(err)
	}
	return r
}

// lastPruned is the newest journal.pruned row.
func lastPruned(t *testing.T, db *DB) plexus.Activity {
	t.Helper()
	rows, err := db.Activity(context.Background(), Filter{Type: ActionPruned, Desc: true, Limit: 1})
	if err != nil || len(rows) != 1 {
		t.Fatalf("the newest %s row: %v, %+v", ActionPruned, err, rows)
	}
	return rows[0]
}

// TestPruneAgainBeforeTheLastPruneRow: a second prune whose prefix ends
// before the first prune's own journal.pruned row (a later cut-off that is
// still older than that row) verifies its prefix without that row, and
// prunes.
func TestPruneAgainBeforeTheLastPruneRow(t *testing.T) {
	td := mustOpen(t)
	recordDays(t, td, 4, 4)
	td.clock.Set(t0.Add(6 * 24 * time.Hour))
	for _, c := range []struct {
		days    int
		through int64
	}{{1, 4}, {2, 8}} {
		got, err := td.PruneActivity(context.Background(), PruneRequest{Before: t0.Add(time.Duration(c.days) * 24 * time.Hour), Now: td.clock.Now(), By: plexus.ActorSystem})
		if err != nil || got.Through != c.through {
			t.Fatalf("prune before day %d = %+v, %v; want through row %d", c.days, got, err, c.through)
		}
	}
	if rep := mustVerify(t, td.DB, td.vopts()); !rep.OK || rep.PrunedThrough != 8 {
		t.Fatalf("verify after two prunes: %s", rep)
	}
}
