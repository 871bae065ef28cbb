package e2e

import (
	"bytes"
	"context"
	"net/http"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/plexus-gw/plexus/daemon"
	"github.com/plexus-gw/plexus/mcpserver"
)

// TestMCPAgentsViewLive: plexus agents view, run while a host is
// connected, reaches the running daemon: the host is told
// tools/list_changed and lists only what the view now shows; --clear gives
// the whole catalog back.
func TestMCPAgentsViewLive(t *testing.T) {
	td := startTestDaemon(t, daemon.Options{})
	addPortal(t, td, "notes")
	pat, _ := enrolledAgent(t, td, "claude")
	changed := make(chan struct{}, 16)
	c := mcp.NewClient(&mcp.Implementation{Name: "claude-code", Version: "2.0"}, &mcp.ClientOptions{
		ToolListChangedHandler: func(context.Context, *mcp.ToolListChangedRequest) { changed <- struct{}{} }})
	cs, err := c.Connect(context.Background(), &mcp.StreamableClientTransport{Endpoint: td.BaseURL() + "/mcp",
		HTTPClient: &http.Client{Transport: patTransport{pat}}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	names := func() []string {
		res, err := cs.ListTools(context.Background(), nil)
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, tool := range res.Tools {
			out = append(out, tool.Name)
		}
		return out
	}
	if got := names(); len(got) < 2 {
		t.Fatalf("tools = %v, want the portal's", got)
	}
	view := func(args ...string) {
		var out, errOut bytes.Buffer
		argv := append([]string{"plexus", "--home", td.Home().Dir, "agents", "view", "claude"}, args...)
		if code := runPlexus(context.Background(), t, nil, nil, argv, &out, &errOut); code != 0 {
			t.Fatalf("plexus agents view %v: %d %s", args, code, errOut.String())
		}
	}
	var out, errOut bytes.Buffer // a misspelt agent: refused, nothing written
	if code := runPlexus(context.Background(), t, nil, nil, []string{"plexus", "--home", td.Home().Dir, "agents", "view", "cluade", "--only", "x"}, &out, &errOut); code == 0 ||
		!strings.Contains(errOut.String(), `no agent "cluade" is enrolled`) {
		t.Errorf("agents view of an unknown agent: exit %d, stderr %q; want refused", code, errOut.String())
	}
	if v, err := mcpserver.ReadView(filepath.Join(td.Home().Dir, mcpserver.ViewFileName), "cluade"); err != nil || len(v.Only) != 0 {
		t.Errorf("the unknown agent's view = %+v, %v; want none written", v, err)
	}
	view("--only", "portal.notes.read")
	waitSignal(t, changed)
	if got := names(); !slices.Equal(got, []string{"portal__notes__read"}) {
		t.Errorf("tools after the view = %v, want [portal__notes__read]", got)
	}
	view("--clear")
	waitSignal(t, changed)
	if got := names(); len(got) < 2 {
		t.Errorf("tools after --clear = %v, want the portal's again", got)
	}
}

func waitSignal(t *testing.T, ch <-chan struct{}) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(30 * time.Second):
		t.Fatal("no tools/list_changed")
	}
}
