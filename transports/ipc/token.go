package ipc

import (
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"sync"
	"time"
)

// tokenBytes is the entropy of a session token (§5.1: unpredictable).
const tokenBytes = 32

// Tokens issues the session tokens handed to launched providers (§5.1) and
// is the [Authenticator] that checks them. A token is 32 bytes from
// crypto/rand, bound to one provider, valid for a short TTL, and good for
// one hello: the first Authenticate that presents it consumes it, whatever
// the outcome of the rest of the handshake.
//
// Only a SHA-256 digest of each token is kept, and digests are compared in
// constant time against every live token, so neither the map nor the timing
// of a refusal tells anything about a live token. Tokens never appear in an
// error, a log or a refusal detail. Safe for concurrent use.
type Tokens struct {
	ttl time.Duration
	now func() time.Time

	mu   sync.Mutex
	live map[[sha256.Size]byte]issued // guarded by mu
}

type issued struct {
	provider string
	expires  time.Time
}

var _ Authenticator = (*Tokens)(nil)

// NewTokens returns an issuer whose tokens live for ttl by clock now (nil
// means time.Now).
func NewTokens(ttl time.Duration, now func() time.Time) *Tokens {
	if now == nil {
		now = time.Now
	}
	return &Tokens{ttl: ttl, now: now, live: make(map[[sha256.Size]byte]issued)}
}

// Issue returns a fresh token for provider, valid until the TTL passes or
// it is used or revoked. The caller hands it to the provider's process and
// then forgets it.
func (t *Tokens) Issue(provider string) string {
	var b [tokenBytes]byte
	_, _ = rand.Read(b[:]) // never fails (crypto/rand panics instead)
	tok := base64.RawURLEncoding.EncodeToString(b[:])
	t.mu.Lock()
	defer t.mu.Unlock()
	t.sweepLocked()
	t.live[sha256.Sum256([]byte(tok))] = issued{provider: provider, expires: t.now().Add(t.ttl)}
	return tok
}

// Authenticate returns the provider token was issued to and consumes the
// token. An unknown, used, revoked or expired token is refused; all
// refusals look alike to the caller.
func (t *Tokens) Authenticate(token string) (string, bool) {
	d := sha256.Sum256([]byte(token))
	now := t.now()
	t.mu.Lock()
	defer t.mu.Unlock()
	var found [sha256.Size]byte
	var hit issued
	ok := 0
	for k, v := range t.live {
		// Every live digest is compared, so the time taken depends on how
		// many tokens are live, not on which one (if any) matched.
		m := subtle.ConstantTimeCompare(k[:], d[:])
		if m == 1 {
			found, hit = k, v
		}
		ok |= m
	}
	if ok == 0 {
		return "", false
	}
	delete(t.live, found)
	if !now.Before(hit.expires) {
		return "", false
	}
	return hit.provider, true
}

// Revoke drops every unused token issued to provider (its process ended
// before connecting, or it is being removed).
func (t *Tokens) Revoke(provider string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for k, v := range t.live {
		if v.provider == provider {
			delete(t.live, k)
		}
	}
}

// Live reports how many unused, unexpired tokens there are (for tests and
// status).
func (t *Tokens) Live() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.sweepLocked()
	return len(t.live)
}

func (t *Tokens) sweepLocked() {
	now := t.now()
	for k, v := range t.live {
		if !now.Before(v.expires) {
			delete(t.live, k)
		}
	}
}
