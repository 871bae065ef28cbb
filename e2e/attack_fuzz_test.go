package e2e

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/plexus-gw/plexus"
	"github.com/plexus-gw/plexus/daemon"
	"github.com/plexus-gw/plexus/journal"
)

// tokenTwins returns the three other spellings of tok's signature that a
// lenient base64url decoder reads as the same bytes: an HS256 signature is
// 32 bytes in 43 characters, so the last character's two low bits are
// unused.
func tokenTwins(t *testing.T, tok string) []string {
	t.Helper()
	const alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
	if dot := strings.LastIndexByte(tok, '.'); len(tok)-dot-1 != 43 {
		t.Fatalf("signature of %q is not 43 characters", tok)
	}
	v := strings.IndexByte(alphabet, tok[len(tok)-1])
	var out []string
	for _, low := range []int{1, 2, 3} {
		out = append(out, tok[:len(tok)-1]+string(alphabet[v^low]))
	}
	return out
}

// TestAttackTokenTwins (issue 12 §7, found by auth.FuzzVerify): an agent
// re-spells its token's last signature character. The twin used to verify
// as the same token, a second spelling of one credential for anything
// keyed by the token string; now each twin is token_revoked on /invoke and
// /grants/refresh, nothing dispatches, and the minted token keeps working.
func TestAttackTokenTwins(t *testing.T) {
	td := startTestDaemon(t, daemon.Options{})
	addEcho(t, td, "test", "")
	_, sid := enrolledAgent(t, td, "alice")
	tok := grantOK(t, td, sid, map[string]any{"test.echo.read": "allow"})
	before := len(td.activity(t, journal.Filter{Type: "invoke.ok"}))

	for _, twin := range tokenTwins(t, tok.Token) {
		st, _, raw := td.invoke(t, twin, plexus.InvokeRequest{ID: "test.echo.read", Input: map[string]any{"msg": "x"}})
		wantDenial(t, td, st, raw, http.StatusUnauthorized, "test.echo.read", plexus.CodeTokenRevoked, false)
		st, raw = td.raw(t, http.MethodPost, "/grants/refresh", bearer(twin), mustJSON(t, plexus.RefreshRequest{SessionID: sid, JTI: tok.JTI}))
		wantEnvelope(t, st, raw, http.StatusUnauthorized, plexus.CodeTokenRevoked)
	}
	if got := len(td.activity(t, journal.Filter{Type: "invoke.ok"})); got != before {
		t.Errorf("a twin dispatched: %d invoke.ok rows, want %d", got, before)
	}
	if st, resp, _ := td.invoke(t, tok.Token, plexus.InvokeRequest{ID: "test.echo.read", Input: map[string]any{"msg": "ok"}}); !resp.OK {
		t.Errorf("the minted token stopped working: status %d, %+v", st, resp.Error)
	}
}

// TestAttackMCPProblemRepeated (issue 12 §7, found by FuzzMCPConfig): a
// server entry with several faults was reported with whichever fault map
// order met first, so every reload of mcp.json (any edit, to any server)
// journaled and logged the same broken server again as a "new" problem.
// Now the same entry names the same fault: across eight reloads, each
// proven by a fresh probe server's own row, the broken server has one row.
func TestAttackMCPProblemRepeated(t *testing.T) {
	td := startTestDaemon(t, daemon.Options{})
	path := filepath.Join(td.Home().Dir, "mcp.json")
	for i := range 8 {
		cfg := fmt.Sprintf(`{"mcpServers": {
			"bad": {"command": "x", "env": {"1a": "v", "2b": "v", "3c": "v", "4d": "v", "5e": "v"}},
			"probe%d": {"command": "./relative"}}}`, i)
		if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
			t.Fatal(err)
		}
		probe := fmt.Sprintf("mcp:probe%d", i)
		waitFor(t, 10*time.Second, "the reload that reports "+probe, holds(func() bool {
			return len(rowsOf(t, td, "mcp.server_failed", probe)) == 1
		}))
	}
	if rows := rowsOf(t, td, "mcp.server_failed", "mcp:bad"); len(rows) != 1 {
		for _, r := range rows {
			t.Logf("row: %+v", r)
		}
		t.Errorf("the unchanged broken server was reported %d times over 8 reloads, want once", len(rows))
	}
}

// TestAttackManifestRefusalStable (issue 12 §7, found by FuzzManifest): a
// manifest whose input schema breaks several metaschema rules was refused
// in words that changed from one try to the next (the schema library's map
// order). The owner's POST /admin/api/extensions now gets the same refusal
// every time, and nothing is registered.
func TestAttackManifestRefusalStable(t *testing.T) {
	td := startTestDaemon(t, daemon.Options{})
	manifest := json.RawMessage(`{"manifest": "plexus-extension/0.1", "source": "wobble", "label": "Wobble", "transport": "cli",
		"capabilities": [{"name": "wobble.run", "kind": "capability", "label": "Run", "describe": "Runs.", "grants": ["read"],
		"route": {"bin": "true"},
		"io": {"input": {"type": "", "required": ["a", "a"], "properties": {"x": {"type": 1}, "y": {"minimum": "z"}}}}}]}`)
	var first string
	for i := range 10 {
		st, raw := td.raw(t, http.MethodPost, "/admin/api/extensions", td.admin(), mustJSON(t, map[string]any{"manifest": manifest}))
		var env plexus.ErrorResponse
		if err := json.Unmarshal(raw, &env); err != nil || env.Error == nil || st != http.StatusBadRequest {
			t.Fatalf("try %d: status %d, %s", i, st, raw)
		}
		if i == 0 {
			first = env.Error.Message
		} else if env.Error.Message != first {
			t.Fatalf("try %d was refused in other words:\n%s\n%s", i, first, env.Error.Message)
		}
	}
	var list struct {
		Sources []struct{ ID string } `json:"sources"`
	}
	if st := td.call(t, http.MethodGet, "/admin/api/sources", td.admin(), nil, &list); st != http.StatusOK {
		t.Fatalf("GET /admin/api/sources: %d", st)
	}
	for _, s := range list.Sources {
		if s.ID == "wobble" {
			t.Errorf("the refused manifest was registered")
		}
	}
}
