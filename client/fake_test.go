package client

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/plexus-gw/plexus"
	"github.com/plexus-gw/plexus/internal/plexustest"
)

// newClock is a manual clock shared by a test's fake gateway and its client.
func newClock() *plexustest.Clock {
	return plexustest.NewClock(time.Date(2026, 6, 23, 10, 0, 0, 0, time.UTC))
}

// Fixed credentials of the fake gateway.
const (
	fakeCode    = "plx_enroll_test"
	fakePAT     = "plx_agent_secret"
	fakeAgentID = "agent-1"
	fakeKey     = "plx_live_key"
)

// fakePending is one pending decision of the fake gateway.
type fakePending struct {
	id        string
	sessionID string
	caps      []string
	scopes    []plexus.TokenScope
	state     string
	reason    string
	token     *plexus.ScopedToken // minted when first polled approved
}

type fakeToken struct {
	jti       string
	sessionID string
	scopes    []plexus.TokenScope
	expiresAt time.Time
	revoked   bool
}

// fakeGateway stands in for the gateway in this package's unit tests only:
// it implements the agent-plane endpoints with the spec's bodies, plus the
// Host guard, and counts what it was asked. The real end-to-end tests run
// the real server.
type fakeGateway struct {
	t     *testing.T
	srv   *httptest.Server
	clock *plexustest.Clock

	mu       sync.Mutex
	entries  []plexus.Entry
	pend     map[string]bool // capabilities whose grant request pends
	decision string          // what a pending decision resolves to
	polls    int             // status polls answered pending before deciding
	reason   string
	pendings map[string]*fakePending // by pending id: pend_1, pend_2, …
	pendSeq  int
	consumed bool
	sessions map[string]time.Time
	tokens   map[string]*fakeToken // by token string
	seq      int

	hits        map[string]int
	grantBodies []plexus.GrantRequest
	invokeToks  []string
}

func newFakeGateway(t *testing.T, c *plexustest.Clock) *fakeGateway {
	t.Helper()
	g := &fakeGateway{
		t: t, clock: c,
		entries: []plexus.Entry{
			{ID: "notes.read", Kind: plexus.KindCapability, Label: "Read notes", Grants: []plexus.Verb{plexus.VerbRead},
				Provenance: plexus.ProvenanceFirstParty, Sensitivity: plexus.SensitivityLow, RecommendedTrustWindow: &plexus.TrustWindow{Kind: plexus.Window7d}},
			{ID: "notes.write", Kind: plexus.KindCapability, Label: "Write notes", Grants: []plexus.Verb{plexus.VerbWrite},
				Provenance: plexus.ProvenanceFirstParty, Sensitivity: plexus.SensitivityElevated},
		},
		pend:     map[string]bool{},
		pendings: map[string]*fakePending{},
		decision: plexus.StateApproved,
		sessions: map[string]time.Time{},
		tokens:   map[string]*fakeToken{},
		hits:     map[string]int{},
	}
	g.srv = httptest.NewServer(http.HandlerFunc(g.serve))
	t.Cleanup(g.srv.Close)
	return g
}

func (g *fakeGateway) count(route string) int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.hits[route]
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

func writeErr(w http.ResponseWriter, status int, code plexus.ErrorCode, msg string) {
	writeJSON(w, status, plexus.ErrorResponse{Error: &plexus.ErrorBody{Code: code, Message: msg}})
}

