package client

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestCredStore(t *testing.T) {
	t.Run("ErrNotEnrolled", func(t *testing.T) {
		_, err := NewCredStore(filepath.Join(t.TempDir(), "none")).Credentials()
		if !errors.Is(err, ErrNotEnrolled) {
			t.Fatalf("err = %v, want ErrNotEnrolled", err)
		}
	})
	t.Run("ErrLooseMode", func(t *testing.T) {
		dir := t.TempDir()
		s := NewCredStore(dir)
		if err := s.SaveCredentials(Credentials{BaseURL: "http://127.0.0.1:1", AgentID: "a", PAT: "p"}, false); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(filepath.Join(dir, CredentialsFile), 0o644); err != nil {
			t.Fatal(err)
		}
		if _, err := s.Credentials(); err == nil || !strings.Contains(err.Error(), "0600") {
			t.Fatalf("err = %v, want a mode complaint", err)
		}
	})
	t.Run("TightensDir", func(t *testing.T) {
		dir := filepath.Join(t.TempDir(), "agent")
		if err := os.Mkdir(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := NewCredStore(dir).ClearTokens(); err != nil {
			t.Fatal(err)
		}
		fi, _ := os.Stat(dir)
		if fi.Mode().Perm() != 0o700 {
			t.Errorf("dir mode = %04o, want 0700", fi.Mode().Perm())
		}
		fi, _ = os.Stat(filepath.Join(dir, TokensFile))
		if fi.Mode().Perm() != 0o600 {
			t.Errorf("tokens mode = %04o, want 0600", fi.Mode().Perm())
		}
	})
	t.Run("Redacted", func(t *testing.T) {
		c := Credentials{AgentID: "a", PAT: "plx_agent_SECRET"}
		h := HeldToken{Token: "eyJSECRET", JTI: "tok_1", ExpiresAt: time.Now()}
		for _, s := range []string{fmt.Sprint(c), fmt.Sprintf("%+v %#v", c, c), fmt.Sprint(h), fmt.Sprintf("%#v", h)} {
			if strings.Contains(s, "SECRET") {
				t.Errorf("formatted value leaks a secret: %s", s)
			}
		}
	})
}

// Tokens returns the cached tokens (possibly expired ones among them).
func (s *CredStore) Tokens() ([]HeldToken, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	c, err := s.readCache()
	return c.Tokens, err
}

// ClearTokens forgets every cached token, the cached session and the
// remembered pending requests.
func (s *CredStore) ClearTokens() error {
	return s.updateCache(func(c *tokenCache) { *c = tokenCache{} })
}
