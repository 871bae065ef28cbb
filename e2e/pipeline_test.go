package e2e

import (
	"bufio"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/plexus-gw/plexus"
	"github.com/plexus-gw/plexus/daemon"
	"github.com/plexus-gw/plexus/gateway"
	"github.com/plexus-gw/plexus/journal"
)

// End-to-end tests of the /invoke pipeline and the grant rules it enforces:
// every error code with its status and body shape, once grants, constraints,
// portal confinement, default-deny and the revocation tombstone. Each runs a
// real daemon (journal.db in a temp home, HTTP on 127.0.0.1:0).

func mustJSON(t testing.TB, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// grantOK asks for grants in session sid and returns the token; anything but
// 200 fails the test.
func grantOK(t testing.TB, td *testDaemon, sid string, grants map[string]any) plexus.ScopedToken {
	t.Helper()
	st, raw := td.raw(t, http.MethodPut, "/grants", session(sid), mustJSON(t, map[string]any{"grants": grants}))
	var tok plexus.ScopedToken
	if st != http.StatusOK || json.Unmarshal(raw, &tok) != nil || tok.Token == "" {
		t.Fatalf("PUT /grants %v: status %d, %s; want 200 with a token", grants, st, raw)
	}
	return tok
}

// grantPending asks for grants and returns the pending notice; anything but
// 202 grant_pending_user fails the test.
func grantPending(t testing.TB, td *testDaemon, sid string, grants map[string]any) plexus.GrantPendingResponse {
	t.Helper()
	st, raw := td.raw(t, http.MethodPut, "/grants", session(sid), mustJSON(t, map[string]any{"grants": grants}))
	var p plexus.GrantPendingResponse
	if st != http.StatusAccepted || json.Unmarshal(raw, &p) != nil || p.Status != plexus.CodeGrantPendingUser || p.PendingID == "" {
		t.Fatalf("PUT /grants %v: status %d, %s; want 202 grant_pending_user", grants, st, raw)
	}
	return p
}

// approve approves a pending decision through the admin API.
func approve(t testing.TB, td *testDaemon, pendingID string, req plexus.DecideRequest) plexus.Pending {
	t.Helper()
	var p plexus.Pending
	if st := td.call(t, http.MethodPost, "/admin/api/pending/"+pendingID+"/approve", td.admin(), req, &p); st != http.StatusOK || p.State != plexus.StateApproved {
		t.Fatalf("approve %s: status %d, %+v", pendingID, st, p)
	}
	return p
}

// approvedToken polls GET /grants/status once after approval and returns
// the token it carries.
func approvedToken(t testing.TB, td *testDaemon, sid, pendingID string) *plexus.ScopedToken {
	t.Helper()
	var s plexus.GrantStatusResponse
	if st := td.call(t, http.MethodGet, "/grants/status?pendingId="+pendingID, session(sid), nil, &s); st != http.StatusOK || s.State != plexus.StateApproved || s.Token == nil {
		t.Fatalf("grant status %s: status %d, %+v", pendingID, st, s)
	}
	return s.Token
}

// wantDenial checks that an /invoke answer is the one result contract for a
// denial: {id, ok:false, error:{code, message, …}, auditId}, with the status
// of the §2 table. An audited denial's auditId must name the journal row
// that records it; an edge denial's auditId is "".
func wantDenial(t testing.TB, td *testDaemon, st int, raw []byte, wantStatus int, wantID string, wantCode plexus.ErrorCode, audited bool) {
	t.Helper()
	var shape map[string]json.RawMessage
	if err := json.Unmarshal(raw, &shape); err != nil {
		t.Errorf("answer %q is not a JSON object: %v", raw, err)
		return
	}
	for _, k := range []string{"id", "ok", "error", "auditId"} {
		if _, ok := shape[k]; !ok {
			t.Errorf("answer %s lacks %q: not the InvokeResponse shape", raw, k)
		}
	}
	if _, ok := shape["output"]; ok {
		t.Errorf("denial %s carries output", raw)
	}
	var r plexus.InvokeResponse
	_ = json.Unmarshal(raw, &r)
	if st != wantStatus {
		t.Errorf("status = %d, want %d (%s)", st, wantStatus, raw)
	}
	if r.OK {
		t.Errorf("ok = true, want false (%s)", raw)
	}
	if r.ID != wantID {
		t.Errorf("id = %q, want %q", r.ID, wantID)
	}
	if r.Error == nil {
		t.Errorf("no error in %s", raw)
		return
	}
	if r.Error.Code != wantCode {
		t.Errorf("error.code = %q, want %q (%s)", r.Error.Code, wantCode, r.Error.Message)
	}
	if r.Error.Message == "" {
		t.Errorf("error.message is empty")
	}
	if !audited {
		if r.AuditID != "" {
			t.Errorf("auditId = %q, want \"\" for an edge denial", r.AuditID)
		}
		return
	}
	if r.AuditID == "" {
		t.Errorf("auditId is empty, want the id of the journal row of this denial")
		return
	}
	row, ok := td.auditRow(t, r.AuditID)
	if !ok {
		t.Errorf("auditId %s names no journal row", r.AuditID)
		return
	}
	if row.ActionType != "invoke.denied" && row.ActionType != "invoke.failed" {
		t.Errorf("journal row %s is %s, want invoke.denied or invoke.failed", r.AuditID, row.ActionType)
	}
	if got, _ := row.Payload["errorCode"].(string); got != string(wantCode) {
		t.Errorf("journal row %s errorCode = %q, want %q", r.AuditID, got, wantCode)
	}
	if row.Target != wantID {
		t.Errorf("journal row %s target = %q, want %q", r.AuditID, row.Target, wantID)
	}
}

// wantEnvelope checks the uniform ErrorResponse envelope {error:{code,…}}
// of every endpoint but /invoke.
func wantEnvelope(t testing.TB, st int, raw []byte, wantStatus int, wantCode plexus.ErrorCode) plexus.ErrorBody {
	t.Helper()
	var shape map[string]json.RawMessage
	if err := json.Unmarshal(raw, &shape); err != nil {
		t.Errorf("answer %q is not a JSON object: %v", raw, err)
		return plexus.ErrorBody{}
	}
	if len(shape) != 1 || shape["error"] == nil {
		t.Errorf("answer %s is not the {error:{…}} envelope", raw)
	}
	var e plexus.ErrorResponse
	_ = json.Unmarshal(raw, &e)
	if st != wantStatus {
		t.Errorf("status = %d, want %d (%s)", st, wantStatus, raw)
	}
	if e.Error == nil {
		return plexus.ErrorBody{}
	}
	if e.Error.Code != wantCode {
		t.Errorf("error.code = %q, want %q (%s)", e.Error.Code, wantCode, e.Error.Message)
	}
	return *e.Error
}

// TestInvokeErrorCodes drives every error code the /invoke pipeline can
// produce and checks its HTTP status, the InvokeResponse shape, and whether
// the denial is audited (auditId naming its journal row) or an edge denial
// (auditId "").
func TestInvokeErrorCodes(t *testing.T) {
	clk := newFakeClock()
	td := startTestDaemon(t, daemon.Options{Clock: clk.Now})
	addEcho(t, td, "test", "")
	dir := addPortal(t, td, "notes")
	outsideDir := t.TempDir()
	if err := os.WriteFile(filepath.Join(outsideDir, "outside.md"), []byte("OUTSIDE-THE-PORTAL"), 0o644); err != nil {
		t.Fatal(err)
	}
	escape, err := filepath.Rel(dir, filepath.Join(outsideDir, "outside.md"))
	if err != nil || !strings.HasPrefix(escape, "..") {
		t.Fatalf("relative path to the outside file = %q, %v", escape, err)
	}

	_, sid := enrolledAgent(t, td, "claude")
	echoTok := grantOK(t, td, sid, map[string]any{"test.echo.read": "allow"})
	portalTok := grantOK(t, td, sid, map[string]any{"portal.notes.read": "allow"})
	revTok := grantOK(t, td, sid, map[string]any{"test.echo.read": "allow"})
	if st := td.call(t, http.MethodPost, "/grants/revoke", td.admin(), plexus.RevokeRequest{JTI: revTok.JTI}, nil); st != http.StatusOK {
		t.Fatalf("revoke jti: status %d", st)
	}

	// Sanity: the happy path answers 200 ok with the echo and an auditId.
	st, resp, _ := td.invoke(t, echoTok.Token, plexus.InvokeRequest{ID: "test.echo.read", Input: map[string]any{"msg": "hi", "n": 2}})
	if st != http.StatusOK || !resp.OK || resp.AuditID == "" {
		t.Fatalf("echo: status %d, %+v", st, resp)
	}

	port := strconv.Itoa(td.port())
	echoCall := func(input map[string]any) []byte {
		return mustJSON(t, plexus.InvokeRequest{ID: "test.echo.read", Input: input})
	}
	tests := []struct {
		name       string
		hdr        map[string]string
		body       []byte
		wantStatus int
		wantID     string
		wantCode   plexus.ErrorCode
		audited    bool
	}{
		{"NoToken", nil, echoCall(map[string]any{"msg": "x"}), 401, "test.echo.read", plexus.CodeGrantRequired, false},
		{"TokenWithoutScope", bearer(echoTok.Token), mustJSON(t, plexus.InvokeRequest{ID: "test.echo.write", Input: map[string]any{"msg": "x"}}),
			401, "test.echo.write", plexus.CodeGrantRequired, true},
		{"TokenWithoutVerb", bearer(portalTok.Token), mustJSON(t, plexus.InvokeRequest{ID: "portal.notes.write", Input: map[string]any{"path": "a.md", "content": "x"}}),
			401, "portal.notes.write", plexus.CodeGrantRequired, true},
		{"GarbageToken", bearer("not-a-token"), echoCall(map[string]any{"msg": "x"}), 401, "test.echo.read", plexus.CodeTokenRevoked, false},
		{"ForgedToken", bearer("eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJjbGF1ZGUifQ.c2lnbmF0dXJl"), echoCall(map[string]any{"msg": "x"}),
			401, "test.echo.read", plexus.CodeTokenRevoked, false},
		{"RevokedJTI", bearer(revTok.Token), echoCall(map[string]any{"msg": "x"}), 401, "test.echo.read", plexus.CodeTokenRevoked, true},
		{"UnknownCapability", bearer(echoTok.Token), mustJSON(t, plexus.InvokeRequest{ID: "test.echo.nope", Input: map[string]any{"msg": "x"}}),
			404, "test.echo.nope", plexus.CodeUnknownCapability, true},
		{"MissingRequired", bearer(echoTok.Token), echoCall(map[string]any{"n": 1}), 422, "test.echo.read", plexus.CodeSchemaValidationFailed, true},
		{"WrongType", bearer(echoTok.Token), echoCall(map[string]any{"msg": "x", "n": "x"}), 422, "test.echo.read", plexus.CodeSchemaValidationFailed, true},
		{"NotAnInteger", bearer(echoTok.Token), echoCall(map[string]any{"msg": "x", "n": 1.5}), 422, "test.echo.read", plexus.CodeSchemaValidationFailed, true},
		{"UnparseableBody", bearer(echoTok.Token), []byte(`{"id":`), 422, "", plexus.CodeSchemaValidationFailed, false},
		{"BodyWithoutID", bearer(echoTok.Token), []byte(`{"input":{"msg":"x"}}`), 422, "", plexus.CodeSchemaValidationFailed, false},
		{"InputNotAnObject", bearer(echoTok.Token), []byte(`{"id":"test.echo.read","input":"msg"}`), 422, "test.echo.read", plexus.CodeSchemaValidationFailed, false},
		{"TransportError", bearer(portalTok.Token), mustJSON(t, plexus.InvokeRequest{ID: "portal.notes.read", Input: map[string]any{"path": escape}}),
			200, "portal.notes.read", plexus.CodeTransportError, true},
		{"ForeignHost", map[string]string{"Authorization": "Bearer " + echoTok.Token, "Host": "evil.example"}, echoCall(map[string]any{"msg": "x"}),
			403, "", plexus.CodeHostForbidden, false},
		{"ForeignHostSamePort", map[string]string{"Authorization": "Bearer " + echoTok.Token, "Host": "evil.example:" + port}, echoCall(map[string]any{"msg": "x"}),
			403, "", plexus.CodeHostForbidden, false},
		{"ForeignOrigin", map[string]string{"Authorization": "Bearer " + echoTok.Token, "Origin": "http://evil.example"}, echoCall(map[string]any{"msg": "x"}),
			403, "", plexus.CodeHostForbidden, false},
		// The gateway's own origin is http:// and the very Host asked: the
		// same port under another loopback name is another origin.
		{"OwnPortOtherOrigin", map[string]string{"Authorization": "Bearer " + echoTok.Token, "Origin": "http://localhost:" + port}, echoCall(map[string]any{"msg": "x"}),
			403, "", plexus.CodeHostForbidden, false},
		{"RebindingOrigin", map[string]string{"Authorization": "Bearer " + echoTok.Token, "Host": "evil.example:" + port, "Origin": "http://evil.example:" + port}, echoCall(map[string]any{"msg": "x"}),
			403, "", plexus.CodeHostForbidden, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			st, raw := td.raw(t, http.MethodPost, "/invoke", tt.hdr, tt.body)
			wantDenial(t, td, st, raw, tt.wantStatus, tt.wantID, tt.wantCode, tt.audited)
			if strings.Contains(string(raw), "OUTSIDE-THE-PORTAL") {
				t.Errorf("answer carries the outside file: %s", raw)
			}
		})
	}

	// The following change the daemon's state, so they run in order.
	t.Run("SourceUnavailable", func(t *testing.T) {
		if err := os.RemoveAll(dir); err != nil {
			t.Fatal(err)
		}
		st, _, raw := td.invoke(t, portalTok.Token, plexus.InvokeRequest{ID: "portal.notes.read", Input: map[string]any{"path": "hello.md"}})
		wantDenial(t, td, st, raw, 503, "portal.notes.read", plexus.CodeSourceUnavailable, true)
	})
	t.Run("TokenExpired", func(t *testing.T) {
		clk.Advance(15*time.Minute - time.Second)
		if st, resp, _ := td.invoke(t, echoTok.Token, plexus.InvokeRequest{ID: "test.echo.read", Input: map[string]any{"msg": "x"}}); !resp.OK {
			t.Fatalf("a second before expiry: status %d, %+v", st, resp.Error)
		}
		clk.Advance(time.Second)
		st, _, raw := td.invoke(t, echoTok.Token, plexus.InvokeRequest{ID: "test.echo.read", Input: map[string]any{"msg": "x"}})
		wantDenial(t, td, st, raw, 401, "test.echo.read", plexus.CodeTokenExpired, true)
	})
	t.Run("SessionExpired", func(t *testing.T) {
		// A token minted in the session's last minutes outlives it: the
		// session check, not the token's own expiry, must refuse it.
		clk.Advance(gateway.DefaultSessionTTL - 15*time.Minute - 5*time.Minute)
		late := grantOK(t, td, sid, map[string]any{"test.echo.read": "allow"})
		clk.Advance(6 * time.Minute)
		if !clk.Now().Before(late.ExpiresAt) {
			t.Fatalf("token expired at %v, before the session; the test needs it live", late.ExpiresAt)
		}
		st, _, raw := td.invoke(t, late.Token, plexus.InvokeRequest{ID: "test.echo.read", Input: map[string]any{"msg": "x"}})
		wantDenial(t, td, st, raw, 401, "test.echo.read", plexus.CodeSessionExpired, true)
		st, raw = td.raw(t, http.MethodGet, "/manifest", session(sid), nil)
		wantEnvelope(t, st, raw, 401, plexus.CodeSessionExpired)
	})
}

