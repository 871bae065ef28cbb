package oauth_test

import (
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/plexus-gw/plexus/internal/oauthtest"
	"github.com/plexus-gw/plexus/internal/plexustest"
	"github.com/plexus-gw/plexus/oauth"
	"github.com/plexus-gw/plexus/platform"
)

const sealPrefix = "plexus-sealed:v1:"

// unopened is the reason a sign-in that does not open is asked for.
const unopened = "the stored tokens could not be opened (token-key changed?)"

// TestSealedStore: what goes through the sealing store lands in its
// secrets/ file sealed, opens only with its key and under its own name,
// and a blob changed on disk is refused, never quoted.
func TestSealedStore(t *testing.T) {
	const canary = `{"token":{"access_token":"AT-CANARY-51f0","refresh_token":"RT-CANARY-9c2e"},"client_secret":"CS-CANARY-77aa"}`
	home := plexustest.TempHome(t)
	plain := platform.New(platform.Options{Home: home.Dir})
	st, err := oauth.NewSealedStore(plain, home.TokenKey)
	if err != nil {
		t.Fatal(err)
	}
	file := func(name string) string { return filepath.Join(home.Dir, "secrets", name) }
	if err := st.SetSecret("oauth.a", []byte(canary)); err != nil {
		t.Fatal(err)
	}
	onDisk, err := os.ReadFile(file("oauth.a"))
	if err != nil {
		t.Fatal(err)
	}
	t.Run("RoundTrip", func(t *testing.T) {
		if got, err := st.Secret("oauth.a"); err != nil || got != canary {
			t.Fatalf("Secret = %q, %v; want the value stored", got, err)
		}
		if !strings.HasPrefix(string(onDisk), sealPrefix) {
			t.Errorf("the file starts %.20q, want %q", onDisk, sealPrefix)
		}
		for _, c := range []string{"AT-CANARY", "RT-CANARY", "CS-CANARY", "token", "{"} {
			if strings.Contains(string(onDisk), c) {
				t.Errorf("the sealed file shows %q", c)
			}
		}
		if fi, err := os.Stat(file("oauth.a")); err != nil || fi.Mode().Perm() != 0o600 {
			t.Errorf("the sealed file: %v, mode %v; want 0600", err, fi)
		}
		// A fresh nonce per write: the same value never seals the same.
		if err := st.SetSecret("oauth.a", []byte(canary)); err != nil {
			t.Fatal(err)
		}
		if again, _ := os.ReadFile(file("oauth.a")); string(again) == string(onDisk) {
			t.Errorf("sealing the same value twice wrote the same bytes")
		}
	})
	t.Run("Legacy", func(t *testing.T) {
		if err := plain.SetSecret("oauth.old", []byte(canary)); err != nil {
			t.Fatal(err)
		}
		if got, err := st.Secret("oauth.old"); err != nil || got != canary {
			t.Errorf("a plain blob from before sealing: Secret = %q, %v; want it as it is", got, err)
		}
	})
	body := strings.TrimSuffix(strings.TrimPrefix(string(onDisk), sealPrefix), "\n")
	raw, err := base64.StdEncoding.DecodeString(body)
	if err != nil {
		t.Fatal(err)
	}
	flipped := append([]byte(nil), raw...)
	flipped[len(flipped)/2] ^= 1
	other := make([]byte, 32)
	if _, err := rand.Read(other); err != nil {
		t.Fatal(err)
	}
	otherKey, err := oauth.NewSealedStore(plain, other)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name  string
		file  string // what is written to secrets/oauth.b
		store oauth.Store
		want  string
	}{
		{"ErrMovedToAnotherName", string(onDisk), st, unopened},
		{"ErrTampered", sealPrefix + base64.StdEncoding.EncodeToString(flipped), st, unopened},
		{"ErrTruncated", sealPrefix + base64.StdEncoding.EncodeToString(raw[:20]), st, unopened},
		{"ErrNotBase64", sealPrefix + "!!" + body, st, unopened},
		{"ErrOtherKey", string(onDisk), otherKey, unopened},
		{"ErrNewerFormat", "plexus-sealed:v2:" + body, st, "sealed in a format this Plexus does not know"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			name := "oauth.b"
			if tc.name == "ErrOtherKey" {
				name = "oauth.a" // its own name: only the key differs
			} else if err := os.WriteFile(file(name), []byte(tc.file), 0o600); err != nil {
				t.Fatal(err)
			}
			got, err := tc.store.Secret(name)
			if err == nil || !strings.Contains(err.Error(), tc.want) || got != "" {
				t.Fatalf("Secret = %q, %v; want no value and %q", got, err, tc.want)
			}
			if strings.Contains(err.Error(), body[:16]) || strings.Contains(err.Error(), "CANARY") {
				t.Errorf("the error quotes the blob: %v", err)
			}
		})
	}
	t.Run("ErrKeySize", func(t *testing.T) {
		if _, err := oauth.NewSealedStore(plain, other[:16]); err == nil {
			t.Errorf("a 16-byte key was taken")
		}
	})
}