func (g *fakeGateway) serve(w http.ResponseWriter, r *http.Request) {
	if r.Host != g.srv.Listener.Addr().String() {
		writeErr(w, http.StatusForbidden, plexus.CodeHostForbidden, "bad host "+r.Host)
		return
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	route := r.Method + " " + r.URL.Path
	g.hits[route]++
	bearer := strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ")
	now := g.clock.Now()
	switch route {
	case "POST /agents/enroll":
		var req plexus.EnrollRequest
		if json.NewDecoder(r.Body).Decode(&req) != nil || req.Code != fakeCode {
			writeErr(w, http.StatusBadRequest, plexus.CodeUnknownCode, "unknown code")
			return
		}
		if g.consumed {
			writeErr(w, http.StatusConflict, plexus.CodeCodeConsumed, "code already used")
			return
		}
		g.consumed = true
		writeJSON(w, http.StatusOK, plexus.EnrollResponse{PAT: fakePAT, AgentID: fakeAgentID})
	case "POST /link/handshake":
		var req plexus.HandshakeRequest
		if bearer != fakePAT || json.NewDecoder(r.Body).Decode(&req) != nil || req.Client == nil || req.ConnectionKey != "" {
			writeErr(w, http.StatusUnauthorized, plexus.CodeUnauthorized, "bad PAT")
			return
		}
		g.seq++
		id := fmt.Sprintf("sess_%d", g.seq)
		exp := now.Add(time.Hour)
		g.sessions[id] = exp
		m := g.manifest(id, exp)
		writeJSON(w, http.StatusOK, plexus.HandshakeResponse{SessionID: id, ExpiresAt: exp, GrantsURL: g.srv.URL + "/grants", Manifest: m})
	case "GET /manifest":
		id := r.Header.Get(plexus.SessionHeader)
		exp, ok := g.sessions[id]
		if !ok || !now.Before(exp) {
			writeErr(w, http.StatusUnauthorized, plexus.CodeSessionExpired, "no session")
			return
		}
		writeJSON(w, http.StatusOK, plexus.ManifestResponse{Manifest: g.manifest(id, exp)})
	case "GET /grants":
		if _, ok := g.sessions[r.Header.Get(plexus.SessionHeader)]; !ok {
			writeErr(w, http.StatusUnauthorized, plexus.CodeSessionExpired, "no session")
			return
		}
		writeJSON(w, http.StatusOK, plexus.GrantsListResponse{Grants: []plexus.StandingGrant{}})
	case "PUT /grants":
		var req plexus.GrantRequest
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
			writeErr(w, http.StatusBadRequest, plexus.CodeMalformed, err.Error())
			return
		}
		g.grantBodies = append(g.grantBodies, req)
		if _, ok := g.sessions[req.SessionID]; !ok {
			writeErr(w, http.StatusUnauthorized, plexus.CodeSessionExpired, "no session")
			return
		}
		var scopes []plexus.TokenScope
		var pending []string
		for id, d := range req.Grants {
			if g.pend[id] {
				pending = append(pending, id)
				continue
			}
			scopes = append(scopes, plexus.TokenScope{ID: id, Verbs: d.Verbs})
		}
		if len(pending) > 0 {
			g.pendSeq++
			fp := &fakePending{id: fmt.Sprintf("pend_%d", g.pendSeq), sessionID: req.SessionID, caps: pending, state: plexus.StatePending}
			for _, id := range pending {
				fp.scopes = append(fp.scopes, plexus.TokenScope{ID: id, Verbs: req.Grants[id].Verbs})
			}
			g.pendings[fp.id] = fp
			writeJSON(w, http.StatusAccepted, plexus.GrantPendingResponse{
				Status: plexus.CodeGrantPendingUser, PendingID: fp.id, Pending: pending,
				StatusURL: g.srv.URL + "/grants/status?pendingId=" + fp.id, PendingNarration: fakeNarration(pending),
			})
			return
		}
		writeJSON(w, http.StatusOK, g.mint(req.SessionID, scopes))
	case "GET /grants/status":
		sid := r.Header.Get(plexus.SessionHeader)
		fp, ok := g.pendings[r.URL.Query().Get("pendingId")]
		if !ok || sid == "" {
			writeErr(w, http.StatusNotFound, plexus.CodeNotFound, "no such pending")
			return
		}
		if exp, ok := g.sessions[sid]; !ok || !now.Before(exp) {
			writeErr(w, http.StatusUnauthorized, plexus.CodeSessionExpired, "no session")
			return
		}
		if fp.state == plexus.StatePending && g.hits[route] > g.polls {
			fp.state, fp.reason = g.decision, g.reason
		}
		resp := plexus.GrantStatusResponse{PendingID: fp.id, State: fp.state, Capabilities: fp.caps,
			PendingNarration: fakeNarration(fp.caps), Reason: fp.reason}
		if fp.state == plexus.StateApproved {
			if fp.token == nil {
				tok := g.mint(fp.sessionID, fp.scopes)
				fp.token = &tok
			}
			if sid == fp.sessionID { // only the asking session gets the token
				resp.Token = fp.token
			}
		}
		writeJSON(w, http.StatusOK, resp)
	case "POST /grants/refresh":
		var req plexus.RefreshRequest
		ft, ok := g.tokens[bearer]
		if json.NewDecoder(r.Body).Decode(&req) != nil || !ok || ft.revoked || ft.jti != req.JTI || ft.sessionID != req.SessionID {
			writeErr(w, http.StatusUnauthorized, plexus.CodeTokenRevoked, "cannot refresh")
			return
		}
		ft.revoked = true
		st := g.mint(ft.sessionID, ft.scopes)
		writeJSON(w, http.StatusOK, plexus.RefreshResponse{Token: st.Token, JTI: st.JTI, ExpiresAt: st.ExpiresAt,
			Scopes: st.Scopes, GrantExpiresAt: *st.GrantExpiresAt})
	case "POST /invoke":
		var req plexus.InvokeRequest
		_ = json.NewDecoder(r.Body).Decode(&req)
		g.invokeToks = append(g.invokeToks, bearer)
		deny := func(status int, code plexus.ErrorCode) {
			writeJSON(w, status, plexus.InvokeResponse{ID: req.ID, OK: false, Error: &plexus.ErrorBody{Code: code, Message: string(code)}, AuditID: "evt_9"})
		}
		ft, ok := g.tokens[bearer]
		switch {
		case !ok || ft.revoked:
			deny(http.StatusUnauthorized, plexus.CodeTokenRevoked)
		case g.sessions[ft.sessionID].IsZero():
			deny(http.StatusUnauthorized, plexus.CodeSessionExpired)
		case !now.Before(ft.expiresAt):
			deny(http.StatusUnauthorized, plexus.CodeTokenExpired)
		case !covers(ft.scopes, req.ID):
			deny(http.StatusUnauthorized, plexus.CodeGrantRequired)
		default:
			writeJSON(w, http.StatusOK, plexus.InvokeResponse{ID: req.ID, OK: true, Output: map[string]any{"content": "hello", "input": req.Input}, AuditID: "evt_1"})
		}
	default:
		writeErr(w, http.StatusNotFound, plexus.CodeNotFound, "no route "+route)
	}
}

