package e2e

// Crash safety with the real command: the built plexus binary runs as
// `plexus serve` (plexusBin), the test drives it over HTTP and SIGKILLs
// it, then restarts it on the same home and checks that nothing that was
// acknowledged was lost and nothing was applied twice (DESIGN.md,
// "Reliability and security": durability, crash safety).

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	_ "github.com/mattn/go-sqlite3" // the read-only integrity check
	"github.com/plexus-gw/plexus"
	"github.com/plexus-gw/plexus/journal"
	"github.com/plexus-gw/plexus/scaffold"
)

// syncBuffer collects a child's output; os/exec writes it from its own
// goroutine.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// plexusProc is one `plexus serve` child process.
type plexusProc struct {
	cmd     *exec.Cmd
	home    string
	addr    string
	out     *syncBuffer
	done    chan struct{} // closed when the process has been reaped
	waitErr error
	hc      *http.Client
}

// freeLoopbackAddr returns 127.0.0.1:<port> for a port that was free a
// moment ago.
func freeLoopbackAddr(t testing.TB) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	return addr
}

// startPlexus runs `plexus serve --home home --addr <free port>` and waits
// until discovery answers. The process is killed when the test ends.
func startPlexus(t testing.TB, home string) *plexusProc {
	t.Helper()
	exe := plexusBin(t)
	for attempt := 0; ; attempt++ {
		p := &plexusProc{home: home, addr: freeLoopbackAddr(t), out: &syncBuffer{}, done: make(chan struct{}),
			hc: &http.Client{Timeout: 15 * time.Second, Transport: &http.Transport{}}}
		p.cmd = exec.Command(exe)
		p.cmd.Args = []string{"plexus", "serve", "--home", home, "--addr", p.addr}
		p.cmd.Stdout, p.cmd.Stderr = p.out, p.out
		if err := p.cmd.Start(); err != nil {
			t.Fatal(err)
		}
		go func() {
			p.waitErr = p.cmd.Wait()
			close(p.done)
		}()
		t.Cleanup(func() { p.kill(t) })
		switch err := p.waitReady(); {
		case err == nil:
			return p
		case attempt < 2 && strings.Contains(p.out.String(), "address already in use"):
			// Another process took the port between our probe and the
			// child's bind: pick another.
			continue
		default:
			p.kill(t)
			t.Fatalf("plexus serve did not come up: %v\noutput:\n%s", err, p.out.String())
		}
	}
}

