package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/plexus-gw/plexus"
	"github.com/plexus-gw/plexus/auth"
	"github.com/plexus-gw/plexus/daemon"
	"github.com/plexus-gw/plexus/gateway"
	"github.com/plexus-gw/plexus/journal"
	"github.com/plexus-gw/plexus/scaffold"
)

// Issue 12 §3: no local lockout or exhaustion. Each test performs the attack
// against a real daemon (real journal.db, real loopback server) from the
// same 127.0.0.1 every local process shares.

// flooder sends one kind of bad request over and over from its own client,
// counting the answers by status, until stop.
type flooder struct {
	name   string
	method string
	path   string
	hdr    map[string]string
	body   []byte
	// failures is how many 401s the flood should get before its
	// credential's bucket blocks it: 5, or 0 where an earlier flood
	// already spent the same credential's.
	failures int64
	statuses sync.Map // status -> *atomic.Int64
}

// once sends the flood's request once and returns the status.
func (f *flooder) once(t *testing.T, td *testDaemon, c *http.Client) int {
	req, err := http.NewRequest(f.method, td.BaseURL()+f.path, strings.NewReader(string(f.body)))
	if err != nil {
		t.Error(err)
		return 0
	}
	for k, v := range f.hdr {
		req.Header.Set(k, v)
	}
	resp, err := c.Do(req)
	if err != nil {
		t.Errorf("%s: %v", f.name, err)
		return 0
	}
	defer resp.Body.Close()
	if _, err := io.Copy(io.Discard, resp.Body); err != nil {
		t.Errorf("%s: read answer: %v", f.name, err)
	}
	n, _ := f.statuses.LoadOrStore(resp.StatusCode, new(atomic.Int64))
	n.(*atomic.Int64).Add(1)
	return resp.StatusCode
}

// run sends the flood's request until stop is closed.
func (f *flooder) run(t *testing.T, td *testDaemon, c *http.Client, stop <-chan struct{}) {
	for {
		select {
		case <-stop:
			return
		default:
		}
		if f.once(t, td, c) == 0 {
			return
		}
	}
}

func (f *flooder) count(status int) int64 {
	if n, ok := f.statuses.Load(status); ok {
		return n.(*atomic.Int64).Load()
	}
	return 0
}

