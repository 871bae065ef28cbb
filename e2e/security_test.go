package e2e

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"crypto/sha512"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"hash"
	"net/http"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/plexus-gw/plexus"
	"github.com/plexus-gw/plexus/daemon"
	"github.com/plexus-gw/plexus/gateway"
	"github.com/plexus-gw/plexus/journal"
)

// End-to-end security tests: the token tampering matrix, enrollment codes,
// agent isolation, execute never standing, key rotation and the /events
// audience rules, against a real daemon.

var b64 = base64.RawURLEncoding

// jwtParts splits a compact JWT and decodes its header and payload.
func jwtParts(t testing.TB, tok string) (header, payload map[string]any, sig string) {
	t.Helper()
	parts := strings.Split(tok, ".")
	if len(parts) != 3 {
		t.Fatalf("token %q is not a compact JWT", tok)
	}
	for i, dst := range []*map[string]any{&header, &payload} {
		b, err := b64.DecodeString(parts[i])
		if err != nil || json.Unmarshal(b, dst) != nil {
			t.Fatalf("token part %d: %v", i, err)
		}
	}
	return header, payload, parts[2]
}

// forge builds a compact JWT from header and payload, signed with newHash and
// key (HMAC), or carrying sig verbatim when newHash is nil.
func forge(t testing.TB, header, payload map[string]any, newHash func() hash.Hash, key []byte, sig string) string {
	t.Helper()
	h, _ := json.Marshal(header)
	p, _ := json.Marshal(payload)
	signing := b64.EncodeToString(h) + "." + b64.EncodeToString(p)
	if newHash != nil {
		m := hmac.New(newHash, key)
		m.Write([]byte(signing))
		sig = b64.EncodeToString(m.Sum(nil))
	}
	return signing + "." + sig
}

func randomHex(t testing.TB, n int) string {
	t.Helper()
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(b)
}

// TestTokenTampering presents altered, foreign and dead tokens on /invoke;
// each is refused with the code the spec gives it, and none dispatches.
func TestTokenTampering(t *testing.T) {
	clk := newFakeClock()
	td := startTestDaemon(t, daemon.Options{Clock: clk.Now})
	addEcho(t, td, "test", "")
	patA, sidA := enrolledAgent(t, td, "alice")
	_, sidB := enrolledAgent(t, td, "bob")
	tokA := grantOK(t, td, sidA, map[string]any{"test.echo.read": "allow"})
	tokB := grantOK(t, td, sidB, map[string]any{"test.echo.read": "allow"})
	revA := grantOK(t, td, sidA, map[string]any{"test.echo.read": "allow"})
	if st := td.call(t, "POST", "/grants/revoke", bearer(revA.Token), plexus.RevokeRequest{JTI: revA.JTI}, nil); st != http.StatusOK {
		t.Fatalf("self-revoke: status %d", st)
	}
	_, sidC := enrolledAgent(t, td, "carol")
	tokC := grantOK(t, td, sidC, map[string]any{"test.echo.read": "allow"})
	if st := td.call(t, "POST", "/admin/api/agents/revoke", td.admin(), plexus.AgentRevokeRequest{AgentID: "carol"}, nil); st != http.StatusOK {
		t.Fatalf("revoke carol: status %d", st)
	}

	header, payload, sig := jwtParts(t, tokA.Token)
	if header["alg"] != "HS256" {
		t.Fatalf("minted alg = %v, want HS256", header["alg"])
	}
	realKey := td.Home().SigningKey
	otherKey := make([]byte, 32)
	_, _ = rand.Read(otherKey)

	widened := map[string]any{}
	for k, v := range payload {
		widened[k] = v
	}
	widened["scopes"] = []any{
		map[string]any{"id": "test.echo.read", "verbs": []string{"read", "write", "execute"}},
		map[string]any{"id": "test.echo.write", "verbs": []string{"write"}},
		map[string]any{"id": "test.echo.run", "verbs": []string{"execute"}},
	}
	unknownJTI := map[string]any{}
	for k, v := range widened {
		unknownJTI[k] = v
	}
	unknownJTI["jti"] = "tok_forged"
	hs := func(alg string) map[string]any { return map[string]any{"alg": alg, "typ": "JWT"} }

	tests := []struct {
		name     string
		token    string
		id       string
		extra    map[string]string
		wantCode plexus.ErrorCode
		audited  bool
	}{
		{"AlgNone", forge(t, hs("none"), payload, nil, nil, ""), "test.echo.read", nil, plexus.CodeTokenRevoked, false},
		{"AlgNoneKeepSig", forge(t, hs("none"), payload, nil, nil, sig), "test.echo.read", nil, plexus.CodeTokenRevoked, false},
		{"AlgNoneCase", forge(t, hs("None"), widened, nil, nil, ""), "test.echo.write", nil, plexus.CodeTokenRevoked, false},
		{"HS512RealKey", forge(t, hs("HS512"), payload, sha512.New, realKey, ""), "test.echo.read", nil, plexus.CodeTokenRevoked, false},
		{"HS512HeaderOldSig", forge(t, hs("HS512"), payload, nil, nil, sig), "test.echo.read", nil, plexus.CodeTokenRevoked, false},
		{"RS256HeaderOldSig", forge(t, hs("RS256"), payload, nil, nil, sig), "test.echo.read", nil, plexus.CodeTokenRevoked, false},
		{"RS256HMACRealKey", forge(t, hs("RS256"), payload, sha256.New, realKey, ""), "test.echo.read", nil, plexus.CodeTokenRevoked, false},
		{"OtherKey", forge(t, header, payload, sha256.New, otherKey, ""), "test.echo.read", nil, plexus.CodeTokenRevoked, false},
		{"WidenedOldSig", forge(t, header, widened, nil, nil, sig), "test.echo.write", nil, plexus.CodeTokenRevoked, false},
		{"WidenedOtherKey", forge(t, header, widened, sha256.New, otherKey, ""), "test.echo.run", nil, plexus.CodeTokenRevoked, false},
		{"StrippedSig", forge(t, header, payload, nil, nil, ""), "test.echo.read", nil, plexus.CodeTokenRevoked, false},
		{"Truncated", tokA.Token[:len(tokA.Token)-4], "test.echo.read", nil, plexus.CodeTokenRevoked, false},
		{"PATAsToken", patA, "test.echo.read", nil, plexus.CodeTokenRevoked, false},
		{"ConnectionKeyAsToken", td.key, "test.echo.read", nil, plexus.CodeTokenRevoked, false},
		// A token the real key signed but the jti registry never saw (a
		// leaked signing key, say) still gets nothing.
		{"RealKeyUnknownJTI", forge(t, header, unknownJTI, sha256.New, realKey, ""), "test.echo.write", nil, plexus.CodeTokenRevoked, true},
		{"RevokedJTI", revA.Token, "test.echo.read", nil, plexus.CodeTokenRevoked, true},
		// Revoking an agent revokes its tokens with its sessions; the jti
		// check answers first.
		{"RevokedAgent", tokC.Token, "test.echo.read", nil, plexus.CodeTokenRevoked, true},
		{"OtherAgentsTokenWithMySession", tokA.Token, "test.echo.read", session(sidB), plexus.CodeSessionExpired, true},
		{"MyTokenWithOtherSession", tokB.Token, "test.echo.read", session(sidA), plexus.CodeSessionExpired, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			st, _, raw := td.invoke(t, tt.token, plexus.InvokeRequest{ID: tt.id, Input: map[string]any{"msg": "x"}}, tt.extra)
			wantDenial(t, td, st, raw, 401, tt.id, tt.wantCode, tt.audited)
		})
	}

	t.Run("RefreshWithOtherSession", func(t *testing.T) {
		st, raw := td.raw(t, "POST", "/grants/refresh", bearer(tokA.Token), mustJSON(t, plexus.RefreshRequest{SessionID: sidB, JTI: tokA.JTI}))
		wantEnvelope(t, st, raw, 401, plexus.CodeSessionExpired)
	})
	t.Run("DeadAgentSession", func(t *testing.T) {
		st, raw := td.raw(t, "GET", "/manifest", session(sidC), nil)
		wantEnvelope(t, st, raw, 401, plexus.CodeSessionExpired)
		st, raw = td.raw(t, "PUT", "/grants", session(sidC), mustJSON(t, map[string]any{"grants": map[string]any{"test.echo.read": "allow"}}))
		wantEnvelope(t, st, raw, 401, plexus.CodeSessionExpired)
	})
	t.Run("Untouched", func(t *testing.T) {
		for _, tok := range []string{tokA.Token, tokB.Token} {
			if st, resp, _ := td.invoke(t, tok, plexus.InvokeRequest{ID: "test.echo.read", Input: map[string]any{"msg": "ok"}}); !resp.OK {
				t.Errorf("untampered token: status %d, %+v", st, resp.Error)
			}
		}
	})
	t.Run("Expired", func(t *testing.T) {
		clk.Advance(15*time.Minute + time.Second)
		st, _, raw := td.invoke(t, tokA.Token, plexus.InvokeRequest{ID: "test.echo.read", Input: map[string]any{"msg": "x"}})
		wantDenial(t, td, st, raw, 401, "test.echo.read", plexus.CodeTokenExpired, true)
		// An expired token that was also tampered with is not invited to
		// refresh.
		st, _, raw = td.invoke(t, forge(t, header, widened, nil, nil, sig), plexus.InvokeRequest{ID: "test.echo.write", Input: map[string]any{"msg": "x"}})
		wantDenial(t, td, st, raw, 401, "test.echo.write", plexus.CodeTokenRevoked, false)
	})

	for _, r := range td.activity(t, journal.Filter{Type: "invoke.ok"}) {
		if r.Target != "test.echo.read" || (r.AgentID != "alice" && r.AgentID != "bob") {
			t.Errorf("a tampered token dispatched: %+v", r)
		}
	}
}