func fakeNarration(caps []string) []plexus.PendingNarration {
	return []plexus.PendingNarration{{ID: caps[0], Verbs: []plexus.Verb{plexus.VerbWrite},
		Summary: "agent-1 asks to write notes", NotificationLine: "Approve write on notes?"}}
}

// decide resolves the pending decision id as the owner (or its expiry) would;
// state "" makes the gateway forget it altogether.
func (g *fakeGateway) decide(id, state, reason string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	fp, ok := g.pendings[id]
	if !ok {
		g.t.Fatalf("fake gateway: no pending %s", id)
	}
	if state == "" {
		delete(g.pendings, id)
		return
	}
	fp.state, fp.reason = state, reason
}

func covers(scopes []plexus.TokenScope, id string) bool {
	for _, s := range scopes {
		if s.ID == id {
			return true
		}
	}
	return false
}

// mint issues a 15-minute token; the caller holds g.mu.
func (g *fakeGateway) mint(sessionID string, scopes []plexus.TokenScope) plexus.ScopedToken {
	g.seq++
	now := g.clock.Now()
	ft := &fakeToken{jti: fmt.Sprintf("tok_%d", g.seq), sessionID: sessionID, scopes: scopes, expiresAt: now.Add(15 * time.Minute)}
	tok := fmt.Sprintf("eyJ.fake.%d", g.seq)
	g.tokens[tok] = ft
	gexp := now.Add(7 * 24 * time.Hour)
	return plexus.ScopedToken{Token: tok, JTI: ft.jti, ExpiresAt: ft.expiresAt, Scopes: scopes, GrantExpiresAt: &gexp}
}

// expireAll makes the gateway treat every live token as expired, ahead of
// the client's clock.
func (g *fakeGateway) expireAll() {
	g.mu.Lock()
	defer g.mu.Unlock()
	for _, ft := range g.tokens {
		ft.expiresAt = time.Time{}
	}
}

// restart forgets every session, as a gateway restart might.
func (g *fakeGateway) restart() {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.sessions = map[string]time.Time{}
}

func (g *fakeGateway) revokeAll() {
	g.mu.Lock()
	defer g.mu.Unlock()
	for _, ft := range g.tokens {
		ft.revoked = true
	}
}

func (g *fakeGateway) manifest(sessionID string, exp time.Time) plexus.Manifest {
	return plexus.Manifest{Gateway: plexus.GatewayInfo{Name: "plexus", BaseURL: g.srv.URL}, SessionID: sessionID,
		ExpiresAt: exp, Revision: 1, Entries: g.entries}
}
