package journal

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/plexus-gw/plexus"
)

func TestOpen(t *testing.T) {
	t.Run("OK", func(t *testing.T) {
		td := mustOpen(t)
		var v int
		if err := td.w.QueryRow("PRAGMA user_version").Scan(&v); err != nil {
			t.Fatal(err)
		}
		if got, want := v, len(migrations()); got != want {
			t.Errorf("user_version = %d, want %d", got, want)
		}
		var mode string
		if err := td.r.QueryRow("PRAGMA journal_mode").Scan(&mode); err != nil {
			t.Fatal(err)
		}
		if mode != "wal" {
			t.Errorf("journal_mode = %q, want wal", mode)
		}
		var fk int
		if err := td.w.QueryRow("PRAGMA foreign_keys").Scan(&fk); err != nil {
			t.Fatal(err)
		}
		if fk != 1 {
			t.Errorf("foreign_keys = %d, want 1", fk)
		}
	})

	t.Run("Reopen", func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "journal.db")
		db, err := Open(context.Background(), path, Options{ChainKey: testKey})
		if err != nil {
			t.Fatal(err)
		}
		mustUpdate(t, db, func(tx plexus.StateTx) error { return tx.SetMeta("k", "v") })
		if err := db.Close(); err != nil {
			t.Fatal(err)
		}
		// Reopening runs no migration again (it would fail on CREATE TABLE)
		// and keeps the data.
		db = mustOpenAt(t, path, Options{})
		mustView(t, db, func(tx plexus.StateTx) error {
			got, err := tx.Meta("k")
			if err != nil || got != "v" {
				t.Errorf("Meta(k) = %q, %v; want v", got, err)
			}
			return nil
		})
		var v int
		if err := db.r.QueryRow("PRAGMA user_version").Scan(&v); err != nil {
			t.Fatal(err)
		}
		if v != len(migrations()) {
			t.Errorf("user_version = %d after reopen, want %d", v, len(migrations()))
		}
	})

	t.Run("ErrNewerSchema", func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "journal.db")
		raw := rawDB(t, path)
		if _, err := raw.Exec("PRAGMA user_version = 99"); err != nil {
			t.Fatal(err)
		}
		raw.Close()
		db, err := Open(context.Background(), path, Options{ChainKey: testKey})
		if err == nil {
			db.Close()
			t.Fatal("Open succeeded on a schema newer than the build")
		}
		if !strings.Contains(err.Error(), "newer") {
			t.Errorf("err = %v, want it to say the schema is newer", err)
		}
	})
}

func TestFilePermissions(t *testing.T) {
	t.Run("Fresh", func(t *testing.T) {
		td := mustOpen(t)
		// A write makes sure the -wal exists.
		mustUpdate(t, td.DB, func(tx plexus.StateTx) error {
			return tx.Record(&plexus.Activity{Actor: plexus.ActorSystem, ActionType: "test.perm"})
		})
		for _, p := range []string{td.path, td.path + "-wal", td.path + "-shm"} {
			fi, err := os.Stat(p)
			if err != nil {
				t.Fatal(err)
			}
			if got := fi.Mode().Perm(); got != 0o600 {
				t.Errorf("%s mode = %o, want 600", filepath.Base(p), got)
			}
		}
		fi, err := os.Stat(td.audit)
		if err != nil {
			t.Fatal(err)
		}
		if got := fi.Mode().Perm(); got != 0o700 {
			t.Errorf("audit dir mode = %o, want 700", got)
		}
	})

	t.Run("Existing", func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "journal.db")
		if err := os.WriteFile(path, nil, 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(path, 0o644); err != nil { // defeat the umask
			t.Fatal(err)
		}
		mustOpenAt(t, path, Options{})
		fi, err := os.Stat(path)
		if err != nil {
			t.Fatal(err)
		}
		if got := fi.Mode().Perm(); got != 0o600 {
			t.Errorf("mode = %o, want 600", got)
		}
	})
}

var errBoom = errors.New("boom")

