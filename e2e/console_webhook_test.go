package e2e

// The owner's notify webhook (auth-config.json "notifyWebhook") against
// the real daemon: a decision put up is POSTed to the owner's receiver.

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/plexus-gw/plexus"
	"github.com/plexus-gw/plexus/auth"
	"github.com/plexus-gw/plexus/daemon"
	"github.com/plexus-gw/plexus/scaffold"
)

func TestNotifyWebhook(t *testing.T) {
	posts := make(chan map[string]any, 4)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, err := io.ReadAll(r.Body)
		var m map[string]any
		if err != nil || json.Unmarshal(b, &m) != nil {
			t.Errorf("webhook body %q: %v", b, err)
		}
		m["raw"] = string(b)
		posts <- m
	}))
	t.Cleanup(srv.Close)

	home := filepath.Join(t.TempDir(), "home")
	if _, err := scaffold.Init(home, scaffold.InitOptions{NewConnectionKey: auth.NewConnectionKey}); err != nil {
		t.Fatal(err)
	}
	cfg := `{"tokenLifetimeMs": 900000, "maxTrustWindowMs": 2592000000, "notifyWebhook": {"url": "` + srv.URL + `/hook", "topic": "my-plexus"}}`
	if err := os.WriteFile(filepath.Join(home, scaffold.FileAuthConfig), []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	td := startTestDaemon(t, daemon.Options{Home: home})
	addPortal(t, td, "notes")
	pat, sid := enrolledAgent(t, td, "claude")
	e := &consoleEnv{td: td, pat: pat, sid: sid}
	pid := e.ask(t, "portal.notes.write")

	var m map[string]any
	select {
	case m = <-posts:
	case <-time.After(20 * time.Second):
		t.Fatal("no webhook POST for the decision put up")
	}
	if m["topic"] != "my-plexus" || m["pendingId"] != pid || m["file"] != filepath.Join(home, plexus.FolderInbox, pid+".md") ||
		!strings.HasSuffix(m["message"].(string), "("+pid+")") {
		t.Errorf("webhook body = %v", m)
	}
	for _, secret := range []string{td.key, pat, plexus.PrefixPAT, plexus.PrefixConnectionKey} {
		if strings.Contains(m["raw"].(string), secret) {
			t.Errorf("the webhook body carries a secret (%.12s…): %s", secret, m["raw"])
		}
	}
}