// TestEnrollment: a code redeems once. Replays, unknown, expired and
// malformed codes are refused with their codes, and of 100 concurrent
// redemptions of one code exactly one gets a PAT.
func TestEnrollment(t *testing.T) {
	clk := newFakeClock()
	td := startTestDaemon(t, daemon.Options{Clock: clk.Now})
	// Before the daemon stops: a connection the client dialed but never
	// used would hold up its graceful shutdown.
	t.Cleanup(http.DefaultClient.CloseIdleConnections)
	connect := func(id string) string {
		t.Helper()
		var conn plexus.ConnectResponse
		if st := td.call(t, "POST", "/admin/api/agents/connect", td.admin(), plexus.ConnectRequest{AgentID: id}, &conn); st != http.StatusCreated || !strings.HasPrefix(conn.Code, plexus.PrefixEnrollCode) {
			t.Fatalf("connect %s: status %d, %+v", id, st, conn)
		}
		return conn.Code
	}
	enroll := func(code string) (int, []byte) {
		return td.raw(t, "POST", "/agents/enroll", nil, mustJSON(t, plexus.EnrollRequest{Code: code}))
	}

	// Failures are charged to the credential presented, never to the
	// address every local process shares: the refusals below block only
	// the values refused.
	code := connect("e1")
	if st, raw := enroll(code); st != http.StatusOK {
		t.Fatalf("first redemption: status %d, %s", st, raw)
	}
	t.Run("Replay", func(t *testing.T) {
		st, raw := enroll(code)
		wantEnvelope(t, st, raw, 401, plexus.CodeCodeConsumed)
	})
	t.Run("Unknown", func(t *testing.T) {
		st, raw := enroll(plexus.PrefixEnrollCode + randomHex(t, 16))
		wantEnvelope(t, st, raw, 401, plexus.CodeUnknownCode)
	})
	t.Run("Malformed", func(t *testing.T) {
		for _, c := range []string{"nope", plexus.PrefixEnrollCode, plexus.PrefixPAT + randomHex(t, 16), td.key} {
			st, raw := enroll(c)
			wantEnvelope(t, st, raw, 400, plexus.CodeMalformed)
		}
	})
	t.Run("Throttled", func(t *testing.T) {
		// The fifth failure of one code blocks that code until the backoff
		// passes; malformed garbage shares one bucket of its own. Neither
		// stops a valid code shown from the same address.
		c := connect("e-throttled")
		wrong := plexus.PrefixEnrollCode + randomHex(t, 16)
		for range 5 {
			enroll(wrong)
			enroll("nope")
		}
		st, raw := enroll(wrong)
		wantEnvelope(t, st, raw, 429, plexus.CodeRateLimited)
		st, raw = enroll("nope")
		wantEnvelope(t, st, raw, 429, plexus.CodeRateLimited)
		if st, raw := enroll(c); st != http.StatusOK {
			t.Errorf("a valid code beside the blocked ones: status %d, %s", st, raw)
		}
		clk.Advance(2 * time.Second)
		st, raw = enroll(wrong)
		wantEnvelope(t, st, raw, 401, plexus.CodeUnknownCode)
	})
	t.Run("Expired", func(t *testing.T) {
		c := connect("e2")
		clk.Advance(15*time.Minute - time.Second)
		c2 := connect("e3")
		clk.Advance(time.Second)
		st, raw := enroll(c)
		wantEnvelope(t, st, raw, 401, plexus.CodeCodeExpired)
		// e3's code is a second old and still redeems.
		if st, raw := enroll(c2); st != http.StatusOK {
			t.Errorf("fresh code: status %d, %s", st, raw)
		}
	})
	t.Run("ReconnectReplacesPAT", func(t *testing.T) {
		var first, second plexus.EnrollResponse
		td.call(t, "POST", "/agents/enroll", nil, plexus.EnrollRequest{Code: connect("e5")}, &first)
		td.call(t, "POST", "/agents/enroll", nil, plexus.EnrollRequest{Code: connect("e5")}, &second)
		if first.PAT == "" || second.PAT == "" || first.PAT == second.PAT {
			t.Fatalf("PATs %q, %q: want two different ones", first.PAT, second.PAT)
		}
		st, raw := td.raw(t, "POST", "/link/handshake", bearer(first.PAT), nil)
		wantEnvelope(t, st, raw, 401, plexus.CodeUnauthorized)
		handshake(t, td, second.PAT, nil)
	})
	t.Run("RevokedAgent", func(t *testing.T) {
		c := connect("e4")
		if st := td.call(t, "POST", "/admin/api/agents/revoke", td.admin(), plexus.AgentRevokeRequest{AgentID: "e4"}, nil); st != http.StatusOK {
			t.Fatalf("revoke: status %d", st)
		}
		st, raw := enroll(c)
		wantEnvelope(t, st, raw, 401, plexus.CodeUnknownCode)
	})
	t.Run("Concurrent", func(t *testing.T) {
		c := connect("racer")
		const n = 100
		statuses := make([]int, n)
		raws := make([][]byte, n)
		var wg sync.WaitGroup
		start := make(chan struct{})
		for i := range n {
			wg.Go(func() {
				<-start
				statuses[i], raws[i] = enroll(c)
			})
		}
		close(start)
		wg.Wait()
		var pat string
		codes := map[plexus.ErrorCode]int{}
		for i := range n {
			if statuses[i] == http.StatusOK {
				var enr plexus.EnrollResponse
				_ = json.Unmarshal(raws[i], &enr)
				if pat != "" {
					t.Errorf("a second redemption succeeded")
				}
				pat = enr.PAT
				continue
			}
			var e plexus.ErrorResponse
			_ = json.Unmarshal(raws[i], &e)
			if e.Error == nil {
				t.Errorf("refusal %d: status %d, %s", i, statuses[i], raws[i])
				continue
			}
			codes[e.Error.Code]++
			switch {
			case e.Error.Code == plexus.CodeCodeConsumed && statuses[i] == 401:
			case e.Error.Code == plexus.CodeRateLimited && statuses[i] == 429:
			default:
				t.Errorf("refusal %d: status %d, code %s; want 401 code_consumed or 429 rate_limited", i, statuses[i], e.Error.Code)
			}
		}
		if pat == "" || codes[plexus.CodeCodeConsumed]+codes[plexus.CodeRateLimited] != n-1 {
			t.Fatalf("of %d redemptions: PAT %v, refusals %v; want exactly one PAT and %d refusals", n, pat != "", codes, n-1)
		}
		if rows := td.activity(t, journal.Filter{Type: "agent.enrolled", AgentID: "racer"}); len(rows) != 1 {
			t.Errorf("journal has %d agent.enrolled rows for racer, want 1", len(rows))
		}
		// The refusals throttled the spent code, not the PAT it bought:
		// the one PAT opens a session bound to its agent at once.
		var hs plexus.HandshakeResponse
		if st := td.call(t, "POST", "/link/handshake", bearer(pat), plexus.HandshakeRequest{}, &hs); st != http.StatusOK {
			t.Fatalf("handshake with the PAT: status %d", st)
		}
		var grants plexus.GrantsListResponse
		if st := td.call(t, "GET", "/grants", session(hs.SessionID), nil, &grants); st != http.StatusOK {
			t.Errorf("session of the PAT: status %d", st)
		}
	})
}

