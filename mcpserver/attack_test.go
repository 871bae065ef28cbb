package mcpserver_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/plexus-gw/plexus"
	"github.com/plexus-gw/plexus/gateway"
	"github.com/plexus-gw/plexus/mcpserver"
)

// The attacks of the threat model on the MCP front door, each against the
// real gateway behind the real loopback server.

const initializeBody = `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"intruder","version":"1"}}}`

// post sends body to /mcp as an MCP host would, with the headers given.
func (f *fixture) post(body string, header map[string]string) (*http.Response, string) {
	f.t.Helper()
	req, err := http.NewRequest(http.MethodPost, f.url, strings.NewReader(body))
	if err != nil {
		f.t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	for k, v := range header {
		if k == "Host" {
			req.Host = v
			continue
		}
		req.Header.Set(k, v)
	}
	resp, err := (&http.Client{Transport: f.hosts}).Do(req)
	if err != nil {
		f.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		f.t.Fatal(err)
	}
	return resp, string(b)
}

// TestAttackNoOrBadBearer: without a bearer, with a PAT that is not one,
// and with a revoked agent's PAT, /mcp answers 401 with the Bearer
// challenge, opens no session and journals no call; the answer never
// echoes the credential.
func TestAttackNoOrBadBearer(t *testing.T) {
	f := newFixture(t, mcpserver.Options{})
	revoked := f.agent("gone")
	if _, err := f.gw.RevokeAgent(context.Background(), gateway.Credentials{ConnectionKey: f.home.ConnectionKey},
		plexus.AgentRevokeRequest{AgentID: "gone"}); err != nil {
		t.Fatal(err)
	}
	for name, auth := range map[string]string{
		"NoBearer":   "",
		"Basic":      "Basic dXNlcjpwYXNz",
		"WrongPAT":   "Bearer plx_agent_0123456789abcdef0123456789abcdef",
		"NotAPAT":    "Bearer plx_live_0123456789abcdef0123456789abcdef",
		"RevokedPAT": "Bearer " + revoked,
	} {
		t.Run(name, func(t *testing.T) {
			bodies := []string{initializeBody}
			if !strings.HasPrefix(auth, "Bearer ") {
				// No bearer at all is refused whatever the request.
				bodies = append(bodies, `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"portal__docs__read","arguments":{"path":"hello.txt"}}}`)
			}
			for _, body := range bodies {
				resp, got := f.post(body, map[string]string{"Authorization": auth})
				if resp.StatusCode != http.StatusUnauthorized || resp.Header.Get("WWW-Authenticate") != "Bearer" {
					t.Fatalf("status %d, WWW-Authenticate %q (%s), want 401 with Bearer", resp.StatusCode, resp.Header.Get("WWW-Authenticate"), got)
				}
				if secret := strings.TrimPrefix(auth, "Bearer "); secret != "" && strings.Contains(got, secret) {
					t.Errorf("the answer echoes the credential: %s", got)
				}
			}
		})
	}
	if n := len(f.rows("session.opened")); n != 0 {
		t.Errorf("session.opened rows = %d, want none", n)
	}
	for _, a := range f.actions() {
		if strings.HasPrefix(a, "invoke.") {
			t.Errorf("journaled %s: a call was made", a)
		}
	}
}

// TestAttackRevokedWhileConnected: an agent revoked while its host is
// connected: its next call runs nothing, its session is then unknown, and
// a new initialize with its PAT is refused 401.
func TestAttackRevokedWhileConnected(t *testing.T) {
	f := newFixture(t, mcpserver.Options{})
	pat := f.agent("claude")
	resp, body := f.post(initializeBody, map[string]string{"Authorization": "Bearer " + pat})
	sid := resp.Header.Get("Mcp-Session-Id")
	if resp.StatusCode != http.StatusOK || sid == "" {
		t.Fatalf("initialize: %d %s", resp.StatusCode, body)
	}
	hdr := map[string]string{"Authorization": "Bearer " + pat, "Mcp-Session-Id": sid, "Mcp-Protocol-Version": "2025-11-25"}
	f.post(`{"jsonrpc":"2.0","method":"notifications/initialized"}`, hdr)
	if _, err := f.gw.RevokeAgent(context.Background(), gateway.Credentials{ConnectionKey: f.home.ConnectionKey},
		plexus.AgentRevokeRequest{AgentID: "claude"}); err != nil {
		t.Fatal(err)
	}
	call := `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"portal__docs__read","arguments":{"path":"hello.txt"}}}`
	if _, body := f.post(call, hdr); !strings.Contains(body, "session ended") || strings.Contains(body, "hello from the portal") {
		t.Fatalf("call after revocation: %s, want the session-ended error", body)
	}
	if resp, body := f.post(call, hdr); resp.StatusCode != http.StatusNotFound {
		t.Fatalf("next request: %d %s, want 404 (start over)", resp.StatusCode, body)
	}
	if resp, body := f.post(initializeBody, map[string]string{"Authorization": "Bearer " + pat}); resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("initialize after revocation: %d %s, want 401", resp.StatusCode, body)
	}
	for _, a := range f.actions() {
		if strings.HasPrefix(a, "invoke.") {
			t.Errorf("journaled %s: a revoked agent's call ran", a)
		}
	}
}

