package e2e

// Issue 12 §2, "the audit can't be skipped", performed against real daemons:
// a second process holds journal.db's write lock while an agent calls a cli
// extension whose effect is a line appended to a file, and a daemon is
// SIGKILLed while such a call runs. The test binary doubles as both helper
// programs (see init below): the lock holder, and the cli tool.

import (
	"bufio"
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	_ "github.com/mattn/go-sqlite3" // the lock holder's own connection
	"github.com/plexus-gw/plexus"
	"github.com/plexus-gw/plexus/daemon"
	"github.com/plexus-gw/plexus/journal"
)

// The first argument that makes the test binary one of the helpers. They
// are arguments, not environment variables, because a cli child gets a
// reduced environment.
const (
	auditAppendArg = "plexus-test-audit-append" // <file> <line> [wait]
	auditLockArg   = "plexus-test-audit-lock"   // <journal.db>
)

func init() {
	if len(os.Args) < 2 {
		return
	}
	switch os.Args[1] {
	case auditAppendArg:
		os.Exit(appendEffect(os.Args[2:]))
	case auditLockArg:
		os.Exit(holdJournalLock(os.Args[2:]))
	}
}

// appendEffect is the cli tool: it appends line to file (the side effect a
// test counts) and answers JSON. With "wait" it then stays while <file>.hold
// exists and its parent (the daemon) lives, so a test can kill the daemon
// mid-call.
func appendEffect(args []string) int {
	if len(args) < 2 {
		return 2
	}
	f, err := os.OpenFile(args[0], os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	if _, err := f.WriteString(args[1] + "\n"); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	if err := f.Close(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	if len(args) > 2 && args[2] == "wait" {
		parent := os.Getppid()
		for deadline := time.Now().Add(2 * time.Minute); os.Getppid() == parent && time.Now().Before(deadline); {
			if _, err := os.Stat(args[0] + ".hold"); err != nil {
				break
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	fmt.Printf("{\"appended\": %q}\n", args[1])
	return 0
}

// holdJournalLock is the other process: it takes journal.db's write lock
// with BEGIN EXCLUSIVE, says "locked" on stdout, and holds the lock until
// its stdin closes.
func holdJournalLock(args []string) int {
	if len(args) != 1 {
		return 2
	}
	db, err := sql.Open("sqlite3", "file:"+args[0]+"?_busy_timeout=5000")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer db.Close()
	ctx := context.Background()
	conn, err := db.Conn(ctx)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer conn.Close()
	if _, err := conn.ExecContext(ctx, "BEGIN EXCLUSIVE"); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	fmt.Println("locked")
	if _, err := io.Copy(io.Discard, os.Stdin); err != nil {
		fmt.Fprintln(os.Stderr, err)
	}
	if _, err := conn.ExecContext(ctx, "ROLLBACK"); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return 0
}

// lockJournal starts the lock holder on the journal at path and returns
// once it holds the lock; the returned func releases it (also at cleanup).
func lockJournal(t *testing.T, path string) (release func()) {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(exe, auditLockArg, path)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	stderr := &syncBuffer{}
	cmd.Stderr = stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	released := false
	release = func() {
		if released {
			return
		}
		released = true
		stdin.Close()
		if err := cmd.Wait(); err != nil {
			t.Errorf("lock holder: %v\n%s", err, stderr.String())
		}
	}
	t.Cleanup(release)
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil || line != "locked\n" {
		release()
		t.Fatalf("lock holder said %q, %v\n%s", line, err, stderr.String())
	}
	return release
}

// effectsManifest declares a cli extension whose capabilities append a line
// to file: effects.line.append returns at once, effects.line.append-wait
// only once the daemon is gone or <file>.hold is removed.
func effectsManifest(t testing.TB, file string) plexus.ExtensionManifest {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	in := json.RawMessage(`{"type":"object","required":["line"],"properties":{"line":{"type":"string"}}}`)
	route := func(extra ...string) json.RawMessage {
		r, err := json.Marshal(map[string]any{"bin": exe, "args": append([]string{auditAppendArg, file, "{line}"}, extra...)})
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	return plexus.ExtensionManifest{Manifest: plexus.ManifestVersion, Source: "effects", Label: "Side effects", Transport: plexus.TransportCLI,
		Capabilities: []plexus.ExtensionCapabilityDecl{
			{Name: "line.append", Kind: plexus.KindCapability, Label: "Append a line", IO: &plexus.IOSchema{Input: in},
				Describe: "Append a line to the effects file. Use when testing side effects.", Grants: []plexus.Verb{plexus.VerbWrite}, Route: route()},
			{Name: "line.append-wait", Kind: plexus.KindCapability, Label: "Append a line, then wait", IO: &plexus.IOSchema{Input: in},
				Describe: "Append a line, then wait for the daemon to go. Use when testing crashes.", Grants: []plexus.Verb{plexus.VerbWrite}, Route: route("wait")},
		}}
}

// effectLines is what the effects file holds: one line per run of the tool.
func effectLines(t testing.TB, file string) []string {
	t.Helper()
	b, err := os.ReadFile(file)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	} else if err != nil {
		t.Fatal(err)
	}
	return strings.Split(strings.TrimSuffix(string(b), "\n"), "\n")
}

// wantOutcome requires resp to be the typed refusal of a call whose
// dispatch did not (or must not again) happen: ok false, internal_error,
// and detail.outcome as given.
func wantOutcome(t testing.TB, what string, status int, resp plexus.InvokeResponse, outcome string) {
	t.Helper()
	if status != http.StatusBadRequest || resp.OK || resp.Error == nil || resp.Error.Code != plexus.CodeInternalError {
		t.Errorf("%s: status %d, ok %v, error %+v; want 400 internal_error", what, status, resp.OK, resp.Error)
		return
	}
	d, _ := resp.Error.Detail.(map[string]any)
	if got, _ := d["outcome"].(string); got != outcome {
		t.Errorf("%s: detail %v; want outcome %q", what, resp.Error.Detail, outcome)
	}
}

// TestAttackAuditLockedJournal: another process holds BEGIN EXCLUSIVE on the
// daemon's journal.db while an agent calls a side-effecting capability with
// an idempotencyKey. The call is refused before dispatch (ok false,
// internal_error, outcome not_run) and the effect did not happen; `plexus
// status` counts the failed write. Once the lock is released, the retry
// with the same key runs exactly once, and a second retry is answered from
// memory without running again.
func TestAttackAuditLockedJournal(t *testing.T) {
	td := startTestDaemon(t, daemon.Options{Authorizer: autoApprove{}})
	effects := filepath.Join(t.TempDir(), "effects.log")
	var reg plexus.ExtensionRegisterResponse
	if st := td.call(t, "POST", "/admin/api/extensions", td.admin(), plexus.ExtensionRegisterRequest{Manifest: effectsManifest(t, effects)}, &reg); st != http.StatusCreated {
		t.Fatalf("add the effects extension: status %d, %+v", st, reg)
	}
	_, sid := enrolledAgent(t, td, "claude")
	tok := grantOK(t, td, sid, map[string]any{"effects.line.append": map[string]any{"decision": "allow", "verbs": []string{"write"}}})
	call := func() (int, plexus.InvokeResponse) {
		st, resp, _ := td.invoke(t, tok.Token, plexus.InvokeRequest{ID: "effects.line.append", Input: map[string]any{"line": "ran"}, IdempotencyKey: "k-1"})
		return st, resp
	}

	release := lockJournal(t, filepath.Join(td.Home().Dir, "journal.db"))
	st, locked := call()
	wantOutcome(t, "the call while the journal is locked", st, locked, "not_run")
	if got := effectLines(t, effects); len(got) != 0 {
		t.Fatalf("the tool ran while its started row could not be written: %q", got)
	}
	release()

	var status plexus.StatusResponse
	if st := td.call(t, "GET", "/admin/api/status", td.admin(), nil, &status); st != http.StatusOK {
		t.Fatalf("status: %d", st)
	}
	if j := status.Journal; j == nil || j.WriteFailures < 1 || j.LastFailure == nil {
		t.Errorf("status journal = %+v; want the failed write counted", status.Journal)
	}
	e := &cliEnv{t: t, home: td.Home().Dir, addr: td.Addr(), agentHome: t.TempDir()}
	if out := e.ok("status").stdout; !strings.Contains(out, "journal write failures:") || !strings.Contains(out, "invoke.started effects.line.append") {
		t.Errorf("plexus status does not show the failed write:\n%s", out)
	}

	st, first := call()
	if st != http.StatusOK || !first.OK {
		t.Fatalf("retry after the lock was released: status %d, %+v", st, first.Error)
	}
	st, again := call()
	if st != http.StatusOK || !again.OK || again.AuditID != first.AuditID {
		t.Errorf("second retry: status %d, %+v; want the first answer (auditId %s) again", st, again, first.AuditID)
	}
	if got := effectLines(t, effects); len(got) != 1 {
		t.Errorf("the tool ran %d times (%q); want exactly once", len(got), got)
	}

	// The journal tells the story: one started row, then its outcome, linked
	// by the keyed hash; the key itself is nowhere.
	started := td.activity(t, journal.Filter{Type: plexus.ActionInvokeStarted})
	ok := td.activity(t, journal.Filter{Type: plexus.ActionInvokeOK})
	if len(started) != 1 || len(ok) != 1 {
		t.Fatalf("journal: %d invoke.started and %d invoke.ok rows; want 1 and 1", len(started), len(ok))
	}
	if ok[0].AuditID() != first.AuditID || ok[0].Payload["startedId"] != started[0].AuditID() || started[0].ID > ok[0].ID ||
		started[0].Payload["idemHash"] == nil || started[0].Payload["idemHash"] != ok[0].Payload["idemHash"] {
		t.Errorf("rows do not link: started %+v, ok %+v", started[0], ok[0])
	}
	for _, r := range td.activity(t, journal.Filter{}) {
		if b, _ := json.Marshal(r.Payload); strings.Contains(string(b), "k-1") {
			t.Errorf("row %d (%s) holds the raw idempotencyKey: %s", r.ID, r.ActionType, b)
		}
	}
}

// TestAttackAuditFailureCounted: a row whose operation completes without it
// (a refused credential's auth.failed, written while another process holds
// the journal's lock) is not dropped: the status counts it and names it.
func TestAttackAuditFailureCounted(t *testing.T) {
	td := startTestDaemon(t, daemon.Options{})
	release := lockJournal(t, filepath.Join(td.Home().Dir, "journal.db"))
	var refused plexus.ErrorResponse
	st := td.call(t, "POST", "/link/handshake", map[string]string{"Authorization": "Bearer not-a-pat"}, plexus.HandshakeRequest{}, &refused)
	release()
	if st != http.StatusUnauthorized || refused.Error == nil || refused.Error.Code != plexus.CodeUnauthorized {
		t.Fatalf("handshake with a bad PAT: status %d, %+v; want 401 unauthorized", st, refused.Error)
	}
	var status plexus.StatusResponse
	if st := td.call(t, "GET", "/admin/api/status", td.admin(), nil, &status); st != http.StatusOK {
		t.Fatalf("status: %d", st)
	}
	if j := status.Journal; j == nil || j.WriteFailures != 1 || j.LastWhat != "auth.failed handshake" || j.LastFailure == nil {
		t.Errorf("status journal = %+v; want 1 failure, auth.failed handshake", status.Journal)
	}
	if n := len(td.activity(t, journal.Filter{Type: "auth.failed"})); n != 0 {
		t.Errorf("%d auth.failed rows, want none: the journal was locked", n)
	}
}

// TestAttackAuditCrashMidCall: the built daemon is SIGKILLed while a
// side-effecting call with an idempotencyKey runs (its tool has appended its
// line), so the journal holds its started row and no outcome. After a
// restart, a retry with the same key (and the same token) is not run again:
// it answers internal_error with outcome unknown, and is journaled; a new
// key runs.
func TestAttackAuditCrashMidCall(t *testing.T) {
	home := filepath.Join(t.TempDir(), "home")
	p := startPlexus(t, home)
	f := setUpCrashFixture(t, p)
	effects := filepath.Join(t.TempDir(), "effects.log")
	if st := p.call(t, "POST", "/admin/api/extensions", f.admin(), plexus.ExtensionRegisterRequest{Manifest: effectsManifest(t, effects)}, nil); st != http.StatusCreated {
		t.Fatalf("add the effects extension: status %d", st)
	}
	sid := f.handshake(t, p)
	tok := crashWriteGrant(t, p, f, sid, "effects.line.append-wait", plexus.WindowUntilRevoked)

	req := plexus.InvokeRequest{ID: "effects.line.append-wait", Input: map[string]any{"line": "ran"}, IdempotencyKey: "k-crash"}
	hdr := map[string]string{"Authorization": "Bearer " + tok}
	if err := os.WriteFile(effects+".hold", nil, 0o600); err != nil {
		t.Fatal(err)
	}
	answered := make(chan error, 1)
	go func() {
		_, _, err := p.send("POST", "/invoke", hdr, req)
		answered <- err
	}()
	waitFor(t, 30*time.Second, "the tool to run", holds(func() bool { return len(effectLines(t, effects)) == 1 }))
	p.kill(t)
	if err := <-answered; err == nil {
		t.Fatal("the call was answered although the daemon was killed mid-call")
	}
	// From now on the tool returns at once: were the retry dispatched, it
	// would run and answer.
	if err := os.Remove(effects + ".hold"); err != nil {
		t.Fatal(err)
	}

	p = startPlexus(t, home)
	var retry plexus.InvokeResponse
	st := p.call(t, "POST", "/invoke", hdr, req, &retry)
	wantOutcome(t, "retry after the crash", st, retry, "unknown")
	if got := effectLines(t, effects); len(got) != 1 {
		t.Errorf("the tool ran %d times (%q); want once: the retry ran it again", len(got), got)
	}
	rows := journalRows(t, home)
	started, _ := countRows(rows, plexus.ActionInvokeStarted, targetIs(req.ID))
	outcomes, _ := countRows(rows, plexus.ActionInvokeOK, targetIs(req.ID))
	refused, _ := countRows(rows, plexus.ActionInvokeDenied, func(a plexus.Activity) bool {
		return a.Target == req.ID && a.Payload["errorCode"] == string(plexus.CodeInternalError) && a.AuditID() == retry.AuditID
	})
	if started != 1 || outcomes != 0 || refused != 1 {
		t.Errorf("journal: %d started, %d ok, %d refused rows for %s; want 1, 0, 1", started, outcomes, refused, req.ID)
	}
	p.stop(t)
}

// TestAttackAuditOutcomeUnwritable: the journal is locked by another
// process after a call's started row was committed and while its tool runs,
// so its outcome row cannot be written. The result is withheld (ok false,
// internal_error, outcome unknown, the started row's auditId), and after the
// lock is released a retry with the same key is refused, not run again.
func TestAttackAuditOutcomeUnwritable(t *testing.T) {
	td, effects, tok := effectsDaemon(t)
	req := plexus.InvokeRequest{ID: "effects.line.append-wait", Input: map[string]any{"line": "ran"}, IdempotencyKey: "k-2"}
	if err := os.WriteFile(effects+".hold", nil, 0o600); err != nil {
		t.Fatal(err)
	}
	type answer struct {
		st   int
		resp plexus.InvokeResponse
		err  error
	}
	answered := make(chan answer, 1)
	go func() { // no t.Fatal off the test goroutine: the answer carries the error
		var a answer
		b, _ := json.Marshal(req)
		hreq, err := http.NewRequest(http.MethodPost, td.BaseURL()+"/invoke", bytes.NewReader(b))
		if err != nil {
			answered <- answer{err: err}
			return
		}
		hreq.Header.Set("Authorization", "Bearer "+tok.Token)
		hreq.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(hreq)
		if err != nil {
			answered <- answer{err: err}
			return
		}
		defer resp.Body.Close()
		a.st, a.err = resp.StatusCode, json.NewDecoder(resp.Body).Decode(&a.resp)
		answered <- a
	}()
	waitFor(t, 30*time.Second, "the tool to run", holds(func() bool { return len(effectLines(t, effects)) == 1 }))
	release := lockJournal(t, filepath.Join(td.Home().Dir, "journal.db"))
	if err := os.Remove(effects + ".hold"); err != nil {
		t.Fatal(err)
	}
	a := <-answered
	release()
	if a.err != nil {
		t.Fatalf("the call got no answer: %v", a.err)
	}
	wantOutcome(t, "the call whose outcome could not be written", a.st, a.resp, "unknown")
	started := td.activity(t, journal.Filter{Type: plexus.ActionInvokeStarted})
	if len(started) != 1 || a.resp.AuditID != started[0].AuditID() {
		t.Errorf("answer auditId %q; want the started row's (%d started rows)", a.resp.AuditID, len(started))
	}
	if a.resp.Output != nil {
		t.Errorf("the withheld result leaked: %v", a.resp.Output)
	}

	st, retry, _ := td.invoke(t, tok.Token, req)
	wantOutcome(t, "retry with the same key", st, retry, "unknown")
	if got := effectLines(t, effects); len(got) != 1 {
		t.Errorf("the tool ran %d times (%q); want once", len(got), got)
	}
	if n := len(td.activity(t, journal.Filter{Type: plexus.ActionInvokeOK})); n != 0 {
		t.Errorf("%d invoke.ok rows; want none", n)
	}
}

// TestAttackAuditConcurrentDuplicate: a second call with the same
// idempotencyKey while the first still runs is not dispatched: the journal
// holds the first's started row without an outcome, so the duplicate is
// refused (outcome unknown) and the tool runs once.
func TestAttackAuditConcurrentDuplicate(t *testing.T) {
	td, effects, tok := effectsDaemon(t)
	req := plexus.InvokeRequest{ID: "effects.line.append-wait", Input: map[string]any{"line": "ran"}, IdempotencyKey: "k-4"}
	if err := os.WriteFile(effects+".hold", nil, 0o600); err != nil {
		t.Fatal(err)
	}
	firstDone := make(chan int, 1)
	go func() { // no t.Fatal off the test goroutine
		b, _ := json.Marshal(req)
		hreq, err := http.NewRequest(http.MethodPost, td.BaseURL()+"/invoke", bytes.NewReader(b))
		if err != nil {
			firstDone <- 0
			return
		}
		hreq.Header.Set("Authorization", "Bearer "+tok.Token)
		resp, err := http.DefaultClient.Do(hreq)
		if err != nil {
			firstDone <- 0
			return
		}
		resp.Body.Close()
		firstDone <- resp.StatusCode
	}()
	waitFor(t, 30*time.Second, "the first call's tool to run", holds(func() bool { return len(effectLines(t, effects)) == 1 }))

	st, dup, _ := td.invoke(t, tok.Token, req)
	if err := os.Remove(effects + ".hold"); err != nil {
		t.Fatal(err)
	}
	wantOutcome(t, "the duplicate while the first runs", st, dup, "unknown")
	if st := <-firstDone; st != http.StatusOK {
		t.Errorf("the first call answered %d, want 200", st)
	}
	if got := effectLines(t, effects); len(got) != 1 {
		t.Errorf("the tool ran %d times (%q); want once", len(got), got)
	}
}

// TestAttackAuditRestartKnownOutcome: calls with an idempotencyKey ran and
// their outcomes were journaled, one on a standing grant and one on a once
// grant; the daemon restarts, which forgets the answers it held in memory. A
// retry of either with the same key is not run again: the answer says it
// already ran, and how it ended (for the once grant, rather than that the
// grant was used).
func TestAttackAuditRestartKnownOutcome(t *testing.T) {
	home := filepath.Join(t.TempDir(), "home")
	p := startPlexus(t, home)
	f := setUpCrashFixture(t, p)
	effects := filepath.Join(t.TempDir(), "effects.log")
	if st := p.call(t, "POST", "/admin/api/extensions", f.admin(), plexus.ExtensionRegisterRequest{Manifest: effectsManifest(t, effects)}, nil); st != http.StatusCreated {
		t.Fatalf("add the effects extension: status %d", st)
	}
	sid := f.handshake(t, p)
	// append-wait returns at once: no .hold file exists.
	calls := []struct {
		window plexus.TrustWindowKind
		req    plexus.InvokeRequest
		hdr    map[string]string
		first  plexus.InvokeResponse
	}{
		{window: plexus.WindowUntilRevoked, req: plexus.InvokeRequest{ID: "effects.line.append", Input: map[string]any{"line": "standing"}, IdempotencyKey: "k-3"}},
		{window: plexus.WindowOnce, req: plexus.InvokeRequest{ID: "effects.line.append-wait", Input: map[string]any{"line": "once"}, IdempotencyKey: "k-3"}},
	}
	for i := range calls {
		c := &calls[i]
		c.hdr = map[string]string{"Authorization": "Bearer " + crashWriteGrant(t, p, f, sid, c.req.ID, c.window)}
		if st := p.call(t, "POST", "/invoke", c.hdr, c.req, &c.first); st != http.StatusOK || !c.first.OK {
			t.Fatalf("first call on a %s grant: status %d, %+v", c.window, st, c.first.Error)
		}
	}
	p.stop(t)

	p = startPlexus(t, home)
	for _, c := range calls {
		var retry plexus.InvokeResponse
		st := p.call(t, "POST", "/invoke", c.hdr, c.req, &retry)
		wantOutcome(t, "retry after a restart ("+string(c.window)+" grant)", st, retry, "ok")
		if retry.Error == nil {
			continue
		}
		if d, _ := retry.Error.Detail.(map[string]any); d["outcomeAuditId"] != c.first.AuditID {
			t.Errorf("retry detail %v; want outcomeAuditId %s", retry.Error.Detail, c.first.AuditID)
		}
	}
	if got := effectLines(t, effects); len(got) != 2 {
		t.Errorf("the tool ran %d times (%q); want once per call", len(got), got)
	}
	p.stop(t)
}

// crashWriteGrant asks for a write grant on p, approves it as the owner
// with window and returns the token the agent then fetches.
func crashWriteGrant(t *testing.T, p *plexusProc, f *crashFixture, sid, capID string, window plexus.TrustWindowKind) string {
	t.Helper()
	var pend plexus.GrantPendingResponse
	if st := p.call(t, "PUT", "/grants", map[string]string{plexus.SessionHeader: sid},
		map[string]any{"grants": map[string]any{capID: map[string]any{"decision": "allow", "verbs": []string{"write"}}}}, &pend); st != http.StatusAccepted {
		t.Fatalf("PUT /grants %s: status %d, %+v", capID, st, pend)
	}
	if st := p.call(t, "POST", "/admin/api/pending/"+pend.PendingID+"/approve", f.admin(),
		plexus.DecideRequest{TrustWindow: &plexus.TrustWindow{Kind: window}}, nil); st != http.StatusOK {
		t.Fatalf("approve %s: status %d", pend.PendingID, st)
	}
	var gs plexus.GrantStatusResponse
	if st := p.call(t, "GET", "/grants/status?pendingId="+pend.PendingID, map[string]string{plexus.SessionHeader: sid}, nil, &gs); st != http.StatusOK || gs.Token == nil {
		t.Fatalf("grant status: %d, %+v", st, gs)
	}
	return gs.Token.Token
}

// effectsDaemon starts a daemon whose authorizer approves every grant, with
// the effects extension (its tool appends a line to the file it returns)
// and an agent holding a standing write grant on effects.line.append-wait.
func effectsDaemon(t *testing.T) (td *testDaemon, effects string, token plexus.ScopedToken) {
	t.Helper()
	td = startTestDaemon(t, daemon.Options{Authorizer: autoApprove{}})
	effects = filepath.Join(t.TempDir(), "effects.log")
	if st := td.call(t, "POST", "/admin/api/extensions", td.admin(), plexus.ExtensionRegisterRequest{Manifest: effectsManifest(t, effects)}, nil); st != http.StatusCreated {
		t.Fatalf("add the effects extension: status %d", st)
	}
	_, sid := enrolledAgent(t, td, "claude")
	token = grantOK(t, td, sid, map[string]any{"effects.line.append-wait": map[string]any{"decision": "allow", "verbs": []string{"write"}}})
	return td, effects, token
}
