package journal

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/plexus-gw/plexus"
)

// kinds lists the (id, kind) of each problem, for comparisons.
func kinds(ps []Problem) []Problem {
	var out []Problem
	for _, p := range ps {
		out = append(out, Problem{ID: p.ID, Kind: p.Kind})
	}
	return out
}

func mustVerify(t *testing.T, db *DB, opts VerifyOptions) VerifyReport {
	t.Helper()
	rep, err := db.Verify(context.Background(), opts)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range rep.Problems {
		if p.Detail == "" {
			t.Errorf("problem %+v has no detail", p)
		}
	}
	return rep
}

// rechainPlain recomputes the plain SHA-256 chain from row from to the end,
// as someone holding journal.db but not the key would after an edit (the
// attack the unkeyed chain could not see).
func rechainPlain(t *testing.T, raw *sql.DB, from int64) {
	t.Helper()
	var prev string
	if err := raw.QueryRow(`SELECT hash FROM activity WHERE id = ?`, from-1).Scan(&prev); err != nil && !errors.Is(err, sql.ErrNoRows) {
		t.Fatal(err)
	}
	rows, err := raw.Query(`SELECT id, ts, trace_id, actor, agent_id, action_type, target, payload, prev_hash, hash
		FROM activity WHERE id >= ? ORDER BY id`, from)
	if err != nil {
		t.Fatal(err)
	}
	var all []mirrorRow
	for rows.Next() {
		r, err := scanActivityRow(rows)
		if err != nil {
			t.Fatal(err)
		}
		all = append(all, r)
	}
	rows.Close()
	for _, r := range all {
		r.PrevHash = prev
		c, err := canonicalOf(&r)
		if err != nil {
			t.Fatal(err)
		}
		r.Hash = legacyHash(prev, c)
		if _, err := raw.Exec(`UPDATE activity SET prev_hash = ?, hash = ? WHERE id = ?`, r.PrevHash, r.Hash, r.ID); err != nil {
			t.Fatal(err)
		}
		prev = r.Hash
	}
}

func TestChainKeyed(t *testing.T) {
	t.Run("ErrNoKey", func(t *testing.T) {
		for _, key := range [][]byte{nil, bytes.Repeat([]byte{1}, MinChainKeyBytes-1)} {
			db, err := Open(context.Background(), filepath.Join(t.TempDir(), "journal.db"), Options{ChainKey: key})
			if err == nil {
				db.Close()
				t.Fatalf("Open with a %d-byte key succeeded", len(key))
			}
			if !strings.Contains(err.Error(), "chain key") {
				t.Errorf("err = %v, want it to name the chain key", err)
			}
		}
	})

	t.Run("ErrWrongKeyAtOpen", func(t *testing.T) {
		td := mustOpen(t)
		recordN(t, td, 3)
		td.Close()
		other := bytes.Repeat([]byte{0x77}, MinChainKeyBytes)
		db, err := Open(context.Background(), td.path, Options{ChainKey: other, AnchorPath: td.anchor})
		if err == nil {
			db.Close()
			t.Fatal("Open with another key succeeded: it would append rows no one can verify")
		}
		if !errors.Is(err, ErrChainKey) || !strings.Contains(err.Error(), "restore the chain-key") {
			t.Errorf("err = %v, want ErrChainKey with how to fix it", err)
		}
	})

	t.Run("WrongKeyAtVerify", func(t *testing.T) {
		td := mustOpen(t)
		recordN(t, td, 3)
		opts := td.vopts()
		opts.Key = bytes.Repeat([]byte{0x77}, MinChainKeyBytes)
		rep := mustVerify(t, td.DB, opts)
		want := []Problem{{Kind: ProblemAnchor}, {Kind: ProblemKey}}
		if diff := cmp.Diff(want, kinds(rep.Problems)); diff != "" || rep.OK {
			t.Errorf("problems (-want +got):\n%s\n%s", diff, rep)
		}
		if !strings.Contains(rep.String(), "not the key this journal was written with") {
			t.Errorf("report does not say the key is wrong:\n%s", rep)
		}
	})

	t.Run("MissingKeyAtVerify", func(t *testing.T) {
		td := mustOpen(t)
		recordN(t, td, 3)
		opts := td.vopts()
		opts.Key, opts.KeyErr = nil, errors.New("chain-key is missing; restore it")
		rep := mustVerify(t, td.DB, opts)
		if diff := cmp.Diff([]Problem{{Kind: ProblemKey}}, kinds(rep.Problems)); diff != "" || rep.OK {
			t.Errorf("problems (-want +got):\n%s\n%s", diff, rep)
		}
		if !strings.Contains(rep.String(), "chain-key is missing; restore it: the hashes of rows 1..3") {
			t.Errorf("report:\n%s", rep)
		}
	})
}