func TestUpdate(t *testing.T) {
	t.Run("Commit", func(t *testing.T) {
		td := mustOpen(t)
		mustUpdate(t, td.DB, func(tx plexus.StateTx) error { return tx.SetMeta("k", "1") })
		mustView(t, td.DB, func(tx plexus.StateTx) error {
			if got, err := tx.Meta("k"); err != nil || got != "1" {
				t.Errorf("Meta(k) = %q, %v; want 1", got, err)
			}
			return nil
		})
	})

	t.Run("ErrRollsBack", func(t *testing.T) {
		td := mustOpen(t)
		err := td.Update(context.Background(), true, func(tx plexus.StateTx) error {
			if err := tx.PutAgent(&plexus.Agent{ID: "a1", CreatedAt: t0}); err != nil {
				return err
			}
			if err := tx.Record(&plexus.Activity{Actor: plexus.ActorHuman, ActionType: "agent.connected", AgentID: "a1"}); err != nil {
				return err
			}
			return errBoom
		})
		if !errors.Is(err, errBoom) {
			t.Fatalf("Update err = %v, want errBoom as is", err)
		}
		mustView(t, td.DB, func(tx plexus.StateTx) error {
			if _, err := tx.Agent("a1"); !errors.Is(err, plexus.ErrNotFound) {
				t.Errorf("Agent after rollback: err = %v, want ErrNotFound", err)
			}
			return nil
		})
		rows, err := td.Activity(context.Background(), Filter{})
		if err != nil {
			t.Fatal(err)
		}
		if len(rows) != 0 {
			t.Errorf("activity rows after rollback = %d, want 0", len(rows))
		}
		if entries, _ := os.ReadDir(td.audit); len(entries) != 0 {
			t.Errorf("audit mirror after rollback holds %d files, want none", len(entries))
		}
	})

	t.Run("PlexusErrorKeepsCode", func(t *testing.T) {
		td := mustOpen(t)
		err := td.Update(context.Background(), false, func(tx plexus.StateTx) error {
			return plexus.Errorf(plexus.CodeConflict, "already decided")
		})
		if got := plexus.CodeOf(err); got != plexus.CodeConflict {
			t.Errorf("CodeOf = %q, want %q", got, plexus.CodeConflict)
		}
	})

	t.Run("DurableRestoresNormal", func(t *testing.T) {
		td := mustOpen(t)
		var inside int
		err := td.Update(context.Background(), true, func(stx plexus.StateTx) error {
			return stx.(*tx).queryRow("PRAGMA synchronous").Scan(&inside)
		})
		if err != nil {
			t.Fatal(err)
		}
		var after int
		if err := td.w.QueryRow("PRAGMA synchronous").Scan(&after); err != nil {
			t.Fatal(err)
		}
		// 2 is FULL, 1 is NORMAL.
		if inside != 2 || after != 1 {
			t.Errorf("synchronous inside durable Update = %d (want 2), after = %d (want 1)", inside, after)
		}
	})

	t.Run("ErrCanceled", func(t *testing.T) {
		td := mustOpen(t)
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		called := false
		err := td.Update(ctx, false, func(tx plexus.StateTx) error { called = true; return nil })
		if err == nil || called {
			t.Errorf("Update on a canceled context: err = %v, fn called = %v; want an error and no call", err, called)
		}
	})
}

func TestViewRefusesWrites(t *testing.T) {
	td := mustOpen(t)
	calls := map[string]func(tx plexus.StateTx) error{
		"Record":   func(tx plexus.StateTx) error { return tx.Record(&plexus.Activity{ActionType: "x"}) },
		"Publish":  func(tx plexus.StateTx) error { return tx.Publish(&plexus.Event{Type: "x"}) },
		"PutAgent": func(tx plexus.StateTx) error { return tx.PutAgent(&plexus.Agent{ID: "a"}) },
		"PutEnrollCode": func(tx plexus.StateTx) error {
			return tx.PutEnrollCode(&plexus.EnrollCode{Hash: []byte{1}, AgentID: "a"})
		},
		"ConsumeEnrollCode": func(tx plexus.StateTx) error {
			_, err := tx.ConsumeEnrollCode([]byte{1}, t0)
			return err
		},
		"PutSession": func(tx plexus.StateTx) error { return tx.PutSession(&plexus.Session{ID: "s"}) },
		"RevokeSessions": func(tx plexus.StateTx) error {
			_, err := tx.RevokeSessions(plexus.SessionAgent, "", 0, t0)
			return err
		},
		"PutGrant":      func(tx plexus.StateTx) error { return tx.PutGrant(&plexus.Grant{ID: "g"}) },
		"RevokeGrant":   func(tx plexus.StateTx) error { return tx.RevokeGrant("g", t0) },
		"MarkGrantUsed": func(tx plexus.StateTx) error { return tx.MarkGrantUsed("g", t0) },
		"PutToken":      func(tx plexus.StateTx) error { return tx.PutToken(&plexus.TokenRecord{JTI: "j"}) },
		"RevokeToken": func(tx plexus.StateTx) error {
			_, err := tx.RevokeToken("j", "", t0)
			return err
		},
		"PutPending":   func(tx plexus.StateTx) error { return tx.PutPending(&plexus.Pending{ID: "p"}) },
		"SetMeta":      func(tx plexus.StateTx) error { return tx.SetMeta("k", "v") },
		"PutSource":    func(tx plexus.StateTx) error { return tx.PutSource(&plexus.SourceConfig{ID: "s"}) },
		"DeleteSource": func(tx plexus.StateTx) error { return tx.DeleteSource("s") },
	}
	for name, call := range calls {
		t.Run(name, func(t *testing.T) {
			err := td.View(context.Background(), call)
			if !errors.Is(err, errReadOnly) {
				t.Errorf("%s inside View: err = %v, want errReadOnly", name, err)
			}
		})
	}
}

