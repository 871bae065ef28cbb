package gateway

import (
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/plexus-gw/plexus"
	"github.com/plexus-gw/plexus/internal/plexustest"
)

// TestConnectingAgent: connecting a new id makes the agent, connecting an
// existing one relabels it only when a label is given, a revoked id is
// never reused, and a failed lookup is passed on.
func TestConnectingAgent(t *testing.T) {
	now := time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC)
	then := now.Add(-time.Hour)
	boom := errors.New("disk")
	tests := []struct {
		name      string
		found     *plexus.Agent
		err       error
		label     string
		wantLabel string
		wantAt    time.Time
		code      plexus.ErrorCode
		wantErr   error
	}{
		{name: "OKNew", err: plexus.ErrNotFound, label: "Claude", wantLabel: "Claude", wantAt: now},
		{name: "OKExistingKeepsLabel", found: &plexus.Agent{ID: "claude", Label: "old", CreatedAt: then}, wantLabel: "old", wantAt: then},
		{name: "OKExistingRelabelled", found: &plexus.Agent{ID: "claude", Label: "old", CreatedAt: then}, label: "new",
			wantLabel: "new", wantAt: then},
		{name: "ErrRevoked", found: &plexus.Agent{ID: "claude", RevokedAt: &then}, code: plexus.CodeConflict},
		{name: "ErrLookup", err: boom, wantErr: boom},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := connectingAgent(tc.found, tc.err, plexus.ConnectRequest{AgentID: "claude", Label: tc.label}, now)
			switch {
			case tc.wantErr != nil:
				if !errors.Is(err, tc.wantErr) {
					t.Fatalf("err = %v; want %v", err, tc.wantErr)
				}
			case tc.code != "":
				if e := plexus.AsError(err); err == nil || e.Code != tc.code {
					t.Fatalf("err = %v; want code %q", err, tc.code)
				}
			case err != nil:
				t.Fatal(err)
			case got.ID != "claude" || got.Label != tc.wantLabel || !got.CreatedAt.Equal(tc.wantAt):
				t.Errorf("agent = %+v; want claude labelled %q created at %v", got, tc.wantLabel, tc.wantAt)
			}
		})
	}
}

// TestEndAgent, on a real journal: revoking an agent ends its session, its
// live token (with its event) and its grant, leaving another agent's
// token; an unknown agent is not_found and a revoked one a conflict.
func TestEndAgent(t *testing.T) {
	now := time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC)
	db := plexustest.MustOpenJournal(t)
	mustUpdate(t, db, func(tx plexus.StateTx) error {
		for _, id := range []string{"claude", "codex"} {
			if err := tx.PutAgent(&plexus.Agent{ID: id, CreatedAt: now}); err != nil {
				return err
			}
			if err := tx.PutSession(&plexus.Session{ID: "sess_" + id, AgentID: id, Kind: plexus.SessionAgent,
				CreatedAt: now, ExpiresAt: now.Add(time.Hour)}); err != nil {
				return err
			}
			if err := tx.PutToken(&plexus.TokenRecord{JTI: "tok_" + id, AgentID: id, SessionID: "sess_" + id,
				IssuedAt: now, ExpiresAt: now.Add(time.Hour)}); err != nil {
				return err
			}
		}
		return tx.PutGrant(&plexus.Grant{ID: "gr_1", PendingID: "pend_1", StandingGrant: plexus.StandingGrant{AgentID: "claude",
			CapabilityID: "files.read", Verbs: []plexus.Verb{plexus.VerbRead}, GrantedAt: now, ExpiresAt: now.Add(time.Hour), Standing: true}})
	})
	end := func(id string) (agentEnded, error) {
		var out agentEnded
		err := db.Update(t.Context(), true, func(tx plexus.StateTx) error {
			var err error
			out, err = endAgent(tx, id, "done", now)
			return err
		})
		return out, err
	}
	if _, err := end("nobody"); plexus.AsError(err) == nil || plexus.AsError(err).Code != plexus.CodeNotFound {
		t.Errorf("unknown agent: err = %v; want not_found", err)
	}
	got, err := end("claude")
	if err != nil {
		t.Fatal(err)
	}
	if !got.resp.OK || !slices.Equal(got.resp.RevokedSessions, []string{"sess_claude"}) || !slices.Equal(got.resp.RevokedJTIs, []string{"tok_claude"}) ||
		got.resp.RevokedGrants != 1 || len(got.events) != 1 || !slices.Equal(got.touched, []string{"pend_1"}) {
		t.Errorf("ended = %+v; want claude's session, token (one event) and grant of pend_1", got)
	}
	if _, err := end("claude"); plexus.AsError(err) == nil || plexus.AsError(err).Code != plexus.CodeConflict {
		t.Errorf("revoked again: err = %v; want conflict", err)
	}
	err = db.View(t.Context(), func(tx plexus.StateTx) error {
		live, err := tx.LiveTokens("", "", "", now)
		if err == nil && (len(live) != 1 || live[0].JTI != "tok_codex") {
			t.Errorf("live tokens = %+v; want only codex's", live)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
}
