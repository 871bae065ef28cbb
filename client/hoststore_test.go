package client

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/plexus-gw/plexus"
)

func TestHostAgents(t *testing.T) {
	home := t.TempDir()
	for id, pat := range map[string]string{"cursor": "plx_agent_cur", "cc": "plx_agent_cc"} {
		store, err := HostStore(home, id)
		if err != nil {
			t.Fatal(err)
		}
		if err := store.SaveCredentials(Credentials{BaseURL: "http://127.0.0.1:7077", AgentID: id, PAT: pat}, false); err != nil {
			t.Fatal(err)
		}
	}
	// A folder without a credential, and one whose name is not an agent id.
	for _, dir := range []string{"lost", "not an id"} {
		if err := os.MkdirAll(filepath.Join(home, HostsDir, dir), 0o700); err != nil {
			t.Fatal(err)
		}
	}
	agents := HostAgents(home)
	for id, want := range map[string]bool{"cursor": true, "cc": true, "lost": false, "never": false, "../cursor": false} {
		if got := agents.Enrolled(id); got != want {
			t.Errorf("Enrolled(%q) = %v, want %v", id, got, want)
		}
	}
	for pat, want := range map[string]string{"plx_agent_cur": "cursor", "plx_agent_cc": "cc", "plx_agent_other": "", "": ""} {
		if got := agents.ByPAT(pat); got != want {
			t.Errorf("ByPAT(%q) = %q, want %q", pat, got, want)
		}
	}
	if got := HostAgents(filepath.Join(home, "none")).ByPAT("plx_agent_cur"); got != "" {
		t.Errorf("ByPAT without a clients folder = %q", got)
	}
}

func TestRevokeHost(t *testing.T) {
	ctx := context.Background()
	for _, tt := range []struct {
		name   string
		status int
		kept   bool
	}{{"Revoked", 200, false}, {"RefusedKeepsCredential", 404, true}} {
		t.Run(tt.name, func(t *testing.T) {
			store, err := HostStore(t.TempDir(), "cursor")
			if err != nil {
				t.Fatal(err)
			}
			if err := store.SaveCredentials(Credentials{BaseURL: "http://127.0.0.1:7077", AgentID: "cursor", PAT: "plx_agent_x"}, false); err != nil {
				t.Fatal(err)
			}
			s := newAdminServer(t, tt.status, plexus.AgentRevokeResponse{OK: true, AgentID: "cursor", RevokedGrants: 2})
			resp, err := mustAdmin(t, s.srv.URL).RevokeHost(ctx, store, "cursor", "disconnected from Cursor")
			if (err != nil) != tt.kept {
				t.Fatalf("err = %v", err)
			}
			if !tt.kept && (resp.AgentID != "cursor" || resp.RevokedGrants != 2 || s.path != "/admin/api/agents/revoke") {
				t.Errorf("resp = %+v, path %s", resp, s.path)
			}
			if _, err := store.Credentials(); (err == nil) != tt.kept {
				t.Errorf("credential kept = %v, want %v", err == nil, tt.kept)
			}
		})
	}
}
