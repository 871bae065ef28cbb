package gateway

import (
	"testing"
	"time"

	"github.com/plexus-gw/plexus"
	"github.com/plexus-gw/plexus/internal/plexustest"
)

// TestCodeRefusal: a code redeems until it is consumed or its expiry is
// reached; each refusal has its own code.
func TestCodeRefusal(t *testing.T) {
	now := time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC)
	tests := []struct {
		name string
		ec   plexus.EnrollCode
		code plexus.ErrorCode
	}{
		{name: "OK", ec: plexus.EnrollCode{ExpiresAt: now.Add(time.Second)}},
		{name: "ErrConsumed", ec: plexus.EnrollCode{ExpiresAt: now.Add(time.Hour), ConsumedAt: &now}, code: plexus.CodeCodeConsumed},
		{name: "ErrExpired", ec: plexus.EnrollCode{ExpiresAt: now}, code: plexus.CodeCodeExpired},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var code plexus.ErrorCode
			if e := codeRefusal(&tc.ec, now); e != nil {
				code = e.Code
			}
			if code != tc.code {
				t.Errorf("codeRefusal = %q; want %q", code, tc.code)
			}
		})
	}
}

// TestRedeemCode, on a real journal: an unknown code is refused; a good
// one stores the PAT hash with its agent.enrolled row and is consumed, so
// redeeming it again is refused and writes nothing; a code of a revoked
// agent is refused as unknown.
func TestRedeemCode(t *testing.T) {
	now := time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC)
	db := plexustest.MustOpenJournal(t)
	mustUpdate(t, db, func(tx plexus.StateTx) error {
		for _, a := range []plexus.Agent{{ID: "claude", CreatedAt: now}, {ID: "gone", CreatedAt: now, RevokedAt: &now}} {
			if err := tx.PutAgent(&a); err != nil {
				return err
			}
			if err := tx.PutEnrollCode(&plexus.EnrollCode{Hash: []byte("code_" + a.ID), AgentID: a.ID, CreatedAt: now,
				ExpiresAt: now.Add(time.Hour), TraceID: "tr_" + a.ID}); err != nil {
				return err
			}
		}
		return nil
	})
	redeem := func(hash string) (string, *plexus.Error) {
		t.Helper()
		var id string
		var fail *plexus.Error
		mustUpdate(t, db, func(tx plexus.StateTx) error {
			var err error
			id, fail, err = redeemCode(tx, []byte(hash), []byte("pat"), "127.0.0.1", now)
			return err
		})
		return id, fail
	}
	if _, fail := redeem("nope"); fail == nil || fail.Code != plexus.CodeUnknownCode {
		t.Errorf("unknown code: fail = %v; want unknown_code", fail)
	}
	if id, fail := redeem("code_claude"); fail != nil || id != "claude" {
		t.Fatalf("redeem = %q, %v; want claude", id, fail)
	}
	if _, fail := redeem("code_claude"); fail == nil || fail.Code != plexus.CodeCodeConsumed {
		t.Errorf("second redeem: fail = %v; want code_consumed", fail)
	}
	if _, fail := redeem("code_gone"); fail == nil || fail.Code != plexus.CodeUnknownCode {
		t.Errorf("revoked agent's code: fail = %v; want unknown_code", fail)
	}
	err := db.View(t.Context(), func(tx plexus.StateTx) error {
		a, err := tx.Agent("claude")
		if err == nil && (string(a.PATHash) != "pat" || a.EnrolledAt == nil) {
			t.Errorf("agent = %+v; want the PAT hash stored and enrolled", a)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if got := actions(t, db); len(got) != 1 || got[0] != "agent.enrolled" {
		t.Errorf("rows = %v; want one agent.enrolled", got)
	}
}
