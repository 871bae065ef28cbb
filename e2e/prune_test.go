package e2e

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/plexus-gw/plexus"
	"github.com/plexus-gw/plexus/auth"
	"github.com/plexus-gw/plexus/daemon"
	"github.com/plexus-gw/plexus/internal/plexustest"
	"github.com/plexus-gw/plexus/journal"
	"github.com/plexus-gw/plexus/scaffold"
)

// TestDaemonPrunes: the running daemon prunes on its schedule, by its
// clock: once the clock has moved three days on, the agent's ended session
// and the activity rows older than the owner's two-day retention are gone,
// the calls made since stay, and `plexus journal verify` (the same Verify,
// with the home's key, anchor and mirror) still passes.
func TestDaemonPrunes(t *testing.T) {
	clk := newFakeClock()
	home := filepath.Join(t.TempDir(), "home")
	if _, err := scaffold.Init(home, scaffold.InitOptions{NewConnectionKey: auth.NewConnectionKey}); err != nil {
		t.Fatal(err)
	}
	cfg := scaffold.DefaultAuthConfig()
	cfg.ActivityRetentionDays = 2
	b, err := json.Marshal(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(home, scaffold.FileAuthConfig), b, 0o600); err != nil {
		t.Fatal(err)
	}
	td := startTestDaemon(t, daemon.Options{Home: home, Clock: clk.Now, PruneEvery: 10 * time.Millisecond})
	addEcho(t, td, "test", "")
	pat, oldSession := enrolledAgent(t, td, "claude")
	tok := grantOK(t, td, oldSession, map[string]any{"test.echo.read": "allow"})
	call := func(tok string) string {
		t.Helper()
		_, resp, raw := td.invoke(t, tok, plexus.InvokeRequest{ID: "test.echo.read", Input: map[string]any{"msg": "hi"}})
		if !resp.OK {
			t.Fatalf("invoke: %s", raw)
		}
		return resp.AuditID
	}
	old := call(tok.Token)

	clk.Advance(72 * time.Hour)
	newSession := handshake(t, td, pat, nil)
	recent := call(grantOK(t, td, newSession, map[string]any{"test.echo.read": "allow"}).Token)

	waitFor(t, 20*time.Second, "the old rows and session pruned", func() string {
		if _, ok := td.auditRow(t, old); ok {
			return "the old call's row is still there"
		}
		if sessionExists(t, td, oldSession) {
			return "the ended session is still there"
		}
		return ""
	})
	if _, ok := td.auditRow(t, recent); !ok {
		t.Errorf("the recent call's row %s was pruned", recent)
	}
	if !sessionExists(t, td, newSession) {
		t.Errorf("the live session was pruned")
	}
	if rows := td.activity(t, journal.Filter{Type: journal.ActionPruned}); len(rows) == 0 {
		t.Errorf("no %s row records the prune", journal.ActionPruned)
	}
	db, err := journal.OpenReader(context.Background(), td.Home().Journal)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	key, err := scaffold.ReadChainKey(home)
	if err != nil {
		t.Fatal(err)
	}
	rep, err := db.Verify(context.Background(), journal.VerifyOptions{Key: key, AnchorPath: td.Home().Anchor, AuditDir: td.Home().Audit})
	if err != nil || !rep.OK || rep.PrunedThrough == 0 {
		t.Fatalf("verify after the daemon pruned: %v\n%s", err, rep)
	}
}

// sessionExists reads the session through a reader of journal.db.
func sessionExists(t *testing.T, td *testDaemon, id string) bool {
	t.Helper()
	db, err := journal.OpenReader(context.Background(), td.Home().Journal)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	err = db.View(context.Background(), func(tx plexus.StateTx) error {
		_, err := tx.Session(id)
		return err
	})
	if errors.Is(err, plexus.ErrNotFound) {
		return false
	}
	if err != nil {
		t.Fatal(err)
	}
	return true
}

