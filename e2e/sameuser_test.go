package e2e

import (
	"context"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/plexus-gw/plexus"
	"github.com/plexus-gw/plexus/auth"
	"github.com/plexus-gw/plexus/daemon"
	"github.com/plexus-gw/plexus/inbox"
	"github.com/plexus-gw/plexus/journal"
	"github.com/plexus-gw/plexus/scaffold"
)

// The test agent runs as the same OS user as the gateway, which is exactly
// the case Plexus must say plainly (and refuse in strict mode).
func TestSameUserAgent(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("the peer's uid is read from /proc/net/tcp on Linux only")
	}
	t.Run("Warn", func(t *testing.T) {
		td := startTestDaemon(t, daemon.Options{})
		addPortal(t, td, "notes")
		_, sid := enrolledAgent(t, td, "claude")
		db, err := journal.OpenReader(context.Background(), filepath.Join(td.Home().Dir, "journal.db"))
		if err != nil {
			t.Fatal(err)
		}
		defer db.Close()
		rows, err := db.Activity(context.Background(), journal.Filter{Type: "session.opened", AgentID: "claude"})
		if err != nil || len(rows) != 1 {
			t.Fatalf("session.opened rows = %v, %v", rows, err)
		}
		if rows[0].Payload["sameUser"] != true {
			t.Fatalf("payload = %v, want sameUser true", rows[0].Payload)
		}
		// The request carries it too, and its decision file warns that the
		// agent could approve itself by moving the file.
		var pend plexus.GrantPendingResponse
		td.call(t, "PUT", "/grants", session(sid), map[string]any{"grants": map[string]any{
			"portal.notes.write": map[string]any{"decision": "allow", "verbs": []string{"write"}}}}, &pend)
		rows, err = db.Activity(context.Background(), journal.Filter{Type: "grant.requested", AgentID: "claude"})
		if err != nil || len(rows) != 1 || rows[0].Payload["sameUser"] != true {
			t.Fatalf("grant.requested rows = %v, %v; want sameUser true", rows, err)
		}
		if err := td.Inbox().Sync(context.Background()); err != nil {
			t.Fatal(err)
		}
		raw, err := os.ReadFile(filepath.Join(td.Home().Inbox, pend.PendingID+".md"))
		if err != nil {
			t.Fatal(err)
		}
		if f, err := inbox.Parse(raw); err != nil || !f.SameUser ||
			!strings.Contains(string(raw), "**Warning: this agent runs as your own user.**") {
			t.Fatalf("decision file (parse err %v):\n%s", err, raw)
		}

		var st plexus.StatusResponse
		td.call(t, "GET", "/admin/api/status", td.admin(), nil, &st)
		if len(st.SameUserAgents) != 1 || st.SameUserAgents[0] != "claude" {
			t.Fatalf("status sameUserAgents = %v", st.SameUserAgents)
		}
		var out, errOut strings.Builder
		if code := runPlexus(context.Background(), t, nil, nil, []string{"plexus", "--home", td.Home().Dir, "--addr", td.Addr(), "status"}, &out, &errOut); code != 0 ||
			!strings.Contains(out.String(), "WARNING: these agents run as your own OS user: claude") {
			t.Fatalf("plexus status (exit %d):\n%s%s", code, out.String(), errOut.String())
		}
	})
	t.Run("StrictRefuses", func(t *testing.T) {
		home := filepath.Join(t.TempDir(), "home")
		if _, err := scaffold.Init(home, scaffold.InitOptions{NewConnectionKey: auth.NewConnectionKey}); err != nil {
			t.Fatal(err)
		}
		a := scaffold.DefaultAuthConfig()
		a.StrictSameUser = true
		b, _ := json.Marshal(a)
		if err := os.WriteFile(filepath.Join(home, "auth-config.json"), b, 0o600); err != nil {
			t.Fatal(err)
		}
		td := startTestDaemon(t, daemon.Options{Home: home})
		var conn plexus.ConnectResponse
		td.call(t, "POST", "/admin/api/agents/connect", td.admin(), plexus.ConnectRequest{AgentID: "claude"}, &conn)
		var enr plexus.EnrollResponse
		if st := td.call(t, "POST", "/agents/enroll", nil, plexus.EnrollRequest{Code: conn.Code}, &enr); st != http.StatusOK {
			t.Fatalf("enroll: %d", st)
		}
		var e plexus.ErrorResponse
		st := td.call(t, "POST", "/link/handshake", bearer(enr.PAT), plexus.HandshakeRequest{}, &e)
		if st != http.StatusUnauthorized || e.Error == nil || e.Error.Code != plexus.CodeUnauthorized {
			t.Fatalf("strict handshake: status %d, %+v", st, e.Error)
		}
	})
}
