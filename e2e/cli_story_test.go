package e2e

// The command line end to end: the real plexus binary (plexusBin) against
// a real in-process gateway (startTestDaemon), with a temp --home (the
// daemon's) and a temp --agent-home.

import (
	"bufio"
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"io"
	"io/fs"
	"maps"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	_ "github.com/mattn/go-sqlite3" // tampering with journal.db
	"github.com/plexus-gw/plexus"
	"github.com/plexus-gw/plexus/client"
	"github.com/plexus-gw/plexus/daemon"
	"github.com/plexus-gw/plexus/scaffold"
)

// cliRun is what one run of the command line left behind.
type cliRun struct {
	args           []string
	code           int
	stdout, stderr string
}

func (r cliRun) String() string {
	return "plexus " + strings.Join(r.args, " ") + ": exit " + strconv.Itoa(r.code) + "\nstdout:\n" + r.stdout + "stderr:\n" + r.stderr
}

// cliEnv runs the command line with one --home, --addr and --agent-home.
type cliEnv struct {
	t         *testing.T
	home      string
	addr      string
	agentHome string
}

// newCLIEnv starts a test daemon and returns an environment pointing at it.
func newCLIEnv(t *testing.T) (*cliEnv, *testDaemon) {
	t.Helper()
	td := startTestDaemon(t, daemon.Options{})
	return &cliEnv{t: t, home: td.Home().Dir, addr: td.Addr(), agentHome: filepath.Join(t.TempDir(), "agent")}, td
}

// with returns a copy of e that reports to t (a subtest's).
func (e *cliEnv) with(t *testing.T) *cliEnv {
	c := *e
	c.t = t
	return &c
}

// testDecider is who decides in the command-line tests: the binary's `git
// config user.email` (deciderEnv) and the in-process daemon's Owner.
const testDecider = "owner@plexus.test"

// testOwner is the in-process daemon's Options.Owner: testDecider.
func testOwner() string { return testDecider }

// run runs `plexus --home … --addr … --agent-home … args…`, deciding as
// testDecider.
func (e *cliEnv) run(args ...string) cliRun {
	e.t.Helper()
	return e.runCtx(context.Background(), args...)
}

func (e *cliEnv) runCtx(ctx context.Context, args ...string) cliRun {
	return e.runStdin(ctx, nil, args...)
}

// runStdin runs args with stdin (nil is the test's own stdin).
func (e *cliEnv) runStdin(ctx context.Context, stdin io.Reader, args ...string) cliRun {
	argv := append([]string{"plexus", "--home", e.home, "--addr", e.addr, "--agent-home", e.agentHome}, args...)
	var out, errOut bytes.Buffer
	code := runPlexus(ctx, e.t, deciderEnv(), stdin, argv, &out, &errOut)
	return cliRun{args: args, code: code, stdout: out.String(), stderr: errOut.String()}
}

// ok runs args and requires exit status 0.
func (e *cliEnv) ok(args ...string) cliRun {
	e.t.Helper()
	r := e.run(args...)
	if r.code != exitOK {
		e.t.Fatalf("%s", r)
	}
	return r
}

// jsonOut runs args (which should include --json) and decodes stdout.
func (e *cliEnv) jsonOut(v any, args ...string) {
	e.t.Helper()
	r := e.ok(args...)
	if err := json.Unmarshal([]byte(r.stdout), v); err != nil {
		e.t.Fatalf("%s\ndecode: %v", r, err)
	}
}

// enroll connects agent id with `agents connect --json` and redeems the
// code with `agent enroll`.
func (e *cliEnv) enroll(id string) {
	e.t.Helper()
	var conn plexus.ConnectResponse
	e.jsonOut(&conn, "agents", "connect", id, "--json")
	if conn.AgentID != id || !strings.HasPrefix(conn.Code, plexus.PrefixEnrollCode) {
		e.t.Fatalf("agents connect --json = %+v", conn)
	}
	r := e.ok("agent", "enroll", conn.Code)
	if !strings.Contains(r.stdout, `Enrolled as "`+id+`"`) {
		e.t.Errorf("%s", r)
	}
}

// notesDir makes a folder holding hello.md and exposes it as portal notes.
func (e *cliEnv) notesDir() string {
	e.t.Helper()
	dir := e.t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "hello.md"), []byte("# Hello from the notes folder\n"), 0o644); err != nil {
		e.t.Fatal(err)
	}
	r := e.ok("portal", "add", dir, "notes")
	if !strings.Contains(r.stdout, `Portal "notes" added`) {
		e.t.Errorf("%s", r)
	}
	return dir
}

// pendings lists open pending decisions with `pending --json`.
func (e *cliEnv) pendings() []plexus.Pending {
	e.t.Helper()
	var ps []plexus.Pending
	e.jsonOut(&ps, "pending", "--json")
	return ps
}