// tokenClaims decodes a token's payload without verifying it.
func tokenClaims(t testing.TB, tok string) (sub, sessionID string) {
	t.Helper()
	_, p, _ := jwtParts(t, tok)
	sub, _ = p["sub"].(string)
	sessionID, _ = p["sessionId"].(string)
	return sub, sessionID
}

// TestAgentIsolation: one agent's PAT never acts as another. The session is
// bound to the PAT's agent whatever client.agentId says, and neither its
// ledger, its tokens, its polls nor its revokes reach the other agent;
// revoking one agent leaves the other working.
func TestAgentIsolation(t *testing.T) {
	td := startTestDaemon(t, daemon.Options{})
	addEcho(t, td, "test", "")
	addPortal(t, td, "notes")
	patA, sidA := enrolledAgent(t, td, "alice")
	patB, _ := enrolledAgent(t, td, "bob")
	tokA := grantOK(t, td, sidA, map[string]any{"test.echo.read": "allow"})
	pendA := grantPending(t, td, sidA, map[string]any{"portal.notes.write": map[string]any{"decision": "allow", "verbs": []string{"write"}}})

	// Bob handshakes with his own PAT but claims to be alice.
	sidB := handshake(t, td, patB, &plexus.ClientInfo{Name: "spoof", AgentID: "alice"})
	var ledger plexus.GrantsListResponse
	td.call(t, "GET", "/grants", session(sidB), nil, &ledger)
	if len(ledger.Grants) != 0 {
		t.Errorf("bob's ledger = %+v, want empty (alice's grants are not his)", ledger.Grants)
	}
	tokB := grantOK(t, td, sidB, map[string]any{"portal.notes.read": "allow"})
	if sub, sess := tokenClaims(t, tokB.Token); sub != "bob" || sess != sidB {
		t.Errorf("bob's token: sub %q, sessionId %q; want bob, %s", sub, sess, sidB)
	}
	td.call(t, "GET", "/grants", session(sidB), nil, &ledger)
	if len(ledger.Grants) != 1 || ledger.Grants[0].AgentID != "bob" || ledger.Grants[0].CapabilityID != "portal.notes.read" {
		t.Errorf("bob's ledger = %+v, want his one read grant", ledger.Grants)
	}
	rows := td.activity(t, journal.Filter{Type: "session.opened", AgentID: "bob"})
	if len(rows) == 0 || rows[len(rows)-1].Target != sidB || rows[len(rows)-1].Payload["claimedAgentId"] != "alice" {
		t.Errorf("session.opened rows for bob = %+v, want the spoofed claim recorded as metadata", rows)
	}
	if rows := td.activity(t, journal.Filter{Type: "session.opened", AgentID: "alice"}); len(rows) != 1 {
		t.Errorf("alice has %d session.opened rows, want only her own", len(rows))
	}

	t.Run("CannotUseAlicesGrant", func(t *testing.T) {
		st, _, raw := td.invoke(t, tokB.Token, plexus.InvokeRequest{ID: "test.echo.read", Input: map[string]any{"msg": "x"}})
		wantDenial(t, td, st, raw, 401, "test.echo.read", plexus.CodeGrantRequired, true)
	})
	t.Run("CannotPollAlicesPending", func(t *testing.T) {
		st, raw := td.raw(t, "GET", "/grants/status?pendingId="+pendA.PendingID, session(sidB), nil)
		wantEnvelope(t, st, raw, 404, plexus.CodeNotFound)
	})
	t.Run("CannotRevokeAlicesToken", func(t *testing.T) {
		st, raw := td.raw(t, "POST", "/grants/revoke", bearer(tokB.Token), mustJSON(t, plexus.RevokeRequest{JTI: tokA.JTI}))
		wantEnvelope(t, st, raw, 404, plexus.CodeNotFound)
		st, raw = td.raw(t, "POST", "/grants/revoke", bearer(tokB.Token), mustJSON(t, plexus.RevokeRequest{AgentID: "alice", CapabilityID: "test.echo.read"}))
		wantEnvelope(t, st, raw, 404, plexus.CodeNotFound)
		if st, resp, _ := td.invoke(t, tokA.Token, plexus.InvokeRequest{ID: "test.echo.read", Input: map[string]any{"msg": "x"}}); !resp.OK {
			t.Errorf("alice's token after bob's revoke attempts: status %d, %+v", st, resp.Error)
		}
	})
	t.Run("CannotNameAnotherAgentWithoutItsPAT", func(t *testing.T) {
		st, raw := td.raw(t, "POST", "/link/handshake", nil, mustJSON(t, plexus.HandshakeRequest{Client: &plexus.ClientInfo{AgentID: "alice"}}))
		wantEnvelope(t, st, raw, 401, plexus.CodeUnauthorized)
	})
	t.Run("RevokingAliceLeavesBob", func(t *testing.T) {
		var out plexus.AgentRevokeResponse
		if st := td.call(t, "POST", "/admin/api/agents/revoke", td.admin(), plexus.AgentRevokeRequest{AgentID: "alice"}, &out); st != http.StatusOK {
			t.Fatalf("revoke alice: status %d", st)
		}
		if slices.Contains(out.RevokedSessions, sidB) || slices.Contains(out.RevokedJTIs, tokB.JTI) {
			t.Errorf("revoking alice ended bob's session or token: %+v", out)
		}
		st, _, raw := td.invoke(t, tokA.Token, plexus.InvokeRequest{ID: "test.echo.read", Input: map[string]any{"msg": "x"}})
		wantDenial(t, td, st, raw, 401, "test.echo.read", plexus.CodeTokenRevoked, true)
		st, raw = td.raw(t, "GET", "/manifest", session(sidA), nil)
		wantEnvelope(t, st, raw, 401, plexus.CodeSessionExpired)
		st, raw = td.raw(t, "POST", "/link/handshake", bearer(patA), nil)
		wantEnvelope(t, st, raw, 401, plexus.CodeUnauthorized)

		if st, resp, _ := td.invoke(t, tokB.Token, plexus.InvokeRequest{ID: "portal.notes.read", Input: map[string]any{"path": "hello.md"}}); !resp.OK {
			t.Errorf("bob's token after alice was revoked: status %d, %+v", st, resp.Error)
		}
		if st := td.call(t, "GET", "/manifest", session(sidB), nil, nil); st != http.StatusOK {
			t.Errorf("bob's session after alice was revoked: status %d", st)
		}
		handshake(t, td, patB, nil)
	})
}

