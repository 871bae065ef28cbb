package e2e

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/plexus-gw/plexus"
	"github.com/plexus-gw/plexus/daemon"
	"github.com/plexus-gw/plexus/examples/planexe"
	"github.com/plexus-gw/plexus/examples/planexe/contract"
)

// planexeCaller runs PlanExe's contract suite through Plexus: every tool
// call is an agent's POST /invoke of the entry mcp.planexe.<tool>, under
// the grant its annotations ask for — read for status, events, list and
// read; a standing write (approved once by the owner) for create, stop and
// artifact.write; and for start and resume an execute grant that is never
// standing, so each such call is asked for and approved on its own. The
// server's CallToolResult arrives verbatim as mcpResult.
type planexeCaller struct {
	t             *testing.T
	td            *testDaemon
	sid           string
	read, write   string
	client        *http.Client
	executeGrants atomic.Int64
	// once serializes execute calls: an agent holds one grant per
	// capability, so a second once grant asked for before the first was
	// spent replaces it.
	once sync.Mutex
}

func (c *planexeCaller) Call(ctx context.Context, tool string, args map[string]any) (contract.Result, error) {
	id := "mcp.planexe." + tool
	var tok string
	switch tool {
	case planexe.ToolSessionStart, planexe.ToolSessionResume:
		c.once.Lock()
		defer c.once.Unlock()
		tok = c.grantOnce(id)
	case planexe.ToolSessionCreate, planexe.ToolSessionStop, planexe.ToolArtifactWrite:
		tok = c.write
	default:
		tok = c.read
	}
	body, err := json.Marshal(plexus.InvokeRequest{ID: id, Input: args})
	if err != nil {
		return contract.Result{}, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.td.BaseURL()+"/invoke", bytes.NewReader(body))
	if err != nil {
		return contract.Result{}, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+tok)
	res, err := c.client.Do(req)
	if err != nil {
		return contract.Result{}, err
	}
	defer res.Body.Close()
	raw, err := io.ReadAll(res.Body)
	if err != nil {
		return contract.Result{}, err
	}
	var resp plexus.InvokeResponse
	if err := json.Unmarshal(raw, &resp); err != nil {
		return contract.Result{}, fmt.Errorf("invoke %s: status %d: %s", id, res.StatusCode, raw)
	}
	if len(resp.MCPResult) == 0 {
		// Plexus refused before the server answered (a grant, a schema):
		// there is no CallToolResult to hand the suite.
		return contract.Result{}, fmt.Errorf("invoke %s: status %d: %s", id, res.StatusCode, raw)
	}
	if resp.OK == (resp.Error != nil) || (!resp.OK && resp.Error.Code != plexus.CodeMCPToolError) {
		return contract.Result{}, fmt.Errorf("invoke %s: ok %v with error %+v", id, resp.OK, resp.Error)
	}
	return contract.ResultFromRaw(resp.MCPResult)
}

// once asks for an execute grant of id for this one call and approves it
// as the owner would.
func (c *planexeCaller) grantOnce(id string) string {
	c.executeGrants.Add(1)
	return grantAllowed(c.t, c.td, c.sid, map[string]any{id: map[string]any{"decision": "allow", "verbs": []string{"execute"}}})
}

// buildPlanExe builds the PlanExe example server into a temp folder.
func buildPlanExe(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "planexe")
	build := exec.Command("go", "build", "-o", bin, "./examples/planexe/cmd/planexe")
	build.Dir = ".."
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build planexe: %v\n%s", err, out)
	}
	return bin
}

// TestMCPStreamableHTTPThroughPlexus: a server reached over Streamable HTTP
// (the PlanExe example serving on loopback), added with plexus mcp add
// --url, is listed and called through /invoke like a stdio one; stopped, it
// is unavailable and calls say so.
func TestMCPStreamableHTTPThroughPlexus(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the PlanExe server")
	}
	bin := buildPlanExe(t)
	root, addr := t.TempDir(), fmt.Sprintf("127.0.0.1:%d", freePort(t))
	// serve runs the server on addr until the returned stop.
	serve := func() (stop func()) {
		srv := exec.Command(bin, "--http", addr, "--root", root, "--delay", "5ms")
		stderr, err := srv.StderrPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := srv.Start(); err != nil {
			t.Fatal(err)
		}
		lines := bufio.NewScanner(stderr)
		for lines.Scan() && !strings.Contains(lines.Text(), "serving MCP at ") {
		}
		drained := make(chan struct{})
		go func() {
			defer close(drained)
			for lines.Scan() { // a full pipe would block the server
			}
		}()
		var once sync.Once
		stop = func() {
			once.Do(func() {
				_ = srv.Process.Kill()
				<-drained
				_ = srv.Wait()
			})
		}
		t.Cleanup(stop)
		return stop
	}
	stop := serve()

	td := startTestDaemon(t, daemon.Options{})
	e := &cliEnv{t: t, home: td.Home().Dir, addr: td.Addr(), agentHome: t.TempDir()}
	e.ok("mcp", "add", "plan", "--url", "http://"+addr+"/mcp")
	_, sid := enrolledAgent(t, td, "planner")
	create := "mcp.plan." + planexe.ToolSessionCreate
	if _, ok := manifestEntry(t, td, sid, create); !ok {
		t.Fatalf("%s is not in the manifest", create)
	}
	tok := grantAllowed(t, td, sid, map[string]any{create: map[string]any{"decision": "allow", "verbs": []string{"write"}}})
	call := func() (int, plexus.InvokeResponse, []byte) {
		return td.invoke(t, tok, plexus.InvokeRequest{ID: create, Input: map[string]any{"idea": "A bakery in Lisbon"}})
	}
	if st, resp, raw := call(); st != http.StatusOK || !resp.OK || !strings.Contains(string(resp.MCPResult), "session_id") {
		t.Fatalf("session.create over HTTP: %d %s", st, raw)
	}

	// Stopped: an HTTP server has no connection whose loss would show, so
	// the first call that cannot reach it finds out, says so, and the
	// source turns unavailable while Plexus reconnects.
	stop()
	if _, resp, raw := call(); resp.OK || resp.Error == nil || resp.Error.Code != plexus.CodeSourceUnavailable {
		t.Fatalf("a call with the server down: %s", raw)
	}
	waitFor(t, 10*time.Second, "the source to be unavailable", holds(func() bool {
		return td.Registry().SourceHealth("mcp:plan").Status == plexus.HealthUnavailable
	}))
	// Back on the same address: reconnected, and calls work again.
	serve()
	waitFor(t, 30*time.Second, "the source to be back", holds(func() bool {
		return td.Registry().SourceHealth("mcp:plan").Status == plexus.HealthOK
	}))
	if st, resp, raw := call(); !resp.OK {
		t.Fatalf("session.create after the server came back: %d %s", st, raw)
	}
}

