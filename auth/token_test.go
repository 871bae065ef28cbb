package auth

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"github.com/google/go-cmp/cmp"
	"github.com/plexus-gw/plexus"
	"github.com/plexus-gw/plexus/internal/plexustest"
)

const testIssuer = "plexus-test"

var t0 = time.Date(2026, 6, 23, 10, 0, 0, 0, time.UTC)

func mustKey(tb testing.TB) []byte {
	tb.Helper()
	k := make([]byte, MinKeyLen)
	if _, err := rand.Read(k); err != nil {
		tb.Fatal(err)
	}
	return k
}

func mustSigner(tb testing.TB, key []byte, now func() time.Time) *Signer {
	tb.Helper()
	s, err := NewSigner(key, testIssuer, now)
	if err != nil {
		tb.Fatal(err)
	}
	return s
}

func testClaims(iat time.Time) Claims {
	return Claims{
		SessionID:      "sess_1",
		Scopes:         []plexus.TokenScope{{ID: "portal.notes.read", Verbs: []plexus.Verb{plexus.VerbRead}}},
		GrantExpiresAt: jwt.NewNumericDate(iat.Add(24 * time.Hour)),
		RegisteredClaims: jwt.RegisteredClaims{
			Subject:   "agent-1",
			ID:        "tok_1",
			IssuedAt:  jwt.NewNumericDate(iat),
			ExpiresAt: jwt.NewNumericDate(iat.Add(15 * time.Minute)),
		},
	}
}

// signRaw signs an arbitrary header and payload with HMAC-SHA256 under key,
// whatever alg the header claims.
func signRaw(header, payload map[string]any, key []byte) string {
	h, _ := json.Marshal(header)
	p, _ := json.Marshal(payload)
	enc := base64.RawURLEncoding
	text := enc.EncodeToString(h) + "." + enc.EncodeToString(p)
	m := hmac.New(sha256.New, key)
	m.Write([]byte(text))
	return text + "." + enc.EncodeToString(m.Sum(nil))
}

func payloadMap(c Claims) map[string]any {
	b, _ := json.Marshal(c)
	var m map[string]any
	_ = json.Unmarshal(b, &m)
	return m
}

func TestSignerRoundTrip(t *testing.T) {
	clk := plexustest.NewClock(t0)
	s := mustSigner(t, mustKey(t), clk.Now)
	want := testClaims(t0)
	tok, err := s.Mint(want)
	if err != nil {
		t.Fatal(err)
	}
	got, err := s.Verify(tok)
	if err != nil {
		t.Fatal(err)
	}
	want.Issuer = testIssuer
	if diff := cmp.Diff(&want, got); diff != "" {
		t.Errorf("claims (-want +got):\n%s", diff)
	}
}

func TestMintRefuses(t *testing.T) {
	s := mustSigner(t, mustKey(t), func() time.Time { return t0 })
	for name, edit := range map[string]func(*Claims){
		"NoExp":       func(c *Claims) { c.ExpiresAt = nil },
		"ExpNotAfter": func(c *Claims) { c.ExpiresAt = c.IssuedAt },
		"NoSub":       func(c *Claims) { c.Subject = "" },
		"NoSession":   func(c *Claims) { c.SessionID = "" },
		"NoJTI":       func(c *Claims) { c.ID = "" },
		"NotBefore":   func(c *Claims) { c.NotBefore = c.IssuedAt },
		"OtherIssuer": func(c *Claims) { c.Issuer = "someone-else" },
	} {
		t.Run(name, func(t *testing.T) {
			c := testClaims(t0)
			edit(&c)
			if _, err := s.Mint(c); err == nil {
				t.Fatal("Mint succeeded, want error")
			}
		})
	}
}

func TestNewSignerShortKey(t *testing.T) {
	if _, err := NewSigner(make([]byte, MinKeyLen-1), testIssuer, nil); err == nil {
		t.Error("NewSigner(31-byte key) succeeded, want error")
	}
	if _, err := NewSigner(make([]byte, MinKeyLen), "", nil); err == nil {
		t.Error("NewSigner(empty issuer) succeeded, want error")
	}
}