// journalLines runs `journal --json` with extra filters and decodes each
// line.
func (e *cliEnv) journalLines(args ...string) []plexus.Activity {
	e.t.Helper()
	r := e.ok(append([]string{"journal", "--json"}, args...)...)
	var rows []plexus.Activity
	sc := bufio.NewScanner(strings.NewReader(r.stdout))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var a plexus.Activity
		if err := json.Unmarshal(sc.Bytes(), &a); err != nil {
			e.t.Fatalf("journal --json line %q: %v", sc.Text(), err)
		}
		rows = append(rows, a)
	}
	return rows
}

var pendingIDRe = regexp.MustCompile(`grant pending: (pend_[0-9A-Za-z]+)`)

func TestCLIInit(t *testing.T) {
	home := filepath.Join(t.TempDir(), "home")
	e := &cliEnv{t: t, home: home, addr: freeLoopbackAddr(t), agentHome: filepath.Join(t.TempDir(), "agent")}

	r := e.ok("init")
	if !strings.Contains(r.stdout, "Initialized "+home) || !strings.Contains(r.stdout, "Next: plexus serve") {
		t.Errorf("%s", r)
	}
	public := map[string]bool{scaffold.FileGitignore: true, scaffold.FileReadme: true}
	var files, dirs []string
	err := filepath.WalkDir(home, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(home, p)
		want := fs.FileMode(0o600)
		switch {
		case d.IsDir():
			want = 0o700
			dirs = append(dirs, rel)
		case public[rel]:
			want = 0o644
			files = append(files, rel)
		default:
			files = append(files, rel)
		}
		if got := fi.Mode().Perm(); got != want {
			t.Errorf("%s: mode %v, want %v", rel, got, want)
		}
		if !d.IsDir() && !strings.Contains(r.stdout, "created "+p) {
			t.Errorf("init did not report creating %s:\n%s", p, r.stdout)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{scaffold.FileConnectionKey, scaffold.FileSigningKey, scaffold.FileHashKey, scaffold.FileAuthConfig, scaffold.FileNetwork} {
		if !slices.Contains(files, f) {
			t.Errorf("init did not create %s; files %v", f, files)
		}
	}
	for _, d := range scaffold.Dirs {
		if !slices.Contains(dirs, d) {
			t.Errorf("init did not create %s/; dirs %v", d, dirs)
		}
	}
	key, err := os.ReadFile(filepath.Join(home, scaffold.FileConnectionKey))
	if err != nil || !strings.HasPrefix(string(key), plexus.PrefixConnectionKey) {
		t.Errorf("connection-key = %q, %v", key, err)
	}
	if strings.Contains(r.stdout+r.stderr, strings.TrimSpace(string(key))) {
		t.Error("init printed the connection-key")
	}

	t.Run("Again", func(t *testing.T) {
		e := e.with(t)
		before := snapshotTree(t, home)
		r := e.ok("init")
		if want := home + " is already initialized; nothing changed.\n"; r.stdout != want {
			t.Errorf("stdout %q, want %q", r.stdout, want)
		}
		if after := snapshotTree(t, home); !maps.Equal(before, after) {
			t.Errorf("a second init changed the home:\nbefore %v\nafter  %v", before, after)
		}
	})
}

// snapshotTree maps each path under dir to its mode and content.
func snapshotTree(t *testing.T, dir string) map[string]string {
	t.Helper()
	m := map[string]string{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		v := fi.Mode().String()
		if !d.IsDir() {
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			v += " " + string(b)
		}
		m[p] = v
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// TestCLIStory is the new user's first session, command by command.
func TestCLIStory(t *testing.T) {
	failOnLeakedGoroutines(t)
	e, _ := newCLIEnv(t)
	dir := e.notesDir()
	e.enroll("claude")
	if fi, err := os.Stat(filepath.Join(e.agentHome, client.CredentialsFile)); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("credentials file: %v, %v", fi, err)
	}

	listing := func() map[string]client.ListEntry {
		t.Helper()
		var entries []client.ListEntry
		e.jsonOut(&entries, "agent", "list", "--json")
		m := map[string]client.ListEntry{}
		for _, le := range entries {
			m[le.ID] = le
		}
		return m
	}
	before := listing()
	for _, id := range []string{"portal.notes.read", "portal.notes.write"} {
		if _, ok := before[id]; !ok {
			t.Fatalf("agent list lacks %s: %v", id, before)
		}
	}
	if before["portal.notes.write"].CallableNow {
		t.Errorf("write callable before any approval: %+v", before["portal.notes.write"])
	}
	if rd := before["portal.notes.read"]; !rd.CallableNow || rd.Via != client.ViaAutoApprove {
		t.Errorf("a read that auto-approves is not callable without approval: %+v", rd)
	}
	r := e.ok("agent", "list")
	if !regexp.MustCompile(`(?m)^portal\.notes\.read\s.*AUTO-APPROVED ON FIRST CALL`).MatchString(r.stdout) {
		t.Errorf("agent list before the first call:\n%s", r.stdout)
	}

	// Read: auto-approved, prints the file.
	r = e.ok("agent", "call", "portal.notes.read", "path=hello.md")
	if r.stdout != "# Hello from the notes folder\n" {
		t.Errorf("read stdout %q", r.stdout)
	}
	// Enrolled with --addr, the agent dials the same gateway without it.
	t.Setenv("PLEXUS_ADDR", "")
	os.Unsetenv("PLEXUS_ADDR")
	var out, errOut bytes.Buffer
	if code := runPlexus(context.Background(), t, nil, nil, []string{"plexus", "--agent-home", e.agentHome, "agent", "call", "portal.notes.read", "path=hello.md"},
		&out, &errOut); code != exitOK || out.String() != "# Hello from the notes folder\n" {
		t.Errorf("agent call without --addr: exit %d, stdout %q, stderr %q", code, out.String(), errOut.String())
	}

	after := listing()
	if !after["portal.notes.read"].CallableNow || after["portal.notes.write"].CallableNow {
		t.Errorf("after the first call: read %+v, write %+v", after["portal.notes.read"], after["portal.notes.write"])
	}
	r = e.ok("agent", "list")
	for _, want := range []*regexp.Regexp{
		regexp.MustCompile(`(?m)^portal\.notes\.read\s.*CALLABLE NOW`),
		regexp.MustCompile(`(?m)^portal\.notes\.write\s.*NEEDS OWNER APPROVAL`),
	} {
		if !want.MatchString(r.stdout) {
			t.Errorf("agent list lacks %s:\n%s", want, r.stdout)
		}
	}

	// Write: pends, exit 3, the narration and the pending id on stderr.
	r = e.run("agent", "call", "portal.notes.write", "path=a.md", "content=hi")
	if r.code != exitPending {
		t.Fatalf("write without approval: %s", r)
	}
	m := pendingIDRe.FindStringSubmatch(r.stderr)
	if m == nil {
		t.Fatalf("no pending id on stderr: %s", r)
	}
	pid := m[1]
	if !strings.Contains(r.stderr, "plexus approve "+pid) {
		t.Errorf("stderr lacks the next step: %s", r)
	}
	ps := e.pendings()
	if len(ps) != 1 || ps[0].ID != pid || ps[0].AgentID != "claude" || len(ps[0].Items) != 1 ||
		ps[0].Items[0].CapabilityID != "portal.notes.write" || len(ps[0].Narration) != 1 {
		t.Fatalf("pending --json = %+v, want %s for portal.notes.write", ps, pid)
	}
	if s := ps[0].Narration[0].Summary; s == "" || !strings.Contains(r.stderr, s) {
		t.Errorf("stderr lacks the narration %q: %s", s, r)
	}
	if _, err := os.Stat(filepath.Join(dir, "a.md")); !os.IsNotExist(err) {
		t.Errorf("a.md exists before approval: %v", err)
	}
	trace := ps[0].TraceID
	r = e.ok("pending")
	if !strings.Contains(r.stdout, pid) || !strings.Contains(r.stdout, "portal.notes.write (write)") {
		t.Errorf("pending table:\n%s", r.stdout)
	}

	// The owner approves from the CLI; the journal says so.
	r = e.ok("approve", pid)
	if !strings.Contains(r.stdout, "Approved "+pid+" for claude: portal.notes.write") {
		t.Errorf("%s", r)
	}
	if ps := e.pendings(); len(ps) != 0 {
		t.Errorf("pending after approve = %+v", ps)
	}
	var approved []plexus.Activity
	for _, a := range e.journalLines("--type", "grant.approved") {
		if a.Payload["pendingId"] == pid {
			approved = append(approved, a)
		}
	}
	if len(approved) != 1 || approved[0].Payload["via"] != plexus.ViaCLI || approved[0].Actor != plexus.ActorHuman {
		t.Fatalf("grant.approved rows for %s = %+v, want one via cli", pid, approved)
	}

	r = e.ok("agent", "call", "portal.notes.write", "path=a.md", "content=hi")
	if b, err := os.ReadFile(filepath.Join(dir, "a.md")); err != nil || string(b) != "hi" {
		t.Fatalf("a.md = %q, %v; %s", b, err, r)
	}

	var grants []plexus.StandingGrant
	e.jsonOut(&grants, "grants", "--json")
	if !slices.ContainsFunc(grants, func(g plexus.StandingGrant) bool {
		return g.AgentID == "claude" && g.CapabilityID == "portal.notes.write" && slices.Contains(g.Verbs, plexus.VerbWrite)
	}) {
		t.Errorf("grants --json lacks claude's write grant: %+v", grants)
	}
	r = e.ok("grants")
	if !regexp.MustCompile(`(?m)^claude\s+portal\.notes\.write\s+write\s`).MatchString(r.stdout) {
		t.Errorf("grants table:\n%s", r.stdout)
	}

	// Revoke: the grant becomes a tombstone, so the next write pends again.
	r = e.ok("grants", "revoke", "claude", "portal.notes.write")
	if !strings.Contains(r.stdout, "Revoked portal.notes.write for claude: grant removed") {
		t.Errorf("%s", r)
	}
	e.jsonOut(&grants, "grants", "--json", "--agent", "claude")
	if slices.ContainsFunc(grants, func(g plexus.StandingGrant) bool { return g.CapabilityID == "portal.notes.write" }) {
		t.Errorf("write grant still listed after revoke: %+v", grants)
	}
	// The agent is told of the revoke, and asks again only saying why.
	r = e.run("agent", "call", "portal.notes.write", "path=a.md", "content=again")
	if r.code != exitError || !strings.Contains(r.stderr, "the owner revoked the grant for portal.notes.write") ||
		!strings.Contains(r.stderr, "--purpose") || len(e.pendings()) != 0 {
		t.Fatalf("write after revoke, without a purpose: %s", r)
	}
	r = e.run("agent", "call", "portal.notes.write", "path=a.md", "content=again", "--purpose", "save it again")
	if r.code != exitPending || !pendingIDRe.MatchString(r.stderr) {
		t.Fatalf("write after revoke, with a purpose: %s", r)
	}
	if ps := e.pendings(); len(ps) != 1 || ps[0].Purpose != "save it again" {
		t.Errorf("the request after the revoke: %+v", ps)
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "a.md")); string(b) != "hi" {
		t.Errorf("a.md = %q after a refused write", b)
	}

	// The write grant's story, by trace id.
	r = e.ok("journal", "--trace", trace)
	var story []string
	lines := strings.Split(strings.TrimSpace(r.stdout), "\n")
	if !regexp.MustCompile(`^ID\s+TIME\s+ACTION\s+ACTOR\s+TARGET\s+TRACE ID\s+PAYLOAD$`).MatchString(lines[0]) {
		t.Errorf("journal prints no column header: %q", lines[0])
	}
	for _, line := range lines[1:] {
		f := strings.Fields(line)
		if len(f) < 6 || !strings.Contains(line, trace) {
			t.Fatalf("journal --trace line %q", line)
		}
		story = append(story, f[3]) // id, date, time, action type, …
	}
	for _, want := range []string{"grant.requested", "grant.approved", "token.minted", "invoke.ok", "grant.revoked"} {
		if !slices.Contains(story, want) {
			t.Errorf("journal --trace %s lacks %s: %v", trace, want, story)
		}
	}
	if i, j := slices.Index(story, "grant.requested"), slices.Index(story, "grant.revoked"); i < 0 || j < i {
		t.Errorf("story out of order: %v", story)
	}

	rows := e.journalLines("--type", "grant.")
	if len(rows) < 4 {
		t.Errorf("journal --json --type grant.: %d rows", len(rows))
	}
	for _, a := range rows {
		if !strings.HasPrefix(a.ActionType, "grant.") || a.ID == 0 || a.Hash == "" {
			t.Errorf("journal --json --type grant. row %+v", a)
		}
	}

	r = e.ok("journal", "verify")
	if !regexp.MustCompile(`^ok: \d+ activity rows, hash chain intact\n$`).MatchString(r.stdout) {
		t.Errorf("%s", r)
	}

	// Nothing the CLI printed carried a secret.
	key, _ := readConnectionKey(e.home)
	creds, _ := os.ReadFile(filepath.Join(e.agentHome, client.CredentialsFile))
	var c struct {
		PAT string `json:"pat"`
	}
	_ = json.Unmarshal(creds, &c)
	all := e.run("journal", "--limit", "0").stdout + r.stdout
	for _, secret := range []string{key, c.PAT} {
		if secret != "" && strings.Contains(all, secret) {
			t.Errorf("the journal output contains a secret")
		}
	}
}

// TestCLIJournalVerifyTampered edits one activity row behind the stopped
// daemon's back: verify exits non-zero and names the row.
func TestCLIJournalVerifyTampered(t *testing.T) {
	failOnLeakedGoroutines(t)
	e, td := newCLIEnv(t)
	e.notesDir()
	e.enroll("claude")
	e.ok("agent", "call", "portal.notes.read", "path=hello.md")
	e.ok("journal", "verify")
	td.stop()

	rows := e.journalLines()
	if len(rows) < 3 {
		t.Fatalf("only %d rows", len(rows))
	}
	victim := rows[len(rows)/2].ID
	u := url.URL{Scheme: "file", Path: filepath.Join(e.home, "journal.db")}
	db, err := sql.Open("sqlite3", u.String())
	if err != nil {
		t.Fatal(err)
	}
	res, err := db.Exec(`UPDATE activity SET payload = '{"edited":true}' WHERE id = ?`, victim)
	if err != nil {
		t.Fatal(err)
	}
	if n, _ := res.RowsAffected(); n != 1 {
		t.Fatalf("updated %d rows", n)
	}
	db.Close()

	r := e.run("journal", "verify")
	if r.code != exitError {
		t.Fatalf("verify of a tampered journal: %s", r)
	}
	want := "  row " + strconv.FormatInt(victim, 10) + ": edited"
	if !strings.HasPrefix(r.stdout, "BROKEN: ") || !strings.Contains(r.stdout, want) {
		t.Errorf("verify output lacks %q:\n%s", want, r)
	}
	r = e.run("journal", "verify", "--json")
	var rep struct {
		OK       bool `json:"ok"`
		Problems []struct {
			ID   int64  `json:"id"`
			Kind string `json:"kind"`
		} `json:"problems"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &rep); err != nil || r.code != exitError || rep.OK ||
		len(rep.Problems) == 0 || rep.Problems[0].ID != victim || rep.Problems[0].Kind != "edited" {
		t.Errorf("verify --json: %+v, %v\n%s", rep, err, r)
	}
}

// TestCLIReject records the owner's reason and tells the agent.
func TestCLIReject(t *testing.T) {
	failOnLeakedGoroutines(t)
	e, _ := newCLIEnv(t)
	dir := e.notesDir()
	e.enroll("claude")
	r := e.run("agent", "call", "portal.notes.write", "path=r.md", "content=x", "--purpose", "tidy up")
	m := pendingIDRe.FindStringSubmatch(r.stderr)
	if r.code != exitPending || m == nil {
		t.Fatalf("%s", r)
	}
	pid := m[1]
	if ps := e.pendings(); len(ps) != 1 || ps[0].Purpose != "tidy up" {
		t.Errorf("pending = %+v", ps)
	}
	r = e.ok("reject", pid, "--reason", "not now")
	if !strings.Contains(r.stdout, "Rejected "+pid+" for claude") {
		t.Errorf("%s", r)
	}
	if ps := e.pendings(); len(ps) != 0 {
		t.Errorf("pending after reject = %+v", ps)
	}
	var denied []plexus.Activity
	for _, a := range e.journalLines("--type", "grant.denied") {
		if a.Target == pid {
			denied = append(denied, a)
		}
	}
	if len(denied) != 1 || denied[0].Payload["reason"] != "not now" || denied[0].Payload["via"] != plexus.ViaCLI {
		t.Errorf("grant.denied rows for %s = %+v", pid, denied)
	}
	if r := e.run("reject", pid, "--reason", "twice"); r.code != exitError || !strings.Contains(r.stderr, "already denied") {
		t.Errorf("second reject: %s", r)
	}
	if r := e.run("approve", pid); r.code != exitError || !strings.Contains(r.stderr, "already denied") {
		t.Errorf("approve after reject: %s", r)
	}
	if _, err := os.Stat(filepath.Join(dir, "r.md")); !os.IsNotExist(err) {
		t.Errorf("r.md exists after a rejection: %v", err)
	}
}

// waitingCall runs `agent call … --wait` in a goroutine and returns the id
// of the pending decision it waits on (polling `pending --json`) and a
// function that returns the call's result once it ends.
func (e *cliEnv) waitingCall(ctx context.Context, args ...string) (pid string, result func() cliRun) {
	e.t.Helper()
	done := make(chan cliRun, 1)
	go func() {
		done <- e.runCtx(ctx, append([]string{"agent", "call"}, args...)...)
	}()
	result = sync.OnceValue(func() cliRun { return <-done })
	deadline := time.Now().Add(10 * time.Second)
	for {
		select {
		case r := <-done:
			e.t.Fatalf("the call ended before its grant pended: %s", r)
		default:
		}
		if time.Now().After(deadline) {
			e.t.Fatal("no pending decision showed up within 10s")
		}
		r := e.run("pending", "--json")
		var ps []plexus.Pending
		if r.code == exitOK && json.Unmarshal([]byte(r.stdout), &ps) == nil && len(ps) > 0 {
			return ps[0].ID, result
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestCLICallWait blocks in `agent call --wait` while the owner decides
// from another goroutine.
func TestCLICallWait(t *testing.T) {
	failOnLeakedGoroutines(t)
	e, _ := newCLIEnv(t)
	dir := e.notesDir()
	e.enroll("claude")

	t.Run("Approved", func(t *testing.T) {
		e := e.with(t)
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		pid, result := e.waitingCall(ctx, "portal.notes.write", "path=w.md", "content=waited", "--wait", "--timeout", "30s")
		approve := e.run("approve", pid, "--window", "1h")
		call := result()
		if approve.code != exitOK {
			t.Fatalf("%s", approve)
		}
		if call.code != exitOK {
			t.Fatalf("the waiting call: %s", call)
		}
		if !strings.Contains(call.stderr, "Waiting up to 30s for the owner's decision (pending "+pid+")") {
			t.Errorf("the waiting call did not say what it waits for: %s", call)
		}
		if b, err := os.ReadFile(filepath.Join(dir, "w.md")); err != nil || string(b) != "waited" {
			t.Errorf("w.md = %q, %v", b, err)
		}
		var grants []plexus.StandingGrant
		e.jsonOut(&grants, "grants", "--json")
		if !slices.ContainsFunc(grants, func(g plexus.StandingGrant) bool {
			return g.CapabilityID == "portal.notes.write" && g.TrustWindow.Kind == plexus.Window1h
		}) {
			t.Errorf("grants after approve --window 1h = %+v", grants)
		}
		e.ok("grants", "revoke", "claude", "portal.notes.write")
	})
	t.Run("Rejected", func(t *testing.T) {
		e := e.with(t)
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		// The first call since Approved's revoke: asking again takes a purpose.
		pid, result := e.waitingCall(ctx, "portal.notes.write", "path=x.md", "content=no", "--wait", "--purpose", "try again")
		e.ok("reject", pid, "--reason", "not now")
		call := result()
		if call.code != exitError || !strings.Contains(call.stderr, "the owner denied the request for portal.notes.write: not now") {
			t.Errorf("the waiting call: %s", call)
		}
		if _, err := os.Stat(filepath.Join(dir, "x.md")); !os.IsNotExist(err) {
			t.Errorf("x.md after a rejection: %v", err)
		}
	})
	t.Run("Timeout", func(t *testing.T) {
		e := e.with(t)
		r := e.run("agent", "call", "portal.notes.write", "path=t.md", "content=late", "--wait", "--timeout", "300ms")
		m := pendingIDRe.FindStringSubmatch(r.stderr)
		if r.code != exitPending || m == nil || !strings.Contains(r.stderr, "plexus approve "+m[1]) {
			t.Fatalf("want exit 3 naming the pending decision: %s", r)
		}
		e.ok("reject", m[1], "--reason", "cleanup")
		// The next call reports that rejection rather than asking again.
		if r := e.run("agent", "call", "portal.notes.write", "path=t.md", "content=late"); r.code != exitError || !strings.Contains(r.stderr, "cleanup") {
			t.Errorf("the call after the rejection: %s", r)
		}
	})
	t.Run("Interrupted", func(t *testing.T) {
		e := e.with(t)
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		pid, result := e.waitingCall(ctx, "portal.notes.write", "path=i.md", "content=x", "--wait")
		// The pending shows in the journal before the client has read its
		// 202: interrupt only once the client has remembered the request,
		// which it does right before it starts waiting.
		deadline := time.Now().Add(10 * time.Second)
		for {
			b, _ := os.ReadFile(filepath.Join(e.agentHome, "tokens.json"))
			if strings.Contains(string(b), pid) {
				break
			}
			if time.Now().After(deadline) {
				t.Fatal("the client never remembered its pending request")
			}
			time.Sleep(10 * time.Millisecond)
		}
		cancel() // Ctrl-C
		call := result()
		if call.code != exitPending || !strings.Contains(call.stderr, "stopped waiting; grant still pending: "+pid) {
			t.Errorf("an interrupted wait: %s", call)
		}
		if ps := e.pendings(); len(ps) != 1 || ps[0].ID != pid {
			t.Errorf("the request must still stand: %+v", ps)
		}
	})
}

// TestCLIJournalFollow prints rows journaled after it started, until
// interrupted.
func TestCLIJournalFollow(t *testing.T) {
	failOnLeakedGoroutines(t)
	e, _ := newCLIEnv(t)
	e.ok("agents", "connect", "first")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	out := &syncBuffer{}
	done := make(chan int, 1)
	go func() {
		argv := []string{"plexus", "--home", e.home, "--addr", e.addr, "journal", "--follow", "--json", "--type", "agent."}
		done <- runPlexus(ctx, t, nil, nil, argv, out, io.Discard)
	}()
	// The existing row first, then the new one once it is journaled.
	waitFor := func(what string) {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for !strings.Contains(out.String(), what) {
			if time.Now().After(deadline) {
				t.Fatalf("journal --follow never printed %q:\n%s", what, out.String())
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	waitFor(`"target":"first"`)
	e.ok("agents", "connect", "second")
	waitFor(`"target":"second"`)
	cancel()
	if code := <-done; code != exitOK {
		t.Errorf("journal --follow exited %d when interrupted", code)
	}
	for _, line := range strings.Split(strings.TrimSpace(out.String()), "\n") {
		var a plexus.Activity
		if err := json.Unmarshal([]byte(line), &a); err != nil || a.ActionType != "agent.connected" {
			t.Errorf("line %q: %+v, %v", line, a, err)
		}
	}
}

func TestCLIErrors(t *testing.T) {
	failOnLeakedGoroutines(t)
	t.Run("DaemonDown", func(t *testing.T) {
		e := &cliEnv{t: t, home: filepath.Join(t.TempDir(), "home"), addr: freeLoopbackAddr(t), agentHome: filepath.Join(t.TempDir(), "agent")}
		e.ok("init")
		r := e.run("agents", "connect", "claude")
		want := "Plexus is not running at " + e.addr + "; start it with: plexus serve"
		if r.code != exitError || !strings.Contains(r.stderr, want) {
			t.Errorf("want exit 1 and %q: %s", want, r)
		}
		// Enrolling against a stopped gateway says the same.
		r = e.run("agent", "enroll", "plx_enroll_nothing")
		if r.code != exitError || !strings.Contains(r.stderr, "Plexus is not running at "+e.addr) {
			t.Errorf("%s", r)
		}
	})
	t.Run("NoHome", func(t *testing.T) {
		e := &cliEnv{t: t, home: filepath.Join(t.TempDir(), "nothing"), addr: freeLoopbackAddr(t), agentHome: t.TempDir()}
		r := e.run("pending")
		if r.code != exitError || !strings.Contains(r.stderr, "is Plexus initialised there?") {
			t.Errorf("%s", r)
		}
		r = e.run("journal")
		if r.code != exitError || !strings.Contains(r.stderr, "no journal at") {
			t.Errorf("%s", r)
		}
	})

	e, _ := newCLIEnv(t)
	e.notesDir()
	t.Run("NotEnrolled", func(t *testing.T) {
		e := e.with(t)
		for _, args := range [][]string{
			{"agent", "call", "portal.notes.read", "path=hello.md"},
			{"agent", "list"},
		} {
			r := e.run(args...)
			if r.code != exitError || !strings.Contains(r.stderr, "not enrolled") || !strings.Contains(r.stderr, "plexus agent enroll <code>") {
				t.Errorf("want exit 1 telling to enroll: %s", r)
			}
		}
	})
	e.enroll("claude")
	t.Run("UnknownCapability", func(t *testing.T) {
		e := e.with(t)
		r := e.run("agent", "call", "portal.nope.read", "path=x")
		if r.code != exitError || !strings.Contains(r.stderr, string(plexus.CodeUnknownCapability)) ||
			!strings.Contains(r.stderr, `"portal.nope.read"`) {
			t.Errorf("want exit 1 naming the capability: %s", r)
		}
		if strings.Count(r.stderr, "\n") != 1 {
			t.Errorf("want one line of error: %q", r.stderr)
		}
	})
	t.Run("EnrollTwice", func(t *testing.T) {
		e := e.with(t)
		var conn plexus.ConnectResponse
		e.jsonOut(&conn, "agents", "connect", "other", "--json")
		r := e.run("agent", "enroll", conn.Code)
		if r.code != exitError || !strings.Contains(r.stderr, "--force") {
			t.Errorf("%s", r)
		}
	})
	t.Run("ReplayedCode", func(t *testing.T) {
		var conn plexus.ConnectResponse
		e.jsonOut(&conn, "agents", "connect", "third", "--json")
		first := &cliEnv{t: t, home: e.home, addr: e.addr, agentHome: filepath.Join(t.TempDir(), "a1")}
		first.ok("agent", "enroll", conn.Code)
		second := &cliEnv{t: t, home: e.home, addr: e.addr, agentHome: filepath.Join(t.TempDir(), "a2")}
		if r := second.run("agent", "enroll", conn.Code); r.code != exitError {
			t.Errorf("a replayed code enrolled: %s", r)
		}
	})
	t.Run("UnknownPending", func(t *testing.T) {
		e := e.with(t)
		r := e.run("approve", "pend_nope")
		if r.code != exitError || !strings.Contains(r.stderr, "no pending decision pend_nope") {
			t.Errorf("%s", r)
		}
	})
	t.Run("PortalNotADir", func(t *testing.T) {
		e := e.with(t)
		f := filepath.Join(t.TempDir(), "file")
		os.WriteFile(f, nil, 0o600)
		if r := e.run("portal", "add", f, "x"); r.code != exitError || !strings.Contains(r.stderr, "is not a directory") {
			t.Errorf("%s", r)
		}
		if r := e.run("portal", "add", t.TempDir(), "../x"); r.code != exitUsage {
			t.Errorf("%s", r)
		}
	})
}

// TestCLIOwnerCommands covers the owner's remaining commands against the
// real daemon: status, agents list and revoke, portal list and remove, key
// show and rotate.
func TestCLIOwnerCommands(t *testing.T) {
	failOnLeakedGoroutines(t)
	e, td := newCLIEnv(t)
	dir := e.notesDir()
	e.enroll("claude")
	e.ok("agents", "connect", "idle", "--label", "Idle One")
	e.ok("agent", "call", "portal.notes.read", "path=hello.md")

	var st plexus.StatusResponse
	e.jsonOut(&st, "status", "--json")
	if st.Home != e.home || st.Agents != 2 || st.Grants != 1 || st.Pending != 0 || st.Gateway.BaseURL != td.BaseURL() ||
		!slices.ContainsFunc(st.Sources, func(s plexus.SourceStatus) bool { return s.ID == "portal:notes" && s.Entries == 4 }) {
		t.Errorf("status --json = %+v", st)
	}
	if r := e.ok("status"); !strings.Contains(r.stdout, "running at "+td.BaseURL()) || !regexp.MustCompile(`(?m)^portal:notes\s`).MatchString(r.stdout) {
		t.Errorf("%s", r)
	}

	var agents []plexus.Agent
	e.jsonOut(&agents, "agents", "list", "--json")
	if len(agents) != 2 {
		t.Fatalf("agents list --json = %+v", agents)
	}
	r := e.ok("agents", "list")
	for _, re := range []string{`(?m)^claude\s+-\s+enrolled `, `(?m)^idle\s+Idle One\s+waiting for enrollment`} {
		if !regexp.MustCompile(re).MatchString(r.stdout) {
			t.Errorf("agents list lacks %s:\n%s", re, r.stdout)
		}
	}

	// The rows of `portal list --json`, as a script reads them.
	var portals []struct {
		ID    string `json:"id"`
		Alias string `json:"alias"`
		Path  string `json:"path"`
	}
	e.jsonOut(&portals, "portal", "list", "--json")
	if len(portals) != 1 || portals[0].Alias != "notes" || portals[0].Path != dir || portals[0].ID != "portal:notes" {
		t.Errorf("portal list --json = %+v", portals)
	}

	// The agent's files are private.
	for _, f := range []string{"", client.CredentialsFile, "tokens.json"} {
		fi, err := os.Stat(filepath.Join(e.agentHome, f))
		want := fs.FileMode(0o600)
		if f == "" {
			want = 0o700
		}
		if err != nil || fi.Mode().Perm() != want {
			t.Errorf("agent home %q: %v, %v; want mode %v", f, fi, err, want)
		}
	}

	// Key rotation: the CLI keeps working with the new key; the old one is
	// refused.
	old := e.ok("key", "show").stdout
	r = e.ok("key", "rotate")
	newKey, _ := readConnectionKey(e.home)
	if newKey == strings.TrimSpace(old) || !strings.Contains(r.stdout, newKey) || e.ok("key", "show").stdout != newKey+"\n" {
		t.Errorf("key rotate: %s (key file now %q)", r, newKey)
	}
	if code := td.call(t, "GET", "/admin/api/status", bearer(strings.TrimSpace(old)), nil, nil); code != 401 && code != 403 {
		t.Errorf("the old key still works: status %d", code)
	}
	e.ok("status")
	// Agents are unaffected by a key rotation.
	e.ok("agent", "call", "portal.notes.read", "path=hello.md")

	// Revoking the agent ends its calls.
	r = e.ok("agents", "revoke", "claude", "--reason", "done")
	if !strings.Contains(r.stdout, `Revoked agent "claude"`) {
		t.Errorf("%s", r)
	}
	r = e.run("agent", "call", "portal.notes.read", "path=hello.md")
	if r.code != exitError || r.stdout != "" || !strings.Contains(r.stderr, "revoked by the owner") {
		t.Errorf("a call by a revoked agent: %s", r)
	}
	if r := e.run("agents", "revoke", "claude"); r.code != exitError || !strings.Contains(r.stderr, "already revoked") {
		t.Errorf("revoking twice: %s", r)
	}

	r = e.ok("portal", "remove", "notes")
	if !strings.Contains(r.stdout, `Portal "notes" removed.`) {
		t.Errorf("%s", r)
	}
	e.jsonOut(&portals, "portal", "list", "--json")
	if len(portals) != 0 {
		t.Errorf("portal list after remove = %+v", portals)
	}
}

// TestCLIJournalTextUTF8: the table form shortens long payloads without
// cutting a character in half.
func TestCLIJournalTextUTF8(t *testing.T) {
	e, _ := newCLIEnv(t)
	e.notesDir()
	e.enroll("claude")
	purpose := strings.Repeat("é", 120) // 240 bytes, longer than a table cell
	r := e.run("agent", "call", "portal.notes.write", "path=u.md", "content=x", "--purpose", purpose)
	if r.code != exitPending {
		t.Fatalf("%s", r)
	}
	for _, typ := range []string{"grant.requested", "grant."} {
		r = e.ok("journal", "--type", typ)
		if !strings.Contains(r.stdout, "grant.requested") || !strings.Contains(r.stdout, "éé") {
			t.Errorf("journal --type %s:\n%s", typ, r.stdout)
		}
		if !utf8.ValidString(r.stdout) {
			t.Errorf("journal --type %s printed invalid UTF-8:\n%q", typ, r.stdout)
		}
	}
	// The JSON form keeps the payload whole.
	rows := e.journalLines("--type", "grant.requested")
	if len(rows) != 1 || rows[0].Payload["purpose"] != purpose {
		t.Errorf("journal --json rows = %+v", rows)
	}
}