// TestAttackCredentialFlood: a local process floods the gateway with bad
// credentials of every kind (a wrong PAT, garbage bearers, a wrong
// connection-key, an unknown enrollment code, forged scoped tokens) while an
// enrolled agent and the owner go about their work. Every valid call
// succeeds (60 of 60), the flood's repeated credentials are answered 429,
// and the failures it causes are journaled as a bounded number of rows, none
// carrying a presented secret. Before the fix the throttle was keyed by the
// address, 127.0.0.1 for everyone, and the flood locked all of them out.
func TestAttackCredentialFlood(t *testing.T) {
	clk := newFakeClock() // frozen: a block, once earned, lasts the whole test
	td := startTestDaemon(t, daemon.Options{Clock: clk.Now})
	t.Cleanup(http.DefaultClient.CloseIdleConnections)
	addEcho(t, td, "test", "")
	pat, sid := enrolledAgent(t, td, "claude")
	tok := grantOK(t, td, sid, map[string]any{"test.echo.read": "allow"})

	wrongPAT := plexus.PrefixPAT + strings.Repeat("A", 43)
	wrongKey := plexus.PrefixConnectionKey + strings.Repeat("B", 43)
	wrongCode := plexus.PrefixEnrollCode + strings.Repeat("C", 32)
	forged := tok.Token[:len(tok.Token)-4] + "AAAA"
	hs := mustJSON(t, plexus.HandshakeRequest{Client: &plexus.ClientInfo{Name: "flood"}})
	floods := []*flooder{
		{name: "wrong PAT", failures: 5, method: "POST", path: "/link/handshake", hdr: bearer(wrongPAT), body: hs},
		{name: "garbage bearer", failures: 5, method: "POST", path: "/link/handshake", hdr: bearer("garbage"), body: hs},
		{name: "wrong key", failures: 5, method: "GET", path: "/admin/api/agents", hdr: bearer(wrongKey)},
		// The bucket is the credential's, whichever endpoint it is shown to.
		{name: "wrong key header", failures: 0, method: "GET", path: "/admin/api/status", hdr: map[string]string{plexus.ConnectionKeyHeader: wrongKey}},
		{name: "wrong key handshake", failures: 0, method: "POST", path: "/link/handshake", body: mustJSON(t, plexus.HandshakeRequest{ConnectionKey: wrongKey})},
		{name: "unknown code", failures: 5, method: "POST", path: "/agents/enroll", body: mustJSON(t, plexus.EnrollRequest{Code: wrongCode})},
		{name: "forged token", method: "POST", path: "/invoke", hdr: bearer(forged),
			body: mustJSON(t, plexus.InvokeRequest{ID: "test.echo.read", Input: map[string]any{"msg": "x"}})},
	}
	// The attacker is its own process, with its own connections.
	attacker := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: len(floods)}}
	t.Cleanup(attacker.CloseIdleConnections)

	// The attack alone first, until each repeated credential is blocked: a
	// valid call below then meets the worst state the flood can make.
	for _, f := range floods {
		for range 8 {
			f.once(t, td, attacker)
		}
	}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for _, f := range floods {
		wg.Go(func() { f.run(t, td, attacker, stop) })
	}

	valid := 0
	for i := range 20 {
		var h plexus.HandshakeResponse
		if st := td.call(t, "POST", "/link/handshake", bearer(pat), plexus.HandshakeRequest{Client: &plexus.ClientInfo{Name: "agent"}}, &h); st == http.StatusOK && h.SessionID != "" {
			valid++
		} else {
			t.Errorf("agent handshake %d: status %d", i, st)
		}
		if st := td.call(t, "GET", "/admin/api/agents", td.admin(), nil, nil); st == http.StatusOK {
			valid++
		} else {
			t.Errorf("owner call %d: status %d", i, st)
		}
		if st, resp, _ := td.invoke(t, tok.Token, plexus.InvokeRequest{ID: "test.echo.read", Input: map[string]any{"msg": "work"}}); resp.OK {
			valid++
		} else {
			t.Errorf("agent invoke %d: status %d, %+v", i, st, resp.Error)
		}
	}
	close(stop)
	wg.Wait()
	if valid != 60 {
		t.Errorf("%d of 60 valid calls succeeded under the flood", valid)
	}

	// Each repeated credential was blocked after five failures: its later
	// attempts are answered 429 rate_limited, never looked up again.
	for _, f := range floods[:6] {
		if got := f.count(http.StatusUnauthorized); got != f.failures {
			t.Errorf("%s: %d answers 401, want the %d before its block", f.name, got, f.failures)
		}
		if f.count(http.StatusTooManyRequests) == 0 {
			t.Errorf("%s: never answered 429", f.name)
		}
	}
	st, raw := td.raw(t, "GET", "/admin/api/agents", bearer(wrongKey), nil)
	if d, _ := wantEnvelope(t, st, raw, http.StatusTooManyRequests, plexus.CodeRateLimited).Detail.(map[string]any); d["retryAfterSeconds"] == nil {
		t.Errorf("blocked key answer %s has no retryAfterSeconds", raw)
	}
	// A forged scoped token is an edge denial: refused, never a lockout.
	if f := floods[6]; f.count(http.StatusOK) != 0 || f.count(http.StatusTooManyRequests) != 0 {
		t.Errorf("forged token answers: 200 ×%d, 429 ×%d", f.count(http.StatusOK), f.count(http.StatusTooManyRequests))
	}

	// The journal: one row per kind of failure and window, plus one summary
	// row per window carrying the count (written at shutdown at the
	// latest), and no presented credential anywhere.
	attacker.CloseIdleConnections()
	http.DefaultClient.CloseIdleConnections()
	td.stop()
	rows := td.activity(t, journal.Filter{Type: "auth.failed"})
	kinds := map[string]int{}
	for _, r := range rows {
		kinds[r.Target+"/"+fmt.Sprint(r.Payload["reason"])]++
		b, _ := json.Marshal(r)
		for _, secret := range []string{wrongPAT, wrongKey, wrongCode, "garbage", td.key, pat} {
			if strings.Contains(string(b), secret) {
				t.Errorf("auth.failed row %d carries a presented credential: %s", r.ID, b)
			}
		}
	}
	for k, n := range kinds {
		if n > 2 {
			t.Errorf("%d auth.failed rows for %s, want the first and one summary", n, k)
		}
	}
	if len(kinds) == 0 {
		t.Error("no auth.failed row: the failures went unjournaled")
	}
}