func TestVerifyTamperMatrix(t *testing.T) {
	clk := plexustest.NewClock(t0)
	key := mustKey(t)
	s := mustSigner(t, key, clk.Now)
	good, err := s.Mint(testClaims(t0))
	if err != nil {
		t.Fatal(err)
	}
	c := testClaims(t0)
	c.Issuer = testIssuer
	payload := payloadMap(c)

	rsaKey, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	withClaims := func(edit func(map[string]any)) map[string]any {
		p := payloadMap(c)
		edit(p)
		return p
	}
	parts := strings.Split(good, ".")

	tests := []struct {
		name  string
		token func(t *testing.T) string
		at    time.Time
		want  plexus.ErrorCode
	}{
		{"Valid", func(*testing.T) string { return good }, t0, ""},
		{"AlgNone", func(t *testing.T) string {
			tok, err := jwt.NewWithClaims(jwt.SigningMethodNone, &c).SignedString(jwt.UnsafeAllowNoneSignatureType)
			if err != nil {
				t.Fatal(err)
			}
			return tok
		}, t0, plexus.CodeTokenRevoked},
		{"AlgNoneWithOldSignature", func(*testing.T) string {
			h, _ := json.Marshal(map[string]any{"alg": "none", "typ": "JWT"})
			return base64.RawURLEncoding.EncodeToString(h) + "." + parts[1] + "." + parts[2]
		}, t0, plexus.CodeTokenRevoked},
		{"RS256RealKey", func(t *testing.T) string {
			tok, err := jwt.NewWithClaims(jwt.SigningMethodRS256, &c).SignedString(rsaKey)
			if err != nil {
				t.Fatal(err)
			}
			return tok
		}, t0, plexus.CodeTokenRevoked},
		{"RS256HeaderHMACSignature", func(*testing.T) string {
			return signRaw(map[string]any{"alg": "RS256", "typ": "JWT"}, payload, key)
		}, t0, plexus.CodeTokenRevoked},
		{"HS512SameKey", func(t *testing.T) string {
			tok, err := jwt.NewWithClaims(jwt.SigningMethodHS512, &c).SignedString(key)
			if err != nil {
				t.Fatal(err)
			}
			return tok
		}, t0, plexus.CodeTokenRevoked},
		{"WrongKey", func(t *testing.T) string {
			other := mustSigner(t, mustKey(t), clk.Now)
			tok, err := other.Mint(testClaims(t0))
			if err != nil {
				t.Fatal(err)
			}
			return tok
		}, t0, plexus.CodeTokenRevoked},
		{"Expired", func(*testing.T) string { return good }, t0.Add(15 * time.Minute), plexus.CodeTokenExpired},
		{"ExpiredLongAgo", func(*testing.T) string { return good }, t0.Add(48 * time.Hour), plexus.CodeTokenExpired},
		{"JustBeforeExpiry", func(*testing.T) string { return good }, t0.Add(15*time.Minute - time.Nanosecond), ""},
		{"MissingExp", func(*testing.T) string {
			return signRaw(map[string]any{"alg": "HS256", "typ": "JWT"}, withClaims(func(p map[string]any) { delete(p, "exp") }), key)
		}, t0, plexus.CodeTokenRevoked},
		{"WrongIssuer", func(*testing.T) string {
			return signRaw(map[string]any{"alg": "HS256", "typ": "JWT"}, withClaims(func(p map[string]any) { p["iss"] = "evil" }), key)
		}, t0, plexus.CodeTokenRevoked},
		{"MissingIssuer", func(*testing.T) string {
			return signRaw(map[string]any{"alg": "HS256", "typ": "JWT"}, withClaims(func(p map[string]any) { delete(p, "iss") }), key)
		}, t0, plexus.CodeTokenRevoked},
		{"ExpiredAndWrongIssuer", func(*testing.T) string {
			return signRaw(map[string]any{"alg": "HS256", "typ": "JWT"}, withClaims(func(p map[string]any) { p["iss"] = "evil" }), key)
		}, t0.Add(time.Hour), plexus.CodeTokenRevoked},
		{"MissingSessionID", func(*testing.T) string {
			return signRaw(map[string]any{"alg": "HS256", "typ": "JWT"}, withClaims(func(p map[string]any) { delete(p, "sessionId") }), key)
		}, t0, plexus.CodeTokenRevoked},
		{"ExpiredAndMissingJTI", func(*testing.T) string {
			return signRaw(map[string]any{"alg": "HS256", "typ": "JWT"}, withClaims(func(p map[string]any) { delete(p, "jti") }), key)
		}, t0.Add(time.Hour), plexus.CodeTokenRevoked},
		{"Truncated", func(*testing.T) string { return good[:len(good)-5] }, t0, plexus.CodeTokenRevoked},
		{"NoSignature", func(*testing.T) string { return parts[0] + "." + parts[1] + "." }, t0, plexus.CodeTokenRevoked},
		{"TwoSegments", func(*testing.T) string { return parts[0] + "." + parts[1] }, t0, plexus.CodeTokenRevoked},
		{"Garbage", func(*testing.T) string { return "not.a.token" }, t0, plexus.CodeTokenRevoked},
		{"Empty", func(*testing.T) string { return "" }, t0, plexus.CodeTokenRevoked},
		{"PAT", func(*testing.T) string { return "plx_agent_abc" }, t0, plexus.CodeTokenRevoked},
		{"PayloadEditedOldSignature", func(*testing.T) string {
			p := withClaims(func(p map[string]any) {
				p["scopes"] = []any{map[string]any{"id": "portal.notes.write", "verbs": []any{"write"}}}
			})
			b, _ := json.Marshal(p)
			return parts[0] + "." + base64.RawURLEncoding.EncodeToString(b) + "." + parts[2]
		}, t0, plexus.CodeTokenRevoked},
		{"PayloadEditedExpiredOldSignature", func(*testing.T) string {
			p := withClaims(func(p map[string]any) { p["sub"] = "agent-2" })
			b, _ := json.Marshal(p)
			return parts[0] + "." + base64.RawURLEncoding.EncodeToString(b) + "." + parts[2]
		}, t0.Add(time.Hour), plexus.CodeTokenRevoked},
		{"PayloadExtendedExpOldSignature", func(*testing.T) string {
			p := withClaims(func(p map[string]any) { p["exp"] = t0.Add(48 * time.Hour).Unix() })
			b, _ := json.Marshal(p)
			return parts[0] + "." + base64.RawURLEncoding.EncodeToString(b) + "." + parts[2]
		}, t0.Add(time.Hour), plexus.CodeTokenRevoked},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			clk.Set(tt.at)
			got, err := s.Verify(tt.token(t))
			if code := plexus.CodeOf(err); code != tt.want {
				t.Fatalf("Verify: code %q (%v), want %q", code, err, tt.want)
			}
			if tt.want == "" && got.Subject != "agent-1" {
				t.Errorf("Verify: sub %q, want agent-1", got.Subject)
			}
			if tt.want != "" && got != nil {
				t.Errorf("Verify returned claims %+v with an error", got)
			}
		})
	}
}

