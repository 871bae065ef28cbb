package auth

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"maps"
	"math"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"github.com/plexus-gw/plexus"
)

// fuzzKey is the signing key of the token fuzzers: fixed, so that the
// committed corpus holds tokens this signer minted.
const fuzzKey = "plexus-fuzz-key!plexus-fuzz-key!"

// fuzzNow is the instant FuzzVerify verifies at.
var fuzzNow = t0.Add(time.Minute)

// fuzzTokens mints the seeds: valid, expired within and past the refresh
// grace, and forgeries (another key, alg none, an algorithm switch, a
// payload missing claims) that Verify must refuse.
func fuzzTokens(tb testing.TB) []string {
	tb.Helper()
	s := mustSigner(tb, []byte(fuzzKey), func() time.Time { return fuzzNow })
	other := mustSigner(tb, bytes.Repeat([]byte("another-key-0123"), 2), func() time.Time { return fuzzNow })
	mint := func(s *Signer, iat time.Time, ttl time.Duration, edit func(*Claims)) string {
		c := testClaims(iat)
		c.ExpiresAt = jwt.NewNumericDate(iat.Add(ttl))
		if edit != nil {
			edit(&c)
		}
		tok, err := s.Mint(c)
		if err != nil {
			tb.Fatal(err)
		}
		return tok
	}
	valid := testClaims(t0)
	valid.Issuer = testIssuer
	return []string{
		mint(s, t0, 15*time.Minute, nil),
		mint(s, t0, 15*time.Minute, func(c *Claims) {
			c.Scopes = append(c.Scopes, plexus.TokenScope{ID: "wf.run", Verbs: []plexus.Verb{plexus.VerbWrite, plexus.VerbExecute},
				Constraint: &plexus.ScopeConstraint{PathPrefix: &plexus.PathPrefixConstraint{Field: "path", Allow: []string{"Inbox/"}}}})
			c.Audience = jwt.ClaimStrings{"plexus"}
		}),
		mint(s, t0.Add(-time.Hour), 59*time.Minute+30*time.Second, nil), // expired 30s ago
		mint(s, t0.Add(-2*time.Hour), time.Hour, nil),                   // expired an hour ago
		mint(other, t0, 15*time.Minute, nil),
		signRaw(map[string]any{"alg": "none", "typ": "JWT"}, payloadMap(valid), nil),
		signRaw(map[string]any{"alg": "HS512", "typ": "JWT"}, payloadMap(valid), []byte(fuzzKey)),
		signRaw(map[string]any{"alg": "HS256", "typ": "JWT"}, map[string]any{"iss": testIssuer, "exp": fuzzNow.Add(time.Hour).Unix()}, []byte(fuzzKey)),
		"", ".", "..", "a.b.c", "eyJhbGciOiJIUzI1NiJ9..",
	}
}

// FuzzVerify: whatever string arrives as a bearer token, Verify and
// VerifyAllowExpired never panic and either refuse it with one of the
// spec's two token codes or accept exactly a token this signer minted: the
// claims they return, minted again, give back the same bytes. A token that
// verifies but differs from every minted one (a re-encoded signature, a
// reordered payload) would be a second spelling of a credential, which
// anything keyed by the token string (a rate-limit bucket, a log line)
// would count as another.
func FuzzVerify(f *testing.F) {
	for _, tok := range fuzzTokens(f) {
		f.Add(tok)
	}
	s := mustSigner(f, []byte(fuzzKey), func() time.Time { return fuzzNow })
	f.Fuzz(func(t *testing.T, token string) {
		check := func(name string, c *Claims, err error) {
			if err != nil {
				var pe *plexus.Error
				if !errors.As(err, &pe) || (pe.Code != plexus.CodeTokenRevoked && pe.Code != plexus.CodeTokenExpired) {
					t.Fatalf("%s(%q) = %v (%T), want a token_revoked or token_expired *plexus.Error", name, token, err, err)
				}
				if c != nil {
					t.Fatalf("%s(%q) returned claims with its error", name, token)
				}
				return
			}
			again, merr := s.Mint(*c)
			if merr != nil {
				t.Fatalf("%s accepted %q, whose claims the signer would not mint: %v", name, token, merr)
			}
			if again != token {
				t.Fatalf("%s accepted %q, which is not the token the signer mints for its claims, %q", name, token, again)
			}
		}
		c, err := s.Verify(token)
		check("Verify", c, err)
		c, err = s.VerifyAllowExpired(token, time.Minute)
		check("VerifyAllowExpired", c, err)
	})
}