// TestInvokeRateLimited: with a rate of one call a second (burst 4) and a
// clock that stands still, a burst of concurrent calls gets exactly four
// through and answers the rest 429 rate_limited in the invoke shape.
func TestInvokeRateLimited(t *testing.T) {
	clk := newFakeClock()
	td := startTestDaemon(t, daemon.Options{Clock: clk.Now, RateLimit: 1})
	// Before the daemon stops: a connection the client dialed but never
	// used would hold up its graceful shutdown.
	t.Cleanup(http.DefaultClient.CloseIdleConnections)
	addEcho(t, td, "test", "")
	_, sid := enrolledAgent(t, td, "claude")
	tok := grantOK(t, td, sid, map[string]any{"test.echo.read": "allow"})

	const n = 12
	type result struct {
		st  int
		raw []byte
	}
	results := make([]result, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			st, _, raw := td.invoke(t, tok.Token, plexus.InvokeRequest{ID: "test.echo.read", Input: map[string]any{"msg": "burst"}})
			results[i] = result{st, raw}
		})
	}
	wg.Wait()
	ok := 0
	for _, r := range results {
		if r.st == http.StatusOK {
			ok++
			continue
		}
		wantDenial(t, td, r.st, r.raw, 429, "test.echo.read", plexus.CodeRateLimited, true)
	}
	if ok != 4 {
		t.Errorf("%d calls got through, want the burst of 4", ok)
	}
	clk.Advance(time.Second)
	if st, resp, _ := td.invoke(t, tok.Token, plexus.InvokeRequest{ID: "test.echo.read", Input: map[string]any{"msg": "later"}}); !resp.OK {
		t.Errorf("a second later: status %d, %+v; want one more call through", st, resp.Error)
	}
}

