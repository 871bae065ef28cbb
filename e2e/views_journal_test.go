package e2e

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/plexus-gw/plexus"
	"github.com/plexus-gw/plexus/daemon"
	"github.com/plexus-gw/plexus/gateway"
	"github.com/plexus-gw/plexus/journal"
	"github.com/plexus-gw/plexus/mcpserver"
)

// TestViewChangesAreJournaled: each change of an agent's MCP view in
// mcp-views.json — through `plexus agents view` or an editor — is one
// view.changed row naming that agent and the view now in force; a rewrite
// that changes nothing writes no row, and another agent's view stays out
// of the row.
func TestViewChangesAreJournaled(t *testing.T) {
	td := startTestDaemon(t, daemon.Options{})
	path := filepath.Join(td.Home().Dir, mcpserver.ViewFileName)
	set := func(agent string, v mcpserver.View) {
		t.Helper()
		if err := mcpserver.SetView(path, agent, v); err != nil {
			t.Fatal(err)
		}
	}
	rows := func() []plexus.Activity {
		return td.activity(t, journal.Filter{Type: gateway.ActionViewChanged})
	}
	waitRows := func(n int) []plexus.Activity {
		t.Helper()
		waitFor(t, 10*time.Second, "view.changed rows", holds(func() bool { return len(rows()) >= n }))
		return rows()
	}

	set("cursor", mcpserver.View{Only: []string{"portal.notes.*"}, Mode: mcpserver.ModeTools})
	waitRows(1)
	set("codex", mcpserver.View{Mode: mcpserver.ModeSearch})
	waitRows(2)
	same, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, same, 0o600); err != nil { // the owner saves without a change
		t.Fatal(err)
	}
	set("cursor", mcpserver.View{}) // back to the default view
	got := waitRows(3)

	want := []struct {
		agent, view string
	}{
		{"cursor", `{"mode":"tools","only":["portal.notes.*"]}`},
		{"codex", `{"mode":"search"}`},
		{"cursor", `{}`},
	}
	if len(got) != len(want) {
		t.Fatalf("got %d view.changed rows, want %d: %+v", len(got), len(want), got)
	}
	for i, w := range want {
		r := got[i]
		view, err := json.Marshal(r.Payload["view"])
		if err != nil {
			t.Fatal(err)
		}
		if r.AgentID != w.agent || r.Target != w.agent || r.Actor != plexus.ActorHuman || string(view) != w.view {
			t.Errorf("row %d: agent %q target %q actor %q view %s; want agent and target %q, actor human, view %s",
				i, r.AgentID, r.Target, r.Actor, view, w.agent, w.view)
		}
	}
}
