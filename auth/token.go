package auth

import (
	"errors"
	"fmt"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"github.com/plexus-gw/plexus"
)

// Claims are the claims of a Plexus scoped token (the protocol's
// ScopedTokenClaims): sub is the agent id, iss the gateway instance, jti the
// token id the revocation registry tracks, iat and exp the token's own
// lifetime, and gexp the grant's trust-window end (diagnostics only; the
// gateway bounds refresh from the persisted grant, never from gexp).
//
// Authority is exactly Scopes; it comes from the verified token, never from a
// request body.
type Claims struct {
	SessionID      string              `json:"sessionId"`
	Scopes         []plexus.TokenScope `json:"scopes"`
	GrantExpiresAt *jwt.NumericDate    `json:"gexp,omitempty"`
	jwt.RegisteredClaims
}

// Validate implements jwt.ClaimsValidator: a token that verifies but lacks
// the claims every Plexus token carries is not a Plexus token.
func (c *Claims) Validate() error {
	switch {
	case c.Subject == "":
		return fmt.Errorf("%w: sub", jwt.ErrTokenRequiredClaimMissing)
	case c.SessionID == "":
		return fmt.Errorf("%w: sessionId", jwt.ErrTokenRequiredClaimMissing)
	case c.ID == "":
		return fmt.Errorf("%w: jti", jwt.ErrTokenRequiredClaimMissing)
	case c.IssuedAt == nil:
		return fmt.Errorf("%w: iat", jwt.ErrTokenRequiredClaimMissing)
	}
	return nil
}

// Signer mints and verifies HS256 scoped tokens under one gateway key.
// It is immutable and safe for concurrent use.
type Signer struct {
	key    []byte
	issuer string
	now    func() time.Time
	parser *jwt.Parser
}

// NewSigner returns a Signer for issuer with a copy of key (at least
// [MinKeyLen] bytes). now is the clock every expiry check uses; nil means
// time.Now.
func NewSigner(key []byte, issuer string, now func() time.Time) (*Signer, error) {
	if len(key) < MinKeyLen {
		return nil, fmt.Errorf("signing key is %d bytes, want at least %d", len(key), MinKeyLen)
	}
	if issuer == "" {
		return nil, errors.New("signer issuer is empty")
	}
	if now == nil {
		now = time.Now
	}
	s := &Signer{key: append([]byte(nil), key...), issuer: issuer, now: now}
	// The parser is built once: with a validator set at construction it holds
	// no mutable state and may be shared across goroutines. Strict decoding
	// refuses base64 whose unused trailing bits are set: without it, four
	// spellings of every signature verify, so a minted token has three
	// forgeable twins that anything keyed by the token string would count
	// apart (found by FuzzVerify).
	s.parser = jwt.NewParser(
		jwt.WithValidMethods([]string{jwt.SigningMethodHS256.Alg()}),
		jwt.WithStrictDecoding(),
		jwt.WithExpirationRequired(),
		jwt.WithIssuer(issuer),
		jwt.WithTimeFunc(now),
		jwt.WithLeeway(0),
	)
	return s, nil
}

// Mint signs c with HS256. It stamps the signer's issuer, and iat when c has
// none; c must carry sub, sessionId, jti and an exp after iat. nbf is refused:
// Plexus tokens are valid from issue, and [Signer.VerifyAllowExpired] relies
// on that.
func (s *Signer) Mint(c Claims) (string, error) {
	if c.Issuer != "" && c.Issuer != s.issuer {
		return "", fmt.Errorf("mint token: issuer %q is not this signer's %q", c.Issuer, s.issuer)
	}
	c.Issuer = s.issuer
	if c.IssuedAt == nil {
		c.IssuedAt = jwt.NewNumericDate(s.now())
	}
	if c.NotBefore != nil {
		return "", errors.New("mint token: nbf is not supported")
	}
	if c.ExpiresAt == nil {
		return "", errors.New("mint token: exp is required")
	}
	if !c.ExpiresAt.After(c.IssuedAt.Time) {
		return "", errors.New("mint token: exp must be after iat")
	}
	if err := c.Validate(); err != nil {
		return "", fmt.Errorf("mint token: %w", err)
	}
	tok, err := jwt.NewWithClaims(jwt.SigningMethodHS256, &c).SignedString(s.key)
	if err != nil {
		return "", fmt.Errorf("mint token: %w", err)
	}
	return tok, nil
}