// TestEndpointErrors: every endpoint but /invoke answers failures in the
// uniform {error:{…}} envelope, with the guard running before auth.
func TestEndpointErrors(t *testing.T) {
	td := startTestDaemon(t, daemon.Options{})
	_, sid := enrolledAgent(t, td, "claude")
	port := strconv.Itoa(td.port())
	withHost := func(h map[string]string, host string) map[string]string {
		out := map[string]string{"Host": host}
		for k, v := range h {
			out[k] = v
		}
		return out
	}
	tests := []struct {
		name         string
		method, path string
		hdr          map[string]string
		body         []byte
		wantStatus   int
		wantCode     plexus.ErrorCode
	}{
		{"MalformedGrants", "PUT", "/grants", session(sid), []byte(`{"grants":`), 400, plexus.CodeMalformed},
		{"GrantsNotAnObject", "PUT", "/grants", session(sid), []byte(`["allow"]`), 400, plexus.CodeMalformed},
		{"TrailingData", "PUT", "/grants", session(sid), []byte(`{"grants":{}} {"grants":{}}`), 400, plexus.CodeMalformed},
		{"MalformedEnroll", "POST", "/agents/enroll", nil, []byte(`{code`), 400, plexus.CodeMalformed},
		{"MalformedHandshake", "POST", "/link/handshake", nil, []byte(`{"client":`), 400, plexus.CodeMalformed},
		{"MalformedRefresh", "POST", "/grants/refresh", session(sid), []byte(`nope`), 400, plexus.CodeMalformed},
		{"MalformedAdmin", "POST", "/admin/api/agents/connect", map[string]string{"Authorization": "Bearer " + td.key}, []byte(`{"agentId":`), 400, plexus.CodeMalformed},
		{"UnknownPendingStatus", "GET", "/grants/status?pendingId=pend_nope", session(sid), nil, 404, plexus.CodeNotFound},
		{"UnknownPendingApprove", "POST", "/admin/api/pending/pend_nope/approve", map[string]string{"Authorization": "Bearer " + td.key}, nil, 404, plexus.CodeNotFound},
		{"NoSession", "GET", "/manifest", nil, nil, 401, plexus.CodeSessionExpired},
		{"UnknownSession", "GET", "/grants", session("sess_nope"), nil, 401, plexus.CodeSessionExpired},
		{"BadConnectionKey", "GET", "/admin/api/status", map[string]string{"Authorization": "Bearer plx_live_0000000000000000000000000000"}, nil, 401, plexus.CodeUnauthorized},
		{"BadConnectionKeyHeader", "GET", "/admin/api/grants", map[string]string{plexus.ConnectionKeyHeader: "plx_live_1111111111111111111111111111"}, nil, 401, plexus.CodeUnauthorized},
		{"AgentSessionOnAdmin", "GET", "/admin/api/grants", session(sid), nil, 401, plexus.CodeUnauthorized},
		{"ForeignHostManifest", "GET", "/manifest", withHost(session(sid), "evil.example"), nil, 403, plexus.CodeHostForbidden},
		{"ForeignHostAdmin", "GET", "/admin/api/status", withHost(td.admin(), "evil.example"), nil, 403, plexus.CodeHostForbidden},
		{"ForeignHostWellKnown", "GET", "/.well-known/plexus", withHost(nil, "evil.example"), nil, 403, plexus.CodeHostForbidden},
		{"NoPort", "GET", "/.well-known/plexus", withHost(nil, "127.0.0.1"), nil, 403, plexus.CodeHostForbidden},
		{"OtherPort", "GET", "/.well-known/plexus", withHost(nil, "127.0.0.1:1"), nil, 403, plexus.CodeHostForbidden},
		{"TrailingDot", "GET", "/.well-known/plexus", withHost(nil, "localhost.:"+port), nil, 403, plexus.CodeHostForbidden},
		{"RebindName", "GET", "/.well-known/plexus", withHost(nil, "127.0.0.1.nip.io:"+port), nil, 403, plexus.CodeHostForbidden},
		{"ForeignOrigin", "GET", "/.well-known/plexus", map[string]string{"Origin": "http://evil.example"}, nil, 403, plexus.CodeHostForbidden},
		{"NullOrigin", "POST", "/agents/enroll", map[string]string{"Origin": "null"}, []byte(`{"code":"x"}`), 403, plexus.CodeHostForbidden},
		{"ForeignOriginAdmin", "POST", "/admin/api/key/rotate", map[string]string{"Authorization": "Bearer " + td.key, "Origin": "http://evil.example"}, nil, 403, plexus.CodeHostForbidden},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			st, raw := td.raw(t, tt.method, tt.path, tt.hdr, tt.body)
			wantEnvelope(t, st, raw, tt.wantStatus, tt.wantCode)
		})
	}

	// The guard refused the rotation before auth: the key still works.
	if st := td.call(t, "GET", "/admin/api/status", td.admin(), nil, nil); st != http.StatusOK {
		t.Errorf("admin status after a forbidden rotation attempt: %d, want 200 (the key must not have rotated)", st)
	}
	// Every loopback spelling of the bound authority is accepted.
	for _, host := range []string{"127.0.0.1:" + port, "localhost:" + port, "LOCALHOST:" + port, "[::1]:" + port} {
		if st, raw := td.raw(t, "GET", "/.well-known/plexus", map[string]string{"Host": host}, nil); st != http.StatusOK {
			t.Errorf("Host %s: status %d, %s; want 200", host, st, raw)
		}
	}
}