// TestJournalPruneCommand: `plexus journal prune --before` while the daemon
// runs asks the daemon to prune (its clock stamps the journal.pruned rows:
// one process writes the journal), deletes the rows written before the
// cut-off, keeps the rest, and `plexus journal verify` passes after it and
// after the daemon wrote on; a malformed date, or one less than a day
// before the daemon's now, is a usage error that prunes nothing. The
// daemon's clock runs days behind the command's, so that its rows are old
// enough to prune only by its own clock.
func TestJournalPruneCommand(t *testing.T) {
	clk := plexustest.NewClock(time.Now().UTC().Add(-72 * time.Hour).Truncate(time.Second))
	td := startTestDaemon(t, daemon.Options{Clock: clk.Now})
	e := &cliEnv{t: t, home: td.Home().Dir, addr: td.Addr(), agentHome: filepath.Join(t.TempDir(), "agent")}
	e.enroll("claude")
	clk.Advance(48 * time.Hour)
	cut := clk.Now().Add(-time.Hour)
	e.ok("agents", "connect", "codex", "--json")
	if r := e.run("journal", "prune", "--before", cut.Format(time.RFC3339Nano)); r.code != exitUsage {
		t.Errorf("prune an hour before the daemon's now: %s", r)
	}
	clk.Advance(25 * time.Hour)
	kept := len(td.activity(t, journal.Filter{Since: cut}))
	all := len(td.activity(t, journal.Filter{}))
	if kept == 0 || kept == all {
		t.Fatalf("%d rows, %d after the cut-off: want some on each side", all, kept)
	}
	for _, bad := range []string{"yesterday", "2999-01-01", time.Now().UTC().Add(-time.Hour).Format(time.RFC3339)} {
		if r := e.run("journal", "prune", "--before", bad); r.code != exitUsage || r.stderr == "" {
			t.Errorf("prune --before %s: %s", bad, r)
		}
	}
	if n := len(td.activity(t, journal.Filter{})); n != all {
		t.Fatalf("a refused prune changed the journal: %d rows, want %d", n, all)
	}
	r := e.ok("journal", "prune", "--before", cut.Format(time.RFC3339Nano))
	if !strings.Contains(r.stdout, "pruned ") {
		t.Errorf("%s", r)
	}
	rows := td.activity(t, journal.Filter{})
	if len(rows) != kept+1 || rows[len(rows)-1].ActionType != journal.ActionPruned {
		t.Fatalf("after the prune: %d rows, want the %d kept and the prune's own last: %+v", len(rows), kept, rows)
	}
	if ts := rows[len(rows)-1].TS; !ts.Equal(clk.Now()) {
		t.Errorf("the prune's row is stamped %s, not by the daemon's clock (%s): the command opened the journal itself", ts, clk.Now())
	}
	e.ok("agents", "connect", "gemini", "--json") // the daemon writes on
	if r := e.ok("journal", "verify"); !strings.Contains(r.stdout, "ok:") {
		t.Errorf("%s", r)
	}
}

