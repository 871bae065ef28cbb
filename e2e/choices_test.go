package e2e

import (
	"encoding/json"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/plexus-gw/plexus"
	"github.com/plexus-gw/plexus/daemon"
)

// TestChoicesQuotes: the refusals docs/choices.md quotes are the daemon's
// own words, each produced here by the real daemon and looked up, in
// double quotes, in the document.
func TestChoicesQuotes(t *testing.T) {
	doc, err := os.ReadFile(filepath.Join("..", "docs", "choices.md"))
	if err != nil {
		t.Fatal(err)
	}
	quoted := func(t *testing.T, text string) {
		t.Helper()
		if !containsQuote(string(doc), text) {
			t.Errorf("docs/choices.md does not quote the daemon's text %q", text)
		}
	}
	td := startTestDaemon(t, daemon.Options{Authorizer: autoApprove{}})
	addPortal(t, td, "notes")
	_, sid := enrolledAgent(t, td, "claude")

	t.Run("BareAllow", func(t *testing.T) {
		st, raw := td.raw(t, http.MethodPut, "/grants", session(sid), mustJSON(t, map[string]any{"grants": map[string]any{"portal.notes.write": "allow"}}))
		body := wantEnvelope(t, st, raw, 401, plexus.CodeGrantRequired)
		var detail struct {
			Declined []plexus.Declined `json:"declined"`
		}
		b, err := json.Marshal(body.Detail)
		if err == nil {
			err = json.Unmarshal(b, &detail)
		}
		if err != nil || len(detail.Declined) != 1 {
			t.Fatalf("declined = %+v (%v)", detail.Declined, err)
		}
		quoted(t, detail.Declined[0].Reason)
	})
	t.Run("SecretNotSet", func(t *testing.T) {
		// The notes-rest example, its service stood in for by a server that
		// answers anything, and its secret never set.
		srv := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
		t.Cleanup(srv.Close)
		_, port, err := net.SplitHostPort(srv.Listener.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		var m map[string]any
		b, err := os.ReadFile(filepath.Join("..", "examples", "extensions", "notes-rest.json"))
		if err == nil {
			err = json.Unmarshal(b, &m)
		}
		if err != nil {
			t.Fatal(err)
		}
		m["serviceHint"].(map[string]any)["defaultPort"], _ = strconv.Atoi(port)
		e := &cliEnv{t: t, home: td.Home().Dir, addr: td.Addr(), agentHome: t.TempDir()}
		e.ok("ext", "add", writeManifest(t, m))
		tok := grantOK(t, td, sid, map[string]any{"notes-rest.vault.search": "allow"})
		_, resp, raw := td.invoke(t, tok.Token, plexus.InvokeRequest{ID: "notes-rest.vault.search", Input: map[string]any{"query": "x"}})
		if resp.Error == nil || resp.Error.Code != plexus.CodeTransportError {
			t.Fatalf("invoke without the secret: %s", raw)
		}
		quoted(t, resp.Error.Message)
	})
}

// containsQuote reports whether doc holds text between double quotes, a
// line break in the document counting as a space.
func containsQuote(doc, text string) bool {
	return strings.Contains(strings.Join(strings.Fields(doc), " "), `"`+text+`"`)
}