// TestOnceGrantConcurrent: a once grant serves exactly one call, even when
// twenty calls race on the same token.
func TestOnceGrantConcurrent(t *testing.T) {
	td := startTestDaemon(t, daemon.Options{Authorizer: autoApprove{}})
	// Before the daemon stops: a connection the client dialed but never
	// used would hold up its graceful shutdown.
	t.Cleanup(http.DefaultClient.CloseIdleConnections)
	addEcho(t, td, "test", "")
	_, sid := enrolledAgent(t, td, "claude")
	tok := grantOK(t, td, sid, map[string]any{"test.echo.run": map[string]any{"decision": "allow", "verbs": []string{"execute"},
		"trustWindow": map[string]any{"kind": "until-revoked"}}})
	if tok.TrustWindow == nil || tok.TrustWindow.Kind != plexus.WindowOnce || tok.GrantExpiresAt != nil {
		t.Fatalf("execute token window = %+v, grantExpiresAt %v; want once, none", tok.TrustWindow, tok.GrantExpiresAt)
	}

	const n = 20
	statuses := make([]int, n)
	raws := make([][]byte, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			statuses[i], _, raws[i] = td.invoke(t, tok.Token, plexus.InvokeRequest{ID: "test.echo.run", Input: map[string]any{"msg": "go", "n": i}})
		})
	}
	wg.Wait()
	ok := 0
	for i := range n {
		if statuses[i] == http.StatusOK {
			ok++
			continue
		}
		wantDenial(t, td, statuses[i], raws[i], 401, "test.echo.run", plexus.CodeGrantRequired, true)
	}
	if ok != 1 {
		t.Errorf("%d of %d concurrent calls ran on one once grant, want exactly 1", ok, n)
	}
	if rows := td.activity(t, journal.Filter{Type: "invoke.ok"}); len(rows) != 1 {
		t.Errorf("journal has %d invoke.ok rows, want 1", len(rows))
	}
	if rows := td.activity(t, journal.Filter{Type: "grant.used"}); len(rows) != 1 {
		t.Errorf("journal has %d grant.used rows, want 1", len(rows))
	}
	var ledger plexus.GrantsListResponse
	td.call(t, "GET", "/grants", session(sid), nil, &ledger)
	if len(ledger.Grants) != 0 {
		t.Errorf("ledger after the once grant was used = %+v, want empty", ledger.Grants)
	}
}