// TestAttackRateLimitFloodJournal: an agent over its rate floods /invoke,
// and a guesser floods the handshake with a fresh wrong PAT each time. Each
// flood leaves two journal rows, the first denial and a summary carrying the
// count of the rest, instead of a row per call (about 1.4 MB/s before).
func TestAttackRateLimitFloodJournal(t *testing.T) {
	clk := newFakeClock() // frozen: the bucket never refills, the window never ends
	td := startTestDaemon(t, daemon.Options{Clock: clk.Now, RateLimit: 1})
	t.Cleanup(http.DefaultClient.CloseIdleConnections)
	addEcho(t, td, "test", "")
	_, sid := enrolledAgent(t, td, "claude")
	tok := grantOK(t, td, sid, map[string]any{"test.echo.read": "allow"})

	const calls = 300
	limited, firstAudit := 0, ""
	for range calls {
		st, resp, raw := td.invoke(t, tok.Token, plexus.InvokeRequest{ID: "test.echo.read", Input: map[string]any{"msg": "flood"}})
		if resp.OK {
			continue
		}
		wantDenial(t, td, st, raw, http.StatusTooManyRequests, "test.echo.read", plexus.CodeRateLimited, true)
		limited++
		if firstAudit == "" {
			firstAudit = resp.AuditID
		} else if resp.AuditID != firstAudit {
			t.Errorf("a coalesced denial names %s, want the window's first row %s", resp.AuditID, firstAudit)
		}
	}
	if limited != calls-4 {
		t.Fatalf("%d calls rate limited, want all but the burst of 4", limited)
	}

	const guesses = 200
	for i := range guesses {
		guess := fmt.Sprintf("%s%043d", plexus.PrefixPAT, i)
		st, raw := td.raw(t, "POST", "/link/handshake", bearer(guess), mustJSON(t, plexus.HandshakeRequest{}))
		wantEnvelope(t, st, raw, http.StatusUnauthorized, plexus.CodeUnauthorized)
	}

	http.DefaultClient.CloseIdleConnections()
	td.stop() // the open windows' summaries are written at shutdown
	denied := td.activity(t, journal.Filter{Type: "invoke.denied", AgentID: "claude"})
	wantCoalesced(t, "invoke.denied", denied, limited, firstAudit)
	failed := td.activity(t, journal.Filter{Type: "auth.failed"})
	wantCoalesced(t, "auth.failed", failed, guesses, "")
}

// wantCoalesced checks rows are one first row and one summary whose count
// makes up total.
func wantCoalesced(t *testing.T, what string, rows []plexus.Activity, total int, firstAudit string) {
	t.Helper()
	if len(rows) != 2 {
		t.Fatalf("%d %s rows for %d denials, want 2 (the first and a summary)", len(rows), what, total)
	}
	first, sum := rows[0], rows[1]
	if firstAudit != "" && first.AuditID() != firstAudit {
		t.Errorf("%s first row is %s, the answers named %s", what, first.AuditID(), firstAudit)
	}
	if sum.Payload["coalesced"] != true || sum.Payload["firstAuditId"] != first.AuditID() {
		t.Errorf("%s summary row = %+v", what, sum.Payload)
	}
	if got := fmt.Sprint(sum.Payload["count"]); got != fmt.Sprint(total-1) {
		t.Errorf("%s summary count = %v, want %d (the denials after the first)", what, sum.Payload["count"], total-1)
	}
	if sum.Target != first.Target || sum.AgentID != first.AgentID || sum.Payload["errorCode"] != first.Payload["errorCode"] {
		t.Errorf("%s summary %+v does not match its first row %+v", what, sum, first)
	}
}

