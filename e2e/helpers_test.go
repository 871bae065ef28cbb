package e2e

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/plexus-gw/plexus"
	"github.com/plexus-gw/plexus/auth"
	"github.com/plexus-gw/plexus/daemon"
	"github.com/plexus-gw/plexus/internal/plexustest"
	"github.com/plexus-gw/plexus/journal"
	"github.com/plexus-gw/plexus/platform"
	"github.com/plexus-gw/plexus/scaffold"
)

// Exit statuses of the plexus command (cmd/plexus/main.go), which the
// suites check as a user's script would.
const (
	exitOK      = 0
	exitError   = 1
	exitUsage   = 2
	exitPending = 3
)

// binDir is where TestMain lets plexusBinary build the command; both are
// set before any test runs and only read after.
var (
	binDir       string
	plexusBinary = sync.OnceValues(buildPlexusBinary)
)

func TestMain(m *testing.M) {
	if os.Getenv(driftServerEnv) == "1" {
		runDriftServer()
		os.Exit(0)
	}
	if n := bulkServerN(); n > 0 {
		runBulkServer(n)
		os.Exit(0)
	}
	dir, err := os.MkdirTemp("", "plexus-e2e-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "e2e:", err)
		os.Exit(1)
	}
	binDir = dir
	code := m.Run()
	if err := os.RemoveAll(dir); err != nil {
		fmt.Fprintln(os.Stderr, "e2e:", err)
	}
	os.Exit(code)
}

// buildPlexusBinary builds cmd/plexus into binDir, with the race detector
// when this test binary has it, so the daemon code a binary-driven suite
// runs is checked as the in-process suites' is.
func buildPlexusBinary() (string, error) {
	goBin, err := exec.LookPath("go")
	if err != nil {
		return "", fmt.Errorf("building the plexus binary needs the go command on PATH: %w", err)
	}
	bin := filepath.Join(binDir, "plexus")
	args := []string{"build", "-o", bin}
	if raceEnabled {
		args = append(args, "-race")
	}
	cmd := exec.Command(goBin, append(args, "github.com/plexus-gw/plexus/cmd/plexus")...)
	cmd.Env = append(os.Environ(), "CGO_ENABLED=1")
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build: %w\n%s", err, out)
	}
	return bin, nil
}

// plexusBin is the built plexus command.
func plexusBin(t testing.TB) string {
	t.Helper()
	bin, err := plexusBinary()
	if err != nil {
		t.Fatal(err)
	}
	return bin
}