// TestVerifyAttacks performs each tampering with the journal closed (the
// daemon stopped) and checks that verify names it.
func TestVerifyAttacks(t *testing.T) {
	for _, tc := range []struct {
		name   string
		tamper func(t *testing.T, td *testDB, raw *sql.DB)
		noMirr bool // verify without the mirror: the other witnesses alone
		legacy int  // start from a journal of this many legacy rows, migrated
		want   []Problem
	}{
		{
			name: "TruncatedTail",
			tamper: func(t *testing.T, td *testDB, raw *sql.DB) {
				mustExec(t, raw, `DELETE FROM activity WHERE id > 3;
					UPDATE sqlite_sequence SET seq = 3 WHERE name = 'activity'`)
			},
			noMirr: true,
			want:   []Problem{{ID: 4, Kind: ProblemTruncated}},
		},
		{
			name: "TruncatedTailMirror",
			tamper: func(t *testing.T, td *testDB, raw *sql.DB) {
				mustExec(t, raw, `DELETE FROM activity WHERE id > 3;
					UPDATE sqlite_sequence SET seq = 3 WHERE name = 'activity'`)
			},
			want: []Problem{{ID: 4, Kind: ProblemTruncated}, {ID: 4, Kind: ProblemMirror}},
		},
		{
			name: "RewrittenPlain",
			tamper: func(t *testing.T, td *testDB, raw *sql.DB) {
				mustExec(t, raw, `UPDATE activity SET payload = '{"n":99}' WHERE id = 2`)
				rechainPlain(t, raw, 2)
			},
			noMirr: true,
			// The anchor's hash of row 5 no longer matches either.
			want: []Problem{{ID: 2, Kind: ProblemRewritten}, {ID: 5, Kind: ProblemRewritten}},
		},
		{
			name: "DeletedMiddle",
			tamper: func(t *testing.T, td *testDB, raw *sql.DB) {
				mustExec(t, raw, `DELETE FROM activity WHERE id = 3`)
			},
			noMirr: true,
			want:   []Problem{{ID: 3, Kind: ProblemDeleted}},
		},
		{
			name: "MirrorEdited",
			tamper: func(t *testing.T, td *testDB, raw *sql.DB) {
				editFile(t, filepath.Join(td.audit, "2025-03-14.jsonl"), `"n":2,`, `"n":7,`)
			},
			want: []Problem{{ID: 3, Kind: ProblemMirror}},
		},
		{
			name: "MirrorLineDeleted",
			tamper: func(t *testing.T, td *testDB, raw *sql.DB) {
				dropLine(t, filepath.Join(td.audit, "2025-03-14.jsonl"), 3)
			},
			// Not tampering with the journal: a note, not a problem.
			want: nil,
		},
		{
			name: "AnchorForged",
			tamper: func(t *testing.T, td *testDB, raw *sql.DB) {
				mustExec(t, raw, `DELETE FROM activity WHERE id > 3;
					UPDATE sqlite_sequence SET seq = 3 WHERE name = 'activity'`)
				var h string
				if err := raw.QueryRow(`SELECT hash FROM activity WHERE id = 3`).Scan(&h); err != nil {
					t.Fatal(err)
				}
				a, err := readAnchor(td.anchor)
				if err != nil {
					t.Fatal(err)
				}
				a.ID, a.Hash = 3, h
				writeJSON(t, td.anchor, a)
			},
			noMirr: true,
			want:   []Problem{{Kind: ProblemAnchor}},
		},
		{
			name: "AnchorDeleted",
			tamper: func(t *testing.T, td *testDB, raw *sql.DB) {
				os.Remove(td.anchor)
			},
			noMirr: true,
			want:   []Problem{{Kind: ProblemAnchor}},
		},
		{
			name: "AnchorFIFO",
			tamper: func(t *testing.T, td *testDB, raw *sql.DB) {
				os.Remove(td.anchor)
				if err := syscall.Mkfifo(td.anchor, 0o600); err != nil {
					t.Fatal(err)
				}
			},
			noMirr: true,
			// Reported, not waited on.
			want: []Problem{{Kind: ProblemAnchor}},
		},
		{
			name: "BoundaryDeleted",
			tamper: func(t *testing.T, td *testDB, raw *sql.DB) {
				mustExec(t, raw, `DELETE FROM meta WHERE key = 'chain.keyed_after'`)
			},
			noMirr: true,
			want:   []Problem{{Kind: ProblemBoundary}},
		},
		{
			name: "BoundaryMoved",
			tamper: func(t *testing.T, td *testDB, raw *sql.DB) {
				// Pass rows 1..5 off as old unkeyed rows, re-hashed plainly.
				mustExec(t, raw, `UPDATE meta SET value = '5' WHERE key = 'chain.keyed_after';
					UPDATE activity SET payload = '{"n":99}' WHERE id = 2`)
				rechainPlain(t, raw, 1)
			},
			noMirr: true,
			// Row 6 should be the journal.chain_keyed row ending rows 1..5.
			want: []Problem{{ID: 1, Kind: ProblemBoundary}, {ID: 5, Kind: ProblemRewritten}, {ID: 6, Kind: ProblemBoundary}},
		},
		{
			name: "BoundaryForgedAnchorDeleted",
			tamper: func(t *testing.T, td *testDB, raw *sql.DB) {
				// As BoundaryMoved, with the anchor (which repeats the
				// boundary under its MAC) out of the way.
				mustExec(t, raw, `UPDATE meta SET value = '5' WHERE key = 'chain.keyed_after';
					UPDATE activity SET payload = '{"n":99}' WHERE id = 2`)
				rechainPlain(t, raw, 1)
				os.Remove(td.anchor)
			},
			noMirr: true,
			want:   []Problem{{Kind: ProblemAnchor}, {ID: 6, Kind: ProblemBoundary}},
		},
		{
			name:   "CutToBoundaryAnchorDeleted",
			legacy: 3, // rows 1..3 legacy, 4 journal.chain_keyed, 5..9 keyed
			tamper: func(t *testing.T, td *testDB, raw *sql.DB) {
				mustExec(t, raw, `DELETE FROM activity WHERE id > 3;
					UPDATE sqlite_sequence SET seq = 3 WHERE name = 'activity'`)
				os.Remove(td.anchor)
			},
			noMirr: true,
			want:   []Problem{{Kind: ProblemAnchor}, {ID: 4, Kind: ProblemBoundary}},
		},
		{
			name:   "CutToChainKeyedAnchorDeleted",
			legacy: 3,
			tamper: func(t *testing.T, td *testDB, raw *sql.DB) {
				mustExec(t, raw, `DELETE FROM activity WHERE id > 4;
					UPDATE sqlite_sequence SET seq = 4 WHERE name = 'activity'`)
				os.Remove(td.anchor)
			},
			noMirr: true,
			want:   []Problem{{Kind: ProblemAnchor}},
		},
		{
			name:   "AnchorDeletedMigrated",
			legacy: 3,
			tamper: func(t *testing.T, td *testDB, raw *sql.DB) {
				os.Remove(td.anchor)
			},
			noMirr: true,
			want:   []Problem{{Kind: ProblemAnchor}},
		},
		{
			name:   "BoundaryLowered",
			legacy: 3,
			tamper: func(t *testing.T, td *testDB, raw *sql.DB) {
				// Row 3 re-chained, keyed_after lowered onto it: row 3
				// now claims to start the keyed chain.
				mustExec(t, raw, `UPDATE meta SET value = '2' WHERE key = 'chain.keyed_after'`)
				os.Remove(td.anchor)
			},
			noMirr: true,
			// Row 3 (legacy, checked as keyed) fails its HMAC; the real
			// journal.chain_keyed row 4 is not where meta says.
			want: []Problem{{Kind: ProblemAnchor}, {ID: 3, Kind: ProblemBoundary}, {ID: 3, Kind: ProblemEdited}, {ID: 4, Kind: ProblemBoundary}},
		},
		{
			name:   "BoundaryRaisedOntoChainKeyed",
			legacy: 3,
			tamper: func(t *testing.T, td *testDB, raw *sql.DB) {
				// Rows 1..4 passed off as legacy: row 4 (journal.chain_keyed)
				// would be checked as a plain row, row 5 must then be the
				// marker.
				mustExec(t, raw, `UPDATE meta SET value = '4' WHERE key = 'chain.keyed_after';
					UPDATE activity SET payload = '{"n":99}' WHERE id = 2`)
				rechainPlainUpTo(t, raw, 1, 4)
				os.Remove(td.anchor)
			},
			noMirr: true,
			// Row 4, re-hashed plainly, no longer chains into row 5.
			want: []Problem{{Kind: ProblemAnchor}, {ID: 4, Kind: ProblemEdited}, {ID: 5, Kind: ProblemBoundary}},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			td := openTestDB(t, tc.legacy)
			recordN(t, td, 5)
			if rep := mustVerify(t, td.DB, td.vopts()); !rep.OK || len(rep.Notes) > 0 {
				t.Fatalf("before tampering: %s", rep)
			}
			td.Close()
			raw := rawDB(t, td.path)
			tc.tamper(t, td, raw)
			raw.Close()
			r, err := OpenReader(context.Background(), td.path)
			if err != nil {
				t.Fatal(err)
			}
			defer r.Close()
			opts := td.vopts()
			if tc.noMirr {
				opts.AuditDir = ""
			}
			rep := mustVerify(t, r, opts)
			if diff := cmp.Diff(tc.want, kinds(rep.Problems)); diff != "" || rep.OK != (len(tc.want) == 0) {
				t.Errorf("problems (-want +got):\n%s\nreport:\n%s", diff, rep)
			}
		})
	}
}

