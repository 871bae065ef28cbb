package e2e

import (
	"bytes"
	"encoding/json"
	"io/fs"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/plexus-gw/plexus"
	"github.com/plexus-gw/plexus/daemon"
	"github.com/plexus-gw/plexus/scaffold"
)

// lockedBuffer collects the daemon's log lines; the daemon writes from many
// goroutines.
type lockedBuffer struct {
	mu sync.Mutex // guards b
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) Bytes() []byte {
	l.mu.Lock()
	defer l.mu.Unlock()
	return bytes.Clone(l.b.Bytes())
}

// TestCanarySecretsNeverPersist runs the whole owner and agent story and
// collects every secret that crossed the wire: the enrollment code, the PAT,
// every token, the connection-keys old and new, the raw call input, and the
// wrong credentials an attacker tried. After the daemon stops, no file under
// PLEXUS_HOME (journal.db and its -wal/-shm, the audit mirror, everything)
// and no log line holds any of them, except that the connection-key file
// holds the current key and nothing else.
func TestCanarySecretsNeverPersist(t *testing.T) {
	logs := &lockedBuffer{}
	clk := newFakeClock()
	td := startTestDaemon(t, daemon.Options{Clock: clk.Now,
		Logger: slog.New(slog.NewJSONHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))})
	home := td.Home().Dir
	dir := addPortal(t, td, "notes")
	input := "CANARY-INPUT-" + randomHex(t, 12)

	secrets := map[string]string{} // name → secret
	keep := func(name, s string) {
		t.Helper()
		if len(s) < 16 {
			t.Fatalf("secret %s = %q: too short to be a meaningful canary", name, s)
		}
		secrets[name] = s
	}
	keepToken := func(name, tok string) {
		t.Helper()
		keep(name, tok)
		if _, _, sig := jwtParts(t, tok); len(sig) >= 16 {
			keep(name+".signature", sig) // a partial leak counts too
		}
	}
	keep("call input", input)
	oldKey := td.key
	keep("connection-key (old)", oldKey)

	// Connect, enroll, handshake.
	var conn plexus.ConnectResponse
	if st := td.call(t, "POST", "/admin/api/agents/connect", td.admin(), plexus.ConnectRequest{AgentID: "canary",
		Grants: []plexus.ConnectGrant{{CapabilityID: "portal.notes.list"}}}, &conn); st != http.StatusCreated {
		t.Fatalf("connect: status %d", st)
	}
	keep("enrollment code", conn.Code)
	var enr plexus.EnrollResponse
	if st := td.call(t, "POST", "/agents/enroll", nil, plexus.EnrollRequest{Code: conn.Code}, &enr); st != http.StatusOK {
		t.Fatalf("enroll: status %d", st)
	}
	keep("PAT", enr.PAT)
	sid := handshake(t, td, enr.PAT, &plexus.ClientInfo{Name: "canary-client", Version: "1"})
	events := td.openEvents(t, sid, "")

	// Grants: read auto-approves, write pends and is approved.
	readTok := grantOK(t, td, sid, map[string]any{"portal.notes.read": "allow"})
	keepToken("read token", readTok.Token)
	p := grantPending(t, td, sid, map[string]any{"portal.notes.write": map[string]any{"decision": "allow", "verbs": []string{"write"},
		"purpose": "save the canary"}})
	approve(t, td, p.PendingID, plexus.DecideRequest{Reason: "fine"})
	ev := waitEvent(t, events, plexus.EventGrantResolved)
	var resolved plexus.GrantResolvedEvent
	if err := json.Unmarshal([]byte(ev.Data), &resolved); err != nil || resolved.Token == nil {
		t.Fatalf("grant_resolved = %s", ev.Data)
	}
	keepToken("write token (event)", resolved.Token.Token)
	writeTok := approvedToken(t, td, sid, p.PendingID)
	keepToken("write token (status)", writeTok.Token)

	// The call whose input must never be stored, made twice (the second
	// idempotent) and read back.
	for _, key := range []string{"", "idem-1"} {
		st, resp, _ := td.invoke(t, writeTok.Token, plexus.InvokeRequest{ID: "portal.notes.write",
			Input: map[string]any{"path": "canary.md", "content": input}, IdempotencyKey: key})
		if st != http.StatusOK || !resp.OK {
			t.Fatalf("write: status %d, %+v", st, resp.Error)
		}
	}
	if st, resp, raw := td.invoke(t, readTok.Token, plexus.InvokeRequest{ID: "portal.notes.read", Input: map[string]any{"path": "canary.md"}}); !resp.OK || !strings.Contains(string(raw), input) {
		t.Fatalf("read back: status %d, %s", st, raw)
	}
	// A denied call with the canary in its input.
	td.invoke(t, readTok.Token, plexus.InvokeRequest{ID: "portal.notes.search", Input: map[string]any{"query": input}})

	// Refresh, then revoke by jti and by scope.
	var ref plexus.RefreshResponse
	if st := td.call(t, "POST", "/grants/refresh", bearer(writeTok.Token), plexus.RefreshRequest{SessionID: sid, JTI: writeTok.JTI}, &ref); st != http.StatusOK {
		t.Fatalf("refresh: status %d", st)
	}
	keepToken("refreshed token", ref.Token)
	if st := td.call(t, "POST", "/grants/revoke", bearer(ref.Token), plexus.RevokeRequest{JTI: ref.JTI, Reason: "done"}, nil); st != http.StatusOK {
		t.Fatalf("revoke jti: status %d", st)
	}
	if st := td.call(t, "POST", "/grants/revoke", td.admin(), plexus.RevokeRequest{AgentID: "canary", CapabilityID: "portal.notes.read"}, nil); st != http.StatusOK {
		t.Fatalf("revoke scope: status %d", st)
	}
	td.invoke(t, ref.Token, plexus.InvokeRequest{ID: "portal.notes.write", Input: map[string]any{"path": "x.md", "content": input}})

	// An admin-path session and its token.
	var adminHS plexus.HandshakeResponse
	if st := td.call(t, "POST", "/link/handshake", nil, plexus.HandshakeRequest{ConnectionKey: oldKey, Client: &plexus.ClientInfo{AgentID: "console"}}, &adminHS); st != http.StatusOK {
		t.Fatalf("admin handshake: status %d", st)
	}
	adminTok := grantOK(t, td, adminHS.SessionID, map[string]any{"portal.notes.list": "allow"})
	keepToken("admin-session token", adminTok.Token)

	// Wrong credentials an attacker might try: refused, and never recorded.
	wrongPAT := plexus.PrefixPAT + randomHex(t, 16)
	wrongKey := plexus.PrefixConnectionKey + randomHex(t, 16)
	wrongCode := plexus.PrefixEnrollCode + randomHex(t, 16)
	keep("wrong PAT", wrongPAT)
	keep("wrong connection-key", wrongKey)
	keep("wrong code", wrongCode)
	if st := td.call(t, "POST", "/link/handshake", bearer(wrongPAT), plexus.HandshakeRequest{}, nil); st != http.StatusUnauthorized {
		t.Errorf("wrong PAT: status %d, want 401", st)
	}
	if st := td.call(t, "GET", "/admin/api/status", bearer(wrongKey), nil, nil); st != http.StatusUnauthorized {
		t.Errorf("wrong key: status %d, want 401", st)
	}
	if st := td.call(t, "POST", "/agents/enroll", nil, plexus.EnrollRequest{Code: wrongCode}, nil); st != http.StatusUnauthorized {
		t.Errorf("wrong code: status %d, want 401", st)
	}
	// A replayed code, and the PAT and the key presented where a code
	// belongs.
	for _, c := range []string{conn.Code, enr.PAT, oldKey} {
		if st := td.call(t, "POST", "/agents/enroll", nil, plexus.EnrollRequest{Code: c}, nil); st == http.StatusOK {
			t.Errorf("enroll with a used or foreign credential succeeded")
		}
	}
	clk.Advance(2 * time.Minute) // past the throttle those failures earned

	// Key rotation.
	var rot plexus.KeyRotateResponse
	if st := td.call(t, "POST", "/admin/api/key/rotate", td.admin(), nil, &rot); st != http.StatusOK {
		t.Fatalf("rotate: status %d", st)
	}
	keep("connection-key (new)", rot.ConnectionKey)
	if st := td.call(t, "GET", "/admin/api/status", bearer(rot.ConnectionKey), nil, nil); st != http.StatusOK {
		t.Fatalf("status with the new key: %d", st)
	}

	// What agents and the owner's console read holds no secret either.
	st, raw := td.raw(t, "GET", "/.well-known/plexus", nil, nil)
	checkNoSecret(t, "GET /.well-known/plexus", raw, secrets, st)
	st, raw = td.raw(t, "GET", "/manifest", session(sid), nil)
	checkNoSecret(t, "GET /manifest", raw, secrets, st)
	st, raw = td.raw(t, "GET", "/admin/api/pending", bearer(rot.ConnectionKey), nil)
	checkNoSecret(t, "GET /admin/api/pending", raw, secrets, st)
	st, raw = td.raw(t, "GET", "/integration/canary", bearer(rot.ConnectionKey), nil)
	checkNoSecret(t, "GET /integration/canary", raw, secrets, st)

	td.stop()

	// The portal folder, outside the home, naturally holds the content.
	if b, err := os.ReadFile(filepath.Join(dir, "canary.md")); err != nil || string(b) != input {
		t.Fatalf("portal file = %q, %v", b, err)
	}
	if rel, err := filepath.Rel(home, dir); err == nil && !strings.HasPrefix(rel, "..") {
		t.Fatalf("the portal %s lies inside the home %s; the walk below would be wrong", dir, home)
	}

	keyFile := filepath.Join(home, scaffold.FileConnectionKey)
	var walked []string
	err := filepath.WalkDir(home, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.Type().IsRegular() {
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(home, path)
		walked = append(walked, rel)
		for name, s := range secrets {
			if !bytes.Contains(b, []byte(s)) {
				continue
			}
			if path == keyFile && name == "connection-key (new)" {
				continue
			}
			t.Errorf("%s holds the %s", rel, name)
		}
		if path == keyFile && strings.TrimSpace(string(b)) != rot.ConnectionKey {
			t.Errorf("connection-key file holds %d bytes other than the current key", len(b))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	var sawJournal, sawAudit, sawKey bool
	for _, rel := range walked {
		sawJournal = sawJournal || rel == "journal.db"
		sawAudit = sawAudit || strings.HasPrefix(rel, "audit"+string(filepath.Separator)) && strings.HasSuffix(rel, ".jsonl")
		sawKey = sawKey || rel == scaffold.FileConnectionKey
	}
	if !sawJournal || !sawAudit || !sawKey {
		t.Errorf("walked %v: want journal.db, an audit/*.jsonl and the connection-key among them", walked)
	}
	t.Logf("walked %d files under the home: %v", len(walked), walked)

	checkNoSecret(t, "the daemon's log", logs.Bytes(), secrets, http.StatusOK)
	if len(logs.Bytes()) == 0 {
		t.Log("the daemon logged nothing")
	}
}

// checkNoSecret fails for every secret found in b.
func checkNoSecret(t *testing.T, what string, b []byte, secrets map[string]string, status int) {
	t.Helper()
	if status != http.StatusOK {
		t.Errorf("%s: status %d", what, status)
	}
	for name, s := range secrets {
		if bytes.Contains(b, []byte(s)) {
			t.Errorf("%s holds the %s", what, name)
		}
	}
}
