package journal

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/plexus-gw/plexus"
)

// mirrorLines reads one day's mirror file; a missing file is no lines.
func mirrorLines(t *testing.T, dir, day string) []mirrorRow {
	t.Helper()
	f, err := os.Open(filepath.Join(dir, day+".jsonl"))
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []mirrorRow
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var r mirrorRow
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			t.Fatalf("mirror line %q: %v", sc.Text(), err)
		}
		out = append(out, r)
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

func TestMirror(t *testing.T) {
	t.Run("WrittenAfterCommit", func(t *testing.T) {
		td := mustOpen(t)
		a := plexus.Activity{Actor: plexus.ActorHuman, ActionType: "grant.approved", TraceID: "tr1",
			Payload: map[string]any{"via": plexus.ViaFile, "token": "plx_agent_secret"}}
		mustUpdate(t, td.DB, func(tx plexus.StateTx) error {
			if err := tx.Record(&a); err != nil {
				return err
			}
			if got := mirrorLines(t, td.audit, "2025-03-14"); len(got) != 0 {
				t.Errorf("mirror written before commit: %v", got)
			}
			return nil
		})
		got := mirrorLines(t, td.audit, "2025-03-14")
		want := []mirrorRow{{
			ID: a.ID, TS: "2025-03-14T15:09:26.535897932Z", TraceID: "tr1", Actor: plexus.ActorHuman,
			ActionType: "grant.approved", Payload: json.RawMessage(`{"token":"[redacted]","via":"file"}`),
			PrevHash: "", Hash: a.Hash,
		}}
		if diff := cmp.Diff(want, got, cmpopts.IgnoreUnexported(mirrorRow{})); diff != "" {
			t.Errorf("mirror lines (-want +got):\n%s", diff)
		}
		fi, err := os.Stat(filepath.Join(td.audit, "2025-03-14.jsonl"))
		if err != nil {
			t.Fatal(err)
		}
		if fi.Mode().Perm() != 0o600 {
			t.Errorf("mirror file mode = %o, want 600", fi.Mode().Perm())
		}
	})

	t.Run("NotWrittenOnRollback", func(t *testing.T) {
		td := mustOpen(t)
		recordN(t, td, 1)
		err := td.Update(context.Background(), true, func(tx plexus.StateTx) error {
			if err := tx.Record(&plexus.Activity{Actor: plexus.ActorSystem, ActionType: "rolled.back"}); err != nil {
				return err
			}
			return errBoom
		})
		if !errors.Is(err, errBoom) {
			t.Fatal(err)
		}
		if got := mirrorLines(t, td.audit, "2025-03-14"); len(got) != 1 {
			t.Errorf("mirror holds %d lines after a committed and a rolled-back row, want 1", len(got))
		}
	})

	t.Run("DailyFiles", func(t *testing.T) {
		td := mustOpen(t)
		late := time.Date(2025, 3, 14, 23, 59, 59, 0, time.FixedZone("CET", 3600)) // 22:59:59Z
		mustUpdate(t, td.DB, func(tx plexus.StateTx) error {
			for _, ts := range []time.Time{late, late.Add(2 * time.Hour), late.Add(3 * time.Hour)} {
				if err := tx.Record(&plexus.Activity{TS: ts, Actor: plexus.ActorSystem, ActionType: "x"}); err != nil {
					return err
				}
			}
			return nil
		})
		if n := len(mirrorLines(t, td.audit, "2025-03-14")); n != 1 {
			t.Errorf("2025-03-14.jsonl has %d lines, want 1", n)
		}
		if n := len(mirrorLines(t, td.audit, "2025-03-15")); n != 2 {
			t.Errorf("2025-03-15.jsonl has %d lines, want 2", n)
		}
	})

	t.Run("FailureIsCountedNotFatal", func(t *testing.T) {
		td := mustOpen(t)
		// A directory where the day's file should be makes the append fail.
		if err := os.Mkdir(filepath.Join(td.audit, "2025-03-14.jsonl"), 0o700); err != nil {
			t.Fatal(err)
		}
		recordN(t, td, 1)
		if got := td.MirrorErrors(); got != 1 {
			t.Errorf("MirrorErrors = %d, want 1", got)
		}
		if rows, _ := td.Activity(context.Background(), Filter{}); len(rows) != 1 {
			t.Errorf("activity rows = %d, want the row kept in SQLite", len(rows))
		}
	})

	t.Run("PlantedLinkOrFIFONeverFollowed", func(t *testing.T) {
		for _, plant := range []string{"symlink", "fifo"} {
			t.Run(plant, func(t *testing.T) {
				td := mustOpen(t)
				target := filepath.Join(t.TempDir(), "elsewhere")
				if err := os.WriteFile(target, []byte("owner's file\n"), 0o600); err != nil {
					t.Fatal(err)
				}
				day := filepath.Join(td.audit, "2025-03-14.jsonl")
				var err error
				if plant == "symlink" {
					err = os.Symlink(target, day)
				} else {
					err = syscall.Mkfifo(day, 0o600)
				}
				if err != nil {
					t.Fatal(err)
				}
				recordN(t, td, 1) // returns: a FIFO without a reader is not waited on
				if got := td.MirrorErrors(); got != 1 {
					t.Errorf("MirrorErrors = %d, want 1", got)
				}
				if b, _ := os.ReadFile(target); string(b) != "owner's file\n" {
					t.Errorf("the link's target now holds %q: the append followed the link", b)
				}
				if rows, _ := td.Activity(context.Background(), Filter{}); len(rows) != 1 {
					t.Errorf("activity rows = %d, want the row kept in SQLite", len(rows))
				}
			})
		}
	})

	t.Run("Off", func(t *testing.T) {
		dir := t.TempDir()
		db := mustOpenAt(t, filepath.Join(dir, "journal.db"), Options{})
		mustUpdate(t, db, func(tx plexus.StateTx) error {
			return tx.Record(&plexus.Activity{Actor: plexus.ActorSystem, ActionType: "x"})
		})
		entries, _ := os.ReadDir(dir)
		for _, e := range entries {
			if filepath.Ext(e.Name()) == ".jsonl" || e.IsDir() {
				t.Errorf("mirror off, yet %s was written", e.Name())
			}
		}
	})
}