// openTestDB is mustOpen, first writing a journal of legacy rows (plain
// SHA-256, schema 3) for Open to migrate when legacy > 0.
func openTestDB(t *testing.T, legacy int) *testDB {
	t.Helper()
	if legacy == 0 {
		return mustOpen(t)
	}
	dir := t.TempDir()
	td := &testDB{path: filepath.Join(dir, "journal.db"), audit: filepath.Join(dir, "audit"),
		anchor: filepath.Join(dir, "journal.anchor"), clock: newClock(t0)}
	writeLegacyJournal(t, td.path, legacy)
	td.DB = mustOpenAt(t, td.path, Options{AuditDir: td.audit, AnchorPath: td.anchor, Clock: td.clock.Now})
	return td
}

func TestVerifyMirrorGapIsANote(t *testing.T) {
	td := mustOpen(t)
	recordN(t, td, 5)
	dropLine(t, filepath.Join(td.audit, "2025-03-14.jsonl"), 3)
	rep := mustVerify(t, td.DB, td.vopts())
	if !rep.OK || len(rep.Notes) != 1 || rep.Notes[0].ID != 3 {
		t.Fatalf("report:\n%s", rep)
	}
	if !strings.Contains(rep.String(), "row 3: mirror — row 3 is not in the audit mirror: a crash between the commit and the mirror append") {
		t.Errorf("report:\n%s", rep)
	}
}