// TestExecuteNeverStanding: whatever window the owner picks, at connect or
// at approval, an execute grant is once: the ledger says standing:false and
// window once, the manifest never marks it standing, and its token works
// exactly once.
func TestExecuteNeverStanding(t *testing.T) {
	td := startTestDaemon(t, daemon.Options{})
	addEcho(t, td, "test", "")
	windows := []struct {
		name string
		w    plexus.TrustWindow
	}{
		{"UntilRevoked", plexus.TrustWindow{Kind: plexus.WindowUntilRevoked}},
		{"Custom30d", plexus.TrustWindow{Kind: plexus.WindowCustom, Ms: 2592000000}},
		{"SevenDays", plexus.TrustWindow{Kind: plexus.Window7d}},
	}
	wantOnce := func(t *testing.T, g plexus.StandingGrant) {
		t.Helper()
		if g.Standing || g.TrustWindow.Kind != plexus.WindowOnce || !g.ExpiresAt.Equal(g.GrantedAt) {
			t.Errorf("execute grant = standing %v, window %+v, expires %v (granted %v); want standing:false, once, expiresAt = grantedAt",
				g.Standing, g.TrustWindow, g.ExpiresAt, g.GrantedAt)
		}
	}
	notStandingInManifest := func(t *testing.T, sid string) {
		t.Helper()
		var m plexus.ManifestResponse
		td.call(t, "GET", "/manifest", session(sid), nil, &m)
		for _, e := range m.Manifest.Entries {
			if e.ID == "test.echo.run" && e.Standing != nil && *e.Standing {
				t.Errorf("manifest marks test.echo.run standing")
			}
		}
	}

	for i, tt := range windows {
		t.Run("Connect"+tt.name, func(t *testing.T) {
			id := "exec" + string(rune('a'+i))
			w := tt.w
			// The owner cannot hand out execute as a starting grant, whatever
			// the window: it is approved per use, when the agent asks.
			var refused plexus.ErrorResponse
			st := td.call(t, "POST", "/admin/api/agents/connect", td.admin(), plexus.ConnectRequest{AgentID: id,
				Grants: []plexus.ConnectGrant{{CapabilityID: "test.echo.run", Verbs: []plexus.Verb{plexus.VerbExecute}, TrustWindow: &w}}}, &refused)
			if st != http.StatusBadRequest || refused.Error == nil || refused.Error.Code != plexus.CodeInvalidRequest ||
				!strings.Contains(refused.Error.Message, "never standing") {
				t.Fatalf("connect with an execute grant: status %d, %+v", st, refused.Error)
			}
			_, sid := enrolledAgent(t, td, id)
			var ledger plexus.GrantsListResponse
			td.call(t, "GET", "/grants", session(sid), nil, &ledger)
			if len(ledger.Grants) != 0 {
				t.Fatalf("ledger = %+v, want no grant", ledger.Grants)
			}
			notStandingInManifest(t, sid)

			// Asking for it with a long window still pends (execute is
			// approved per use) and the pending window is once.
			p := grantPending(t, td, sid, map[string]any{"test.echo.run": map[string]any{"decision": "allow", "verbs": []string{"execute"},
				"trustWindow": map[string]any{"kind": "until-revoked"}}})
			if len(p.PendingNarration) != 1 || p.PendingNarration[0].DefaultTrustWindow.Kind != plexus.WindowOnce {
				t.Errorf("narration = %+v, want window once", p.PendingNarration)
			}
			approve(t, td, p.PendingID, plexus.DecideRequest{TrustWindow: &w})
			tok := approvedToken(t, td, sid, p.PendingID)
			if tok.TrustWindow == nil || tok.TrustWindow.Kind != plexus.WindowOnce || tok.GrantExpiresAt != nil {
				t.Errorf("token window = %+v, grantExpiresAt %v; want once, none", tok.TrustWindow, tok.GrantExpiresAt)
			}
			td.call(t, "GET", "/grants", session(sid), nil, &ledger)
			if len(ledger.Grants) != 1 {
				t.Fatalf("ledger = %+v, want the approved grant", ledger.Grants)
			}
			wantOnce(t, ledger.Grants[0])
			var all plexus.GrantsListResponse
			td.call(t, "GET", "/admin/api/grants", td.admin(), nil, &all)
			for _, g := range all.Grants {
				if g.CapabilityID == "test.echo.run" {
					wantOnce(t, g)
				}
			}
			notStandingInManifest(t, sid)

			st, resp, _ := td.invoke(t, tok.Token, plexus.InvokeRequest{ID: "test.echo.run", Input: map[string]any{"msg": "once"}})
			if st != http.StatusOK || !resp.OK {
				t.Fatalf("first call: status %d, %+v", st, resp.Error)
			}
			st, _, raw := td.invoke(t, tok.Token, plexus.InvokeRequest{ID: "test.echo.run", Input: map[string]any{"msg": "twice"}})
			wantDenial(t, td, st, raw, 401, "test.echo.run", plexus.CodeGrantRequired, true)
			// Refresh cannot stretch a once grant either.
			st, raw = td.raw(t, "POST", "/grants/refresh", bearer(tok.Token), mustJSON(t, plexus.RefreshRequest{SessionID: sid, JTI: tok.JTI}))
			wantEnvelope(t, st, raw, 401, plexus.CodeGrantRequired)
			td.call(t, "GET", "/grants", session(sid), nil, &ledger)
			if len(ledger.Grants) != 0 {
				t.Errorf("ledger after the one call = %+v, want empty", ledger.Grants)
			}
		})
	}
}