// FuzzVerifyClaims signs a fuzzed header and payload with the signer's own
// key, as only the gateway can, and checks what Verify then enforces on its
// own: HS256 only, the issuer, every claim a Plexus token carries, and
// expiry (token_expired only for a token whose every other check passes,
// and VerifyAllowExpired accepting it only within the grace).
func FuzzVerifyClaims(f *testing.F) {
	valid := payloadMap(testClaims(t0))
	valid["iss"] = testIssuer
	seed := func(header, payload map[string]any) {
		h, _ := json.Marshal(header)
		p, _ := json.Marshal(payload)
		f.Add(h, p)
	}
	seed(map[string]any{"alg": "HS256", "typ": "JWT"}, valid)
	for _, drop := range []string{"sub", "sessionId", "jti", "iat", "exp", "iss"} {
		p := maps.Clone(valid)
		delete(p, drop)
		seed(map[string]any{"alg": "HS256"}, p)
	}
	for k, v := range map[string]any{"exp": fuzzNow.Add(-time.Second).Unix(), "nbf": fuzzNow.Add(time.Hour).Unix(),
		"iss": "someone-else", "exp ": "soon", "sub": 7, "scopes": "all"} {
		p := maps.Clone(valid)
		p[k] = v
		seed(map[string]any{"alg": "HS256"}, p)
	}
	seed(map[string]any{"alg": "none"}, valid)
	seed(map[string]any{"alg": "HS512"}, valid)
	s := mustSigner(f, []byte(fuzzKey), func() time.Time { return fuzzNow })
	f.Fuzz(func(t *testing.T, header, payload []byte) {
		enc := base64.RawURLEncoding
		text := enc.EncodeToString(header) + "." + enc.EncodeToString(payload)
		m := hmac.New(sha256.New, []byte(fuzzKey))
		m.Write([]byte(text))
		token := text + "." + enc.EncodeToString(m.Sum(nil))

		c, err := s.Verify(token)
		if err != nil {
			var pe *plexus.Error
			if !errors.As(err, &pe) || (pe.Code != plexus.CodeTokenRevoked && pe.Code != plexus.CodeTokenExpired) {
				t.Fatalf("Verify = %v (%T), want a token code", err, err)
			}
			if pe.Code == plexus.CodeTokenExpired {
				requireOnlyExpired(t, s, token)
			}
			return
		}
		var h struct{ Alg string }
		if json.Unmarshal(header, &h) != nil || h.Alg != "HS256" {
			t.Fatalf("accepted a token whose header says %s", header)
		}
		if !plexusClaims(c) || !c.ExpiresAt.After(fuzzNow) {
			t.Fatalf("accepted claims a Plexus token never carries: %+v", c)
		}
		if c.NotBefore != nil && c.NotBefore.After(fuzzNow) {
			t.Fatalf("accepted a token not valid until %v", c.NotBefore)
		}
	})
}

// plexusClaims reports whether c carries what every Plexus token does.
func plexusClaims(c *Claims) bool {
	return c.Issuer == testIssuer && c.Subject != "" && c.SessionID != "" && c.ID != "" && c.IssuedAt != nil && c.ExpiresAt != nil
}

// requireOnlyExpired checks a token Verify called expired: past its exp and
// otherwise a Plexus token, which VerifyAllowExpired takes only within the
// grace. The widest grace is the longest Duration: an exp beyond int64
// seconds decodes to the far past, and time.Sub saturates there.
func requireOnlyExpired(t *testing.T, s *Signer, token string) {
	t.Helper()
	c, err := s.VerifyAllowExpired(token, time.Duration(math.MaxInt64))
	if err != nil {
		t.Fatalf("token_expired, but not accepted with any grace: %v", err)
	}
	if !plexusClaims(c) || c.ExpiresAt.After(fuzzNow) {
		t.Fatalf("token_expired for claims that are not only expired: %+v", c)
	}
	if ago := fuzzNow.Sub(c.ExpiresAt.Time); ago > time.Second {
		if _, err := s.VerifyAllowExpired(token, ago-time.Second); err == nil {
			t.Fatalf("VerifyAllowExpired accepted a token expired %v ago with a grace of %v", ago, ago-time.Second)
		}
	}
}
