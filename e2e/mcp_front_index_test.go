package e2e

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/plexus-gw/plexus/daemon"
)

// TestMCPFrontCatalogChanges: a host session that has called a tool keeps
// calling what the catalog holds now: a source the owner adds meanwhile is
// callable at once, and the tool of a source the owner removes is unknown
// at its next call.
func TestMCPFrontCatalogChanges(t *testing.T) {
	td := startTestDaemon(t, daemon.Options{})
	addPortal(t, td, "notes")
	pat, _ := enrolledAgent(t, td, "claude")
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "claude-code", Version: "2.0"}, nil).Connect(context.Background(),
		&mcp.StreamableClientTransport{Endpoint: td.BaseURL() + "/mcp", HTTPClient: &http.Client{Transport: patTransport{pat}}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	read := func(tool string) (*mcp.CallToolResult, error) {
		return cs.CallTool(context.Background(), &mcp.CallToolParams{Name: tool, Arguments: map[string]any{"path": "hello.md"}})
	}
	if res, err := read("portal__notes__read"); err != nil || res.IsError {
		t.Fatalf("read notes: %v %+v", err, res)
	}
	addPortal(t, td, "more")
	if res, err := read("portal__more__read"); err != nil || res.IsError {
		t.Fatalf("read from the source added since: %v %+v", err, res)
	}
	if st := td.call(t, "DELETE", "/admin/api/sources/portal:notes", td.admin(), nil, nil); st/100 != 2 {
		t.Fatalf("remove notes: status %d", st)
	}
	if _, err := read("portal__notes__read"); err == nil || !strings.Contains(err.Error(), "unknown tool") {
		t.Errorf("read from the removed source: %v, want unknown tool", err)
	}
}