// TestAttackEventStreamFlood: one agent opens 1,500 /events streams over
// several sessions. Only the caps succeed (8 per session, 32 per agent);
// the rest are answered 429 rate_limited before any stream byte. The owner
// can still open a stream, and once the agent's clients close their
// connections the slots come back.
func TestAttackEventStreamFlood(t *testing.T) {
	td := startTestDaemon(t, daemon.Options{})
	pat, _ := enrolledAgent(t, td, "claude")
	sessions := make([]string, 10)
	for i := range sessions {
		sessions[i] = handshake(t, td, pat, &plexus.ClientInfo{Name: "streams"})
	}
	tr := &http.Transport{MaxIdleConnsPerHost: 16}
	client := &http.Client{Transport: tr}
	t.Cleanup(tr.CloseIdleConnections)

	var (
		mu      sync.Mutex
		open    []func()
		refused int
	)
	try := func(sid string) (int, []byte, func()) {
		ctx, cancel := context.WithCancel(context.Background())
		req, _ := http.NewRequestWithContext(ctx, "GET", td.BaseURL()+"/events", nil)
		req.Header.Set(plexus.SessionHeader, sid)
		resp, err := client.Do(req)
		if err != nil {
			cancel()
			t.Errorf("events: %v", err)
			return 0, nil, nil
		}
		if resp.StatusCode == http.StatusOK {
			return resp.StatusCode, nil, func() { cancel(); resp.Body.Close() }
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		cancel()
		return resp.StatusCode, b, nil
	}
	const attempts = 1500
	next := make(chan int)
	var wg sync.WaitGroup
	for range 16 {
		wg.Go(func() {
			for i := range next {
				st, raw, closeStream := try(sessions[i%len(sessions)])
				mu.Lock()
				switch {
				case closeStream != nil:
					open = append(open, closeStream)
				case st == http.StatusTooManyRequests:
					refused++
					if refused == 1 {
						wantEnvelope(t, st, raw, http.StatusTooManyRequests, plexus.CodeRateLimited)
					}
				default:
					t.Errorf("stream %d: status %d %s", i, st, raw)
				}
				mu.Unlock()
			}
		})
	}
	for i := range attempts {
		next <- i
	}
	close(next)
	wg.Wait()
	if len(open) != 32 || refused != attempts-32 {
		t.Fatalf("%d streams opened and %d refused of %d, want 32 (the per-agent cap) and the rest refused", len(open), refused, attempts)
	}
	// One session alone stops at its own cap.
	own := handshake(t, td, pat, &plexus.ClientInfo{Name: "late"})
	if st, _, _ := try(own); st != http.StatusTooManyRequests {
		t.Errorf("a fresh session of the capped agent: status %d, want 429", st)
	}
	// The agent's streams are not the owner's.
	var adm plexus.HandshakeResponse
	if st := td.call(t, "POST", "/link/handshake", nil, plexus.HandshakeRequest{ConnectionKey: td.key, Client: &plexus.ClientInfo{Name: "owner", AgentID: "claude"}}, &adm); st != http.StatusOK {
		t.Fatalf("owner handshake: status %d", st)
	}
	if st, raw, closeOwner := try(adm.SessionID); closeOwner == nil {
		t.Errorf("the owner's stream refused while the agent is at its cap: %d %s", st, raw)
	} else {
		closeOwner()
	}

	// The agent's clients go away: closing the connections gives the slots
	// back, with no request from the agent.
	for _, closeStream := range open {
		closeStream()
	}
	var again []func()
	t.Cleanup(func() {
		for _, c := range again {
			c()
		}
	})
	waitFor(t, 10*time.Second, "slots given back after the clients closed", func() string {
		for len(again) < 8 {
			st, raw, closeStream := try(own)
			if closeStream == nil {
				return fmt.Sprintf("stream %d refused: %d %s", len(again)+1, st, raw)
			}
			again = append(again, closeStream)
		}
		return ""
	})
	if st, _, closeStream := try(own); st != http.StatusTooManyRequests {
		t.Errorf("ninth stream of one session: status %d, want 429", st)
		if closeStream != nil {
			closeStream()
		}
	}
}

// rawRequest writes one request by hand on a fresh TCP connection, so the
// request line can be absolute-form, and reads the answer.
func rawRequest(t *testing.T, addr, requestLine, host string) (int, []byte) {
	t.Helper()
	conn, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if err := conn.SetDeadline(time.Now().Add(10 * time.Second)); err != nil {
		t.Fatal(err)
	}
	if _, err := fmt.Fprintf(conn, "%s\r\nHost: %s\r\nConnection: close\r\n\r\n", requestLine, host); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, b
}

// TestAttackAbsoluteFormHost: a request whose request line is absolute-form
// was routed by its authority while its Host header went unchecked (net/http
// drops it). A foreign Host header, or a foreign authority in the request
// line, is now answered 403 host_forbidden before any credential is read.
func TestAttackAbsoluteFormHost(t *testing.T) {
	td := startTestDaemon(t, daemon.Options{})
	_, sid := enrolledAgent(t, td, "claude")
	addr := td.Addr()
	before := len(td.activity(t, journal.Filter{}))
	tests := []struct{ name, line, host string }{
		{"foreign Host", "GET http://" + addr + "/.well-known/plexus HTTP/1.1", "evil.example"},
		{"foreign Host with port", "GET http://" + addr + "/.well-known/plexus HTTP/1.1", "evil.example:" + fmt.Sprint(td.port())},
		{"foreign authority", "GET http://evil.example/.well-known/plexus HTTP/1.1", addr},
		{"enroll with foreign Host", "POST http://" + addr + "/agents/enroll HTTP/1.1", "evil.example"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			st, raw := rawRequest(t, addr, tt.line, tt.host)
			wantEnvelope(t, st, raw, http.StatusForbidden, plexus.CodeHostForbidden)
		})
	}
	// The session an attacker page would ride on is untouched, and the
	// gateway journaled nothing for the refused requests.
	st, raw := rawRequest(t, addr, "GET /manifest HTTP/1.1\r\n"+plexus.SessionHeader+": "+sid, addr)
	if st != http.StatusOK {
		t.Errorf("origin-form with the bound Host: %d %s", st, raw)
	}
	if after := len(td.activity(t, journal.Filter{})); after != before {
		t.Errorf("%d journal rows written by refused requests", after-before)
	}
}

