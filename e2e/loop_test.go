package e2e

import (
	"context"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/plexus-gw/plexus"
	"github.com/plexus-gw/plexus/daemon"
	"github.com/plexus-gw/plexus/journal"
)

// enrolledAgent connects an agent through the admin API, redeems its code
// and handshakes, returning the PAT and the session id.
func enrolledAgent(t *testing.T, td *testDaemon, id string, grants ...plexus.ConnectGrant) (pat, sessionID string) {
	t.Helper()
	var conn plexus.ConnectResponse
	if st := td.call(t, "POST", "/admin/api/agents/connect", td.admin(), plexus.ConnectRequest{AgentID: id, Grants: grants}, &conn); st != http.StatusCreated && st != http.StatusOK {
		t.Fatalf("connect: status %d", st)
	}
	var enr plexus.EnrollResponse
	if st := td.call(t, "POST", "/agents/enroll", nil, plexus.EnrollRequest{Code: conn.Code}, &enr); st != http.StatusOK {
		t.Fatalf("enroll: status %d", st)
	}
	if enr.AgentID != id || !strings.HasPrefix(enr.PAT, plexus.PrefixPAT) {
		t.Fatalf("enroll = %+v", enr)
	}
	var hs plexus.HandshakeResponse
	if st := td.call(t, "POST", "/link/handshake", bearer(enr.PAT), plexus.HandshakeRequest{Client: &plexus.ClientInfo{Name: "test"}}, &hs); st != http.StatusOK {
		t.Fatalf("handshake: status %d", st)
	}
	return enr.PAT, hs.SessionID
}

func addPortal(t *testing.T, td *testDaemon, alias string) string {
	t.Helper()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "hello.md"), []byte("# Hello from the notes folder\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg, _ := json.Marshal(map[string]string{"path": dir, "alias": alias})
	if st := td.call(t, "POST", "/admin/api/sources", td.admin(), plexus.SourceConfig{Kind: "portal", Config: cfg}, nil); st/100 != 2 {
		t.Fatalf("add portal: status %d", st)
	}
	return dir
}