func TestMirrorRetention(t *testing.T) {
	dir := t.TempDir()
	audit := filepath.Join(dir, "audit")
	if err := os.Mkdir(audit, 0o700); err != nil {
		t.Fatal(err)
	}
	now := t0
	day := func(daysAgo int) string { return now.AddDate(0, 0, -daysAgo).Format("2006-01-02") + ".jsonl" }
	for _, name := range []string{day(91), day(90), day(89), "notes.txt", "1999-01-01.txt"} {
		if err := os.WriteFile(filepath.Join(audit, name), []byte("{}\n"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	clk := newClock(now)
	db := mustOpenAt(t, filepath.Join(dir, "journal.db"), Options{AuditDir: audit, Clock: clk.Now})

	exists := func(name string) bool {
		_, err := os.Stat(filepath.Join(audit, name))
		return err == nil
	}
	for name, want := range map[string]bool{
		day(91): false, day(90): true, day(89): true, "notes.txt": true, "1999-01-01.txt": true,
	} {
		if got := exists(name); got != want {
			t.Errorf("at Open: %s exists = %v, want %v", name, got, want)
		}
	}

	// Two days later the next append runs the daily pass.
	clk.Set(now.AddDate(0, 0, 2))
	mustUpdate(t, db, func(tx plexus.StateTx) error {
		return tx.Record(&plexus.Activity{Actor: plexus.ActorSystem, ActionType: "x"})
	})
	if exists(day(90)) || exists(day(89)) {
		t.Errorf("files now 92 and 91 days old survived the daily pass")
	}
	if !exists(now.AddDate(0, 0, 2).Format("2006-01-02") + ".jsonl") {
		t.Errorf("today's file missing")
	}
}