// TestAttackForeignHostOrOrigin: a DNS-rebinding page's Host, or a foreign
// Origin, is refused before any credential is looked at, even with a valid
// PAT.
func TestAttackForeignHostOrOrigin(t *testing.T) {
	f := newFixture(t, mcpserver.Options{})
	pat := f.agent("claude")
	for name, h := range map[string]map[string]string{
		"RebindHost":      {"Host": "attacker.example:" + port(f.url)},
		"LoopbackAlias":   {"Host": "127.0.0.1.nip.io:" + port(f.url)},
		"ForeignOrigin":   {"Origin": "https://attacker.example"},
		"ForeignNoBearer": {"Origin": "http://localhost:1"},
	} {
		t.Run(name, func(t *testing.T) {
			if name != "ForeignNoBearer" {
				h["Authorization"] = "Bearer " + pat
			}
			resp, body := f.post(initializeBody, h)
			if resp.StatusCode != http.StatusForbidden || !strings.Contains(body, string(plexus.CodeHostForbidden)) {
				t.Fatalf("status %d (%s), want 403 host_forbidden", resp.StatusCode, body)
			}
		})
	}
	if n := len(f.rows("session.opened")); n != 0 {
		t.Errorf("session.opened rows = %d, want none: the guard runs first", n)
	}
}

// TestAttackSessionOfAnotherAgent: one agent's MCP session id presented
// with another agent's PAT reaches nothing: it is answered as an unknown
// session, and the session's owner still uses it.
func TestAttackSessionOfAnotherAgent(t *testing.T) {
	f := newFixture(t, mcpserver.Options{})
	alice, mallory := f.agent("alice"), f.agent("mallory")
	resp, body := f.post(initializeBody, map[string]string{"Authorization": "Bearer " + alice})
	sid := resp.Header.Get("Mcp-Session-Id")
	if resp.StatusCode != http.StatusOK || sid == "" {
		t.Fatalf("initialize: %d %s, no session id", resp.StatusCode, body)
	}
	call := `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"portal__docs__read","arguments":{"path":"hello.txt"}}}`
	hdr := map[string]string{"Mcp-Session-Id": sid, "Mcp-Protocol-Version": "2025-11-25"}
	hdr["Authorization"] = "Bearer " + mallory
	if resp, body := f.post(call, hdr); resp.StatusCode != http.StatusNotFound {
		t.Fatalf("mallory's PAT on alice's session: %d %s, want 404", resp.StatusCode, body)
	}
	if n := len(f.rows("invoke.ok")); n != 0 {
		t.Fatalf("invoke.ok rows = %d: mallory's request ran", n)
	}
	hdr["Authorization"] = "Bearer " + alice
	f.post(`{"jsonrpc":"2.0","method":"notifications/initialized"}`, hdr)
	if resp, body := f.post(call, hdr); resp.StatusCode != http.StatusOK || !strings.Contains(body, "hello from the portal") {
		t.Fatalf("alice's own call: %d %s", resp.StatusCode, body)
	}
}

// TestAttackUnknownTool: a tool name outside the agent's view is a
// protocol error, and nothing is asked or invoked.
func TestAttackUnknownTool(t *testing.T) {
	f := newFixture(t, mcpserver.Options{})
	cs := f.connect(f.agent("claude"), "claude-code", nil)
	for _, name := range []string{"portal.docs.read", "portal__docs__secret", "../portal__docs__read", mcpserver.ToolName("mcp.other.tool")} {
		_, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: name, Arguments: map[string]any{}})
		if err == nil || !strings.Contains(err.Error(), "unknown tool") {
			t.Errorf("call %q: %v, want unknown tool", name, err)
		}
	}
	for _, a := range f.actions() {
		if strings.HasPrefix(a, "invoke.") || strings.HasPrefix(a, "grant.") {
			t.Errorf("journaled %s for a tool outside the view", a)
		}
	}
}

// TestAttackSecretsStayOut: the PAT, the minted tokens and a call's raw
// input reach neither the logs (at debug level) nor the journal.
func TestAttackSecretsStayOut(t *testing.T) {
	f := newFixture(t, mcpserver.Options{})
	pat := f.agent("claude", standing("portal.docs.write", plexus.VerbWrite))
	cs := f.connect(pat, "claude-code", nil)
	const canary = "CANARY-7f3a-input-must-not-leak"
	if res := call(t, cs, "portal__docs__write", map[string]any{"path": "c.txt", "content": canary}); res.IsError {
		t.Fatalf("write: %q", text(res))
	}
	if _, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "mcp__up__count", Arguments: map[string]any{"n": 1, "note": canary}}); err != nil {
		t.Fatal(err)
	}
	rows, err := json.Marshal(f.rowsAll())
	if err != nil {
		t.Fatal(err)
	}
	for name, hay := range map[string][]byte{"journal": rows, "log": []byte(f.logs.String())} {
		for _, secret := range []string{pat, canary, "eyJ"} {
			if bytes.Contains(hay, []byte(secret)) {
				t.Errorf("the %s holds a secret (%.12s…)", name, secret)
			}
		}
	}
}

func port(url string) string {
	hostport := strings.TrimPrefix(strings.TrimSuffix(url, "/mcp"), "http://")
	return hostport[strings.LastIndex(hostport, ":")+1:]
}