// TestAnchorBehindIsAccepted: a crash between a commit and its anchor
// write leaves the anchor behind the table; that is no alarm as long as the
// anchored row still has its hash.
func TestAnchorBehindIsAccepted(t *testing.T) {
	td := mustOpen(t)
	recordN(t, td, 2)
	old, err := os.ReadFile(td.anchor)
	if err != nil {
		t.Fatal(err)
	}
	recordN(t, td, 3)
	if err := os.WriteFile(td.anchor, old, 0o600); err != nil {
		t.Fatal(err)
	}
	if rep := mustVerify(t, td.DB, td.vopts()); !rep.OK {
		t.Fatalf("anchor behind the head: %s", rep)
	}
	// Reopening accepts it too, records nothing and anchors the head.
	td.Close()
	db := mustOpenAt(t, td.path, Options{AuditDir: td.audit, AnchorPath: td.anchor, Clock: td.clock.Now})
	rows, err := db.Activity(context.Background(), Filter{Type: ActionAnchorMismatch})
	if err != nil || len(rows) != 0 {
		t.Errorf("anchor mismatch rows = %v, %v; want none", rows, err)
	}
	if a, err := readAnchor(td.anchor); err != nil || a.ID != 5 {
		t.Errorf("anchor after reopen = %+v, %v; want row 5", a, err)
	}

	t.Run("ErrAnchoredRowRewritten", func(t *testing.T) {
		td := mustOpen(t)
		recordN(t, td, 2)
		old, _ := os.ReadFile(td.anchor)
		recordN(t, td, 2)
		os.WriteFile(td.anchor, old, 0o600)
		mustExec(t, rawDB(t, td.path), `UPDATE activity SET hash = 'f00d' WHERE id = 2`)
		opts := td.vopts()
		opts.AuditDir = ""
		rep := mustVerify(t, td.DB, opts)
		want := []Problem{{ID: 2, Kind: ProblemRewritten}, {ID: 2, Kind: ProblemEdited}}
		if diff := cmp.Diff(want, kinds(rep.Problems)); diff != "" {
			t.Errorf("problems (-want +got):\n%s\n%s", diff, rep)
		}
	})
}

