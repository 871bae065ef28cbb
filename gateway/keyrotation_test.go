package gateway

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/plexus-gw/plexus"
	"github.com/plexus-gw/plexus/internal/plexustest"
)

// TestEndKeySessions, on a real journal: rotating the key moves the epoch
// on and ends every admin and anon session opened under an older one with
// its live tokens (one token_revoked event each); an agent's session,
// opened under its PAT, and its token are untouched.
func TestEndKeySessions(t *testing.T) {
	now := time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC)
	db := plexustest.MustOpenJournal(t)
	mustUpdate(t, db, func(tx plexus.StateTx) error {
		if err := tx.PutAgent(&plexus.Agent{ID: "claude", CreatedAt: now}); err != nil {
			return err
		}
		for _, s := range []plexus.Session{
			{ID: "sess_admin", Kind: plexus.SessionAdmin},
			{ID: "sess_anon", Kind: plexus.SessionAnon},
			{ID: "sess_agent", Kind: plexus.SessionAgent, AgentID: "claude"},
		} {
			s.CreatedAt, s.ExpiresAt = now, now.Add(time.Hour)
			if err := tx.PutSession(&s); err != nil {
				return err
			}
			if err := tx.PutToken(&plexus.TokenRecord{JTI: "tok_" + s.ID, AgentID: s.AgentID, SessionID: s.ID,
				IssuedAt: now, ExpiresAt: now.Add(time.Hour)}); err != nil {
				return err
			}
		}
		return nil
	})
	var rot keyRotation
	mustUpdate(t, db, func(tx plexus.StateTx) error {
		var err error
		rot, err = endKeySessions(tx, now)
		return err
	})
	if rot.epoch != 2 || !slices.Equal(rot.sessions, []string{"sess_admin", "sess_anon"}) ||
		!slices.Equal(rot.jtis, []string{"tok_sess_admin", "tok_sess_anon"}) || len(rot.events) != 2 {
		t.Fatalf("rotation = %+v; want epoch 2 (the first key is epoch 1) ending the admin and anon sessions and their two tokens", rot)
	}
	err := db.View(context.Background(), func(tx plexus.StateTx) error {
		live, err := tx.LiveTokens("", "", "", now)
		if err != nil {
			return err
		}
		if len(live) != 1 || live[0].JTI != "tok_sess_agent" {
			t.Errorf("live tokens = %+v; want only the agent's", live)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	mustUpdate(t, db, func(tx plexus.StateTx) error {
		var err error
		rot, err = endKeySessions(tx, now)
		return err
	})
	if rot.epoch != 3 || len(rot.sessions) != 0 || rot.sessions == nil || rot.jtis == nil || len(rot.events) != 0 {
		t.Errorf("second rotation = %+v; want epoch 3 ending nothing (empty lists, not nil)", rot)
	}
}
