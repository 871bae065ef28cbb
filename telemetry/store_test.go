package telemetry_test

import (
	"context"
	"errors"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/plexus-gw/plexus"
	"github.com/plexus-gw/plexus/internal/plexustest"
	"github.com/plexus-gw/plexus/journal"
	"github.com/plexus-gw/plexus/telemetry"
)

// TestObserveCountsCommittedRows: the store decorator counts what committed
// rows say (a decision by its channel, a token, a restart), and nothing of
// an update that rolled back; an operation's own refusal is no journal
// error, a closed journal is.
func TestObserveCountsCommittedRows(t *testing.T) {
	db := plexustest.MustOpenJournal(t)
	m := telemetry.NewMetrics(telemetry.Probes{})
	store := telemetry.Observe(db, m, nil)
	ctx := context.Background()
	record := func(rows ...plexus.Activity) func(plexus.StateTx) error {
		return func(tx plexus.StateTx) error {
			for i := range rows {
				if err := tx.Record(&rows[i]); err != nil {
					return err
				}
			}
			return nil
		}
	}
	approved := plexus.Activity{Actor: plexus.ActorHuman, ActionType: "grant.approved", Target: "portal.notes.write",
		Payload: map[string]any{"via": plexus.ViaFile}}
	minted := plexus.Activity{Actor: plexus.ActorSystem, ActionType: "token.minted", Target: "jti_1"}
	started := plexus.Activity{Actor: plexus.ActorSystem, ActionType: "mcp.server_started", Target: "mcp:fs"}
	if err := store.Update(ctx, true, record(approved, minted, started, started)); err != nil {
		t.Fatal(err)
	}
	refused := errors.New("the operation refuses")
	rollback := func(tx plexus.StateTx) error {
		if err := record(approved, minted)(tx); err != nil {
			return err
		}
		return refused
	}
	if err := store.Update(ctx, false, rollback); !errors.Is(err, refused) {
		t.Fatalf("update = %v, want the fn's error", err)
	}
	want := map[string]float64{
		"plexus_decisions_total":             1,
		"plexus_tokens_minted_total":         1,
		"plexus_source_restarts_total":       1,
		"plexus_journal_commit_errors_total": 0,
	}
	for name, v := range want {
		if got := gathered(t, m, name); got != v {
			t.Errorf("%s = %v, want %v", name, got, v)
		}
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	if err := store.Update(ctx, false, record(minted)); err == nil {
		t.Fatal("update of a closed journal succeeded")
	}
	if got := gathered(t, m, "plexus_journal_commit_errors_total"); got != 1 {
		t.Errorf("commit errors after a closed journal = %v, want 1", got)
	}
}

// gathered sums every series of the family name.
func gathered(t *testing.T, m *telemetry.Metrics, name string) float64 {
	t.Helper()
	fams, err := m.Registry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	sum := 0.0
	for _, f := range fams {
		if f.GetName() != name {
			continue
		}
		for _, s := range f.GetMetric() {
			sum += s.GetCounter().GetValue() + s.GetGauge().GetValue()
		}
	}
	return sum
}

// TestDecisionRows: which rows count as decisions, and under which labels.
func TestDecisionRows(t *testing.T) {
	for _, c := range []struct {
		action, via string
		want        bool
	}{
		{"grant.approved", plexus.ViaFile, true},
		{"grant.denied", plexus.ViaCLI, true},
		{"extension.withdrawn", plexus.ViaAgent, true},
		{"grant.approved", "", false},
		{"grant.requested", plexus.ViaFile, false},
		{"token.revoked", plexus.ViaAdminAPI, false},
	} {
		m := telemetry.NewMetrics(telemetry.Probes{})
		store := telemetry.Observe(plexustest.MustOpenJournal(t), m, nil)
		a := plexus.Activity{Actor: plexus.ActorHuman, ActionType: c.action, Target: "x", Payload: map[string]any{"via": c.via}}
		if err := store.Update(context.Background(), false, func(tx plexus.StateTx) error { return tx.Record(&a) }); err != nil {
			t.Fatal(err)
		}
		if got := testutil.CollectAndCount(m.Registry(), "plexus_decisions_total") == 1; got != c.want {
			t.Errorf("%s via %q counted = %v, want %v", c.action, c.via, got, c.want)
		}
	}
}

// BenchmarkObserveUpdate compares an /invoke-sized update through the
// decorator with the same update on the journal itself: the difference in
// allocs/op is what the decorator costs each call.
func BenchmarkObserveUpdate(b *testing.B) {
	db := plexustest.MustOpenJournal(b)
	fn := func(tx plexus.StateTx) error {
		return tx.Record(&plexus.Activity{Actor: "agent-1", AgentID: "agent-1", ActionType: "invoke.ok",
			Target: "fs.read", Payload: map[string]any{"ms": 3}})
	}
	for _, bc := range []struct {
		name  string
		store plexus.Store
	}{
		{"Bare", db},
		{"Observed", telemetry.Observe(db, telemetry.NewMetrics(telemetry.Probes{}), nil)},
	} {
		b.Run(bc.name, func(b *testing.B) {
			ctx := context.Background()
			b.ReportAllocs()
			for b.Loop() {
				if err := bc.store.Update(ctx, false, fn); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// TestObserveAppend: the decorator passes the journal's Append on (the
// gateway commits a call's rows through it when its store has one), observed
// as an Update is: the row is journaled and handed back with its id, counted
// once committed, and a closed journal is a commit error. Over a store
// without Append it records the row through Update instead.
func TestObserveAppend(t *testing.T) {
	type appender interface {
		Append(ctx context.Context, a *plexus.Activity) error
	}
	for _, tc := range []struct {
		name string
		wrap func(plexus.Store) plexus.Store
	}{
		{"journal", func(s plexus.Store) plexus.Store { return s }},
		{"store without Append", func(s plexus.Store) plexus.Store { return struct{ plexus.Store }{s} }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			db := plexustest.MustOpenJournal(t)
			m := telemetry.NewMetrics(telemetry.Probes{})
			ap, ok := telemetry.Observe(tc.wrap(db), m, nil).(appender)
			if !ok {
				t.Fatal("the observed store has no Append")
			}
			ctx := context.Background()
			minted := plexus.Activity{Actor: plexus.ActorSystem, ActionType: "token.minted", Target: "jti_1"}
			if err := ap.Append(ctx, &minted); err != nil {
				t.Fatal(err)
			}
			if minted.ID == 0 {
				t.Error("the appended row was handed back without its id")
			}
			rows, err := db.Activity(ctx, journal.Filter{})
			if err != nil {
				t.Fatal(err)
			}
			if len(rows) != 1 || rows[0].ActionType != "token.minted" || rows[0].ID != minted.ID {
				t.Fatalf("journal rows = %+v, want the one appended", rows)
			}
			if got := gathered(t, m, "plexus_tokens_minted_total"); got != 1 {
				t.Errorf("tokens minted = %v, want 1", got)
			}
			if err := db.Close(); err != nil {
				t.Fatal(err)
			}
			again := plexus.Activity{Actor: plexus.ActorSystem, ActionType: "token.minted", Target: "jti_2"}
			if err := ap.Append(ctx, &again); err == nil {
				t.Fatal("append to a closed journal succeeded")
			}
			if got := gathered(t, m, "plexus_journal_commit_errors_total"); got != 1 {
				t.Errorf("commit errors after a closed journal = %v, want 1", got)
			}
			if got := gathered(t, m, "plexus_tokens_minted_total"); got != 1 {
				t.Errorf("tokens minted after a failed append = %v, want 1", got)
			}
		})
	}
}