// TestOpenRecordsTruncation: rows cut from the end while the daemon was
// stopped are recorded at its next start (writing on would re-anchor the
// cut table) and verify keeps reporting them.
func TestOpenRecordsTruncation(t *testing.T) {
	td := mustOpen(t)
	recordN(t, td, 5)
	td.Close()
	mustExec(t, rawDB(t, td.path), `DELETE FROM activity WHERE id > 3;
		UPDATE sqlite_sequence SET seq = 3 WHERE name = 'activity'`)

	db := mustOpenAt(t, td.path, Options{AnchorPath: td.anchor, Clock: td.clock.Now})
	recordN(t, &testDB{DB: db}, 2)
	rows, err := db.Activity(context.Background(), Filter{Type: ActionAnchorMismatch})
	if err != nil || len(rows) != 1 {
		t.Fatalf("anchor mismatch rows = %v, %v; want one", rows, err)
	}
	if rows[0].ID != 4 || rows[0].Payload["kind"] != ProblemTruncated || rows[0].Payload["anchorId"] != json.Number("5") {
		t.Errorf("recorded %+v", rows[0])
	}
	opts := td.vopts()
	opts.AuditDir = ""
	rep := mustVerify(t, db, opts)
	if diff := cmp.Diff([]Problem{{ID: 4, Kind: ProblemTruncated}}, kinds(rep.Problems)); diff != "" {
		t.Errorf("problems (-want +got):\n%s\n%s", diff, rep)
	}
	if !strings.Contains(rep.String(), "recorded at start-up on") || !strings.Contains(rep.String(), "rows 4..5 were deleted from the end") {
		t.Errorf("report:\n%s", rep)
	}
	// The mirror still has the deleted rows 4 and 5, whose ids were issued
	// again.
	rep = mustVerify(t, db, td.vopts())
	if !strings.Contains(rep.String(), "rows 4..5 differ from the audit mirror") {
		t.Errorf("report with the mirror:\n%s", rep)
	}
}