// TestAgentLoop walks the whole loop of issue #2 against the real gateway:
// connect → enroll → handshake → read grant auto-approved → invoke portal
// read → write grant pends → approve via the admin API → grant_resolved on
// /events → invoke write → refresh → revoke → token_revoked → invoke refused
// token_revoked; and the journal tells that story by trace id.
func TestAgentLoop(t *testing.T) {
	td := startTestDaemon(t, daemon.Options{})
	dir := addPortal(t, td, "notes")
	_, sid := enrolledAgent(t, td, "claude")
	events := td.openEvents(t, sid, "")

	// Read: first-party read auto-approves.
	var readTok plexus.ScopedToken
	if st := td.call(t, "PUT", "/grants", session(sid), map[string]any{"grants": map[string]any{"portal.notes.read": "allow"}}, &readTok); st != http.StatusOK {
		t.Fatalf("read grant: status %d", st)
	}
	var inv plexus.InvokeResponse
	if st := td.call(t, "POST", "/invoke", bearer(readTok.Token), plexus.InvokeRequest{ID: "portal.notes.read", Input: map[string]any{"path": "hello.md"}}, &inv); st != http.StatusOK || !inv.OK {
		t.Fatalf("invoke read: status %d, %+v", st, inv)
	}
	if out, _ := json.Marshal(inv.Output); !strings.Contains(string(out), "Hello from the notes folder") {
		t.Fatalf("read output = %s", out)
	}
	if inv.AuditID == "" {
		t.Error("a dispatched call must carry its auditId")
	}

	// Write: pends for the owner.
	var pend plexus.GrantPendingResponse
	st := td.call(t, "PUT", "/grants", session(sid), map[string]any{"grants": map[string]any{
		"portal.notes.write": map[string]any{"decision": "allow", "verbs": []string{"write"}, "purpose": "save the meeting notes"}}}, &pend)
	if st != http.StatusAccepted || pend.Status != plexus.CodeGrantPendingUser || pend.PendingID == "" {
		t.Fatalf("write grant: status %d, %+v", st, pend)
	}
	if len(pend.PendingNarration) != 1 || pend.PendingNarration[0].Summary == "" {
		t.Fatalf("pending narration = %+v", pend.PendingNarration)
	}
	var status plexus.GrantStatusResponse
	td.call(t, "GET", "/grants/status?pendingId="+pend.PendingID, session(sid), nil, &status)
	if status.State != plexus.StatePending || status.Token != nil {
		t.Fatalf("status before approval = %+v", status)
	}

	// The owner approves through the admin API; the token rides the event.
	var decided plexus.Pending
	if st := td.call(t, "POST", "/admin/api/pending/"+pend.PendingID+"/approve", td.admin(), plexus.DecideRequest{}, &decided); st != http.StatusOK {
		t.Fatalf("approve: status %d", st)
	}
	if decided.State != plexus.StateApproved || decided.Via != plexus.ViaAdminAPI {
		t.Fatalf("decided = %+v", decided)
	}
	ev := waitEvent(t, events, plexus.EventGrantResolved)
	var resolved plexus.GrantResolvedEvent
	if err := json.Unmarshal([]byte(ev.Data), &resolved); err != nil {
		t.Fatal(err)
	}
	if resolved.PendingID != pend.PendingID || resolved.Decision != plexus.StateApproved || resolved.Token == nil {
		t.Fatalf("grant_resolved = %s", ev.Data)
	}
	writeTok := resolved.Token

	if st := td.call(t, "POST", "/invoke", bearer(writeTok.Token), plexus.InvokeRequest{ID: "portal.notes.write",
		Input: map[string]any{"path": "meeting.md", "content": "decided: ship it"}}, &inv); st != http.StatusOK || !inv.OK {
		t.Fatalf("invoke write: status %d, %+v", st, inv)
	}
	if b, err := os.ReadFile(filepath.Join(dir, "meeting.md")); err != nil || string(b) != "decided: ship it" {
		t.Fatalf("written file = %q, %v", b, err)
	}

	// Refresh: a new token; the old jti is revoked.
	var ref plexus.RefreshResponse
	if st := td.call(t, "POST", "/grants/refresh", bearer(writeTok.Token), plexus.RefreshRequest{SessionID: sid, JTI: writeTok.JTI}, &ref); st != http.StatusOK {
		t.Fatalf("refresh: status %d", st)
	}
	if ref.JTI == writeTok.JTI || ref.Token == "" || ref.GrantExpiresAt.IsZero() {
		t.Fatalf("refresh = %+v", ref)
	}
	td.call(t, "POST", "/invoke", bearer(writeTok.Token), plexus.InvokeRequest{ID: "portal.notes.write",
		Input: map[string]any{"path": "x.md", "content": "x"}}, &inv)
	if inv.OK || inv.Error.Code != plexus.CodeTokenRevoked {
		t.Fatalf("old token after refresh = %+v", inv)
	}

	// Revoke the write grant: token_revoked fires for the refreshed token.
	var rev plexus.RevokeResponse
	if st := td.call(t, "POST", "/grants/revoke", td.admin(), plexus.RevokeRequest{AgentID: "claude", CapabilityID: "portal.notes.write"}, &rev); st != http.StatusOK {
		t.Fatalf("revoke: status %d", st)
	}
	if !rev.OK || !rev.GrantRemoved || !slices.Contains(rev.RevokedJTIs, ref.JTI) {
		t.Fatalf("revoke = %+v", rev)
	}
	if slices.Contains(rev.RevokedJTIs, readTok.JTI) {
		t.Fatal("revoking the write scope must not kill the read token")
	}
	ev = waitEvent(t, events, plexus.EventTokenRevoked)
	var tr plexus.TokenRevokedEvent
	_ = json.Unmarshal([]byte(ev.Data), &tr)
	if tr.JTI != ref.JTI {
		t.Fatalf("token_revoked = %s, want jti %s", ev.Data, ref.JTI)
	}
	st = td.call(t, "POST", "/invoke", bearer(ref.Token), plexus.InvokeRequest{ID: "portal.notes.write",
		Input: map[string]any{"path": "y.md", "content": "y"}}, &inv)
	if st != http.StatusUnauthorized || inv.OK || inv.Error.Code != plexus.CodeTokenRevoked || inv.AuditID == "" {
		t.Fatalf("invoke after revoke: status %d, %+v", st, inv)
	}
	// The read token still works.
	if td.call(t, "POST", "/invoke", bearer(readTok.Token), plexus.InvokeRequest{ID: "portal.notes.read", Input: map[string]any{"path": "meeting.md"}}, &inv); !inv.OK {
		t.Fatalf("read token after write revoke = %+v", inv)
	}

	// The journal tells the write grant's story under one trace id.
	db, err := journal.OpenReader(context.Background(), filepath.Join(td.Home().Dir, "journal.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	rows, err := db.Activity(context.Background(), journal.Filter{TraceID: decided.TraceID})
	if err != nil {
		t.Fatal(err)
	}
	var story []string
	for _, r := range rows {
		story = append(story, r.ActionType)
	}
	for _, want := range []string{"grant.requested", "grant.approved", "token.minted", "invoke.ok", "token.refreshed", "grant.revoked", "invoke.denied"} {
		if !slices.Contains(story, want) {
			t.Errorf("trace %s lacks %s; story = %v", decided.TraceID, want, story)
		}
	}
	if i, j := slices.Index(story, "grant.requested"), slices.Index(story, "grant.revoked"); i < 0 || j < i {
		t.Errorf("story out of order: %v", story)
	}
}
