package auth

import (
	"bytes"
	"errors"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"github.com/plexus-gw/plexus"
)

// fuzzKey is the signing key of FuzzVerify: fixed, so that the committed
// corpus holds tokens this signer minted.
var fuzzKey = bytes.Repeat([]byte("plexus-fuzz-key!"), 2)

// fuzzNow is the instant FuzzVerify verifies at.
var fuzzNow = t0.Add(time.Minute)

// fuzzTokens mints the seeds: valid, expired within and past the refresh
// grace, and forgeries (another key, alg none, an algorithm switch, a
// payload missing claims) that Verify must refuse.
func fuzzTokens(tb testing.TB) []string {
	tb.Helper()
	s := mustSigner(tb, fuzzKey, func() time.Time { return fuzzNow })
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
		signRaw(map[string]any{"alg": "HS512", "typ": "JWT"}, payloadMap(valid), fuzzKey),
		signRaw(map[string]any{"alg": "HS256", "typ": "JWT"}, map[string]any{"iss": testIssuer, "exp": fuzzNow.Add(time.Hour).Unix()}, fuzzKey),
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
	s := mustSigner(f, fuzzKey, func() time.Time { return fuzzNow })
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