// TestKeyRotation: rotating the connection-key retires the old key, ends
// every session opened with it (admin and anonymous) and their tokens, and
// leaves agent sessions, bootstrapped under PATs, working.
func TestKeyRotation(t *testing.T) {
	td := startTestDaemon(t, daemon.Options{})
	addEcho(t, td, "test", "")
	_, sid := enrolledAgent(t, td, "claude")
	agentTok := grantOK(t, td, sid, map[string]any{"test.echo.read": "allow"})

	oldKey := td.key
	var adminHS, anonHS plexus.HandshakeResponse
	// The admin path may name an agent, even an enrolled one: rotation must
	// end this session by its kind, not by the agent it names.
	if st := td.call(t, "POST", "/link/handshake", nil, plexus.HandshakeRequest{ConnectionKey: oldKey, Client: &plexus.ClientInfo{Name: "console", AgentID: "claude"}}, &adminHS); st != http.StatusOK {
		t.Fatalf("admin handshake: status %d", st)
	}
	if st := td.call(t, "POST", "/link/handshake", nil, plexus.HandshakeRequest{ConnectionKey: oldKey}, &anonHS); st != http.StatusOK {
		t.Fatalf("anonymous handshake: status %d", st)
	}
	adminTok := grantOK(t, td, adminHS.SessionID, map[string]any{"test.echo.read": "allow"})
	anonTok := grantOK(t, td, anonHS.SessionID, map[string]any{"test.echo.read": "allow"})

	var rot plexus.KeyRotateResponse
	if st := td.call(t, "POST", "/admin/api/key/rotate", td.admin(), nil, &rot); st != http.StatusOK || !strings.HasPrefix(rot.ConnectionKey, plexus.PrefixConnectionKey) || rot.ConnectionKey == oldKey {
		t.Fatalf("rotate: status %d, %+v", st, rot)
	}
	newKey := rot.ConnectionKey
	for _, s := range []string{adminHS.SessionID, anonHS.SessionID} {
		if !slices.Contains(rot.RevokedSessions, s) {
			t.Errorf("revokedSessions %v lacks %s", rot.RevokedSessions, s)
		}
	}
	for _, j := range []string{adminTok.JTI, anonTok.JTI} {
		if !slices.Contains(rot.RevokedJTIs, j) {
			t.Errorf("revokedJtis %v lacks %s", rot.RevokedJTIs, j)
		}
	}
	if slices.Contains(rot.RevokedSessions, sid) || slices.Contains(rot.RevokedJTIs, agentTok.JTI) {
		t.Errorf("rotation touched the agent: %+v", rot)
	}
	if onDisk, err := readConnectionKey(td.Home().Dir); err != nil || onDisk != newKey {
		t.Errorf("connection-key file = %q, %v; want the new key", onDisk, err)
	}

	t.Run("OldKeyRefused", func(t *testing.T) {
		st, raw := td.raw(t, "GET", "/admin/api/status", bearer(oldKey), nil)
		wantEnvelope(t, st, raw, 401, plexus.CodeUnauthorized)
		st, raw = td.raw(t, "POST", "/link/handshake", nil, mustJSON(t, plexus.HandshakeRequest{ConnectionKey: oldKey}))
		wantEnvelope(t, st, raw, 401, plexus.CodeUnauthorized)
	})
	t.Run("NewKeyWorks", func(t *testing.T) {
		if st := td.call(t, "GET", "/admin/api/status", bearer(newKey), nil, nil); st != http.StatusOK {
			t.Errorf("status with the new key: %d", st)
		}
		if st := td.call(t, "GET", "/admin/api/grants", map[string]string{plexus.ConnectionKeyHeader: newKey}, nil, nil); st != http.StatusOK {
			t.Errorf("grants with the new key in the header: %d", st)
		}
		var hs plexus.HandshakeResponse
		if st := td.call(t, "POST", "/link/handshake", nil, plexus.HandshakeRequest{ConnectionKey: newKey}, &hs); st != http.StatusOK {
			t.Errorf("handshake with the new key: %d", st)
		}
	})
	t.Run("KeySessionsDead", func(t *testing.T) {
		for _, c := range []struct {
			sid string
			tok plexus.ScopedToken
		}{{adminHS.SessionID, adminTok}, {anonHS.SessionID, anonTok}} {
			st, _, raw := td.invoke(t, c.tok.Token, plexus.InvokeRequest{ID: "test.echo.read", Input: map[string]any{"msg": "x"}})
			wantDenial(t, td, st, raw, 401, "test.echo.read", plexus.CodeTokenRevoked, true)
			st, raw = td.raw(t, "GET", "/manifest", session(c.sid), nil)
			wantEnvelope(t, st, raw, 401, plexus.CodeSessionExpired)
			st, raw = td.raw(t, "POST", "/grants/refresh", bearer(c.tok.Token), mustJSON(t, plexus.RefreshRequest{SessionID: c.sid, JTI: c.tok.JTI}))
			wantEnvelope(t, st, raw, 401, plexus.CodeSessionExpired)
		}
	})
	t.Run("AgentSessionLives", func(t *testing.T) {
		if st, resp, _ := td.invoke(t, agentTok.Token, plexus.InvokeRequest{ID: "test.echo.read", Input: map[string]any{"msg": "x"}}); !resp.OK {
			t.Errorf("agent token after rotation: status %d, %+v", st, resp.Error)
		}
		if st := td.call(t, "GET", "/manifest", session(sid), nil, nil); st != http.StatusOK {
			t.Errorf("agent session after rotation: status %d", st)
		}
		var ref plexus.RefreshResponse
		if st := td.call(t, "POST", "/grants/refresh", bearer(agentTok.Token), plexus.RefreshRequest{SessionID: sid, JTI: agentTok.JTI}, &ref); st != http.StatusOK {
			t.Errorf("agent refresh after rotation: status %d", st)
		}
	})
}