// TestConstraintsFailClosed: a constrained grant admits only input inside
// its constraint, fails closed on anything doubtful, survives refresh, and a
// constraint with an unsupported op is declined and never admits a call.
func TestConstraintsFailClosed(t *testing.T) {
	td := startTestDaemon(t, daemon.Options{})
	dir := addPortal(t, td, "docs")
	for name, body := range map[string]string{"public/a.md": "PUBLIC-A", "secret.md": "TOP-SECRET", "publicity/b.md": "NEIGHBOUR"} {
		p := filepath.Join(dir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	_, sid := enrolledAgent(t, td, "claude")
	constraint := map[string]any{"pathPrefix": map[string]any{"field": "path", "allow": []string{"public/"}}}
	tok := grantOK(t, td, sid, map[string]any{"portal.docs.read": map[string]any{"decision": "allow", "constraint": constraint}})
	if len(tok.Scopes) != 1 || tok.Scopes[0].Constraint == nil || tok.Scopes[0].Constraint.PathPrefix == nil {
		t.Fatalf("token scopes = %+v, want the constraint carried", tok.Scopes)
	}

	check := func(t *testing.T, token string) {
		tests := []struct {
			name  string
			input map[string]any
		}{
			{"Outside", map[string]any{"path": "secret.md"}},
			{"DotDot", map[string]any{"path": "public/../secret.md"}},
			{"DotDotBack", map[string]any{"path": "public/../public/a.md"}},
			{"Missing", map[string]any{}},
			{"WrongType", map[string]any{"path": 7}},
			{"Absolute", map[string]any{"path": "/public/a.md"}},
			{"SiblingPrefix", map[string]any{"path": "publicity/b.md"}},
			{"EncodedDots", map[string]any{"path": "public/%2e%2e/secret.md"}},
			{"Backslash", map[string]any{"path": `public\..\secret.md`}},
			{"CaseFold", map[string]any{"path": "Public/a.md"}},
		}
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				st, _, raw := td.invoke(t, token, plexus.InvokeRequest{ID: "portal.docs.read", Input: tt.input})
				wantDenial(t, td, st, raw, 401, "portal.docs.read", plexus.CodeGrantRequired, true)
				for _, leak := range []string{"TOP-SECRET", "NEIGHBOUR", "PUBLIC-A"} {
					if strings.Contains(string(raw), leak) {
						t.Errorf("denial carries file content %q", leak)
					}
				}
			})
		}
		t.Run("Inside", func(t *testing.T) {
			st, resp, raw := td.invoke(t, token, plexus.InvokeRequest{ID: "portal.docs.read", Input: map[string]any{"path": "public/a.md"}})
			if st != http.StatusOK || !resp.OK || !strings.Contains(string(raw), "PUBLIC-A") {
				t.Errorf("public/a.md: status %d, %s", st, raw)
			}
		})
	}
	t.Run("Token", func(t *testing.T) { check(t, tok.Token) })

	t.Run("Ledger", func(t *testing.T) {
		var ledger plexus.GrantsListResponse
		td.call(t, "GET", "/grants", session(sid), nil, &ledger)
		if len(ledger.Grants) != 1 || ledger.Grants[0].Constraint == nil || ledger.Grants[0].Constraint.PathPrefix == nil ||
			!slices.Equal(ledger.Grants[0].Constraint.PathPrefix.Allow, []string{"public/"}) {
			t.Errorf("ledger = %+v, want the grant with its constraint", ledger.Grants)
		}
	})

	t.Run("Refreshed", func(t *testing.T) {
		var ref plexus.RefreshResponse
		if st := td.call(t, "POST", "/grants/refresh", bearer(tok.Token), plexus.RefreshRequest{SessionID: sid, JTI: tok.JTI}, &ref); st != http.StatusOK {
			t.Fatalf("refresh: status %d", st)
		}
		if len(ref.Scopes) != 1 || ref.Scopes[0].Constraint == nil {
			t.Fatalf("refreshed scopes = %+v, want the same constraint", ref.Scopes)
		}
		check(t, ref.Token)
	})

	t.Run("UnsupportedOp", func(t *testing.T) {
		for _, c := range []map[string]any{
			{"match": []any{map[string]any{"field": "query", "op": "regex", "pattern": ".*"}}},
			{"match": []any{map[string]any{"field": "query", "op": "glob", "value": "*"}}},
			{"pathPrefix": map[string]any{"field": "path", "allow": []string{"."}}, "match": []any{map[string]any{"field": "query", "op": "regex", "pattern": ".*"}}},
			{},
		} {
			st, raw := td.raw(t, http.MethodPut, "/grants", session(sid), mustJSON(t, map[string]any{"grants": map[string]any{
				"portal.docs.search": map[string]any{"decision": "allow", "constraint": c}}}))
			body := wantEnvelope(t, st, raw, 401, plexus.CodeGrantRequired)
			if !strings.Contains(body.Message, "portal.docs.search") || !strings.Contains(body.Message, "constraint") {
				t.Errorf("constraint %v: message %q does not say the constraint was declined", c, body.Message)
			}
		}
		// Beside a valid grant, the bad one is listed as declined and the
		// token carries no scope for it.
		regex := map[string]any{"match": []any{map[string]any{"field": "query", "op": "regex", "pattern": ".*"}}}
		mixed := grantOK(t, td, sid, map[string]any{"portal.docs.list": "allow",
			"portal.docs.search": map[string]any{"decision": "allow", "constraint": regex}})
		if len(mixed.Declined) != 1 || mixed.Declined[0].ID != "portal.docs.search" || !strings.Contains(mixed.Declined[0].Reason, "regex") {
			t.Errorf("declined = %+v, want portal.docs.search declined for its regex op", mixed.Declined)
		}
		for _, s := range mixed.Scopes {
			if s.ID == "portal.docs.search" {
				t.Errorf("token carries a scope for the declined capability: %+v", s)
			}
		}
		st, _, raw := td.invoke(t, mixed.Token, plexus.InvokeRequest{ID: "portal.docs.search", Input: map[string]any{"query": "SECRET"}})
		wantDenial(t, td, st, raw, 401, "portal.docs.search", plexus.CodeGrantRequired, true)
		// Nor can the owner hand it out at connect.
		var e plexus.ErrorResponse
		st = td.call(t, "POST", "/admin/api/agents/connect", td.admin(), plexus.ConnectRequest{AgentID: "other", Grants: []plexus.ConnectGrant{{
			CapabilityID: "portal.docs.search", Constraint: &plexus.ScopeConstraint{Match: []plexus.ScopeMatch{{Field: "query", Op: "regex", Pattern: ".*"}}}}}}, &e)
		if st != http.StatusBadRequest || e.Error == nil || e.Error.Code != plexus.CodeInvalidRequest {
			t.Errorf("connect with a regex constraint: status %d, %+v; want 400 invalid_request", st, e.Error)
		}
		var ledger plexus.GrantsListResponse
		td.call(t, "GET", "/admin/api/grants", td.admin(), nil, &ledger)
		for _, g := range ledger.Grants {
			if g.CapabilityID == "portal.docs.search" {
				t.Errorf("ledger holds a grant for the declined capability: %+v", g)
			}
		}
	})
}