// Verify checks token's signature, algorithm (HS256 only), issuer and expiry
// against the signer's clock, with no leeway, and returns its claims.
//
// Failures are *plexus.Error values. An expired token whose every other
// check passes is token_expired (the agent refreshes). Everything else, a bad
// or stripped signature, alg "none", an algorithm switch (RS256, HS512), a
// wrong key, a malformed or truncated token, a missing exp, a wrong issuer,
// is token_revoked with a message saying why: such a token can never become
// valid, and the agent's recovery for an untrustworthy token is to request
// the grant again (PUT /grants). An expired token that also fails any other
// check is token_revoked, so a forged token is never invited to refresh.
func (s *Signer) Verify(token string) (*Claims, error) {
	c, err := s.verify(token)
	if err != nil {
		return nil, err
	}
	return c, nil
}

// VerifyAllowExpired is [Signer.Verify] for POST /grants/refresh only: it
// also accepts a token that is signature-valid and passes every check but
// expiry, if it expired at most grace ago. A token expired longer ago is
// token_expired; the gateway's refresh then fails and the agent re-grants.
// It must never be used on /invoke.
func (s *Signer) VerifyAllowExpired(token string, grace time.Duration) (*Claims, error) {
	c, err := s.verify(token)
	if err == nil {
		return c, nil
	}
	if err.Code != plexus.CodeTokenExpired || c == nil {
		return nil, err
	}
	if s.now().Sub(c.ExpiresAt.Time) <= max(grace, 0) {
		return c, nil
	}
	return nil, &plexus.Error{
		Code:    plexus.CodeTokenExpired,
		Message: "token expired longer ago than the refresh grace; request the grant again",
		Err:     err.Err,
	}
}

// verify returns the claims alongside a token_expired error, so that
// VerifyAllowExpired can apply its grace; callers outside drop them.
func (s *Signer) verify(token string) (*Claims, *plexus.Error) {
	c := &Claims{}
	_, err := s.parser.ParseWithClaims(token, c, s.keyFunc)
	if err == nil {
		return c, nil
	}
	if errors.Is(err, jwt.ErrTokenExpired) && s.onlyExpired(c) {
		// ErrTokenExpired comes from claims validation, which jwt runs only
		// after the signature verified, so c is authentic.
		return c, &plexus.Error{
			Code:    plexus.CodeTokenExpired,
			Message: "token expired; refresh it with POST /grants/refresh",
			Err:     err,
		}
	}
	return nil, &plexus.Error{
		Code:    plexus.CodeTokenRevoked,
		Message: "token rejected (" + rejectReason(err) + "); request the grant again",
		Err:     err,
	}
}

// onlyExpired reports whether c passes every claim check at the last instant
// before its exp, i.e. whether expiry is its only fault.
func (s *Signer) onlyExpired(c *Claims) bool {
	if c.ExpiresAt == nil {
		return false
	}
	at := c.ExpiresAt.Add(-time.Nanosecond)
	v := jwt.NewValidator(
		jwt.WithExpirationRequired(),
		jwt.WithIssuer(s.issuer),
		jwt.WithTimeFunc(func() time.Time { return at }),
		jwt.WithLeeway(0),
	)
	return v.Validate(c) == nil
}

func (s *Signer) keyFunc(t *jwt.Token) (any, error) {
	// WithValidMethods already pins HS256; checking the method type as well
	// keeps a future edit of the option list from turning the HMAC key into
	// a "public key" for another algorithm.
	if m, ok := t.Method.(*jwt.SigningMethodHMAC); !ok || m != jwt.SigningMethodHS256 {
		return nil, fmt.Errorf("unexpected signing method %v", t.Header["alg"])
	}
	return s.key, nil
}

func rejectReason(err error) string {
	switch {
	case errors.Is(err, jwt.ErrTokenMalformed):
		return "malformed token"
	case errors.Is(err, jwt.ErrTokenUnverifiable):
		return "unverifiable token: signing method not allowed"
	case errors.Is(err, jwt.ErrTokenSignatureInvalid):
		return "invalid signature or signing method not allowed"
	case errors.Is(err, jwt.ErrTokenInvalidIssuer):
		return "wrong issuer"
	case errors.Is(err, jwt.ErrTokenRequiredClaimMissing):
		return "missing required claim"
	case errors.Is(err, jwt.ErrTokenNotValidYet):
		return "token not valid yet"
	}
	return "invalid claims"
}