// TestSealedSignIn: a sign-in is stored sealed, with nothing of its
// tokens or its client's secret in the file, and a restarted Manager
// (the same token-key) opens it and uses it without a new sign-in.
func TestSealedSignIn(t *testing.T) {
	h := newHarness(t, oauthtest.Options{})
	h.handler(oauth.Config{})
	h.login()
	blob := h.stored()
	checkSealed(t, h, blob)
	h.newManager() // a restart
	if _, err := h.connect(h.handler(oauth.Config{})); err != nil {
		t.Fatalf("connect after a restart: %v", err)
	}
	if got := h.as.Count(oauthtest.EndpointToken); got != 1 {
		t.Errorf("token requests = %d, want 1 (the login's exchange)", got)
	}
}

// checkSealed checks that the stored file of the harness's server is
// sealed and shows none of blob's secrets.
func checkSealed(t *testing.T, h *harness, blob map[string]any) {
	t.Helper()
	secrets := []string{tokenOf(blob, "access_token"), tokenOf(blob, "refresh_token")}
	if s, ok := blob["client_secret"].(string); ok {
		secrets = append(secrets, s)
	}
	raw := h.raw(server)
	if !strings.HasPrefix(raw, sealPrefix) {
		t.Errorf("the stored file starts %.20q, want %q", raw, sealPrefix)
	}
	for _, s := range secrets {
		if s == "" {
			t.Fatalf("the sign-in lacks a secret to look for: %v", blob)
		}
		if strings.Contains(raw, s) {
			t.Errorf("the stored file holds a secret (%.6s…)", s)
		}
	}
}

// TestLegacySignInSealedOnWrite: a sign-in the last release stored plain
// is used as it is, and is sealed when it is next written (here by a
// refresh).
func TestLegacySignInSealedOnWrite(t *testing.T) {
	h := newHarness(t, oauthtest.Options{})
	h.handler(oauth.Config{})
	h.login()
	v, err := h.sealed().Secret(oauth.SecretName(server))
	if err != nil {
		t.Fatal(err)
	}
	if err := h.store.SetSecret(oauth.SecretName(server), []byte(v)); err != nil { // as the last release wrote it
		t.Fatal(err)
	}
	h.newManager()
	oh := h.handler(oauth.Config{})
	if _, err := h.connect(oh); err != nil {
		t.Fatalf("connect on the plain sign-in: %v", err)
	}
	if raw := h.raw(server); raw != v+"\n" {
		t.Fatalf("reading the plain sign-in rewrote it")
	}
	h.clock.Advance(2 * time.Hour) // the token expired: the next call refreshes
	h.as.SetTokenLifetime(24 * time.Hour)
	if _, err := h.connect(oh); err != nil {
		t.Fatalf("connect after expiry: %v", err)
	}
	if got := h.as.Count(oauthtest.EndpointToken); got != 2 {
		t.Fatalf("token requests = %d, want 2 (the exchange and the refresh)", got)
	}
	blob := h.stored()
	checkSealed(t, h, blob)
	if tokenOf(blob, "access_token") == tokenOf(mustJSON(t, v), "access_token") {
		t.Errorf("the stored sign-in holds the old token after the refresh")
	}
}