// TestPortalConfinement: paths leading out of a portal, absolute paths and
// symlinks pointing outside are refused in-band (200, ok:false,
// transport_error), nothing outside is read or written, and each refusal is
// an invoke.failed row with errorCode transport_error.
func TestPortalConfinement(t *testing.T) {
	td := startTestDaemon(t, daemon.Options{})
	dir := addPortal(t, td, "box")
	outside := t.TempDir()
	const canary = "OUTSIDE-CANARY-7f3a9c"
	secret := filepath.Join(outside, "secret.txt")
	if err := os.WriteFile(secret, []byte(canary+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(secret, filepath.Join(dir, "link.txt")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(outside, filepath.Join(dir, "linkdir")); err != nil {
		t.Fatal(err)
	}
	rel, _ := filepath.Rel(dir, secret)

	_, sid := enrolledAgent(t, td, "claude")
	readTok := grantOK(t, td, sid, map[string]any{"portal.box.read": "allow", "portal.box.list": "allow", "portal.box.search": "allow"})
	p := grantPending(t, td, sid, map[string]any{"portal.box.write": map[string]any{"decision": "allow", "verbs": []string{"write"}}})
	approve(t, td, p.PendingID, plexus.DecideRequest{})
	writeTok := approvedToken(t, td, sid, p.PendingID)

	tests := []struct {
		name  string
		tok   string
		id    string
		input map[string]any
	}{
		{"ReadDotDot", readTok.Token, "portal.box.read", map[string]any{"path": "../x"}},
		{"ReadDotDotReal", readTok.Token, "portal.box.read", map[string]any{"path": rel}},
		{"ReadEtcPasswd", readTok.Token, "portal.box.read", map[string]any{"path": "/etc/passwd"}},
		{"ReadAbsoluteOutside", readTok.Token, "portal.box.read", map[string]any{"path": secret}},
		{"ReadSymlinkOut", readTok.Token, "portal.box.read", map[string]any{"path": "link.txt"}},
		{"ReadThroughSymlinkDir", readTok.Token, "portal.box.read", map[string]any{"path": "linkdir/secret.txt"}},
		{"ListSymlinkDir", readTok.Token, "portal.box.list", map[string]any{"path": "linkdir"}},
		{"ListDotDot", readTok.Token, "portal.box.list", map[string]any{"path": ".."}},
		{"SearchSymlinkDir", readTok.Token, "portal.box.search", map[string]any{"query": "OUTSIDE", "path": "linkdir"}},
		{"WriteDotDot", writeTok.Token, "portal.box.write", map[string]any{"path": "../escaped.txt", "content": "x"}},
		{"WriteAbsolute", writeTok.Token, "portal.box.write", map[string]any{"path": filepath.Join(outside, "escaped.txt"), "content": "x"}},
		{"WriteSymlinkOut", writeTok.Token, "portal.box.write", map[string]any{"path": "link.txt", "content": "overwritten"}},
		{"WriteThroughSymlinkDir", writeTok.Token, "portal.box.write", map[string]any{"path": "linkdir/escaped.txt", "content": "x"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			st, _, raw := td.invoke(t, tt.tok, plexus.InvokeRequest{ID: tt.id, Input: tt.input})
			wantDenial(t, td, st, raw, http.StatusOK, tt.id, plexus.CodeTransportError, true)
			if strings.Contains(string(raw), canary) {
				t.Errorf("answer carries the outside file: %s", raw)
			}
			if strings.Contains(string(raw), dir) {
				t.Errorf("answer names the portal's absolute path: %s", raw)
			}
		})
	}
	// A search of the whole portal must not follow the symlinks out.
	st, resp, raw := td.invoke(t, readTok.Token, plexus.InvokeRequest{ID: "portal.box.search", Input: map[string]any{"query": "OUTSIDE-CANARY"}})
	if st != http.StatusOK || !resp.OK || strings.Contains(string(raw), canary) {
		t.Errorf("search over the portal: status %d, %s; want ok without the outside content", st, raw)
	}

	if b, err := os.ReadFile(secret); err != nil || string(b) != canary+"\n" {
		t.Errorf("outside file = %q, %v; want it untouched", b, err)
	}
	for _, name := range []string{"escaped.txt", filepath.Join("..", "escaped.txt")} {
		if _, err := os.Lstat(filepath.Join(outside, name)); err == nil {
			t.Errorf("%s was written outside the portal", name)
		}
	}
	if _, err := os.Lstat(filepath.Join(filepath.Dir(dir), "escaped.txt")); err == nil {
		t.Errorf("escaped.txt was written beside the portal")
	}
	failed := td.activity(t, journal.Filter{Type: "invoke.failed"})
	n := 0
	for _, r := range failed {
		if r.Payload["errorCode"] == string(plexus.CodeTransportError) {
			n++
		}
	}
	if n != len(tests) {
		t.Errorf("journal has %d invoke.failed transport_error rows, want %d", n, len(tests))
	}
}

// TestDefaultDenyReadOnly: a bare allow grants read only, so it is declined
// on a write capability with a reason naming the verbs; write pends under the
// shipped authorizer, and so does any read of an extension. A pending
// decision nobody takes expires.
func TestDefaultDenyReadOnly(t *testing.T) {
	clk := newFakeClock()
	td := startTestDaemon(t, daemon.Options{Clock: clk.Now})
	addPortal(t, td, "notes")
	addEcho(t, td, "ext", plexus.ProvenanceExtension)
	pat, sid := enrolledAgent(t, td, "claude")

	t.Run("BareAllowOnWrite", func(t *testing.T) {
		st, raw := td.raw(t, http.MethodPut, "/grants", session(sid), mustJSON(t, map[string]any{"grants": map[string]any{"portal.notes.write": "allow"}}))
		body := wantEnvelope(t, st, raw, 401, plexus.CodeGrantRequired)
		var detail struct {
			Declined []plexus.Declined `json:"declined"`
		}
		b, _ := json.Marshal(body.Detail)
		_ = json.Unmarshal(b, &detail)
		if len(detail.Declined) != 1 || detail.Declined[0].ID != "portal.notes.write" {
			t.Fatalf("declined = %+v, want portal.notes.write", detail.Declined)
		}
		if r := detail.Declined[0].Reason; !strings.Contains(r, "read") || !strings.Contains(r, "write") {
			t.Errorf("reason %q does not name the verbs", r)
		}
	})
	t.Run("BareAllowBesideRead", func(t *testing.T) {
		tok := grantOK(t, td, sid, map[string]any{"portal.notes.read": "allow", "portal.notes.write": "allow"})
		if len(tok.Scopes) != 1 || tok.Scopes[0].ID != "portal.notes.read" || !slices.Equal(tok.Scopes[0].Verbs, []plexus.Verb{plexus.VerbRead}) {
			t.Errorf("scopes = %+v, want read on portal.notes.read only", tok.Scopes)
		}
		if len(tok.Declined) != 1 || tok.Declined[0].ID != "portal.notes.write" {
			t.Errorf("declined = %+v, want portal.notes.write", tok.Declined)
		}
		st, _, raw := td.invoke(t, tok.Token, plexus.InvokeRequest{ID: "portal.notes.write", Input: map[string]any{"path": "a.md", "content": "x"}})
		wantDenial(t, td, st, raw, 401, "portal.notes.write", plexus.CodeGrantRequired, true)
	})
	var writePending plexus.GrantPendingResponse
	t.Run("WritePends", func(t *testing.T) {
		writePending = grantPending(t, td, sid, map[string]any{"portal.notes.write": map[string]any{"decision": "allow", "verbs": []string{"write"},
			"trustWindow": map[string]any{"kind": "until-revoked"}}})
		if !slices.Equal(writePending.Pending, []string{"portal.notes.write"}) {
			t.Errorf("pending = %v", writePending.Pending)
		}
		// The agent's window is advisory: until-revoked is cut to the
		// write ceiling of one day.
		var list plexus.PendingListResponse
		td.call(t, "GET", "/admin/api/pending", td.admin(), nil, &list)
		if len(list.Pending) != 1 || list.Pending[0].Items[0].TrustWindow.Kind != plexus.Window1d {
			t.Errorf("pending items = %+v, want the write window capped at 1d", list.Pending)
		}
	})
	t.Run("ExtensionReadPends", func(t *testing.T) {
		p := grantPending(t, td, sid, map[string]any{"ext.echo.read": "allow"})
		if len(p.PendingNarration) != 1 || p.PendingNarration[0].Provenance != plexus.ProvenanceExtension {
			t.Errorf("narration = %+v, want extension provenance", p.PendingNarration)
		}
	})
	t.Run("PendingExpires", func(t *testing.T) {
		clk.Advance(24*time.Hour + time.Second)
		if err := td.Gateway().Sweep(t.Context()); err != nil {
			t.Fatal(err)
		}
		var s plexus.GrantStatusResponse
		// The session outlived its 12 hours too; a new one sees the state.
		sid2 := handshake(t, td, pat, nil)
		td.call(t, "GET", "/grants/status?pendingId="+writePending.PendingID, session(sid2), nil, &s)
		if s.State != plexus.StateExpired || s.Token != nil {
			t.Errorf("status after expiry = %+v, want expired without a token", s)
		}
		st, raw := td.raw(t, http.MethodPost, "/admin/api/pending/"+writePending.PendingID+"/approve", td.admin(), nil)
		wantEnvelope(t, st, raw, 409, plexus.CodeConflict)
	})
}

// handshake opens a new session with pat.
func handshake(t testing.TB, td *testDaemon, pat string, client *plexus.ClientInfo) string {
	t.Helper()
	var hs plexus.HandshakeResponse
	if st := td.call(t, "POST", "/link/handshake", bearer(pat), plexus.HandshakeRequest{Client: client}, &hs); st != http.StatusOK || hs.SessionID == "" {
		t.Fatalf("handshake: status %d", st)
	}
	return hs.SessionID
}

// TestRevocationTombstone: after the owner revokes an auto-approved read,
// asking for it again pends instead of silently re-approving; once the owner
// approves again, the standing grant short-circuits as before.
func TestRevocationTombstone(t *testing.T) {
	td := startTestDaemon(t, daemon.Options{})
	addPortal(t, td, "notes")
	_, sid := enrolledAgent(t, td, "claude")
	tok := grantOK(t, td, sid, map[string]any{"portal.notes.read": "allow"})

	var rev plexus.RevokeResponse
	if st := td.call(t, "POST", "/grants/revoke", td.admin(), plexus.RevokeRequest{AgentID: "claude", CapabilityID: "portal.notes.read"}, &rev); st != http.StatusOK || !rev.GrantRemoved {
		t.Fatalf("revoke: status %d, %+v", st, rev)
	}
	st, _, raw := td.invoke(t, tok.Token, plexus.InvokeRequest{ID: "portal.notes.read", Input: map[string]any{"path": "hello.md"}})
	wantDenial(t, td, st, raw, 401, "portal.notes.read", plexus.CodeTokenRevoked, true)

	p := grantPending(t, td, sid, map[string]any{"portal.notes.read": "allow"})
	// Asking twice does not wear the tombstone down.
	grantPending(t, td, sid, map[string]any{"portal.notes.read": "allow"})
	approve(t, td, p.PendingID, plexus.DecideRequest{})
	again := grantOK(t, td, sid, map[string]any{"portal.notes.read": "allow"})
	if st, resp, _ := td.invoke(t, again.Token, plexus.InvokeRequest{ID: "portal.notes.read", Input: map[string]any{"path": "hello.md"}}); !resp.OK {
		t.Errorf("read after re-approval: status %d, %+v", st, resp.Error)
	}
	// The agent relinquishing its own grant leaves a tombstone too.
	if st := td.call(t, "PUT", "/grants", session(sid), map[string]any{"grants": map[string]any{"portal.notes.read": "deny"}}, nil); st != http.StatusOK {
		t.Fatalf("relinquish: status %d", st)
	}
	grantPending(t, td, sid, map[string]any{"portal.notes.read": "allow"})
}

// TestGuardEmptyHost: a request with no Host, or an empty one, is refused
// like any foreign Host (a raw connection, since net/http always sends one).
func TestGuardEmptyHost(t *testing.T) {
	td := startTestDaemon(t, daemon.Options{})
	for _, req := range []string{
		"GET /.well-known/plexus HTTP/1.0\r\n\r\n",
		"GET /.well-known/plexus HTTP/1.1\r\nHost: \r\nConnection: close\r\n\r\n",
		"POST /invoke HTTP/1.0\r\nContent-Length: 2\r\n\r\n{}",
	} {
		conn, err := net.Dial("tcp", td.Addr())
		if err != nil {
			t.Fatal(err)
		}
		if _, err := conn.Write([]byte(req)); err != nil {
			t.Fatal(err)
		}
		resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
		if err != nil {
			conn.Close()
			t.Fatalf("%q: %v", req, err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		conn.Close()
		if strings.HasPrefix(req, "POST /invoke") {
			wantDenial(t, td, resp.StatusCode, b, 403, "", plexus.CodeHostForbidden, false)
		} else {
			wantEnvelope(t, resp.StatusCode, b, 403, plexus.CodeHostForbidden)
		}
	}
}

// TestOnceGrantIdempotentRetry: retrying a call made on a once grant with the
// same idempotencyKey (the client lost the answer) replays the first answer
// and runs nothing again; a new key is a new call, which the used grant
// refuses.
func TestOnceGrantIdempotentRetry(t *testing.T) {
	td := startTestDaemon(t, daemon.Options{Authorizer: autoApprove{}})
	addEcho(t, td, "test", "")
	_, sid := enrolledAgent(t, td, "claude")
	tok := grantOK(t, td, sid, map[string]any{"test.echo.run": map[string]any{"decision": "allow", "verbs": []string{"execute"}}})

	call := func(key string) (int, plexus.InvokeResponse, []byte) {
		return td.invoke(t, tok.Token, plexus.InvokeRequest{ID: "test.echo.run", Input: map[string]any{"msg": "launch"}, IdempotencyKey: key})
	}
	st, first, _ := call("k-1")
	if st != http.StatusOK || !first.OK {
		t.Fatalf("first call: status %d, %+v", st, first.Error)
	}
	st, retry, _ := call("k-1")
	if st != http.StatusOK || !retry.OK || retry.AuditID != first.AuditID {
		t.Errorf("retry with the same key: status %d, %+v; want the first answer (auditId %s) replayed", st, retry, first.AuditID)
	}
	st, _, raw := call("k-2")
	wantDenial(t, td, st, raw, 401, "test.echo.run", plexus.CodeGrantRequired, true)
	if rows := td.activity(t, journal.Filter{Type: "invoke.ok"}); len(rows) != 1 {
		t.Errorf("journal has %d invoke.ok rows, want 1: the retry must not run again", len(rows))
	}
}