// TestPlanExeThroughPlexus: the PlanExe example server, ingested from
// mcp.json like any MCP server, passes its whole §17 contract suite (start,
// stop and resume loops, sha256-locked writes, invalid transitions, event
// cursors, Stop → Edit → Resume recomputing only what the edit invalidated)
// when every call goes through Plexus /invoke under grants; its tools
// require the verbs the issue asks for, and no start is ever made on a
// standing grant.
func TestPlanExeThroughPlexus(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the PlanExe server")
	}
	bin := buildPlanExe(t)
	home := filepath.Join(t.TempDir(), "home")
	if err := os.MkdirAll(home, 0o700); err != nil {
		t.Fatal(err)
	}
	cfg := fmt.Sprintf(`{"mcpServers":{"planexe":{"command":%q,"args":["--root",%q,"--delay","10ms"]}}}`, bin, t.TempDir())
	if err := os.WriteFile(filepath.Join(home, "mcp.json"), []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	td := startTestDaemon(t, daemon.Options{Home: home, RateLimit: 1e6})
	_, sid := enrolledAgent(t, td, "planner")
	waitFor(t, 20*time.Second, "the PlanExe tools", holds(func() bool {
		_, ok := manifestEntry(t, td, sid, "mcp.planexe."+planexe.ToolArtifactWrite)
		return ok
	}))
	verbs := map[string]plexus.Verb{
		planexe.ToolSessionCreate: plexus.VerbWrite, planexe.ToolSessionStart: plexus.VerbExecute,
		planexe.ToolSessionStatus: plexus.VerbRead, planexe.ToolSessionStop: plexus.VerbWrite,
		planexe.ToolSessionResume: plexus.VerbExecute, planexe.ToolSessionEvents: plexus.VerbRead,
		planexe.ToolArtifactList: plexus.VerbRead, planexe.ToolArtifactRead: plexus.VerbRead,
		planexe.ToolArtifactWrite: plexus.VerbWrite,
	}
	readGrants, writeGrants := map[string]any{}, map[string]any{}
	for tool, v := range verbs {
		id := "mcp.planexe." + tool
		e, ok := manifestEntry(t, td, sid, id)
		if !ok || !slices.Equal(e.Grants, []plexus.Verb{v}) {
			t.Fatalf("%s: listed %v with grants %v, want [%s]", id, ok, e.Grants, v)
		}
		switch v {
		case plexus.VerbRead:
			readGrants[id] = "allow"
		case plexus.VerbWrite:
			writeGrants[id] = map[string]any{"decision": "allow", "verbs": []string{"write"}, "trustWindow": map[string]any{"kind": "1d"}}
		}
	}
	// An execute grant asked for as standing is still once.
	start := "mcp.planexe." + planexe.ToolSessionStart
	st, raw := td.raw(t, http.MethodPut, "/grants", session(sid), mustJSON(t, map[string]any{"grants": map[string]any{
		start: map[string]any{"decision": "allow", "verbs": []string{"execute"}, "trustWindow": map[string]any{"kind": "until-revoked"}}}}))
	var pend plexus.GrantPendingResponse
	if st != http.StatusAccepted || json.Unmarshal(raw, &pend) != nil {
		t.Fatalf("execute grant: %d %s", st, raw)
	}
	if p := approve(t, td, pend.PendingID, plexus.DecideRequest{}); p.Items[0].TrustWindow.Kind != plexus.WindowOnce {
		t.Fatalf("an approved execute grant has window %+v, want once", p.Items[0].TrustWindow)
	}

	c := &planexeCaller{t: t, td: td, sid: sid, client: &http.Client{Timeout: 30 * time.Second},
		read: grantAllowed(t, td, sid, readGrants), write: grantAllowed(t, td, sid, writeGrants)}
	contract.Run(t, c)
	if c.executeGrants.Load() == 0 {
		t.Error("the suite started no run through Plexus")
	}
	if n := len(rowsOf(t, td, "grant.used", "")); int64(n) < c.executeGrants.Load() {
		t.Errorf("%d grant.used rows for %d execute grants: every start and resume spends its own", n, c.executeGrants.Load())
	}
}