// TestUnopenedSignIn: a stored sign-in that does not open (the token-key
// replaced, the file changed, a blob moved from another server's name, a
// file that is not a sign-in at all) is no sign-in: the server needs one, said once with the reason, no token
// request is made and nothing loops; the error and the log never quote
// the blob. Signing in again stores a sealed sign-in that opens.
func TestUnopenedSignIn(t *testing.T) {
	for _, tc := range []struct {
		name  string
		spoil func(h *harness) string // returns the server whose sign-in no longer opens
		why   string                  // the reason the sign-in request gives ("": unopened)
	}{
		{"KeyReplaced", func(h *harness) string {
			h.key = make([]byte, 32)
			if _, err := rand.Read(h.key); err != nil {
				h.t.Fatal(err)
			}
			return server
		}, ""},
		{"Tampered", func(h *harness) string {
			raw := []byte(strings.TrimSuffix(h.raw(server), "\n"))
			raw[len(raw)-5] ^= 1 // another base64 letter: the tag no longer verifies
			writeRaw(h, server, raw)
			return server
		}, ""},
		{"MovedFromAnotherName", func(h *harness) string {
			writeRaw(h, "twin", []byte(h.raw(server))) // twin has the same URL: only the name tells them apart
			return "twin"
		}, ""},
		{"NotJSON", func(h *harness) string {
			writeRaw(h, server, []byte("plexus-sealed-ish: not a sign-in\n")) // neither sealed nor JSON
			return server
		}, "the stored sign-in is not valid JSON"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, oauthtest.Options{})
			h.handler(oauth.Config{})
			h.login()
			before := h.raw(server)
			name, why := tc.spoil(h), tc.why
			if why == "" {
				why = unopened
			}
			h.newManager()
			oh := h.m.Handler(name, h.as.URL, oauth.Config{})
			for i := range 3 {
				_, err := h.connect(oh)
				if !errors.Is(err, oauth.ErrNeedsSignIn) || !strings.Contains(err.Error(), why+"; run: plexus mcp login "+name) {
					t.Fatalf("connect %d: err = %v, want ErrNeedsSignIn saying %q", i, err, why)
				}
				if strings.Contains(err.Error(), before[len(sealPrefix):len(sealPrefix)+16]) {
					t.Errorf("the error quotes the blob: %v", err)
				}
			}
			if got := h.as.Count(oauthtest.EndpointToken); got != 1 {
				t.Errorf("token requests = %d, want 1 (the first login's exchange)", got)
			}
			needs := h.needsRequests()
			if len(needs) != 1 || needs[0].Server != name || needs[0].Reason != why {
				t.Errorf("sign-in requests = %+v, want one for %s saying %q", needs, name, why)
			}
			if needs, detail := h.m.State(name); !needs || detail != why {
				t.Errorf("State = %v %q, want needs sign-in, %q", needs, detail, why)
			}
			if logs := h.logs.String(); strings.Contains(logs, before[len(sealPrefix):len(sealPrefix)+16]) || !strings.Contains(logs, "cannot be used") {
				t.Errorf("the log quotes the blob or does not say it cannot be used:\n%s", logs)
			}

			flow, err := h.m.Login(t.Context(), name)
			if err != nil {
				t.Fatalf("Login: %v", err)
			}
			if status, _ := oauthtest.Browse(t, flow.URL); status != 200 {
				t.Fatalf("callback answered %d", status)
			}
			if err := <-flow.Done; err != nil {
				t.Fatalf("flow: %v", err)
			}
			if _, err := h.connect(oh); err != nil {
				t.Fatalf("connect after signing in again: %v", err)
			}
			if _, err := h.sealed().Secret(oauth.SecretName(name)); err != nil {
				t.Errorf("the new sign-in does not open with the key in use: %v", err)
			}
		})
	}
}

// writeRaw writes a server's stored sign-in file as is, 0600.
func writeRaw(h *harness, name string, b []byte) {
	h.t.Helper()
	if err := os.WriteFile(filepath.Join(h.home, "secrets", oauth.SecretName(name)), b, 0o600); err != nil {
		h.t.Fatal(err)
	}
}

func mustJSON(t *testing.T, v string) map[string]any {
	t.Helper()
	var out map[string]any
	if err := json.Unmarshal([]byte(v), &out); err != nil {
		t.Fatalf("not JSON: %v", err)
	}
	return out
}
