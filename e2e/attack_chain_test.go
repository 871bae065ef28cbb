package e2e

// Attacks on the journal's chain (issue 12 §6), each performed end to end:
// a real daemon writes the journal, it is stopped (or SIGKILLed), the
// attacker edits journal.db with a plain SQLite connection (or the audit
// mirror with os calls) holding everything but the chain-key, and the real
// `plexus journal verify` must name what was done.

import (
	"bytes"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	_ "github.com/mattn/go-sqlite3" // the attacker's own connection
	"github.com/plexus-gw/plexus"
	"github.com/plexus-gw/plexus/daemon"
)

// chainAttackEnv is a home a real daemon wrote: a portal, an enrolled
// agent and a few invocations, then the daemon stopped.
type chainAttackEnv struct {
	*cliEnv
	td *testDaemon
}

func newChainAttackEnv(t *testing.T) *chainAttackEnv {
	t.Helper()
	e, td := newCLIEnv(t)
	e.notesDir()
	e.enroll("claude")
	for range 4 {
		e.ok("agent", "call", "portal.notes.read", "path=hello.md")
	}
	e.ok("journal", "verify")
	td.stop()
	return &chainAttackEnv{cliEnv: e, td: td}
}

// attackerDB opens journal.db the way an attacker with file access would.
func (e *chainAttackEnv) attackerDB() *sql.DB {
	e.t.Helper()
	u := url.URL{Scheme: "file", Path: filepath.Join(e.home, "journal.db"), RawQuery: "_busy_timeout=5000"}
	db, err := sql.Open("sqlite3", u.String())
	if err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(func() { db.Close() })
	return db
}

func (e *chainAttackEnv) exec(db *sql.DB, q string, args ...any) {
	e.t.Helper()
	if _, err := db.Exec(q, args...); err != nil {
		e.t.Fatalf("%s: %v", q, err)
	}
}

func (e *chainAttackEnv) lastID(db *sql.DB) int64 {
	e.t.Helper()
	var id int64
	if err := db.QueryRow(`SELECT max(id) FROM activity`).Scan(&id); err != nil {
		e.t.Fatal(err)
	}
	return id
}

// verifyBroken runs `plexus journal verify`, requires it to exit non-zero
// and to print every want, and returns its output.
func (e *chainAttackEnv) verifyBroken(want ...string) string {
	e.t.Helper()
	r := e.run("journal", "verify")
	if r.code != exitError || !strings.HasPrefix(r.stdout, "BROKEN: ") {
		e.t.Fatalf("verify after the attack: %s", r)
	}
	for _, w := range want {
		if !strings.Contains(r.stdout, w) {
			e.t.Errorf("verify output lacks %q:\n%s", w, r.stdout)
		}
	}
	return r.stdout
}

// snapshot is what verify must leave as it found it.
func (e *chainAttackEnv) snapshot() map[string][]byte {
	e.t.Helper()
	files := map[string][]byte{}
	for _, p := range []string{"journal.db", "journal.anchor", "chain-key"} {
		b, err := os.ReadFile(filepath.Join(e.home, p))
		if err != nil && !errors.Is(err, os.ErrNotExist) {
			e.t.Fatal(err)
		}
		files[p] = b
	}
	mirror, _ := filepath.Glob(filepath.Join(e.home, "audit", "*.jsonl"))
	for _, p := range mirror {
		b, err := os.ReadFile(p)
		if err != nil {
			e.t.Fatal(err)
		}
		files[filepath.Base(p)] = b
	}
	return files
}

func (e *chainAttackEnv) unchangedSince(before map[string][]byte) {
	e.t.Helper()
	after := e.snapshot()
	for name, b := range before {
		if !bytes.Equal(b, after[name]) {
			e.t.Errorf("verify changed %s", name)
		}
	}
}