// runPlexus runs the plexus binary with argv (argv[0] is "plexus", as
// os.Args would hold) and returns its exit status. env is added to the
// test's environment; stdin nil is the test's own. Cancelling ctx
// interrupts the command, as Ctrl-C would.
func runPlexus(ctx context.Context, t testing.TB, env []string, stdin io.Reader, argv []string, stdout, stderr io.Writer) int {
	t.Helper()
	cmd := exec.CommandContext(ctx, plexusBin(t), argv[1:]...)
	cmd.Env = append(os.Environ(), env...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = stdin, stdout, stderr
	if stdin == nil {
		cmd.Stdin = os.Stdin
	}
	cmd.Cancel = func() error { return cmd.Process.Signal(os.Interrupt) }
	cmd.WaitDelay = 10 * time.Second
	// An interrupted command that exits 0 still reports ctx's error: its
	// exit status is the answer.
	if err := cmd.Run(); cmd.ProcessState == nil {
		t.Errorf("%s: %v", strings.Join(argv, " "), err)
		return -1
	}
	return cmd.ProcessState.ExitCode()
}

// deciderEnv makes the command line's decider (`git config user.email`,
// else $USER) testDecider: git takes configuration from the environment
// over every file.
func deciderEnv() []string {
	return []string{"GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_COUNT=1", "GIT_CONFIG_KEY_0=user.email",
		"GIT_CONFIG_VALUE_0=" + testDecider, "USER=" + testDecider}
}

// readConnectionKey reads the owner's connection-key from home, as the
// command line does.
func readConnectionKey(home string) (string, error) {
	b, err := os.ReadFile(filepath.Join(home, scaffold.FileConnectionKey))
	if err != nil {
		return "", err
	}
	key := strings.TrimSpace(string(b))
	if key == "" {
		return "", fmt.Errorf("%s in %s is empty", scaffold.FileConnectionKey, home)
	}
	return key, nil
}

// testDaemon is a real gateway (journal.db, registry, portal transport,
// loopback server) on 127.0.0.1:0 with a temp home.
type testDaemon struct {
	*daemon.Daemon
	key    string
	cancel context.CancelFunc
	done   chan error
}

func startTestDaemon(t testing.TB, o daemon.Options) *testDaemon {
	t.Helper()
	if o.Home == "" {
		o.Home = filepath.Join(t.TempDir(), "home")
	}
	if o.Addr == "" {
		o.Addr = "127.0.0.1:0"
	}
	if o.Owner == nil {
		o.Owner = testOwner
	}
	if o.Logger == nil && os.Getenv("PLEXUS_TEST_LOG") != "" {
		o.Logger = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	ctx, cancel := context.WithCancel(context.Background())
	d, err := daemon.Start(ctx, o)
	if err != nil {
		cancel()
		t.Fatalf("start daemon: %v", err)
	}
	key, err := readConnectionKey(o.Home)
	if err != nil {
		t.Fatal(err)
	}
	td := &testDaemon{Daemon: d, key: key, cancel: cancel, done: make(chan error, 1)}
	go func() { td.done <- d.Run(ctx) }()
	t.Cleanup(td.stop)
	return td
}

func (td *testDaemon) stop() {
	if td.cancel == nil {
		return
	}
	td.cancel()
	<-td.done
	td.cancel = nil
}

// call sends one request and decodes the JSON answer into out (when non-nil).
func (td *testDaemon) call(t testing.TB, method, path string, hdr map[string]string, body any, out any) int {
	t.Helper()
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			t.Fatal(err)
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequest(method, td.BaseURL()+path, rd)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	if out != nil && len(raw) > 0 {
		if err := json.Unmarshal(raw, out); err != nil {
			t.Fatalf("%s %s: decode %q: %v", method, path, raw, err)
		}
	}
	return resp.StatusCode
}

// port is the daemon's bound port, the one its Host guard accepts.
func (td *testDaemon) port() int {
	_, p, err := net.SplitHostPort(td.Addr())
	if err != nil {
		panic(err)
	}
	n, err := strconv.Atoi(p)
	if err != nil {
		panic(err)
	}
	return n
}

// resolve finds name as the daemon's cli and stdio transports do: on its
// PATH (the test's own environment: the suites leave Options.Env nil)
// enriched with the usual install folders.
func (td *testDaemon) resolve(name string) (string, error) {
	userHome, err := os.UserHomeDir()
	if err != nil {
		return "", err
	}
	plat := platform.New(platform.Options{Home: td.Home().Dir, UserHome: userHome, Env: os.Environ(), GOOS: runtime.GOOS})
	return plat.Resolve(name)
}

func (td *testDaemon) admin() map[string]string {
	return map[string]string{"Authorization": "Bearer " + td.key}
}

func bearer(tok string) map[string]string { return map[string]string{"Authorization": "Bearer " + tok} }

func session(id string) map[string]string { return map[string]string{plexus.SessionHeader: id} }

// sseEvent is one parsed server-sent event.
type sseEvent struct {
	ID   string
	Type string
	Data string
}

// openEvents subscribes to /events for a session and streams parsed events
// until the test ends.
func (td *testDaemon) openEvents(t testing.TB, sessionID, lastEventID string) <-chan sseEvent {
	t.Helper()
	ch, stop := openStream(t, td, sessionID, lastEventID)
	t.Cleanup(stop)
	return ch
}

// openStream subscribes to /events for a session and streams parsed events
// until stop is called.
func openStream(t testing.TB, td *testDaemon, sid, lastEventID string) (<-chan sseEvent, func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, td.BaseURL()+"/events", nil)
	req.Header.Set(plexus.SessionHeader, sid)
	if lastEventID != "" {
		req.Header.Set("Last-Event-ID", lastEventID)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil || resp.StatusCode != http.StatusOK {
		cancel()
		t.Fatalf("events: %v", err)
	}
	out := make(chan sseEvent, 64)
	done := make(chan struct{})
	go func() {
		defer close(done)
		defer close(out)
		sc := bufio.NewScanner(resp.Body)
		var ev sseEvent
		for sc.Scan() {
			line := sc.Text()
			switch {
			case line == "":
				if ev.Type != "" {
					out <- ev
				}
				ev = sseEvent{}
			case strings.HasPrefix(line, "id: "):
				ev.ID = strings.TrimPrefix(line, "id: ")
			case strings.HasPrefix(line, "event: "):
				ev.Type = strings.TrimPrefix(line, "event: ")
			case strings.HasPrefix(line, "data: "):
				ev.Data += strings.TrimPrefix(line, "data: ")
			}
		}
	}()
	var once sync.Once
	stop := func() {
		once.Do(func() {
			cancel()
			resp.Body.Close()
			for range out {
			}
			<-done
		})
	}
	t.Cleanup(stop)
	return out, stop
}

// waitEvent returns the first event of type typ, failing after a generous
// deadline (a liveness bound, not a timing assertion).
func waitEvent(t testing.TB, ch <-chan sseEvent, typ string) sseEvent {
	t.Helper()
	deadline := time.After(10 * time.Second)
	for {
		select {
		case ev, ok := <-ch:
			if !ok {
				t.Fatalf("event stream ended before %s", typ)
			}
			if ev.Type == typ {
				return ev
			}
		case <-deadline:
			t.Fatalf("no %s event", typ)
		}
	}
}

// eventWhere waits for the first event of type typ whose data, decoded as
// T, match accepts.
func eventWhere[T any](t testing.TB, ch <-chan sseEvent, typ string, match func(T) bool) T {
	t.Helper()
	for {
		ev := waitEvent(t, ch, typ)
		var v T
		if err := json.Unmarshal([]byte(ev.Data), &v); err != nil {
			t.Fatalf("%s %s: %v", typ, ev.Data, err)
		}
		if match(v) {
			return v
		}
	}
}

// newFakeClock is the daemon's injectable clock (daemonOptions.Clock): it
// stands still until a test moves it, so tokens, windows, codes and pendings
// expire when the test says, never by sleeping. It starts at the current
// second, so the audit mirror's daily files and retention see a realistic
// date.
func newFakeClock() *plexustest.Clock {
	return plexustest.NewClock(time.Now().UTC().Truncate(time.Second))
}

// raw sends body as is and returns the status and the body of the answer. A
// "Host" entry in hdr becomes the request's Host (net/http ignores it as a
// header).
func (td *testDaemon) raw(t testing.TB, method, path string, hdr map[string]string, body []byte) (int, []byte) {
	t.Helper()
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequest(method, td.BaseURL()+path, rd)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	for k, v := range hdr {
		if k == "Host" {
			req.Host = v
			continue
		}
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Errorf("%s %s: %v", method, path, err)
		return 0, nil
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, b
}

// invoke posts req to /invoke with tok as the Bearer (none when tok is "")
// and any extra headers, returning the status, the decoded answer and its
// raw bytes.
func (td *testDaemon) invoke(t testing.TB, tok string, req plexus.InvokeRequest, extra ...map[string]string) (int, plexus.InvokeResponse, []byte) {
	t.Helper()
	hdr := map[string]string{}
	if tok != "" {
		hdr["Authorization"] = "Bearer " + tok
	}
	for _, e := range extra {
		for k, v := range e {
			hdr[k] = v
		}
	}
	b, _ := json.Marshal(req)
	st, raw := td.raw(t, http.MethodPost, "/invoke", hdr, b)
	var resp plexus.InvokeResponse
	if err := json.Unmarshal(raw, &resp); err != nil {
		t.Errorf("invoke %s: answer %q is not an InvokeResponse: %v", req.ID, raw, err)
	}
	return st, resp, raw
}

// activity reads the journal through a separate read-only connection, as a
// script would.
func (td *testDaemon) activity(t testing.TB, f journal.Filter) []plexus.Activity {
	t.Helper()
	db, err := journal.OpenReader(context.Background(), td.Home().Journal)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	rows, err := db.Activity(context.Background(), f)
	if err != nil {
		t.Fatal(err)
	}
	return rows
}

// auditRow returns the journal row an auditId ("evt_<n>") names.
func (td *testDaemon) auditRow(t testing.TB, auditID string) (plexus.Activity, bool) {
	t.Helper()
	n, err := strconv.ParseInt(strings.TrimPrefix(auditID, "evt_"), 10, 64)
	if err != nil || !strings.HasPrefix(auditID, "evt_") {
		t.Errorf("auditId %q is not evt_<n>", auditID)
		return plexus.Activity{}, false
	}
	rows := td.activity(t, journal.Filter{AfterID: n - 1, Limit: 1})
	if len(rows) == 0 || rows[0].ID != n {
		return plexus.Activity{}, false
	}
	return rows[0], true
}

// waitFor polls cond (which says what is not yet so, or "") until it holds,
// failing after limit: a bound on a hang, not a timing assertion.
func waitFor(t testing.TB, limit time.Duration, what string, cond func() string) {
	t.Helper()
	deadline := time.Now().Add(limit)
	for {
		why := cond()
		if why == "" {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: not so after %s: %s", what, limit, why)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// holds adapts a yes/no condition to waitFor.
func holds(cond func() bool) func() string {
	return func() string {
		if cond() {
			return ""
		}
		return "not yet"
	}
}

// autoApprove allows every well-formed grant request, for the suites that
// test what happens past the owner's decision: the shipped policy's
// decision (narration, sensitivity, window), allowed; a request the policy
// denies (an unknown verb) stays denied. The gateway still caps execute at
// once.
type autoApprove struct{ auth.UserConfirmAuthorizer }

func (autoApprove) Policy() string { return "auto-approve" }

func (a autoApprove) Authorize(ctx context.Context, ac plexus.AuthorizationContext) plexus.AuthorizationDecision {
	d := a.UserConfirmAuthorizer.Authorize(ctx, ac)
	if d.Outcome != plexus.OutcomeDeny {
		d.Outcome, d.Reason = plexus.OutcomeAllow, "auto-approve policy"
	}
	return d
}