// TestJournalPruneEndpointAttacks: POST /admin/api/journal/prune is the
// owner's: no credentials, a wrong connection-key, an agent's PAT or
// session, each with a valid body or a malformed one, are refused as
// unauthorized (a malformed body does not tell a stranger what a valid one
// looks like), and nothing is pruned. The owner's key with a cut-off less
// than a day ago is invalid_request, and prunes nothing either.
func TestJournalPruneEndpointAttacks(t *testing.T) {
	clk := newFakeClock()
	td := startTestDaemon(t, daemon.Options{Clock: clk.Now})
	pat, sid := enrolledAgent(t, td, "claude")
	clk.Advance(72 * time.Hour)
	first := td.activity(t, journal.Filter{Limit: 1})
	valid := plexus.JournalPruneRequest{Before: clk.Now().Add(-48 * time.Hour)}
	for _, tc := range []struct {
		name string
		hdr  map[string]string
	}{
		{"NoCredentials", nil},
		{"WrongKey", bearer("plx_live_" + strings.Repeat("x", 43))},
		{"WrongKeyHeader", map[string]string{plexus.ConnectionKeyHeader: "plx_live_" + strings.Repeat("y", 43)}},
		{"AgentPAT", bearer(pat)},
		{"AgentSession", session(sid)},
	} {
		for _, body := range []any{valid, map[string]any{"before": "yesterday", "extra": 1}} {
			var resp plexus.ErrorResponse
			st := td.call(t, "POST", "/admin/api/journal/prune", tc.hdr, body, &resp)
			if st != http.StatusUnauthorized || resp.Error == nil || resp.Error.Code != plexus.CodeUnauthorized {
				t.Errorf("%s, body %v: status %d, %+v; want 401 unauthorized", tc.name, body, st, resp.Error)
			}
		}
	}
	var resp plexus.ErrorResponse
	if st := td.call(t, "POST", "/admin/api/journal/prune", td.admin(), plexus.JournalPruneRequest{Before: clk.Now().Add(-time.Hour)}, &resp); st != http.StatusBadRequest ||
		resp.Error == nil || resp.Error.Code != plexus.CodeInvalidRequest {
		t.Errorf("the owner, a cut-off an hour ago: status %d, %+v; want 400 invalid_request", st, resp.Error)
	}
	if rows := td.activity(t, journal.Filter{Type: journal.ActionPruned}); len(rows) != 0 {
		t.Fatalf("a refused prune pruned: %+v", rows)
	}
	if now := td.activity(t, journal.Filter{Limit: 1}); len(now) != 1 || now[0].ID != first[0].ID {
		t.Fatalf("the first row changed from %+v to %+v", first, now)
	}
	var ok plexus.JournalPruneResponse
	if st := td.call(t, "POST", "/admin/api/journal/prune", td.admin(), valid, &ok); st != http.StatusOK || ok.Rows == 0 {
		t.Fatalf("the owner's prune: status %d, %+v", st, ok)
	}
}

// TestJournalPruneCommandRefusesUnverified: rows deleted from the middle
// of the prefix while the daemon runs make `plexus journal prune` refuse
// (exit 1, the problem named, --force offered) and prune nothing; with
// --force it prunes, says what it pruned over, and `plexus journal verify`
// keeps reporting the forced prune.
func TestJournalPruneCommandRefusesUnverified(t *testing.T) {
	clk := plexustest.NewClock(time.Now().UTC().Add(-96 * time.Hour).Truncate(time.Second))
	td := startTestDaemon(t, daemon.Options{Clock: clk.Now})
	e := &cliEnv{t: t, home: td.Home().Dir, addr: td.Addr(), agentHome: filepath.Join(t.TempDir(), "agent")}
	e.ok("agents", "connect", "codex", "--json")
	e.ok("agents", "connect", "gemini", "--json")
	e.ok("agents", "connect", "cursor", "--json")
	clk.Advance(72 * time.Hour)
	cut := clk.Now().Add(-48 * time.Hour).Format(time.RFC3339)
	raw, err := sql.Open("sqlite3", "file:"+td.Home().Journal+"?_busy_timeout=5000")
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	if _, err := raw.Exec(`DELETE FROM activity WHERE id = 2`); err != nil {
		t.Fatal(err)
	}
	r := e.run("journal", "prune", "--before", cut)
	if r.code != exitError || !strings.Contains(r.stderr, "row 2: deleted") || !strings.Contains(r.stderr, "--force") {
		t.Fatalf("prune over a deleted row: %s", r)
	}
	if rows := td.activity(t, journal.Filter{Type: journal.ActionPruned}); len(rows) != 0 {
		t.Fatalf("a refused prune pruned: %+v", rows)
	}
	r = e.ok("journal", "prune", "--before", cut, "--force")
	if !strings.Contains(r.stdout, "forced:") || !strings.Contains(r.stdout, "row 2: deleted") {
		t.Errorf("forced prune: %s", r)
	}
	if r := e.run("journal", "verify"); r.code == exitOK || !strings.Contains(r.stdout, journal.ProblemUnverifiedPrune) {
		t.Errorf("verify after a forced prune: %s", r)
	}
}