// TestOpenRecordsMissingAnchor: a journal.anchor missing while journal.db
// holds rows is recorded at the next start (re-anchoring would bury it),
// whatever the boundary claims; a journal with no rows yet is no alarm.
func TestOpenRecordsMissingAnchor(t *testing.T) {
	for _, tc := range []struct {
		name   string
		legacy int
		rows   int
		tamper string // SQL run on the stopped journal, besides deleting the anchor
		want   int    // anchor mismatch rows recorded at the restart
	}{
		{name: "Empty", want: 0},
		{name: "AnchorDeleted", rows: 3, want: 1},
		// The journal cut back to its journal.chain_keyed row: what a crash
		// right after the migration would look like, had the migration not
		// anchored the legacy head before its commit.
		{name: "CutToChainKeyed", legacy: 3, rows: 3, want: 1, tamper: `DELETE FROM activity WHERE id > 4;
			UPDATE sqlite_sequence SET seq = 4 WHERE name = 'activity'`},
		{name: "BoundaryForged", rows: 5, want: 1, tamper: `UPDATE meta SET value = '5' WHERE key = 'chain.keyed_after'`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			td := openTestDB(t, tc.legacy)
			recordN(t, td, tc.rows)
			td.Close()
			if tc.tamper != "" {
				mustExec(t, rawDB(t, td.path), tc.tamper)
			}
			if err := os.Remove(td.anchor); err != nil {
				t.Fatal(err)
			}
			db := mustOpenAt(t, td.path, Options{AnchorPath: td.anchor, Clock: td.clock.Now})
			rows, err := db.Activity(context.Background(), Filter{Type: ActionAnchorMismatch})
			if err != nil || len(rows) != tc.want {
				t.Fatalf("anchor mismatch rows = %+v, %v; want %d", rows, err, tc.want)
			}
			opts := VerifyOptions{Key: testKey, AnchorPath: td.anchor}
			rep := mustVerify(t, db, opts)
			if rep.OK != (tc.want == 0) {
				t.Fatalf("verify after the restart:\n%s", rep)
			}
			if tc.want > 0 && (rows[0].Payload["kind"] != ProblemAnchor || !strings.Contains(rep.String(), "journal.anchor is missing")) {
				t.Errorf("recorded %+v; report:\n%s", rows[0], rep)
			}
		})
	}
}

// TestMigrationAnchorsLegacyHead: the migration that keys an old journal
// anchors the legacy head before it commits, so that no keyed row is ever
// committed without an anchor and a missing anchor is never a crash.
func TestMigrationAnchorsLegacyHead(t *testing.T) {
	dir := t.TempDir()
	path, anchorPath := filepath.Join(dir, "journal.db"), filepath.Join(dir, "journal.anchor")
	legacy := writeLegacyJournal(t, path, 3)
	// The first start finds the anchor the migration wrote: nothing to
	// record.
	db := mustOpenAt(t, path, Options{AnchorPath: anchorPath})
	mismatches := func(db *DB) {
		t.Helper()
		rows, err := db.Activity(context.Background(), Filter{Type: ActionAnchorMismatch})
		if err != nil || len(rows) != 0 {
			t.Fatalf("anchor mismatch rows = %+v, %v; want none", rows, err)
		}
	}
	mismatches(db)
	db.Close()

	// A crash between the migration's commit and Open's first advance
	// leaves the anchor the migration wrote: the legacy head, behind the
	// journal.chain_keyed row. The next start accepts it.
	bare := &DB{anchorPath: anchorPath}
	var err error
	if bare.chain, err = newChainer(testKey); err != nil {
		t.Fatal(err)
	}
	if err := bare.anchorLegacyHead(legacyWalk{rows: 3, lastID: 3, head: legacy[2]}); err != nil {
		t.Fatal(err)
	}
	a, err := readAnchor(anchorPath)
	if err != nil || a.ID != 3 || a.KeyedAfter != 3 || a.Hash != legacy[2] || a.MAC != bare.chain.anchorMAC(&a) {
		t.Fatalf("anchor = %+v, %v", a, err)
	}
	db = mustOpenAt(t, path, Options{AnchorPath: anchorPath})
	mismatches(db)
	if rep := mustVerify(t, db, VerifyOptions{Key: testKey, AnchorPath: anchorPath}); !rep.OK {
		t.Errorf("verify:\n%s", rep)
	}
}

