package e2e

import (
	"bytes"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/plexus-gw/plexus"
	"github.com/plexus-gw/plexus/daemon"
	"github.com/plexus-gw/plexus/internal/oauthtest"
	"github.com/plexus-gw/plexus/journal"
)

// sealedPrefix starts a sign-in stored sealed under the token-key.
const sealedPrefix = "plexus-sealed:v1:"

// TestMCPOAuthTokenKey is the owner's story of the sealed sign-in on the
// daemon as wired: after plexus mcp login, secrets/oauth.fx is sealed and
// shows no token, code or client secret; a restart opens it and fx
// connects with no new sign-in and no token request; a restart after
// token-key was lost makes a new key (0600) and fx needs sign-in saying
// why, once, with nothing sent to the fixture meanwhile; signing in again
// works and is sealed under the new key.
func TestMCPOAuthTokenKey(t *testing.T) {
	o := newOAuthEnv(t)
	o.waitNeedsSignIn()
	run, code, page := o.login()
	if run.code != exitOK {
		t.Fatalf("%s\ncallback page: %s", run, page)
	}
	home := o.td.Home().Dir
	secrets := map[string]string{"authorization code": code, "client secret": clientSecretCanary}
	for i, v := range o.fx.Issued() {
		secrets["token "+string(rune('a'+i))] = v
	}
	checkSealedFile(t, home, secrets)
	keyPath := filepath.Join(home, "token-key")
	oldKey, err := os.ReadFile(keyPath)
	if err != nil {
		t.Fatal(err)
	}

	t.Run("RestartOpensIt", func(t *testing.T) {
		tokens := o.fx.Count(oauthtest.EndpointToken)
		o.restart()
		o.waitConnected()
		if got := o.fx.Count(oauthtest.EndpointToken); got != tokens {
			t.Errorf("token requests went %d → %d across the restart, want none", tokens, got)
		}
	})

	t.Run("KeyLost", func(t *testing.T) {
		o.td.stop()
		blob, err := os.ReadFile(filepath.Join(home, "secrets", "oauth.fx"))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.Remove(keyPath); err != nil {
			t.Fatal(err)
		}
		tokens, before := o.fx.Count(oauthtest.EndpointToken), o.signInReasons()
		o.restart()
		newKey, err := os.ReadFile(keyPath)
		fi, statErr := os.Stat(keyPath)
		if err != nil || statErr != nil || fi.Mode().Perm() != 0o600 || bytes.Equal(newKey, oldKey) {
			t.Fatalf("token-key after the restart: %v %v mode %v; want a new key, 0600", err, statErr, fi)
		}
		o.waitNeedsSignIn()
		quietFixture(t, o.fx)
		if got := o.fx.Count(oauthtest.EndpointToken); got != tokens {
			t.Errorf("token requests went %d → %d, want none: the old refresh token could not be read", tokens, got)
		}
		reasons := o.signInReasons()[len(before):]
		want := "the stored tokens could not be opened (token-key changed?)"
		if len(reasons) != 1 || reasons[0] != want {
			t.Errorf("sign-in requests' reasons since the restart = %q, want one %q", reasons, want)
		}
		checkNoSecret(t, "the daemon's log", o.logs.Bytes(), map[string]string{"sealed blob": string(blob[len(sealedPrefix) : len(sealedPrefix)+24])}, http.StatusOK)

		if run, _, page := o.login(); run.code != exitOK {
			t.Fatalf("%s\ncallback page: %s", run, page)
		}
		o.waitConnected()
		for i, v := range o.fx.Issued() {
			secrets["new token "+string(rune('a'+i))] = v
		}
		checkSealedFile(t, home, secrets)
	})
}

// restart stops the daemon and starts another on the same home, logging
// to the same buffer; the command line follows it.
func (o *oauthEnv) restart() {
	o.t.Helper()
	o.td.stop()
	o.td = startTestDaemon(o.t, daemon.Options{Home: o.td.Home().Dir,
		Logger: slog.New(slog.NewJSONHandler(o.logs, &slog.HandlerOptions{Level: slog.LevelDebug}))})
	o.e = &cliEnv{t: o.t, home: o.e.home, addr: o.td.Addr(), agentHome: o.e.agentHome}
}

// signInReasons are the reasons of fx's sign-in requests journaled so far.
func (o *oauthEnv) signInReasons() []string {
	var out []string
	for _, r := range o.td.activity(o.t, journal.Filter{Type: "signin.requested"}) {
		if r.Payload["server"] == "fx" {
			reason, _ := r.Payload["reason"].(string)
			out = append(out, reason)
		}
	}
	return out
}

// waitConnected waits until mcp list shows fx connected.
func (o *oauthEnv) waitConnected() {
	o.t.Helper()
	waitFor(o.t, 20*time.Second, "fx connected", holds(func() bool {
		it := o.item()
		return it.Source != nil && it.Source.Health.Status == plexus.HealthOK && !it.Source.Health.NeedsSignIn
	}))
}

// checkSealedFile checks that secrets/oauth.fx is sealed and holds none of
// secrets.
func checkSealedFile(t *testing.T, home string, secrets map[string]string) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(home, "secrets", "oauth.fx"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(string(b), sealedPrefix) {
		t.Errorf("secrets/oauth.fx starts %.20q, want %q", b, sealedPrefix)
	}
	checkNoSecret(t, "secrets/oauth.fx", b, secrets, http.StatusOK)
}