// until collects events up to and including the first that stop accepts.
func until(t *testing.T, ch <-chan sseEvent, stop func(sseEvent) bool) []sseEvent {
	t.Helper()
	var got []sseEvent
	deadline := time.After(10 * time.Second)
	for {
		select {
		case ev, ok := <-ch:
			if !ok {
				t.Fatalf("stream ended after %d events", len(got))
			}
			got = append(got, ev)
			if stop(ev) {
				return got
			}
		case <-deadline:
			t.Fatalf("no closing event after %d events", len(got))
		}
	}
}

// TestEventsReplay: a client reconnecting with Last-Event-ID gets exactly the
// events it missed, a replayed grant_resolved carries no token, and no other
// session ever sees this session's token_revoked or grant_resolved.
func TestEventsReplay(t *testing.T) {
	td := startTestDaemon(t, daemon.Options{})
	addPortal(t, td, "notes")
	patA, sidA := enrolledAgent(t, td, "alice")
	_, sidB := enrolledAgent(t, td, "bob")
	evA, closeA := openStream(t, td, sidA, "")
	evB, _ := openStream(t, td, sidB, "")

	readTok := grantOK(t, td, sidA, map[string]any{"portal.notes.read": "allow"})

	addEcho(t, td, "test", "") // manifest_changed, to everyone
	first := waitEvent(t, evA, plexus.EventManifestChanged)

	p := grantPending(t, td, sidA, map[string]any{"portal.notes.write": map[string]any{"decision": "allow", "verbs": []string{"write"}}})
	approve(t, td, p.PendingID, plexus.DecideRequest{})
	live := waitEvent(t, evA, plexus.EventGrantResolved)
	var resolved plexus.GrantResolvedEvent
	if err := json.Unmarshal([]byte(live.Data), &resolved); err != nil || resolved.Token == nil || resolved.Token.Token == "" {
		t.Fatalf("live grant_resolved = %s, want the token", live.Data)
	}
	if st := td.call(t, "POST", "/grants/revoke", bearer(readTok.Token), plexus.RevokeRequest{JTI: readTok.JTI}, nil); st != http.StatusOK {
		t.Fatalf("revoke: status %d", st)
	}
	revoked := waitEvent(t, evA, plexus.EventTokenRevoked)
	if _, err := td.Registry().Add(context.Background(), echoSource{id: "last", prov: plexus.ProvenanceFirstParty}); err != nil {
		t.Fatal(err) // a closing broadcast
	}
	last := waitEvent(t, evA, plexus.EventManifestChanged)
	closeA()

	isLast := func(ev sseEvent) bool { return ev.ID == last.ID }
	t.Run("Replay", func(t *testing.T) {
		ch, _ := openStream(t, td, sidA, first.ID)
		got := until(t, ch, isLast)
		var types, ids []string
		for _, ev := range got {
			types = append(types, ev.Type)
			ids = append(ids, ev.ID)
		}
		want := []string{plexus.EventGrantResolved, plexus.EventTokenRevoked, plexus.EventManifestChanged}
		if !slices.Equal(types, want) {
			t.Fatalf("replayed %v (ids %v), want %v", types, ids, want)
		}
		if got[0].ID != live.ID || got[1].ID != revoked.ID {
			t.Errorf("replayed ids %v, want %s, %s, %s", ids, live.ID, revoked.ID, last.ID)
		}
		var rep map[string]any
		if err := json.Unmarshal([]byte(got[0].Data), &rep); err != nil {
			t.Fatal(err)
		}
		if _, ok := rep["token"]; ok || strings.Contains(got[0].Data, resolved.Token.Token) {
			t.Errorf("replayed grant_resolved carries a token: %s", got[0].Data)
		}
		if rep["pendingId"] != p.PendingID || rep["decision"] != plexus.StateApproved {
			t.Errorf("replayed grant_resolved = %s", got[0].Data)
		}
		var tr plexus.TokenRevokedEvent
		if err := json.Unmarshal([]byte(got[1].Data), &tr); err != nil || tr.JTI != readTok.JTI {
			t.Errorf("replayed token_revoked = %s, want jti %s", got[1].Data, readTok.JTI)
		}
	})
	t.Run("OtherAgentLive", func(t *testing.T) {
		for _, ev := range until(t, evB, isLast) {
			if ev.Type == plexus.EventGrantResolved || ev.Type == plexus.EventTokenRevoked {
				t.Errorf("bob's live stream got alice's %s: %s", ev.Type, ev.Data)
			}
		}
	})
	t.Run("OtherAgentReplay", func(t *testing.T) {
		ch, _ := openStream(t, td, sidB, "1")
		got := until(t, ch, isLast)
		sawFirst := false
		for _, ev := range got {
			if ev.Type == plexus.EventGrantResolved || ev.Type == plexus.EventTokenRevoked {
				t.Errorf("bob's replay got alice's %s: %s", ev.Type, ev.Data)
			}
			sawFirst = sawFirst || ev.ID == first.ID
		}
		if !sawFirst {
			t.Errorf("bob's replay lacks the broadcast manifest_changed %s", first.ID)
		}
	})
	t.Run("SameAgentOtherSession", func(t *testing.T) {
		sidA2 := handshake(t, td, patA, nil)
		var s plexus.GrantStatusResponse
		if st := td.call(t, "GET", "/grants/status?pendingId="+p.PendingID, session(sidA2), nil, &s); st != http.StatusOK || s.State != plexus.StateApproved || s.Token != nil {
			t.Errorf("status from another session of the agent: %d, %+v; want approved without the token", st, s)
		}
		ch, _ := openStream(t, td, sidA2, first.ID)
		for _, ev := range until(t, ch, isLast) {
			if ev.Type == plexus.EventGrantResolved || ev.Type == plexus.EventTokenRevoked {
				t.Errorf("alice's other session got %s addressed to %s: %s", ev.Type, sidA, ev.Data)
			}
		}
	})
}