// TestMigrateLegacyChain opens a journal written the way builds before
// the keyed chain wrote it (schema 3, plain SHA-256 rows) and checks the
// upgrade: no row re-hashed, the boundary recorded, the keyed chain
// starting from the old head.
func TestMigrateLegacyChain(t *testing.T) {
	ctx := context.Background()
	t.Run("OK", func(t *testing.T) {
		dir := t.TempDir()
		path := filepath.Join(dir, "journal.db")
		legacy := writeLegacyJournal(t, path, 4)
		anchorPath := filepath.Join(dir, "journal.anchor")
		db := mustOpenAt(t, path, Options{AnchorPath: anchorPath})
		recordN(t, &testDB{DB: db}, 2)

		rows, err := db.Activity(ctx, Filter{})
		if err != nil || len(rows) != 7 {
			t.Fatalf("rows = %d, %v; want 4 old, the boundary and 2 new", len(rows), err)
		}
		for i, h := range legacy {
			if rows[i].Hash != h {
				t.Errorf("old row %d re-hashed: %s, was %s", i+1, rows[i].Hash, h)
			}
		}
		b := rows[4]
		if b.ActionType != ActionChainKeyed || b.PrevHash != legacy[3] || b.Payload["legacyIntact"] != true ||
			b.Payload["legacyLastId"] != json.Number("4") || b.Payload["legacyHead"] != legacy[3] {
			t.Errorf("boundary row = %+v", b)
		}
		rep := mustVerify(t, db, VerifyOptions{Key: testKey, AnchorPath: anchorPath})
		if !rep.OK || rep.KeyedAfter != 4 || rep.Rows != 7 {
			t.Errorf("verify after the migration: %s (keyed after %d)", rep, rep.KeyedAfter)
		}

		// Rewriting an old row with the plain chain recomputed up to the
		// boundary no longer goes unseen: the keyed row chains to the old
		// head.
		mustExec(t, rawDB(t, path), `UPDATE activity SET payload = '{"n":99}' WHERE id = 2`)
		raw := rawDB(t, path)
		rechainPlainUpTo(t, raw, 2, 4)
		rep = mustVerify(t, db, VerifyOptions{Key: testKey, AnchorPath: anchorPath})
		if diff := cmp.Diff([]Problem{{ID: 4, Kind: ProblemEdited}}, kinds(rep.Problems)); diff != "" {
			t.Errorf("problems (-want +got):\n%s\n%s", diff, rep)
		}
	})

	t.Run("BrokenBeforeUpgrade", func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "journal.db")
		writeLegacyJournal(t, path, 3)
		mustExec(t, rawDB(t, path), `UPDATE activity SET target = 'edited' WHERE id = 2`)
		db := mustOpenAt(t, path, Options{})
		rows, err := db.Activity(ctx, Filter{Type: ActionChainKeyed})
		if err != nil || len(rows) != 1 || rows[0].Payload["legacyIntact"] != false || rows[0].Payload["legacyProblems"] != json.Number("1") {
			t.Fatalf("boundary row = %+v, %v", rows, err)
		}
		rep := mustVerify(t, db, VerifyOptions{Key: testKey})
		if diff := cmp.Diff([]Problem{{ID: 2, Kind: ProblemEdited}}, kinds(rep.Problems)); diff != "" {
			t.Errorf("problems (-want +got):\n%s\n%s", diff, rep)
		}
	})

	t.Run("Empty", func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "journal.db")
		writeLegacyJournal(t, path, 0)
		db := mustOpenAt(t, path, Options{})
		if rows, err := db.Activity(ctx, Filter{}); err != nil || len(rows) != 0 {
			t.Errorf("rows after migrating an empty journal = %v, %v", rows, err)
		}
	})
}

