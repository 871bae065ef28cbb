package e2e

import (
	"encoding/json"
	"maps"
	"slices"
	"testing"

	"github.com/plexus-gw/plexus"
	"github.com/plexus-gw/plexus/daemon"
	"github.com/plexus-gw/plexus/gateway"
)

// TestCheckPins walks the pin rules through the real gateway and journal:
// first sight pins all; a new tool later is pinned and served; a changed
// one is held and put up once; a denial is not asked again and a revert is
// served without a question; an approval pins the new definition; taking
// the approval back pins the old one again; forgetting the pins starts
// afresh.
func TestCheckPins(t *testing.T) {
	td := startTestDaemon(t, daemon.Options{})
	ctx := t.Context()
	const src = "mcp:s"
	def := func(name, desc string) gateway.Definition {
		raw, _ := json.Marshal(map[string]any{"name": name, "description": desc})
		return gateway.Definition{EntryID: "mcp.s." + name, Primitive: "tool", Name: name, Hash: "h:" + desc, Raw: raw}
	}
	check := func(step string, want []string, defs ...gateway.Definition) {
		t.Helper()
		held, err := td.Gateway().CheckPins(ctx, src, defs)
		if err != nil {
			t.Fatalf("%s: %v", step, err)
		}
		got := slices.Sorted(maps.Keys(held))
		if !slices.Equal(got, want) {
			t.Fatalf("%s: held %v, want %v", step, got, want)
		}
	}
	pending := func() []plexus.Pending {
		t.Helper()
		var out []plexus.Pending
		var list plexus.PendingListResponse
		td.call(t, "GET", "/admin/api/pending", td.admin(), nil, &list)
		for _, p := range list.Pending {
			if p.Kind == plexus.PendingDefinition {
				out = append(out, p)
			}
		}
		return out
	}
	decide := func(p plexus.Pending, approve bool) {
		t.Helper()
		if _, err := td.Gateway().Decide(ctx, plexus.Decision{PendingID: p.ID, Approve: approve, Via: plexus.ViaCLI}); err != nil {
			t.Fatal(err)
		}
	}

	check("first sight", nil, def("a", "A"), def("b", "B"))
	if n := len(rowsOf(t, td, "source.pinned", src)); n != 1 {
		t.Errorf("source.pinned rows: %d", n)
	}
	check("unchanged", nil, def("a", "A"), def("b", "B"))
	check("a new tool", nil, def("a", "A"), def("b", "B"), def("c", "C"))
	if n := len(rowsOf(t, td, "definition.pinned", src)); n != 1 {
		t.Errorf("definition.pinned rows: %d", n)
	}

	check("a changed", []string{"mcp.s.a"}, def("a", "A2"), def("b", "B"), def("c", "C"))
	check("a changed, scanned again", []string{"mcp.s.a"}, def("a", "A2"), def("b", "B"), def("c", "C"))
	ps := pending()
	if len(ps) != 1 || ps[0].Definition.EntryID != "mcp.s.a" || ps[0].Definition.OldHash != "h:A" || ps[0].Definition.NewHash != "h:A2" {
		t.Fatalf("pending definitions: %+v", ps)
	}
	decide(ps[0], false)
	check("denied: still held", []string{"mcp.s.a"}, def("a", "A2"), def("b", "B"), def("c", "C"))
	if n := len(pending()); n != 0 {
		t.Fatalf("asked again after a denial: %d pending", n)
	}
	check("reverted: served without a question", nil, def("a", "A"), def("b", "B"), def("c", "C"))

	check("b changed", []string{"mcp.s.b"}, def("a", "A"), def("b", "B2"), def("c", "C"))
	ps = pending()
	decide(ps[0], true)
	check("approved: served", nil, def("a", "A"), def("b", "B2"), def("c", "C"))
	check("approved, but the old one is back: held", []string{"mcp.s.b"}, def("a", "A"), def("b", "B"), def("c", "C"))
	if n := len(pending()); n != 1 {
		t.Fatalf("pending after a revert of an approved change: %d", n)
	}
	if _, err := td.Gateway().RevokeDecision(ctx, ps[0].ID, "owner", plexus.ViaCLI, "changed my mind"); err != nil {
		t.Fatal(err)
	}
	check("revoked: the old definition pinned again", []string{"mcp.s.b"}, def("a", "A"), def("b", "B2"), def("c", "C"))
	check("revoked: the old definition served", nil, def("a", "A"), def("b", "B"), def("c", "C"))

	if err := td.Gateway().ForgetPins(ctx, src); err != nil {
		t.Fatal(err)
	}
	if n := len(pending()); n != 0 {
		t.Errorf("pending definitions after ForgetPins: %d, want withdrawn", n)
	}
	check("forgotten: a first sight again", nil, def("a", "A9"), def("b", "B9"))
}
