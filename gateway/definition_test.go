package gateway

import (
	"encoding/json"
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/plexus-gw/plexus"
	"github.com/plexus-gw/plexus/internal/plexustest"
)

// TestComparePins: a definition with no pin is fresh, one whose hash
// differs from its pin is changed and held, one pinned as it is is left
// out; a source with no pins at all is being checked for the first time.
func TestComparePins(t *testing.T) {
	pin := func(entry, hash string) plexus.Pin { return plexus.Pin{Source: "s", EntryID: entry, Hash: hash} }
	def := func(entry, hash string) Definition { return Definition{EntryID: entry, Hash: hash} }
	tests := []struct {
		name    string
		pins    []plexus.Pin
		defs    []Definition
		first   bool
		fresh   []string
		changed []string
	}{
		{name: "FirstAdd", defs: []Definition{def("a", "1"), def("b", "1")}, first: true, fresh: []string{"a", "b"}},
		{name: "Settled", pins: []plexus.Pin{pin("a", "1")}, defs: []Definition{def("a", "1")}},
		{name: "NewEntry", pins: []plexus.Pin{pin("a", "1")}, defs: []Definition{def("a", "1"), def("b", "1")}, fresh: []string{"b"}},
		{name: "Changed", pins: []plexus.Pin{pin("a", "1"), pin("b", "1")}, defs: []Definition{def("b", "2"), def("a", "1")},
			changed: []string{"b"}},
		{name: "Mixed", pins: []plexus.Pin{pin("a", "1")}, defs: []Definition{def("c", "1"), def("a", "2")},
			fresh: []string{"c"}, changed: []string{"a"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := comparePins(tc.pins, tc.defs)
			var fresh, changed []string
			for _, d := range got.fresh {
				fresh = append(fresh, d.EntryID)
			}
			held := map[string]bool{}
			for _, c := range got.changed {
				changed = append(changed, c.def.EntryID)
				held[c.def.EntryID] = true
				if c.pin.EntryID != c.def.EntryID || c.pin.Hash == c.def.Hash {
					t.Errorf("change %+v pairs the wrong pin", c)
				}
			}
			if got.first != tc.first || !slices.Equal(fresh, tc.fresh) || !slices.Equal(changed, tc.changed) {
				t.Errorf("comparePins = first %v fresh %v changed %v; want %v %v %v", got.first, fresh, changed, tc.first, tc.fresh, tc.changed)
			}
			if diff := cmp.Diff(held, got.held); diff != "" {
				t.Errorf("held (-want +got):\n%s", diff)
			}
		})
	}
}

// TestCommitPins, on a real journal: a first check pins every definition
// under one source.pinned row; a changed definition is put up once as a
// definition decision with its definition.changed row, and checking the
// same change again asks nothing twice; a new entry later is pinned under
// definition.pinned.
func TestCommitPins(t *testing.T) {
	now := time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC)
	db := plexustest.MustOpenJournal(t)
	raw := json.RawMessage(`{"name":"t"}`)
	check := func(defs ...Definition) []string {
		t.Helper()
		var created []string
		mustUpdate(t, db, func(tx plexus.StateTx) error {
			pins, err := tx.Pins("srv")
			if err != nil {
				return err
			}
			created, err = commitPins(tx, "srv", comparePins(pins, defs), now)
			return err
		})
		return created
	}
	if got := check(Definition{EntryID: "srv.a", Hash: "1", Raw: raw}); len(got) != 0 {
		t.Fatalf("first check created %v; want no decision", got)
	}
	changed := Definition{EntryID: "srv.a", Name: "a", Hash: "2", Raw: raw}
	created := check(changed)
	if len(created) != 1 {
		t.Fatalf("a changed definition created %v; want one decision", created)
	}
	if again := check(changed); len(again) != 0 {
		t.Errorf("the same change again created %v; want none (the owner is asked once)", again)
	}
	check(changed, Definition{EntryID: "srv.b", Hash: "1", Raw: raw})
	var p *plexus.Pending
	mustUpdate(t, db, func(tx plexus.StateTx) error {
		var err error
		p, err = tx.Pending(created[0])
		return err
	})
	if p.Kind != plexus.PendingDefinition || p.State != plexus.StatePending || p.Definition == nil ||
		p.Definition.OldHash != "1" || p.Definition.NewHash != "2" || !p.ExpiresAt.Equal(now.Add(DefinitionTTL)) {
		t.Errorf("decision = %+v; want a pending definition change 1 -> 2 expiring after DefinitionTTL", p)
	}
	want := []string{"source.pinned", "definition.changed", "definition.pinned"}
	if got := actions(t, db); !slices.Equal(got, want) {
		t.Errorf("rows = %v; want %v", got, want)
	}
}