// TestDenialWindowRollover: when a denial window ends, the next denial of
// the key writes the ended window's summary and opens a new window with a
// row of its own, so the rows of a long flood grow with its length in
// windows, not in calls.
func TestDenialWindowRollover(t *testing.T) {
	clk := newFakeClock()
	td := startTestDaemon(t, daemon.Options{Clock: clk.Now, RateLimit: 1})
	t.Cleanup(http.DefaultClient.CloseIdleConnections)
	addEcho(t, td, "test", "")
	_, sid := enrolledAgent(t, td, "claude")
	tok := grantOK(t, td, sid, map[string]any{"test.echo.read": "allow"})
	call := func() plexus.InvokeResponse {
		_, resp, _ := td.invoke(t, tok.Token, plexus.InvokeRequest{ID: "test.echo.read", Input: map[string]any{"msg": "x"}})
		return resp
	}
	for range 4 + 10 { // the burst, then ten denials in the first window
		call()
	}
	clk.Advance(gateway.DefaultDenialWindow)
	for range 4 { // the bucket refilled during the minute
		call()
	}
	if resp := call(); resp.OK || resp.Error.Code != plexus.CodeRateLimited {
		t.Fatalf("call after the refilled burst: %+v, want rate_limited", resp)
	}
	rows := td.activity(t, journal.Filter{Type: "invoke.denied", AgentID: "claude"})
	if len(rows) != 3 {
		t.Fatalf("%d invoke.denied rows, want the first window's row and summary and the second window's row", len(rows))
	}
	wantCoalesced(t, "first window", rows[:2], 10, "")
	if rows[2].Payload["coalesced"] != nil {
		t.Errorf("the second window opened with a summary row: %+v", rows[2].Payload)
	}
}

