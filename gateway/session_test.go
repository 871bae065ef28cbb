package gateway

import (
	"encoding/json"
	"os"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/plexus-gw/plexus"
	"github.com/plexus-gw/plexus/internal/plexustest"
	"github.com/plexus-gw/plexus/registry"
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

// TestManifestStream, on a real journal and registry: an agent's streamed
// manifest stamps standing:true on the entry it holds a live standing
// grant on and no other, the head carries no entries, and Manifest (the
// collected stream) holds the same entries; another session's has no stamp.
func TestManifestStream(t *testing.T) {
	clk := plexustest.NewClock(time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC))
	home := plexustest.TempHome(t)
	db := plexustest.MustOpenHomeJournal(t, home, clk.Now)
	reg := registry.New(registry.Options{Clock: clk.Now})
	b, err := os.ReadFile("../registry/testdata/obsidian.json")
	if err != nil {
		t.Fatal(err)
	}
	var m plexus.ExtensionManifest
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	src, err := registry.NewExtensionSource(m, plexus.ProvenanceManaged, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := reg.Add(t.Context(), src); err != nil {
		t.Fatal(err)
	}
	g := mustGateway(t, home, db, clk.Now, func(d *Deps) { d.Registry = reg })
	now := clk.Now()
	mustUpdate(t, db, func(tx plexus.StateTx) error {
		if err := tx.PutAgent(&plexus.Agent{ID: "claude", CreatedAt: now}); err != nil {
			return err
		}
		for id, kind := range map[string]plexus.SessionKind{"sess_claude": plexus.SessionAgent, "sess_anon": plexus.SessionAnon} {
			if err := tx.PutSession(&plexus.Session{ID: id, AgentID: "claude", Kind: kind, CreatedAt: now, ExpiresAt: now.Add(time.Hour)}); err != nil {
				return err
			}
		}
		return tx.PutGrant(&plexus.Grant{ID: "gr_1", StandingGrant: plexus.StandingGrant{AgentID: "claude",
			CapabilityID: "obsidian.vault.read", Verbs: []plexus.Verb{plexus.VerbRead}, GrantedAt: now, ExpiresAt: now.Add(time.Hour), Standing: true}})
	})
	for sess, want := range map[string][]string{"sess_claude": {"obsidian.vault.read"}, "sess_anon": nil} {
		ms, err := g.ManifestStream(t.Context(), Credentials{SessionID: sess})
		if err != nil {
			t.Fatal(err)
		}
		if ms.Head.SessionID != sess || ms.Head.Entries != nil {
			t.Errorf("%s: head = session %q, %d entries; want its session, none", sess, ms.Head.SessionID, len(ms.Head.Entries))
		}
		var streamed []plexus.Entry
		var standing []string
		for e := range ms.Entries {
			streamed = append(streamed, *e)
			if e.Standing != nil && *e.Standing {
				standing = append(standing, e.ID)
			}
		}
		if len(streamed) != reg.Len() || len(streamed) < 2 {
			t.Errorf("%s: streamed %d entries, want the registry's %d", sess, len(streamed), reg.Len())
		}
		if diff := cmp.Diff(want, standing); diff != "" {
			t.Errorf("%s: standing entries (-want +got):\n%s", sess, diff)
		}
		whole, err := g.Manifest(t.Context(), Credentials{SessionID: sess})
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(streamed, whole.Manifest.Entries); diff != "" {
			t.Errorf("%s: Manifest's entries differ from the stream's (-stream +Manifest):\n%s", sess, diff)
		}
	}
}

// TestWellKnownSummaries: the discovery document summarizes every entry of
// the registry, in its order (read through registry.All, one entry at a
// time, each summarized before the next overwrites it).
func TestWellKnownSummaries(t *testing.T) {
	clk := plexustest.NewClock(time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC))
	home := plexustest.TempHome(t)
	db := plexustest.MustOpenHomeJournal(t, home, clk.Now)
	reg := registry.New(registry.Options{Clock: clk.Now})
	b, err := os.ReadFile("../registry/testdata/obsidian.json")
	if err != nil {
		t.Fatal(err)
	}
	var m plexus.ExtensionManifest
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	src, err := registry.NewExtensionSource(m, plexus.ProvenanceManaged, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := reg.Add(t.Context(), src); err != nil {
		t.Fatal(err)
	}
	g := mustGateway(t, home, db, clk.Now, nil)
	if got := g.WellKnown().Capabilities; len(got) != 0 {
		t.Errorf("an empty registry: %d summaries, want none", len(got))
	}
	g = mustGateway(t, home, db, clk.Now, func(d *Deps) { d.Registry = reg })
	var want []plexus.Summary
	for _, e := range reg.Entries() {
		want = append(want, e.Summarize())
	}
	if len(want) < 2 {
		t.Fatalf("the registry holds %d entries, want several", len(want))
	}
	if diff := cmp.Diff(want, g.WellKnown().Capabilities); diff != "" {
		t.Errorf("summaries (-want +got):\n%s", diff)
	}
}
