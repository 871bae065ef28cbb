package gateway

import (
	"bytes"
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/plexus-gw/plexus"
	"github.com/plexus-gw/plexus/auth"
	"github.com/plexus-gw/plexus/internal/plexustest"
	"github.com/plexus-gw/plexus/journal"
)

// TestIdempotencyScope: a keyed write or execute call is named by its
// agent, capability and key, never by its token (a retry after a refresh is
// the same call), and the journal sees only a keyed hash of that name.
func TestIdempotencyScope(t *testing.T) {
	h, err := auth.NewHasher(bytes.Repeat([]byte{7}, auth.MinKeyLen))
	if err != nil {
		t.Fatal(err)
	}
	g := &Gateway{d: Deps{Hasher: h}}
	call := func(agent, jti, id, key string, mutating bool) (string, string) {
		return g.idempotencyScope(plexus.InvokeRequest{ID: id, IdempotencyKey: key}, plexus.InvokeContext{AgentID: agent, JTI: jti}, mutating)
	}
	_, base := call("claude", "tok_1", "effects.line.append", "k-1", true)
	if base == "" || strings.Contains(base, "k-1") {
		t.Fatalf("hash %q: want a keyed hash that does not hold the key", base)
	}
	tests := []struct {
		name                  string
		agent, jti, id, key   string
		mutating, same, empty bool
	}{
		{name: "RefreshedToken", agent: "claude", jti: "tok_2", id: "effects.line.append", key: "k-1", mutating: true, same: true},
		{name: "OtherAgent", agent: "codex", jti: "tok_1", id: "effects.line.append", key: "k-1", mutating: true},
		{name: "OtherCapability", agent: "claude", jti: "tok_1", id: "effects.line.other", key: "k-1", mutating: true},
		{name: "OtherKey", agent: "claude", jti: "tok_1", id: "effects.line.append", key: "k-2", mutating: true},
		{name: "ReadOnly", agent: "claude", jti: "tok_1", id: "effects.line.append", key: "k-1", empty: true},
		{name: "NoKey", agent: "claude", jti: "tok_1", id: "effects.line.append", mutating: true, empty: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			key, hash := call(tc.agent, tc.jti, tc.id, tc.key, tc.mutating)
			switch {
			case tc.empty:
				if key != "" || hash != "" {
					t.Errorf("scope = %q, %q; want none", key, hash)
				}
			case (hash == base) != tc.same:
				t.Errorf("hash %q vs %q: same = %v, want %v", hash, base, hash == base, tc.same)
			}
		})
	}
}

// TestBegin, on a real journal: the started row of a call is committed
// before dispatch, with the consumption of its once grant in the same
// transaction; a second use of the grant, or a repeat of a keyed call the
// journal already holds, is refused with nothing written.
func TestBegin(t *testing.T) {
	ctx := context.Background()
	now := time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC)
	ic := plexus.InvokeContext{AgentID: "claude", JTI: "tok_1", TraceID: "tr_1"}
	setup := func(t *testing.T) (*Gateway, *journal.DB, *plexus.Grant) {
		db := plexustest.MustOpenJournal(t)
		once := &plexus.Grant{ID: "grant_1", PendingID: "pend_1", StandingGrant: plexus.StandingGrant{AgentID: "claude",
			CapabilityID: "fs.write", Verbs: []plexus.Verb{plexus.VerbWrite}, GrantedAt: now,
			TrustWindow: plexus.TrustWindow{Kind: plexus.WindowOnce}}}
		mustUpdate(t, db, func(tx plexus.StateTx) error {
			if err := tx.PutAgent(&plexus.Agent{ID: "claude", CreatedAt: now}); err != nil {
				return err
			}
			return tx.PutGrant(once)
		})
		return &Gateway{d: Deps{Store: db}, cache: newAuthCache()}, db, once
	}

	t.Run("OnceConsumed", func(t *testing.T) {
		g, db, once := setup(t)
		st, err := g.begin(ctx, "fs.write", ic, once, true, map[string]any{"jti": "tok_1"}, "", now)
		if err != nil || st.refusal != nil || st.row == nil || st.row.ID == 0 || st.decision != "pend_1" {
			t.Fatalf("begin = %+v, %v; want a committed started row and the decision pend_1", st, err)
		}
		if got, want := actions(t, db), []string{"grant.used", plexus.ActionInvokeStarted}; !slices.Equal(got, want) {
			t.Errorf("rows = %v, want %v", got, want)
		}
		var used *plexus.Grant
		if err := db.View(ctx, func(tx plexus.StateTx) error {
			var err error
			used, err = tx.Grant("claude", "fs.write")
			return err
		}); err != nil || used.UsedAt == nil {
			t.Fatalf("grant after begin = %+v, %v; want it used", used, err)
		}

		st, err = g.begin(ctx, "fs.write", ic, once, true, map[string]any{"jti": "tok_1"}, "", now)
		if err != nil || st.refusal == nil || st.refusal.Code != plexus.CodeGrantRequired || st.row != nil {
			t.Fatalf("second begin = %+v, %v; want a grant_required refusal and no row", st, err)
		}
		if got := len(actions(t, db)); got != 2 {
			t.Errorf("%d rows after the refused second use, want 2", got)
		}
	})

	t.Run("KeyedRepeat", func(t *testing.T) {
		g, db, _ := setup(t)
		standing := &plexus.Grant{ID: "grant_2", StandingGrant: plexus.StandingGrant{AgentID: "claude", CapabilityID: "fs.write", Standing: true}}
		st, err := g.begin(ctx, "fs.write", ic, standing, false, map[string]any{"idemHash": "h1"}, "h1", now)
		if err != nil || st.refusal != nil || st.row == nil {
			t.Fatalf("begin = %+v, %v; want a started row", st, err)
		}
		st, err = g.begin(ctx, "fs.write", ic, standing, false, map[string]any{"idemHash": "h1"}, "h1", now)
		if err != nil || st.refusal == nil || detailOf(st.refusal)["outcome"] != "unknown" || st.row != nil {
			t.Fatalf("repeat = %+v, %v; want a refusal whose outcome is unknown, and no row", st, err)
		}
		if got, want := actions(t, db), []string{plexus.ActionInvokeStarted}; !slices.Equal(got, want) {
			t.Errorf("rows = %v, want %v", got, want)
		}
	})

	t.Run("ErrJournalClosed", func(t *testing.T) {
		g, db, once := setup(t)
		if err := db.Close(); err != nil {
			t.Fatal(err)
		}
		if st, err := g.begin(ctx, "fs.write", ic, once, true, map[string]any{}, "", now); err == nil {
			t.Fatalf("begin on a closed journal = %+v, nil; want an error (nothing may run)", st)
		}
	})
}

// detailOf is e's detail map, nil when it has none.
func detailOf(e *plexus.Error) map[string]any {
	m, _ := e.Detail.(map[string]any)
	return m
}