// streamEnds reads ch until it closes, failing on any event of the types in
// forbidden; it fails too if the stream is still open at the deadline.
func streamEnds(t *testing.T, ch <-chan sseEvent, forbidden ...string) {
	t.Helper()
	deadline := time.After(10 * time.Second)
	for {
		select {
		case ev, ok := <-ch:
			if !ok {
				return
			}
			if slices.Contains(forbidden, ev.Type) {
				t.Errorf("a dead session's stream delivered %s %s: %s", ev.Type, ev.ID, ev.Data)
			}
		case <-deadline:
			t.Errorf("the stream of a dead session is still open")
			return
		}
	}
}

// TestEventsEndWithSession: an /events stream is authorized by its session,
// so it ends when the session does (the agent revoked, the connection-key
// rotated under an admin session, the session expired) after delivering the
// token_revoked events of that ending, and carries nothing afterwards.
func TestEventsEndWithSession(t *testing.T) {
	clk := newFakeClock()
	td := startTestDaemon(t, daemon.Options{Clock: clk.Now})
	addEcho(t, td, "test", "")
	_, sidA := enrolledAgent(t, td, "alice")
	_, sidB := enrolledAgent(t, td, "bob")
	tokA := grantOK(t, td, sidA, map[string]any{"test.echo.read": "allow"})
	var adminHS plexus.HandshakeResponse
	if st := td.call(t, "POST", "/link/handshake", nil, plexus.HandshakeRequest{ConnectionKey: td.key, Client: &plexus.ClientInfo{AgentID: "console"}}, &adminHS); st != http.StatusOK {
		t.Fatalf("admin handshake: status %d", st)
	}
	adminTok := grantOK(t, td, adminHS.SessionID, map[string]any{"test.echo.read": "allow"})

	evA, _ := openStream(t, td, sidA, "")
	evB, _ := openStream(t, td, sidB, "")
	evAdmin, _ := openStream(t, td, adminHS.SessionID, "")
	n := 0
	broadcast := func() sseEvent {
		t.Helper()
		n++
		if _, err := td.Registry().Add(context.Background(), echoSource{id: "more" + string(rune('a'+n)), prov: plexus.ProvenanceFirstParty}); err != nil {
			t.Fatal(err)
		}
		return waitEvent(t, evB, plexus.EventManifestChanged)
	}

	t.Run("AgentRevoked", func(t *testing.T) {
		if st := td.call(t, "POST", "/admin/api/agents/revoke", td.admin(), plexus.AgentRevokeRequest{AgentID: "alice"}, nil); st != http.StatusOK {
			t.Fatalf("revoke alice: status %d", st)
		}
		var tr plexus.TokenRevokedEvent
		_ = json.Unmarshal([]byte(waitEvent(t, evA, plexus.EventTokenRevoked).Data), &tr)
		if tr.JTI != tokA.JTI {
			t.Errorf("token_revoked for %s, want %s", tr.JTI, tokA.JTI)
		}
		broadcast()
		streamEnds(t, evA, plexus.EventManifestChanged)
		st, raw := td.raw(t, "GET", "/events", session(sidA), nil)
		wantEnvelope(t, st, raw, 401, plexus.CodeSessionExpired)
	})
	t.Run("KeyRotated", func(t *testing.T) {
		var rot plexus.KeyRotateResponse
		if st := td.call(t, "POST", "/admin/api/key/rotate", td.admin(), nil, &rot); st != http.StatusOK {
			t.Fatalf("rotate: status %d", st)
		}
		td.key = rot.ConnectionKey
		var tr plexus.TokenRevokedEvent
		_ = json.Unmarshal([]byte(waitEvent(t, evAdmin, plexus.EventTokenRevoked).Data), &tr)
		if tr.JTI != adminTok.JTI {
			t.Errorf("token_revoked for %s, want %s", tr.JTI, adminTok.JTI)
		}
		broadcast()
		streamEnds(t, evAdmin, plexus.EventManifestChanged)
	})
	t.Run("SessionExpired", func(t *testing.T) {
		clk.Advance(gateway.DefaultSessionTTL + time.Minute)
		// bob's session has expired too: a new stream on a new session
		// watches the broadcast that bob's old stream must not carry.
		_, sidC := enrolledAgent(t, td, "carol")
		evC, _ := openStream(t, td, sidC, "")
		if _, err := td.Registry().Add(context.Background(), echoSource{id: "late", prov: plexus.ProvenanceFirstParty}); err != nil {
			t.Fatal(err)
		}
		waitEvent(t, evC, plexus.EventManifestChanged)
		streamEnds(t, evB, plexus.EventManifestChanged)
	})
}