// TestReadersNotBlocked holds a write transaction open and reads meanwhile:
// the read must complete (WAL, separate reader pool) and see only committed
// state.
func TestReadersNotBlocked(t *testing.T) {
	td := mustOpen(t)
	mustUpdate(t, td.DB, func(tx plexus.StateTx) error { return tx.SetMeta("k", "committed") })

	inTx := make(chan struct{})
	release := make(chan struct{})
	done := make(chan error, 1)
	go func() {
		done <- td.Update(context.Background(), false, func(tx plexus.StateTx) error {
			if err := tx.SetMeta("k", "uncommitted"); err != nil {
				return err
			}
			close(inTx)
			<-release
			return nil
		})
	}()
	<-inTx

	// A deadline only so that a regression fails instead of hanging.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var got string
	err := td.View(ctx, func(tx plexus.StateTx) error {
		var err error
		got, err = tx.Meta("k")
		return err
	})
	close(release)
	if err != nil {
		t.Fatalf("View during a write transaction: %v", err)
	}
	if got != "committed" {
		t.Errorf("View saw %q during the write, want the committed value", got)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	mustView(t, td.DB, func(tx plexus.StateTx) error {
		if got, _ := tx.Meta("k"); got != "uncommitted" {
			t.Errorf("after commit Meta(k) = %q, want uncommitted", got)
		}
		return nil
	})
}

func TestOpenReader(t *testing.T) {
	t.Run("OK", func(t *testing.T) {
		td := mustOpen(t) // the daemon keeps its handle open meanwhile
		recordN(t, td, 3)
		r, err := OpenReader(context.Background(), td.path)
		if err != nil {
			t.Fatal(err)
		}
		defer r.Close()
		rows, err := r.Activity(context.Background(), Filter{})
		if err != nil || len(rows) != 3 {
			t.Errorf("Activity through OpenReader = %d rows, %v; want 3", len(rows), err)
		}
		if rep, err := r.Verify(context.Background(), td.vopts()); err != nil || !rep.OK {
			t.Errorf("Verify through OpenReader = %+v, %v", rep, err)
		}
		err = r.Update(context.Background(), false, func(tx plexus.StateTx) error { return tx.SetMeta("k", "v") })
		if err == nil {
			t.Error("Update through OpenReader succeeded")
		}
	})

	t.Run("ErrMissing", func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "journal.db")
		if db, err := OpenReader(context.Background(), path); err == nil {
			db.Close()
			t.Error("OpenReader succeeded on a missing file")
		}
		if _, err := os.Stat(path); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("OpenReader created %s (stat err = %v)", path, err)
		}
	})

	t.Run("ErrUnmigrated", func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "journal.db")
		if err := os.WriteFile(path, nil, 0o600); err != nil {
			t.Fatal(err)
		}
		if db, err := OpenReader(context.Background(), path); err == nil {
			db.Close()
			t.Error("OpenReader succeeded on an empty, unmigrated file")
		}
	})
}

// TestBackgroundCheckpoint: the WAL is checkpointed into journal.db by the
// journal's own goroutine, not inside a commit. The commits below write far
// fewer pages than the writer's backstop, so journal.db grows only if the
// background checkpoint ran; with it turned off (an interval longer than
// the test) it stays as it was.
func TestBackgroundCheckpoint(t *testing.T) {
	for _, tt := range []struct {
		name  string
		every time.Duration
		grows bool
	}{{"Runs", 5 * time.Millisecond, true}, {"NotInCommits", time.Hour, false}} {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "journal.db")
			db := mustOpenAt(t, path, Options{CheckpointEvery: tt.every})
			size := func() int64 {
				fi, err := os.Stat(path)
				if err != nil {
					t.Fatal(err)
				}
				return fi.Size()
			}
			before := size()
			for i := range 300 {
				if err := db.Update(context.Background(), false, func(tx plexus.StateTx) error {
					return tx.Record(&plexus.Activity{Actor: "a", ActionType: "invoke.ok", TraceID: fmt.Sprintf("trc_%04d", i),
						Payload: map[string]any{"pad": strings.Repeat("x", 400)}})
				}); err != nil {
					t.Fatal(err)
				}
			}
			deadline := time.Now().Add(5 * time.Second)
			for tt.grows && size() == before && time.Now().Before(deadline) {
				time.Sleep(5 * time.Millisecond)
			}
			if grew := size() > before; grew != tt.grows {
				t.Errorf("journal.db grew from %d to %d bytes: grew = %v, want %v", before, size(), grew, tt.grows)
			}
		})
	}
}