// writeLegacyJournal creates a schema-3 journal with n activity rows
// chained the way builds before the key did (plain SHA-256, by the same
// canonical encoding) and returns their hashes.
func writeLegacyJournal(t *testing.T, path string, n int) []string {
	t.Helper()
	raw := rawDB(t, path)
	for _, step := range migrations()[:3] {
		mustExec(t, raw, step)
	}
	mustExec(t, raw, `PRAGMA user_version = 3`)
	var hashes []string
	prev := ""
	for i := range n {
		r := mirrorRow{TS: fmtTime(t0.Add(time.Duration(i) * time.Second)), Actor: plexus.ActorSystem, ActionType: "grant.approved",
			Target: fmt.Sprintf("cap.%d", i), Payload: []byte(fmt.Sprintf(`{"n":%d}`, i)), PrevHash: prev}
		r.Hash = legacyHash(prev, appendCanonicalRow(nil, &r))
		if _, err := raw.Exec(`INSERT INTO activity (ts, trace_id, actor, agent_id, action_type, target, payload, prev_hash, hash)
			VALUES (?, '', ?, '', ?, ?, ?, ?, ?)`, r.TS, r.Actor, r.ActionType, r.Target, string(r.Payload), r.PrevHash, r.Hash); err != nil {
			t.Fatal(err)
		}
		hashes = append(hashes, r.Hash)
		prev = r.Hash
	}
	raw.Close()
	return hashes
}

// rechainPlainUpTo is rechainPlain stopping at row to.
func rechainPlainUpTo(t *testing.T, raw *sql.DB, from, to int64) {
	t.Helper()
	// Park the rows after to, rechain, put them back.
	mustExec(t, raw, fmt.Sprintf(`CREATE TEMP TABLE parked AS SELECT * FROM activity WHERE id > %d;
		DELETE FROM activity WHERE id > %d`, to, to))
	rechainPlain(t, raw, from)
	mustExec(t, raw, `INSERT INTO activity SELECT * FROM parked; DROP TABLE parked`)
}

func mustExec(t *testing.T, db *sql.DB, q string) {
	t.Helper()
	if _, err := db.Exec(q); err != nil {
		t.Fatalf("%s: %v", q, err)
	}
}

func editFile(t *testing.T, path, old, new string) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(b, []byte(old)) {
		t.Fatalf("%s has no %q", path, old)
	}
	if err := os.WriteFile(path, bytes.Replace(b, []byte(old), []byte(new), 1), 0o600); err != nil {
		t.Fatal(err)
	}
}

// dropLine deletes the line of row id from a mirror file.
func dropLine(t *testing.T, path string, id int64) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var out []byte
	prefix := fmt.Sprintf(`{"id":%d,`, id)
	for _, l := range bytes.SplitAfter(b, []byte("\n")) {
		if !bytes.HasPrefix(l, []byte(prefix)) {
			out = append(out, l...)
		}
	}
	if len(out) == len(b) {
		t.Fatalf("no line for row %d in %s", id, path)
	}
	if err := os.WriteFile(path, out, 0o600); err != nil {
		t.Fatal(err)
	}
}

func writeJSON(t *testing.T, path string, v any) {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
}

// TestOpenSetsAsideAnchorFIFO: a FIFO planted as the anchor neither blocks
// nor stops the start; it is recorded and set aside.
func TestOpenSetsAsideAnchorFIFO(t *testing.T) {
	td := mustOpen(t)
	recordN(t, td, 2)
	td.Close()
	os.Remove(td.anchor)
	if err := syscall.Mkfifo(td.anchor, 0o600); err != nil {
		t.Fatal(err)
	}
	db := mustOpenAt(t, td.path, Options{AnchorPath: td.anchor, Clock: td.clock.Now})
	rows, err := db.Activity(context.Background(), Filter{Type: ActionAnchorMismatch})
	if err != nil || len(rows) != 1 || !strings.Contains(fmt.Sprint(rows[0].Payload["problem"]), "not a regular file") {
		t.Fatalf("anchor mismatch rows = %+v, %v", rows, err)
	}
	if fi, err := os.Lstat(td.anchor); err != nil || !fi.Mode().IsRegular() {
		t.Errorf("anchor after start: %v, %v; want a regular file", fi, err)
	}
	aside, _ := filepath.Glob(td.anchor + ".not-a-file-*")
	if len(aside) != 1 {
		t.Errorf("set aside: %v", aside)
	}
}