// TestAttackExpiredTokenFlood: an agent loops on /invoke with a token that
// has expired. Each call is an audited token_expired denial, which used to
// be checked before the rate limit and so wrote a row per call without
// bound; now the rate limit comes first, and the flood leaves the burst's
// rows and one coalesced run of rate_limited.
func TestAttackExpiredTokenFlood(t *testing.T) {
	clk := newFakeClock()
	td := startTestDaemon(t, daemon.Options{Clock: clk.Now, RateLimit: 1})
	t.Cleanup(http.DefaultClient.CloseIdleConnections)
	addEcho(t, td, "test", "")
	_, sid := enrolledAgent(t, td, "claude")
	tok := grantOK(t, td, sid, map[string]any{"test.echo.read": "allow"})
	clk.Advance(tok.ExpiresAt.Sub(clk.Now()) + time.Minute)

	const calls = 300
	codes := map[plexus.ErrorCode]int{}
	for range calls {
		st, resp, raw := td.invoke(t, tok.Token, plexus.InvokeRequest{ID: "test.echo.read", Input: map[string]any{"msg": "x"}})
		if resp.OK || resp.Error == nil {
			t.Fatalf("an expired token's call: %d %s", st, raw)
		}
		codes[resp.Error.Code]++
	}
	if codes[plexus.CodeTokenExpired] != 4 || codes[plexus.CodeRateLimited] != calls-4 {
		t.Fatalf("answers %v, want the burst of 4 token_expired and the rest rate_limited", codes)
	}
	http.DefaultClient.CloseIdleConnections()
	td.stop()
	var expired, limited []plexus.Activity
	for _, r := range td.activity(t, journal.Filter{Type: "invoke.denied", AgentID: "claude"}) {
		switch r.Payload["errorCode"] {
		case string(plexus.CodeTokenExpired):
			expired = append(expired, r)
		case string(plexus.CodeRateLimited):
			limited = append(limited, r)
		default:
			t.Errorf("unexpected denial row %+v", r)
		}
	}
	if len(expired) != 4 {
		t.Errorf("%d token_expired rows, want one per call within the rate (4)", len(expired))
	}
	wantCoalesced(t, "rate_limited", limited, calls-4, "")
}

// TestAttackSameUserRefusalFlood: in strict mode an agent running as the
// owner's OS user is refused at the handshake, and each refusal was a
// journal row; retrying in a loop now leaves one row and a summary.
func TestAttackSameUserRefusalFlood(t *testing.T) {
	home := filepath.Join(t.TempDir(), "home")
	if _, err := scaffold.Init(home, scaffold.InitOptions{NewConnectionKey: auth.NewConnectionKey}); err != nil {
		t.Fatal(err)
	}
	a := scaffold.DefaultAuthConfig()
	a.StrictSameUser = true
	if err := os.WriteFile(filepath.Join(home, "auth-config.json"), mustJSON(t, a), 0o600); err != nil {
		t.Fatal(err)
	}
	td := startTestDaemon(t, daemon.Options{Home: home})
	t.Cleanup(http.DefaultClient.CloseIdleConnections)
	var conn plexus.ConnectResponse
	td.call(t, "POST", "/admin/api/agents/connect", td.admin(), plexus.ConnectRequest{AgentID: "claude"}, &conn)
	var enr plexus.EnrollResponse
	if st := td.call(t, "POST", "/agents/enroll", nil, plexus.EnrollRequest{Code: conn.Code}, &enr); st != http.StatusOK {
		t.Fatalf("enroll: %d", st)
	}
	const tries = 100
	for range tries {
		st, raw := td.raw(t, "POST", "/link/handshake", bearer(enr.PAT), mustJSON(t, plexus.HandshakeRequest{}))
		wantEnvelope(t, st, raw, http.StatusUnauthorized, plexus.CodeUnauthorized)
	}
	http.DefaultClient.CloseIdleConnections()
	td.stop()
	wantCoalesced(t, "auth.same_user_refused", td.activity(t, journal.Filter{Type: "auth.same_user_refused"}), tries, "")
}