// waitReady polls GET /.well-known/plexus (with Host 127.0.0.1:<port>, which
// the client sets from the URL) until it answers 200, the child exits or a
// generous deadline passes.
func (p *plexusProc) waitReady() error {
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		select {
		case <-p.done:
			return fmt.Errorf("exited early: %v", p.waitErr)
		default:
		}
		req, _ := http.NewRequest(http.MethodGet, p.baseURL()+"/.well-known/plexus", nil)
		req.Host = p.addr
		resp, err := p.hc.Do(req)
		if err == nil {
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	return fmt.Errorf("no 200 from /.well-known/plexus within 20s")
}

func (p *plexusProc) baseURL() string { return "http://" + p.addr }

// kill SIGKILLs the process (if it still runs) and reaps it. A data race
// the race-instrumented child reported before dying fails the test.
func (p *plexusProc) kill(t testing.TB) {
	t.Helper()
	select {
	case <-p.done:
	default:
		if err := syscall.Kill(p.cmd.Process.Pid, syscall.SIGKILL); err != nil {
			t.Errorf("kill %d: %v", p.cmd.Process.Pid, err)
		}
		<-p.done
	}
	p.finish(t)
}

// stop ends the process the way Ctrl-C does and expects a clean exit.
func (p *plexusProc) stop(t testing.TB) {
	t.Helper()
	if err := syscall.Kill(p.cmd.Process.Pid, syscall.SIGTERM); err != nil {
		t.Fatalf("SIGTERM: %v", err)
	}
	select {
	case <-p.done:
	case <-time.After(15 * time.Second):
		p.kill(t)
		t.Fatalf("plexus serve ignored SIGTERM for 15s\noutput:\n%s", p.out.String())
	}
	if p.waitErr != nil {
		t.Errorf("plexus serve exited with %v after SIGTERM\noutput:\n%s", p.waitErr, p.out.String())
	}
	p.finish(t)
}

func (p *plexusProc) finish(t testing.TB) {
	t.Helper()
	p.hc.CloseIdleConnections()
	if out := p.out.String(); strings.Contains(out, "WARNING: DATA RACE") {
		t.Errorf("the plexus child reported a data race:\n%s", out)
	}
}

// send performs one request; an error means no complete answer arrived.
func (p *plexusProc) send(method, path string, hdr map[string]string, body any) (int, []byte, error) {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return 0, nil, err
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequest(method, p.baseURL()+path, rd)
	if err != nil {
		return 0, nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := p.hc.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		return 0, nil, err
	}
	return resp.StatusCode, raw, nil
}

// call is send for requests that must get an answer; it decodes the body
// into out (when non-nil) and returns the status.
func (p *plexusProc) call(t testing.TB, method, path string, hdr map[string]string, body, out any) int {
	t.Helper()
	st, raw, err := p.send(method, path, hdr, body)
	if err != nil {
		t.Fatalf("%s %s: %v\nplexus output:\n%s", method, path, err, p.out.String())
	}
	if out != nil && len(raw) > 0 {
		if err := json.Unmarshal(raw, out); err != nil {
			t.Fatalf("%s %s: decode %q: %v", method, path, raw, err)
		}
	}
	return st
}

// crashFixture is a home with a notes portal and an enrolled agent, served
// by a child process.
type crashFixture struct {
	home, dir string
	key       string
	pat       string
}

// setUpCrashFixture adds the notes portal and connects and enrolls agent
// "claude" on p.
func setUpCrashFixture(t *testing.T, p *plexusProc) *crashFixture {
	t.Helper()
	key, err := readConnectionKey(p.home)
	if err != nil {
		t.Fatal(err)
	}
	f := &crashFixture{home: p.home, dir: t.TempDir(), key: key}
	if err := os.WriteFile(filepath.Join(f.dir, "hello.md"), []byte("# Hello from the notes folder\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg, _ := json.Marshal(map[string]string{"path": f.dir, "alias": "notes"})
	if st := p.call(t, "POST", "/admin/api/sources", f.admin(), plexus.SourceConfig{ID: "portal:notes", Kind: "portal", Config: cfg}, nil); st/100 != 2 {
		t.Fatalf("add portal: status %d", st)
	}
	var conn plexus.ConnectResponse
	if st := p.call(t, "POST", "/admin/api/agents/connect", f.admin(), plexus.ConnectRequest{AgentID: "claude"}, &conn); st/100 != 2 || conn.Code == "" {
		t.Fatalf("connect: status %d, %+v", st, conn)
	}
	var enr plexus.EnrollResponse
	if st := p.call(t, "POST", "/agents/enroll", nil, plexus.EnrollRequest{Code: conn.Code}, &enr); st != http.StatusOK || enr.PAT == "" {
		t.Fatalf("enroll: status %d", st)
	}
	f.pat = enr.PAT
	return f
}

func (f *crashFixture) admin() map[string]string {
	return map[string]string{"Authorization": "Bearer " + f.key}
}

// handshake opens a session for the agent on p.
func (f *crashFixture) handshake(t testing.TB, p *plexusProc) string {
	t.Helper()
	var hs plexus.HandshakeResponse
	if st := p.call(t, "POST", "/link/handshake", map[string]string{"Authorization": "Bearer " + f.pat},
		plexus.HandshakeRequest{Client: &plexus.ClientInfo{Name: "crash-test"}}, &hs); st != http.StatusOK || hs.SessionID == "" {
		t.Fatalf("handshake: status %d", st)
	}
	return hs.SessionID
}

// checkIntegrity opens journal.db read-only, as a second process would, and
// requires PRAGMA integrity_check to say ok and no foreign key to dangle.
func checkIntegrity(t testing.TB, home string) {
	t.Helper()
	u := url.URL{Scheme: "file", Path: filepath.Join(home, "journal.db"), RawQuery: "mode=ro"}
	db, err := sql.Open("sqlite3", u.String())
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	for _, pragma := range []string{"integrity_check", "foreign_key_check"} {
		rows, err := db.Query("PRAGMA " + pragma)
		if err != nil {
			t.Fatalf("PRAGMA %s: %v", pragma, err)
		}
		cols, _ := rows.Columns()
		var got []string
		for rows.Next() {
			vals := make([]any, len(cols))
			ptrs := make([]any, len(cols))
			for i := range vals {
				ptrs[i] = &vals[i]
			}
			if err := rows.Scan(ptrs...); err != nil {
				t.Fatal(err)
			}
			got = append(got, fmt.Sprint(vals...))
		}
		if err := rows.Err(); err != nil {
			t.Fatalf("PRAGMA %s: %v", pragma, err)
		}
		rows.Close()
		want := []string{"ok"}
		if pragma == "foreign_key_check" {
			want = nil
		}
		if !slices.Equal(got, want) {
			t.Errorf("PRAGMA %s = %q, want %q", pragma, got, want)
		}
	}
}

// journalRows reads every activity row and checks the hash chain.
func journalRows(t testing.TB, home string) []plexus.Activity {
	t.Helper()
	ctx := context.Background()
	db, err := journal.OpenReader(ctx, filepath.Join(home, "journal.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	key, err := scaffold.ReadChainKey(home)
	if err != nil {
		t.Fatal(err)
	}
	l := scaffold.Layout(home)
	rep, err := db.Verify(ctx, journal.VerifyOptions{Key: key, AnchorPath: l.Anchor, AuditDir: l.Audit})
	if err != nil {
		t.Fatal(err)
	}
	if !rep.OK {
		t.Errorf("journal verify: %s", rep)
	}
	rows, err := db.Activity(ctx, journal.Filter{})
	if err != nil {
		t.Fatal(err)
	}
	return rows
}

// verifyJournalCLI runs the real `plexus journal verify` on home (the
// daemon may be running) and requires it to say ok.
func verifyJournalCLI(t testing.TB, home string) {
	t.Helper()
	var out, errOut bytes.Buffer
	if code := runPlexus(context.Background(), t, nil, nil, []string{"plexus", "--home", home, "journal", "verify"}, &out, &errOut); code != exitOK ||
		!strings.HasPrefix(out.String(), "ok: ") {
		t.Errorf("journal verify: exit %d, stdout %q, stderr %q", code, out.String(), errOut.String())
	}
}

// mirrorHashes counts the lines of the daily JSONL audit mirror by row hash.
func mirrorHashes(t testing.TB, home string) map[string]int {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(home, "audit", "*.jsonl"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no audit mirror files in %s/audit: %v", home, err)
	}
	m := map[string]int{}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, line := range strings.Split(strings.TrimSuffix(string(b), "\n"), "\n") {
			var r struct {
				Hash string `json:"hash"`
			}
			if err := json.Unmarshal([]byte(line), &r); err != nil || r.Hash == "" {
				// A torn last line is what a kill mid-append may leave;
				// it never belongs to an acknowledged row.
				continue
			}
			m[r.Hash]++
		}
	}
	return m
}

// countRows counts rows of action type typ matching match.
func countRows(rows []plexus.Activity, typ string, match func(plexus.Activity) bool) (n int, ids []int64) {
	for _, r := range rows {
		if r.ActionType == typ && match(r) {
			n++
			ids = append(ids, r.ID)
		}
	}
	return n, ids
}

func payloadIs(key, want string) func(plexus.Activity) bool {
	return func(a plexus.Activity) bool { s, _ := a.Payload[key].(string); return s == want }
}

func targetIs(want string) func(plexus.Activity) bool {
	return func(a plexus.Activity) bool { return a.Target == want }
}

// failOnLeakedGoroutines fails the test if it leaves goroutines behind; call it
// first, so its cleanup runs last.
func failOnLeakedGoroutines(t *testing.T) {
	before := runtime.NumGoroutine()
	t.Cleanup(func() {
		deadline := time.Now().Add(5 * time.Second)
		for runtime.NumGoroutine() > before && time.Now().Before(deadline) {
			time.Sleep(20 * time.Millisecond)
		}
		if n := runtime.NumGoroutine(); n > before {
			buf := make([]byte, 1<<20)
			t.Errorf("%d goroutines leaked:\n%s", n-before, buf[:runtime.Stack(buf, true)])
		}
	})
}

// TestCrashRevokeThenKill revokes a token by jti, SIGKILLs the daemon the
// moment the 200 arrives, and restarts it: the revocation holds, its journal
// row is there exactly once, the chain verifies and the database is intact.
func TestCrashRevokeThenKill(t *testing.T) {
	failOnLeakedGoroutines(t)
	home := filepath.Join(t.TempDir(), "home")
	p := startPlexus(t, home)
	f := setUpCrashFixture(t, p)
	sid := f.handshake(t, p)

	tok := crashReadGrant(t, p, sid)
	read := plexus.InvokeRequest{ID: "portal.notes.read", Input: map[string]any{"path": "hello.md"}}
	var inv plexus.InvokeResponse
	if st := p.call(t, "POST", "/invoke", map[string]string{"Authorization": "Bearer " + tok.Token}, read, &inv); st != http.StatusOK || !inv.OK {
		t.Fatalf("invoke before revoke: status %d, %+v", st, inv)
	}

	var rev plexus.RevokeResponse
	st := p.call(t, "POST", "/grants/revoke", f.admin(), plexus.RevokeRequest{JTI: tok.JTI, Reason: "crash test"}, &rev)
	p.kill(t) // the moment the 200 has arrived
	if st != http.StatusOK || !rev.OK || !slices.Contains(rev.RevokedJTIs, tok.JTI) || rev.AuditID == "" {
		t.Fatalf("revoke: status %d, %+v", st, rev)
	}

	// Right after the crash, before anything recovers the WAL.
	checkIntegrity(t, home)
	rows := journalRows(t, home)
	if n, ids := countRows(rows, "token.revoked", targetIs(tok.JTI)); n != 1 || "evt_"+strconv.FormatInt(ids[0], 10) != rev.AuditID {
		t.Fatalf("token.revoked rows for %s: %d (ids %v), want exactly 1 with auditId %s", tok.JTI, n, ids, rev.AuditID)
	}
	// The audit mirror got it too, before the answer went out.
	for _, r := range rows {
		if r.AuditID() == rev.AuditID {
			if n := mirrorHashes(t, home)[r.Hash]; n != 1 {
				t.Errorf("audit mirror lines for the revoke: %d, want 1", n)
			}
		}
	}

	p = startPlexus(t, home)
	inv = plexus.InvokeResponse{}
	st = p.call(t, "POST", "/invoke", map[string]string{"Authorization": "Bearer " + tok.Token}, read, &inv)
	if st != http.StatusUnauthorized || inv.OK || inv.Error == nil || inv.Error.Code != plexus.CodeTokenRevoked {
		t.Fatalf("invoke with the revoked token after restart: status %d, %+v", st, inv)
	}
	// The real CLI agrees, against the running daemon.
	verifyJournalCLI(t, home)
	p.stop(t)

	checkIntegrity(t, home)
	rows = journalRows(t, home)
	if n, _ := countRows(rows, "token.revoked", targetIs(tok.JTI)); n != 1 {
		t.Errorf("token.revoked rows for %s after restart: %d, want 1", tok.JTI, n)
	}
	if n, _ := countRows(rows, "invoke.denied", payloadIs("errorCode", string(plexus.CodeTokenRevoked))); n != 1 {
		t.Errorf("invoke.denied token_revoked rows: %d, want 1", n)
	}
}

// crashTok is a token the randomized test holds.
type crashTok struct {
	jti, token string
	capID      string
	revoked    bool // an acknowledged (or journaled) revocation covers it
}

// crashExpect is a journal row an acknowledged operation must have left
// exactly once.
type crashExpect struct {
	what  string
	typ   string
	match func(plexus.Activity) bool
	// auditID, when set, must be that row's id.
	auditID string
	// acked: the daemon answered, so the audit mirror has the row too (an
	// operation found committed after a kill may have died before its
	// mirror line).
	acked bool
	// absent: a refused operation that must have left no row at all.
	absent bool
}

// want is how many rows the expectation allows.
func (e crashExpect) want() int {
	if e.absent {
		return 0
	}
	return 1
}

// crashOp is one request of the randomized test. apply runs when an answer
// arrived (the operation was acknowledged or refused); resolve runs, with the
// journal, when the daemon died before answering, and must find the
// operation applied exactly once or not at all.
type crashOp struct {
	name         string
	method, path string
	hdr          map[string]string
	body         any
	apply        func(st int, raw []byte)
	resolve      func(rows []plexus.Activity)
}

// crashWorld is the model the randomized test keeps of what the daemon has
// acknowledged.
type crashWorld struct {
	t       *testing.T
	f       *crashFixture
	p       *plexusProc
	sid     string
	rng     *rand.Rand
	seq     int
	open    map[string]string // pending id → capability
	granted map[string]bool   // capability → an approved grant stands
	// everGranted: a grant was approved once, so a revoke leaves a
	// tombstone and the next request pends.
	everGranted map[string]bool
	toks        []*crashTok
	expect      []crashExpect
	trace       []string
}

var crashCaps = []string{"portal.notes.read", "portal.notes.write"}

func (w *crashWorld) marker() string {
	w.seq++
	return fmt.Sprintf("crash-op-%d", w.seq)
}

func (w *crashWorld) fail(format string, args ...any) {
	w.t.Helper()
	w.t.Fatalf("%s\noperations so far:\n  %s", fmt.Sprintf(format, args...), strings.Join(w.trace, "\n  "))
}

func decodeInto(w *crashWorld, raw []byte, v any) {
	w.t.Helper()
	if err := json.Unmarshal(raw, v); err != nil {
		w.fail("decode %q: %v", raw, err)
	}
}

// opGrant asks for capID; it auto-approves (read, first party), stands on a
// prior approval, or pends.
func (w *crashWorld) opGrant(capID string) crashOp {
	m := w.marker()
	verb := "read"
	if strings.HasSuffix(capID, ".write") {
		verb = "write"
	}
	stood := w.granted[capID]
	// Only a first-party read that was never revoked may be approved
	// without the owner.
	auto := verb == "read" && !w.everGranted[capID]
	op := crashOp{name: m + " grant " + capID, method: "PUT", path: "/grants", hdr: map[string]string{plexus.SessionHeader: w.sid},
		body: map[string]any{"grants": map[string]any{capID: map[string]any{"decision": "allow", "verbs": []string{verb}, "purpose": m}}}}
	op.apply = func(st int, raw []byte) {
		switch st {
		case http.StatusOK:
			if !stood && !auto {
				w.fail("%s: granted without the owner: %s", op.name, raw)
			}
			var tok plexus.ScopedToken
			decodeInto(w, raw, &tok)
			w.toks = append(w.toks, &crashTok{jti: tok.JTI, token: tok.Token, capID: capID})
			w.granted[capID], w.everGranted[capID] = true, true
			w.expect = append(w.expect, crashExpect{what: op.name, acked: true, typ: "token.minted", match: targetIs(tok.JTI)})
		case http.StatusAccepted:
			if stood {
				w.fail("%s: pends although an approved grant stands: %s", op.name, raw)
			}
			var pend plexus.GrantPendingResponse
			decodeInto(w, raw, &pend)
			w.open[pend.PendingID] = capID
			w.expect = append(w.expect, crashExpect{what: op.name, acked: true, typ: "grant.requested",
				match: func(a plexus.Activity) bool { return a.Target == pend.PendingID && payloadIs("purpose", m)(a) }})
		default:
			w.fail("%s: status %d: %s", op.name, st, raw)
		}
	}
	op.resolve = func(rows []plexus.Activity) {
		// Only a request that would pend is sent in flight: its journal
		// row carries the marker as purpose.
		n, ids := countRows(rows, "grant.requested", payloadIs("purpose", m))
		if w.appliedOnce(op.name, n) {
			for _, r := range rows {
				if r.ID == ids[0] {
					w.open[r.Target] = capID
					w.expect = append(w.expect, crashExpect{what: op.name, typ: "grant.requested", match: targetIs(r.Target)})
				}
			}
		}
	}
	return op
}

// opDecide approves or denies an open pending decision.
func (w *crashWorld) opDecide(pid string, approve bool) crashOp {
	m := w.marker()
	capID := w.open[pid]
	action, typ := "deny", "grant.denied"
	if approve {
		action, typ = "approve", "grant.approved"
	}
	match := func(a plexus.Activity) bool { return a.Target == pid && payloadIs("reason", m)(a) }
	if approve {
		match = func(a plexus.Activity) bool { return payloadIs("pendingId", pid)(a) && payloadIs("reason", m)(a) }
	}
	effect := func(acked bool) {
		delete(w.open, pid)
		if approve {
			w.granted[capID], w.everGranted[capID] = true, true
		}
		w.expect = append(w.expect, crashExpect{what: m + " " + action + " " + pid, typ: typ, match: match, acked: acked})
	}
	op := crashOp{name: m + " " + action + " " + pid + " (" + capID + ")", method: "POST",
		path: "/admin/api/pending/" + pid + "/" + action, hdr: w.f.admin(), body: plexus.DecideRequest{Reason: m}}
	op.apply = func(st int, raw []byte) {
		if st != http.StatusOK {
			w.fail("%s: status %d: %s", op.name, st, raw)
		}
		effect(true)
	}
	op.resolve = func(rows []plexus.Activity) {
		if n, _ := countRows(rows, typ, match); w.appliedOnce(op.name, n) {
			effect(false)
		}
	}
	return op
}

// opInvoke calls the capability of tok: refused token_revoked when a
// revocation covers it, answered otherwise.
func (w *crashWorld) opInvoke(tok *crashTok) crashOp {
	m := w.marker()
	in := map[string]any{"path": "hello.md"}
	if strings.HasSuffix(tok.capID, ".write") {
		in = map[string]any{"path": m + ".md", "content": m}
	}
	op := crashOp{name: fmt.Sprintf("%s invoke %s with %s (revoked %v)", m, tok.capID, tok.jti, tok.revoked), method: "POST", path: "/invoke",
		hdr: map[string]string{"Authorization": "Bearer " + tok.token}, body: plexus.InvokeRequest{ID: tok.capID, Input: in}}
	op.apply = func(st int, raw []byte) {
		var inv plexus.InvokeResponse
		decodeInto(w, raw, &inv)
		if tok.revoked {
			if st != http.StatusUnauthorized || inv.Error == nil || inv.Error.Code != plexus.CodeTokenRevoked {
				w.fail("%s: a revoked token was not refused token_revoked: status %d, %s", op.name, st, raw)
			}
			return
		}
		if st != http.StatusOK || !inv.OK {
			w.fail("%s: status %d: %s", op.name, st, raw)
		}
		// Calls are told apart by their audit id alone.
		w.expect = append(w.expect, crashExpect{what: op.name, acked: true, typ: "invoke.ok", auditID: inv.AuditID,
			match: func(a plexus.Activity) bool { return a.Target == tok.capID && a.AuditID() == inv.AuditID }})
	}
	op.resolve = func([]plexus.Activity) {} // never sent in flight
	return op
}

// opRevokeJTI revokes one live token by jti.
func (w *crashWorld) opRevokeJTI(tok *crashTok) crashOp {
	m := w.marker()
	match := func(a plexus.Activity) bool { return a.Target == tok.jti && payloadIs("reason", m)(a) }
	op := crashOp{name: m + " revoke jti " + tok.jti + " (" + tok.capID + ")", method: "POST", path: "/grants/revoke",
		hdr: w.f.admin(), body: plexus.RevokeRequest{JTI: tok.jti, Reason: m}}
	op.apply = func(st int, raw []byte) {
		var rev plexus.RevokeResponse
		decodeInto(w, raw, &rev)
		if st != http.StatusOK || !rev.OK || !slices.Equal(rev.RevokedJTIs, []string{tok.jti}) {
			w.fail("%s: status %d: %s", op.name, st, raw)
		}
		tok.revoked = true
		w.expect = append(w.expect, crashExpect{what: op.name, acked: true, typ: "token.revoked", match: match, auditID: rev.AuditID})
	}
	op.resolve = func(rows []plexus.Activity) {
		if n, _ := countRows(rows, "token.revoked", match); w.appliedOnce(op.name, n) {
			tok.revoked = true
			w.expect = append(w.expect, crashExpect{what: op.name, typ: "token.revoked", match: match})
		}
	}
	return op
}

// opRevokeScope revokes the agent's grant on capID and every token carrying
// it; the grant stays as a tombstone.
func (w *crashWorld) opRevokeScope(capID string) crashOp {
	m := w.marker()
	match := func(a plexus.Activity) bool { return a.Target == capID && payloadIs("reason", m)(a) }
	effect := func() {
		for _, tok := range w.toks {
			if tok.capID == capID {
				tok.revoked = true
			}
		}
		w.granted[capID] = false
	}
	op := crashOp{name: m + " revoke grant " + capID, method: "POST", path: "/grants/revoke",
		hdr: w.f.admin(), body: plexus.RevokeRequest{AgentID: "claude", CapabilityID: capID, Reason: m}}
	op.apply = func(st int, raw []byte) {
		live := w.granted[capID]
		for _, tok := range w.toks {
			live = live || (tok.capID == capID && !tok.revoked)
		}
		if !live {
			// Nothing stands: the revoke is refused and journals nothing.
			if st != http.StatusNotFound {
				w.fail("%s: nothing to revoke, status %d, want 404: %s", op.name, st, raw)
			}
			w.expect = append(w.expect, crashExpect{what: op.name, acked: true, typ: "grant.revoked", match: match, absent: true})
			return
		}
		var rev plexus.RevokeResponse
		decodeInto(w, raw, &rev)
		if st != http.StatusOK || rev.GrantRemoved != w.granted[capID] {
			w.fail("%s: status %d, granted %v: %s", op.name, st, w.granted[capID], raw)
		}
		for _, tok := range w.toks {
			if tok.capID == capID && !tok.revoked && !slices.Contains(rev.RevokedJTIs, tok.jti) {
				w.fail("%s: live token %s not revoked: %s", op.name, tok.jti, raw)
			}
		}
		effect()
		w.expect = append(w.expect, crashExpect{what: op.name, acked: true, typ: "grant.revoked", match: match, auditID: rev.AuditID})
	}
	op.resolve = func(rows []plexus.Activity) {
		if n, _ := countRows(rows, "grant.revoked", match); w.appliedOnce(op.name, n) {
			effect()
			w.expect = append(w.expect, crashExpect{what: op.name, typ: "grant.revoked", match: match})
		}
	}
	return op
}

// appliedOnce reports whether an operation in flight at the kill left n
// journal rows, failing when it was applied more than once.
func (w *crashWorld) appliedOnce(name string, n int) bool {
	w.t.Helper()
	switch n {
	case 0:
		w.trace = append(w.trace, "   the journal says: not applied")
		return false
	case 1:
		w.trace = append(w.trace, "   the journal says: applied once")
		return true
	}
	w.fail("%s: in flight at the kill, applied %d times", name, n)
	return false
}

// nextOp picks a random operation that the model says can be made; inFlight
// restricts it to those identifiable in the journal afterwards.
func (w *crashWorld) nextOp(inFlight bool) crashOp {
	var live []*crashTok
	for _, tok := range w.toks {
		if !tok.revoked {
			live = append(live, tok)
		}
	}
	pids := make([]string, 0, len(w.open))
	for pid := range w.open {
		pids = append(pids, pid)
	}
	sort.Strings(pids)
	for {
		switch k := w.rng.IntN(6); {
		case k == 0 && !inFlight:
			return w.opGrant(crashCaps[w.rng.IntN(2)])
		case k == 0 && !w.granted["portal.notes.write"]:
			// Only a request that pends leaves a journal row naming it
			// (its purpose), and a write without a standing grant pends.
			return w.opGrant("portal.notes.write")
		case k == 1 && len(pids) > 0:
			return w.opDecide(pids[w.rng.IntN(len(pids))], w.rng.IntN(4) != 0)
		case k == 2 && !inFlight && len(w.toks) > 0:
			// Mostly live tokens; now and then a revoked one, which must be
			// refused.
			if len(live) > 0 && w.rng.IntN(4) != 0 {
				return w.opInvoke(live[w.rng.IntN(len(live))])
			}
			return w.opInvoke(w.toks[w.rng.IntN(len(w.toks))])
		case k == 3 && len(live) > 0:
			return w.opRevokeJTI(live[w.rng.IntN(len(live))])
		case k == 4 && w.rng.IntN(2) == 0:
			return w.opRevokeScope(crashCaps[w.rng.IntN(2)])
		case k == 5 && !inFlight:
			return w.opGrant("portal.notes.write")
		}
	}
}

// do sends op and applies its answer.
func (w *crashWorld) do(op crashOp) {
	w.t.Helper()
	w.trace = append(w.trace, op.name)
	st, raw, err := w.p.send(op.method, op.path, op.hdr, op.body)
	if err != nil {
		w.fail("%s: %v\nplexus output:\n%s", op.name, err, w.p.out.String())
	}
	op.apply(st, raw)
}

// check compares the restarted daemon with the model: standing grants,
// open pendings and token revocations are exactly what was acknowledged,
// and every acknowledged operation's journal row is there exactly once.
func (w *crashWorld) check(rows []plexus.Activity) {
	w.t.Helper()
	mirrored := mirrorHashes(w.t, w.f.home)
	for _, e := range w.expect {
		n, ids := countRows(rows, e.typ, e.match)
		if n != e.want() {
			w.fail("%s: %d %s rows (ids %v), want exactly %d", e.what, n, e.typ, ids, e.want())
		}
		if n == 0 {
			continue
		}
		if e.auditID != "" && e.auditID != "evt_"+strconv.FormatInt(ids[0], 10) {
			w.fail("%s: auditId %s, but the %s row is %d", e.what, e.auditID, e.typ, ids[0])
		}
		for _, r := range rows {
			if r.ID == ids[0] && e.acked && mirrored[r.Hash] != 1 {
				w.fail("%s: %d audit mirror lines for row %d, want 1", e.what, mirrored[r.Hash], r.ID)
			}
		}
	}

	var grants plexus.GrantsListResponse
	if st := w.p.call(w.t, "GET", "/admin/api/grants", w.f.admin(), nil, &grants); st != http.StatusOK {
		w.fail("admin grants: status %d", st)
	}
	var gotGrants, wantGrants []string
	for _, g := range grants.Grants {
		gotGrants = append(gotGrants, g.AgentID+" "+g.CapabilityID)
	}
	for _, c := range crashCaps {
		if w.granted[c] {
			wantGrants = append(wantGrants, "claude "+c)
		}
	}
	sort.Strings(gotGrants)
	if !slices.Equal(gotGrants, wantGrants) {
		w.fail("standing grants after restart = %q, want %q", gotGrants, wantGrants)
	}

	var pend plexus.PendingListResponse
	if st := w.p.call(w.t, "GET", "/admin/api/pending", w.f.admin(), nil, &pend); st != http.StatusOK {
		w.fail("admin pending: status %d", st)
	}
	var gotPend, wantPend []string
	for _, p := range pend.Pending {
		gotPend = append(gotPend, p.ID)
	}
	for pid := range w.open {
		wantPend = append(wantPend, pid)
	}
	sort.Strings(gotPend)
	sort.Strings(wantPend)
	if !slices.Equal(gotPend, wantPend) {
		w.fail("open pendings after restart = %q, want %q", gotPend, wantPend)
	}

	// Every token does what the model says: revoked ones are refused,
	// the others still work (no unacknowledged revocation leaked in).
	for _, tok := range w.toks {
		w.do(w.opInvoke(tok))
	}
}

// crashRand is a crash test's source of random choices: seeded with def,
// or with PLEXUS_CRASH_SEED when set, and the seed is logged so that a
// failure's choices can be replayed (the timing of a kill cannot be).
func crashRand(t testing.TB, def uint64) *rand.Rand {
	t.Helper()
	seed := def
	if s := os.Getenv("PLEXUS_CRASH_SEED"); s != "" {
		var err error
		if seed, err = strconv.ParseUint(s, 10, 64); err != nil {
			t.Fatalf("PLEXUS_CRASH_SEED=%q: %v", s, err)
		}
	}
	t.Logf("seed %d (set PLEXUS_CRASH_SEED to replay another)", seed)
	return rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
}

// TestCrashRandomKill fires a deterministic random mix of grant, approve,
// deny, invoke and revoke requests at the real daemon and SIGKILLs it at a
// random point, sometimes while a decision is in flight; after each restart
// everything acknowledged is still in force, exactly once.
func TestCrashRandomKill(t *testing.T) {
	failOnLeakedGoroutines(t)
	const rounds = 5
	rng := crashRand(t, 20240611)
	home := filepath.Join(t.TempDir(), "home")
	p := startPlexus(t, home)
	w := &crashWorld{t: t, p: p, f: setUpCrashFixture(t, p), rng: rng,
		open: map[string]string{}, granted: map[string]bool{}, everGranted: map[string]bool{}}

	for round := range rounds {
		w.trace = append(w.trace, fmt.Sprintf("-- round %d on %s", round, w.p.addr))
		w.sid = w.f.handshake(t, w.p)
		for range 6 + w.rng.IntN(10) {
			w.do(w.nextOp(false))
		}
		// Most rounds die with a decision in flight, at a random moment
		// (a durable commit takes about a millisecond here); the others
		// between two requests.
		if w.rng.IntN(3) != 0 {
			op := w.nextOp(true)
			delay := time.Duration(w.rng.IntN(1500)) * time.Microsecond
			w.trace = append(w.trace, fmt.Sprintf("%s [in flight, kill after %s]", op.name, delay))
			type answer struct {
				st  int
				raw []byte
				err error
			}
			ch := make(chan answer, 1)
			go func() {
				st, raw, err := w.p.send(op.method, op.path, op.hdr, op.body)
				ch <- answer{st, raw, err}
			}()
			time.Sleep(delay)
			w.p.kill(t)
			a := <-ch
			if a.err == nil {
				w.trace = append(w.trace, fmt.Sprintf("   answered %d before the kill", a.st))
				op.apply(a.st, a.raw)
			} else {
				w.trace = append(w.trace, fmt.Sprintf("   no answer (%v)", a.err))
				op.resolve(journalRows(t, home))
			}
		} else {
			w.p.kill(t)
		}
		w.trace = append(w.trace, "-- SIGKILL")

		checkIntegrity(t, home)
		rows := journalRows(t, home)
		w.p = startPlexus(t, home)
		w.check(rows)
	}
	w.p.stop(t)
	checkIntegrity(t, home)
	w.checkJournal(home)
	t.Logf("%d operations, %d journal rows checked:\n  %s", w.seq, len(w.expect), strings.Join(w.trace, "\n  "))
}

// checkJournal is the final journal check once the daemon has stopped
// cleanly.
func (w *crashWorld) checkJournal(home string) {
	w.t.Helper()
	rows := journalRows(w.t, home)
	for _, e := range w.expect {
		if n, _ := countRows(rows, e.typ, e.match); n != e.want() {
			w.fail("%s: %d %s rows after a clean stop, want %d", e.what, n, e.typ, e.want())
		}
	}
}

// crashReadGrant gets the session a standing read grant on
// portal.notes.read (reads of a first-party portal approve themselves).
func crashReadGrant(t *testing.T, p *plexusProc, sid string) plexus.ScopedToken {
	t.Helper()
	var tok plexus.ScopedToken
	if st := p.call(t, "PUT", "/grants", map[string]string{plexus.SessionHeader: sid},
		map[string]any{"grants": map[string]any{"portal.notes.read": "allow"}}, &tok); st != http.StatusOK || tok.Token == "" {
		t.Fatalf("read grant: status %d, %+v", st, tok)
	}
	return tok
}