// TestKeyRotationRace: handshakes with the connection-key racing its
// rotation either fail or open a session that the rotation ends; none opened
// with the old key outlives it.
func TestKeyRotationRace(t *testing.T) {
	td := startTestDaemon(t, daemon.Options{})
	// Before the daemon stops: a connection the client dialed but never
	// used would hold up its graceful shutdown.
	t.Cleanup(http.DefaultClient.CloseIdleConnections)
	oldKey := td.key
	var (
		mu       sync.Mutex
		sessions []string
		wg       sync.WaitGroup
	)
	stop := make(chan struct{})
	for range 8 {
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				var hs plexus.HandshakeResponse
				st := td.call(t, "POST", "/link/handshake", nil, plexus.HandshakeRequest{ConnectionKey: oldKey, Client: &plexus.ClientInfo{AgentID: "console"}}, &hs)
				switch st {
				case http.StatusOK:
					mu.Lock()
					sessions = append(sessions, hs.SessionID)
					mu.Unlock()
				case http.StatusUnauthorized, http.StatusTooManyRequests:
					return // the key has rotated (or the refusals got throttled)
				default:
					t.Errorf("handshake: status %d", st)
					return
				}
			}
		})
	}
	// Let the handshakes get going, then rotate.
	deadline := time.Now().Add(10 * time.Second)
	for {
		mu.Lock()
		n := len(sessions)
		mu.Unlock()
		if n >= 8 {
			break
		}
		if time.Now().After(deadline) {
			close(stop)
			wg.Wait()
			t.Fatalf("only %d handshakes succeeded before the deadline", n)
		}
		runtime.Gosched()
	}
	var rot plexus.KeyRotateResponse
	st := td.call(t, "POST", "/admin/api/key/rotate", td.admin(), nil, &rot)
	close(stop)
	wg.Wait()
	if st != http.StatusOK {
		t.Fatalf("rotate: status %d", st)
	}
	alive := 0
	for _, sid := range sessions {
		if st, _ := td.raw(t, "GET", "/manifest", session(sid), nil); st == http.StatusOK {
			alive++
		}
	}
	if alive > 0 {
		t.Errorf("%d of %d sessions opened with the old key outlived its rotation", alive, len(sessions))
	}
}

// Redeeming a new code replaces the agent's PAT: the old PAT and every
// session opened under it stop working at once.
func TestReenrollEndsOldSessions(t *testing.T) {
	td := startTestDaemon(t, daemon.Options{})
	addPortal(t, td, "notes")
	oldPAT, oldSID := enrolledAgent(t, td, "claude")
	var tok plexus.ScopedToken
	if st := td.call(t, "PUT", "/grants", session(oldSID), map[string]any{"grants": map[string]any{"portal.notes.read": "allow"}}, &tok); st != http.StatusOK {
		t.Fatalf("grant: %d", st)
	}
	newPAT, newSID := enrolledAgent(t, td, "claude")
	if newPAT == oldPAT {
		t.Fatal("re-enrollment returned the same PAT")
	}
	var e plexus.ErrorResponse
	if st := td.call(t, "GET", "/manifest", session(oldSID), nil, &e); st != http.StatusUnauthorized || e.Error.Code != plexus.CodeSessionExpired {
		t.Fatalf("old session: status %d, %+v", st, e.Error)
	}
	var inv plexus.InvokeResponse
	td.call(t, "POST", "/invoke", bearer(tok.Token), plexus.InvokeRequest{ID: "portal.notes.read", Input: map[string]any{"path": "hello.md"}}, &inv)
	if inv.OK || inv.Error.Code != plexus.CodeSessionExpired {
		t.Fatalf("old session's token: %+v", inv)
	}
	if st := td.call(t, "POST", "/link/handshake", bearer(oldPAT), plexus.HandshakeRequest{}, &e); st != http.StatusUnauthorized {
		t.Fatalf("old PAT handshake: status %d", st)
	}
	if st := td.call(t, "GET", "/manifest", session(newSID), nil, nil); st != http.StatusOK {
		t.Fatalf("new session: status %d", st)
	}
}