func TestVerifyErrorMessages(t *testing.T) {
	clk := plexustest.NewClock(t0)
	s := mustSigner(t, mustKey(t), clk.Now)
	_, err := s.Verify("garbage")
	pe := plexus.AsError(err)
	if !strings.Contains(pe.Message, "malformed") {
		t.Errorf("message %q, want it to say malformed", pe.Message)
	}
	tok, _ := s.Mint(testClaims(t0))
	clk.Advance(time.Hour)
	_, err = s.Verify(tok)
	if pe := plexus.AsError(err); !strings.Contains(pe.Message, "refresh") {
		t.Errorf("expired message %q, want it to mention refresh", pe.Message)
	}
}

func TestVerifyAllowExpired(t *testing.T) {
	clk := plexustest.NewClock(t0)
	key := mustKey(t)
	s := mustSigner(t, key, clk.Now)
	tok, err := s.Mint(testClaims(t0))
	if err != nil {
		t.Fatal(err)
	}
	exp := t0.Add(15 * time.Minute)
	const grace = 5 * time.Minute
	wrongKey := mustSigner(t, mustKey(t), clk.Now)
	forged, _ := wrongKey.Mint(testClaims(t0))

	tests := []struct {
		name  string
		token string
		grace time.Duration
		at    time.Time
		want  plexus.ErrorCode
	}{
		{"NotExpired", tok, grace, t0, ""},
		{"JustExpired", tok, grace, exp, ""},
		{"WithinGrace", tok, grace, exp.Add(4 * time.Minute), ""},
		{"AtGraceEdge", tok, grace, exp.Add(grace), ""},
		{"PastGrace", tok, grace, exp.Add(grace + time.Second), plexus.CodeTokenExpired},
		{"ZeroGrace", tok, 0, exp.Add(time.Second), plexus.CodeTokenExpired},
		{"NegativeGrace", tok, -time.Hour, exp.Add(time.Second), plexus.CodeTokenExpired},
		{"WrongKeyWithinGrace", forged, grace, exp.Add(time.Minute), plexus.CodeTokenRevoked},
		{"GarbageWithinGrace", "x.y.z", grace, exp.Add(time.Minute), plexus.CodeTokenRevoked},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			clk.Set(tt.at)
			got, err := s.VerifyAllowExpired(tt.token, tt.grace)
			if code := plexus.CodeOf(err); code != tt.want {
				t.Fatalf("VerifyAllowExpired: code %q (%v), want %q", code, err, tt.want)
			}
			if tt.want == "" && got.ID != "tok_1" {
				t.Errorf("jti %q, want tok_1", got.ID)
			}
		})
	}
	// Verify itself never honours the grace.
	clk.Set(exp.Add(time.Minute))
	if _, err := s.Verify(tok); plexus.CodeOf(err) != plexus.CodeTokenExpired {
		t.Errorf("Verify within grace: %v, want token_expired", err)
	}
}
