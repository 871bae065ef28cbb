package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/plexus-gw/plexus"
	"github.com/plexus-gw/plexus/internal/plexustest"
	"github.com/plexus-gw/plexus/mcpserver"
)

// runHome runs the command line with args against home (no daemon).
func runHome(home string, args ...string) result {
	argv := append([]string{"plexus", "--home", home}, args...)
	var out, errOut bytes.Buffer
	code := run(context.Background(), argv, &out, &errOut)
	return result{code, out.String(), errOut.String()}
}

// TestAgentsView: plexus agents view writes the agent's view into the
// owner's mcp-views.json (other agents and keys kept), shows it, refuses a
// view that is not one with a usage error that says why and changes
// nothing, and --clear removes it.
func TestAgentsView(t *testing.T) {
	h := plexustest.TempHome(t)
	home := h.Dir
	db := plexustest.MustOpenHomeJournal(t, h, nil)
	if err := db.Update(context.Background(), true, func(tx plexus.StateTx) error {
		return tx.PutAgent(&plexus.Agent{ID: "claude", CreatedAt: time.Now()})
	}); err != nil {
		t.Fatal(err)
	}
	if r := runHome(home, "agents", "view", "cluade", "--mode", "tools"); r.code == 0 || !strings.Contains(r.stderr, `no agent "cluade" is enrolled`) {
		t.Errorf("a view for an agent never enrolled: %d %q, want refused", r.code, r.stderr)
	}
	path := filepath.Join(home, mcpserver.ViewFileName)
	if err := os.WriteFile(path, []byte(`{"agents":{"cursor":{"mode":"tools"}},"note":"mine"}`), 0o600); err != nil {
		t.Fatal(err)
	}
	r := runHome(home, "agents", "view", "claude", "--only", "mcp.github.*", "--only", "mcp.github.get_issue", "--names", "original", "--mode", "search")
	if r.code != 0 || !strings.Contains(r.stdout, "mcp.github.*, mcp.github.get_issue") || !strings.Contains(r.stdout, "original") {
		t.Fatalf("set: %d %q %q", r.code, r.stdout, r.stderr)
	}
	v, err := mcpserver.ReadView(path, "claude")
	if err != nil || v.Names != mcpserver.NamesOriginal || v.Mode != mcpserver.ModeSearch || len(v.Only) != 2 {
		t.Fatalf("the file holds %+v, %v", v, err)
	}
	if r := runHome(home, "agents", "view", "claude", "--json"); r.code != 0 || !strings.Contains(r.stdout, `"names": "original"`) {
		t.Errorf("show --json: %d %q %q", r.code, r.stdout, r.stderr)
	}
	before, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	for name, args := range map[string][]string{
		"ErrTwoServersOriginal": {"--only", "mcp.github.*", "--only", "mcp.gitlab.*", "--names", "original"},
		"ErrWildOriginal":       {"--only", "mcp.*", "--names", "original"},
		"ErrMode":               {"--mode", "everything"},
		"ErrNames":              {"--names", "short"},
		"ErrClearWithSetting":   {"--clear", "--mode", "tools"},
	} {
		t.Run(name, func(t *testing.T) {
			r := runHome(home, append([]string{"agents", "view", "claude"}, args...)...)
			if r.code != exitUsage || r.stderr == "" {
				t.Errorf("%v: %d %q, want a usage error", args, r.code, r.stderr)
			}
			if after, err := os.ReadFile(path); err != nil || !bytes.Equal(after, before) {
				t.Errorf("the file changed: %s", after)
			}
		})
	}
	if r := runHome(home, "agents", "view", "claude", "--only", "mcp.a.*", "--only", "mcp.b.*", "--names", "original"); !strings.Contains(r.stderr, "2 servers (a, b)") {
		t.Errorf("the refusal %q does not say which servers", r.stderr)
	}
	if r := runHome(home, "agents", "view", "claude", "--clear"); r.code != 0 || !strings.Contains(r.stdout, "every capability") {
		t.Errorf("clear: %d %q %q", r.code, r.stdout, r.stderr)
	}
	after, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if s := string(after); strings.Contains(s, "claude") || !strings.Contains(s, `"cursor"`) || !strings.Contains(s, `"note"`) {
		t.Errorf("after clear the file is %s, want cursor and the note kept, claude gone", s)
	}
}