// plainCanonical is the documented canonical row (docs/journal.md): what an
// attacker needs to recompute the chain without the key.
func plainCanonical(t testing.TB, ts, trace, actor, agent, typ, target, payload string) []byte {
	t.Helper()
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	err := enc.Encode(struct {
		TS         string          `json:"ts"`
		TraceID    string          `json:"trace_id"`
		Actor      string          `json:"actor"`
		AgentID    string          `json:"agent_id"`
		ActionType string          `json:"action_type"`
		Target     string          `json:"target"`
		Payload    json.RawMessage `json:"payload"`
	}{ts, trace, actor, agent, typ, target, json.RawMessage(payload)})
	if err != nil {
		t.Fatal(err)
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n"))
}

// rechainPlainFrom recomputes hex(sha256(prev_hash || canonical)) from row
// from to the end: the attack the unkeyed chain could not see.
func (e *chainAttackEnv) rechainPlainFrom(db *sql.DB, from int64) {
	e.t.Helper()
	var prev string // "" before row 1
	if err := db.QueryRow(`SELECT coalesce((SELECT hash FROM activity WHERE id < ? ORDER BY id DESC LIMIT 1), '')`, from).Scan(&prev); err != nil {
		e.t.Fatal(err)
	}
	rows, err := db.Query(`SELECT id, ts, trace_id, actor, agent_id, action_type, target, payload FROM activity WHERE id >= ? ORDER BY id`, from)
	if err != nil {
		e.t.Fatal(err)
	}
	type row struct {
		id                                            int64
		ts, trace, actor, agent, typ, target, payload string
	}
	var all []row
	for rows.Next() {
		var r row
		if err := rows.Scan(&r.id, &r.ts, &r.trace, &r.actor, &r.agent, &r.typ, &r.target, &r.payload); err != nil {
			e.t.Fatal(err)
		}
		all = append(all, r)
	}
	rows.Close()
	for _, r := range all {
		sum := sha256.Sum256(append([]byte(prev), plainCanonical(e.t, r.ts, r.trace, r.actor, r.agent, r.typ, r.target, r.payload)...))
		h := hex.EncodeToString(sum[:])
		e.exec(db, `UPDATE activity SET prev_hash = ?, hash = ? WHERE id = ?`, prev, h, r.id)
		prev = h
	}
}

func TestAttackChainTruncatedTail(t *testing.T) {
	failOnLeakedGoroutines(t)
	e := newChainAttackEnv(t)
	db := e.attackerDB()
	last := e.lastID(db)
	// Delete the last 3 rows and make sqlite_sequence agree, so ids carry
	// on as if they had never been issued.
	e.exec(db, `DELETE FROM activity WHERE id > ?`, last-3)
	e.exec(db, `UPDATE sqlite_sequence SET seq = ? WHERE name = 'activity'`, last-3)
	db.Close()

	before := e.snapshot()
	e.verifyBroken(
		fmt.Sprintf("row %d: truncated — the database ends at row %d but the anchor records row %d: rows %d..%d were deleted from the end",
			last-2, last-3, last, last-2, last),
		fmt.Sprintf("row %d: mirror — rows %d..%d are in the audit mirror but not in the database: deleted", last-2, last-2, last),
	)
	e.unchangedSince(before)

	// Starting the daemon again does not re-anchor the cut table: it
	// records what it found, and verify keeps reporting it.
	td := startTestDaemon(t, daemon.Options{Home: e.home})
	e.addr = td.Addr()
	e.ok("agent", "call", "portal.notes.read", "path=hello.md")
	td.stop()
	e.verifyBroken(
		fmt.Sprintf("row %d: truncated — recorded at start-up on", last-2),
		fmt.Sprintf("rows %d..%d were deleted from the end", last-2, last),
	)
}

// TestAttackChainBoundaryForged: with journal.anchor deleted, meta
// chain.keyed_after is raised to the last row, claiming every row is
// legacy (unkeyed), a row is edited and the plain SHA-256 chain recomputed
// from row 1: no key needed; the audit mirror is deleted too. Verify names the missing anchor and the
// missing journal.chain_keyed row, and a restart (which would re-anchor
// the forged boundary) records the missing anchor in the keyed chain, so
// verify still reports both.
func TestAttackChainBoundaryForged(t *testing.T) {
	failOnLeakedGoroutines(t)
	e := newChainAttackEnv(t)
	db := e.attackerDB()
	last := e.lastID(db)
	var victim int64
	if err := db.QueryRow(`SELECT min(id) FROM activity WHERE action_type = 'invoke.ok'`).Scan(&victim); err != nil {
		t.Fatal(err)
	}
	e.exec(db, `UPDATE meta SET value = ? WHERE key = 'chain.keyed_after'`, fmt.Sprint(last))
	e.exec(db, `UPDATE activity SET payload = '{"durationMs":1}' WHERE id = ?`, victim)
	e.rechainPlainFrom(db, 1)
	db.Close()
	// The audit mirror would show the recomputed hashes: the attacker
	// deletes it too, so the journal's own witnesses must tell.
	mirror, _ := filepath.Glob(filepath.Join(e.home, "audit", "*.jsonl"))
	for _, p := range append(mirror, filepath.Join(e.home, "journal.anchor")) {
		if err := os.Remove(p); err != nil {
			t.Fatal(err)
		}
	}

	before := e.snapshot()
	boundary := fmt.Sprintf("row %d: boundary — meta chain.keyed_after says rows 1..%d are legacy (unkeyed), but row %d, the journal.chain_keyed row that must follow them, is missing",
		last+1, last, last+1)
	e.verifyBroken("journal: anchor — journal.anchor is missing", boundary)
	e.unchangedSince(before)

	td := startTestDaemon(t, daemon.Options{Home: e.home})
	e.addr = td.Addr()
	e.ok("agent", "call", "portal.notes.read", "path=hello.md")
	td.stop()
	e.verifyBroken(
		fmt.Sprintf("row %d: anchor — recorded at start-up on", last+1),
		"journal.anchor is missing while journal.db holds rows up to",
		fmt.Sprintf("row %d: boundary — meta chain.keyed_after says rows 1..%d are legacy (unkeyed), but row %d, which must be the journal.chain_keyed row, is journal.anchor_mismatch",
			last+1, last, last+1),
	)
}

func TestAttackChainRewrittenPlain(t *testing.T) {
	failOnLeakedGoroutines(t)
	e := newChainAttackEnv(t)
	db := e.attackerDB()
	var victim int64
	if err := db.QueryRow(`SELECT min(id) FROM activity WHERE action_type = 'invoke.ok'`).Scan(&victim); err != nil {
		t.Fatal(err)
	}
	last := e.lastID(db)
	e.exec(db, `UPDATE activity SET payload = '{"durationMs":1}' WHERE id = ?`, victim)
	e.rechainPlainFrom(db, victim)
	db.Close()

	before := e.snapshot()
	e.verifyBroken(
		fmt.Sprintf("row %d: rewritten — rows %d..%d chain to each other but their hashes are not their HMAC under chain-key: the chain was recomputed from row %d on as a plain SHA-256",
			victim, victim, last, victim),
		// The mirror names the row whose content changed.
		fmt.Sprintf("row %d: mirror — row %d differs from the audit mirror: the database row's content was edited", victim, victim),
		fmt.Sprintf("row %d: mirror — rows %d..%d differ from the audit mirror: same content, different hashes: the chain was recomputed", victim+1, victim+1, last),
	)
	e.unchangedSince(before)
}

func TestAttackChainDeletedMiddle(t *testing.T) {
	failOnLeakedGoroutines(t)
	e := newChainAttackEnv(t)
	db := e.attackerDB()
	victim := e.lastID(db) / 2
	e.exec(db, `DELETE FROM activity WHERE id = ?`, victim)
	db.Close()
	e.verifyBroken(
		fmt.Sprintf("row %d: deleted — rows %d..%d missing", victim, victim, victim),
		fmt.Sprintf("row %d: mirror — row %d is in the audit mirror but not in the database: deleted", victim, victim),
	)
}

func TestAttackChainMirrorEdited(t *testing.T) {
	failOnLeakedGoroutines(t)
	e := newChainAttackEnv(t)
	files, _ := filepath.Glob(filepath.Join(e.home, "audit", "*.jsonl"))
	if len(files) != 1 {
		t.Fatalf("mirror files %v", files)
	}
	b, err := os.ReadFile(files[0])
	if err != nil {
		t.Fatal(err)
	}
	// Hide one invocation in the mirror: name another capability.
	i := bytes.Index(b, []byte(`"target":"portal.notes.read"`))
	if i < 0 {
		t.Fatalf("no invocation in the mirror:\n%s", b)
	}
	var line struct {
		ID int64 `json:"id"`
	}
	start := bytes.LastIndexByte(b[:i], '\n') + 1
	if err := json.Unmarshal(b[start:start+bytes.IndexByte(b[start:], '\n')], &line); err != nil {
		t.Fatal(err)
	}
	edited := bytes.Replace(b, []byte(`"target":"portal.notes.read"`), []byte(`"target":"portal.notes.list"`), 1)
	if err := os.WriteFile(files[0], edited, 0o600); err != nil {
		t.Fatal(err)
	}
	e.verifyBroken(fmt.Sprintf("row %d: mirror — row %d differs from the audit mirror: the mirror line was edited (the database row verifies)", line.ID, line.ID))
}

// TestAttackChainKeyFile: without the chain-key, or with another one,
// verify says so plainly instead of listing every row, and the daemon
// refuses to append rows under a key the chain does not verify with.
func TestAttackChainKeyFile(t *testing.T) {
	failOnLeakedGoroutines(t)
	e := newChainAttackEnv(t)
	keyPath := filepath.Join(e.home, "chain-key")
	orig, err := os.ReadFile(keyPath)
	if err != nil {
		t.Fatal(err)
	}

	t.Run("Missing", func(t *testing.T) {
		if err := os.Remove(keyPath); err != nil {
			t.Fatal(err)
		}
		defer os.WriteFile(keyPath, orig, 0o600)
		out := (&chainAttackEnv{cliEnv: e.with(t)}).verifyBroken("journal: key — chain-key is missing; restore it from a backup of this home")
		if strings.Count(out, "\n") != 2 {
			t.Errorf("want one problem, got:\n%s", out)
		}
	})

	t.Run("Replaced", func(t *testing.T) {
		other := bytes.Repeat([]byte("ab"), 32)
		if err := os.WriteFile(keyPath, append(other, '\n'), 0o600); err != nil {
			t.Fatal(err)
		}
		defer os.WriteFile(keyPath, orig, 0o600)
		(&chainAttackEnv{cliEnv: e.with(t)}).verifyBroken(
			"journal: anchor — ", "does not verify with chain-key",
			"journal: key — no keyed row (1..", "chain-key is not the key this journal was written with")

		_, err := daemon.Start(t.Context(), daemon.Options{Home: e.home, Addr: "127.0.0.1:0", Owner: testOwner})
		if err == nil || !strings.Contains(err.Error(), "chain-key does not match this journal") {
			t.Fatalf("start with another chain-key: %v", err)
		}
	})

	// Restored, all is well again and nothing was appended meanwhile.
	e.ok("journal", "verify")
}

// TestAttackChainIntactAfterRun: a journal the daemon wrote, untouched,
// verifies with no problem and no note.
func TestAttackChainIntactAfterRun(t *testing.T) {
	failOnLeakedGoroutines(t)
	e := newChainAttackEnv(t)
	r := e.ok("journal", "verify")
	if !strings.HasPrefix(r.stdout, "ok: ") || strings.Contains(r.stdout, "notes") {
		t.Errorf("%s", r)
	}
	for _, p := range []string{"chain-key", "journal.anchor"} {
		fi, err := os.Stat(filepath.Join(e.home, p))
		if err != nil || fi.Mode().Perm() != 0o600 {
			t.Errorf("%s: %v, %v; want mode 0600", p, fi, err)
		}
	}
}

// TestAttackChainCrashNoFalseAlarm SIGKILLs the built daemon while agents
// invoke in parallel (commits, mirror appends and anchor writes in flight):
// verify must not cry wolf, before or after a restart.
func TestAttackChainCrashNoFalseAlarm(t *testing.T) {
	failOnLeakedGoroutines(t)
	home := filepath.Join(t.TempDir(), "home")
	p := startPlexus(t, home)
	f := setUpCrashFixture(t, p)
	sid := f.handshake(t, p)
	tok := crashReadGrant(t, p, sid)
	read := plexus.InvokeRequest{ID: "portal.notes.read", Input: map[string]any{"path": "hello.md"}}
	hdr := map[string]string{"Authorization": "Bearer " + tok.Token}

	for round := range 3 {
		var (
			wg   sync.WaitGroup
			mu   sync.Mutex
			done int
			kill = make(chan struct{})
		)
		for range 4 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for {
					if st, _, err := p.send("POST", "/invoke", hdr, read); err != nil || st != http.StatusOK {
						return // the daemon is gone
					}
					mu.Lock()
					done++
					if done == 40 {
						close(kill)
					}
					mu.Unlock()
				}
			}()
		}
		<-kill
		p.kill(t) // mid-flight: other calls are between commit, mirror and anchor
		wg.Wait()

		checkIntegrity(t, home)
		verifyJournalCLI(t, home)
		p = startPlexus(t, home)
		verifyJournalCLI(t, home) // the daemon running, after its start-up check
		rows := journalRows(t, home)
		if n, _ := countRows(rows, "journal.anchor_mismatch", func(plexus.Activity) bool { return true }); n != 0 {
			t.Fatalf("round %d: the restart recorded %d anchor mismatches after a crash", round, n)
		}
	}
	p.stop(t)
	verifyJournalCLI(t, home)
}
