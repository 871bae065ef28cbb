package console

import (
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"sync"
	"time"
)

// Bounds on what the console holds in memory: a caller with the key can
// mint links, and each sign-in adds a session, so both are capped (the
// oldest goes first).
const (
	maxLinks    = 16
	maxSessions = 32
)

// session is one signed-in browser tab. The cookie carries the session's
// id, the store keeps only its hash; the page secret travels only in the
// sign-in redirect's fragment and then in a header the tab's script sends,
// because a cookie is also sent to every other port of the same host.
type session struct {
	page    string   // the tab's secret, sent with every API call
	csrf    string   // sent back by the page on every change
	keySum  [32]byte // the connection-key it was opened under
	expires time.Time
}

type link struct {
	keySum  [32]byte
	expires time.Time
}

// authStore holds the one-time sign-in links and the sessions, by the
// sha256 of their secret, so that nothing in memory opens the console by
// itself being read. Safe for concurrent use; mu guards both maps.
type authStore struct {
	now                 func() time.Time
	linkTTL, sessionTTL time.Duration

	mu       sync.Mutex
	links    map[[32]byte]link
	sessions map[[32]byte]*session
}

func newAuthStore(now func() time.Time, linkTTL, sessionTTL time.Duration) *authStore {
	return &authStore{now: now, linkTTL: linkTTL, sessionTTL: sessionTTL,
		links: map[[32]byte]link{}, sessions: map[[32]byte]*session{}}
}

// secret returns a new random secret of 128 bits.
func secret() string { return rand.Text() }

func sum(s string) [32]byte { return sha256.Sum256([]byte(s)) }

// mintLink returns a new one-time code for a sign-in under the key whose
// hash is keySum, and when it expires.
func (a *authStore) mintLink(keySum [32]byte) (string, time.Time) {
	code := secret()
	now := a.now()
	l := link{keySum: keySum, expires: now.Add(a.linkTTL)}
	a.mu.Lock()
	defer a.mu.Unlock()
	for h, old := range a.links {
		if !now.Before(old.expires) {
			delete(a.links, h)
		}
	}
	for len(a.links) >= maxLinks {
		delete(a.links, oldest(a.links, func(l link) time.Time { return l.expires }))
	}
	a.links[sum(code)] = l
	return code, l.expires
}

// redeem spends code: it works once, and only before it expires. It
// reports the key hash the link was minted under.
func (a *authStore) redeem(code string) ([32]byte, bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	h := sum(code)
	l, ok := a.links[h]
	delete(a.links, h)
	if !ok || !a.now().Before(l.expires) {
		return [32]byte{}, false
	}
	return l.keySum, true
}

// open starts a session under keySum and returns its id (the cookie's
// value) and the session.
func (a *authStore) open(keySum [32]byte) (string, *session) {
	id := secret()
	now := a.now()
	s := &session{page: secret(), csrf: secret(), keySum: keySum, expires: now.Add(a.sessionTTL)}
	a.mu.Lock()
	defer a.mu.Unlock()
	for h, old := range a.sessions {
		if !now.Before(old.expires) {
			delete(a.sessions, h)
		}
	}
	for len(a.sessions) >= maxSessions {
		delete(a.sessions, oldest(a.sessions, func(s *session) time.Time { return s.expires }))
	}
	a.sessions[sum(id)] = s
	return id, s
}

// lookup returns the live session of id, ending it when it has expired or
// was opened under another key than keySum (the key was rotated).
func (a *authStore) lookup(id string, keySum [32]byte) (*session, bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	h := sum(id)
	s, ok := a.sessions[h]
	if !ok {
		return nil, false
	}
	if !a.now().Before(s.expires) || subtle.ConstantTimeCompare(s.keySum[:], keySum[:]) != 1 {
		delete(a.sessions, h)
		return nil, false
	}
	return s, true
}

// close ends the session of id.
func (a *authStore) close(id string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	delete(a.sessions, sum(id))
}

// oldest is the key of m whose time is earliest.
func oldest[V any](m map[[32]byte]V, at func(V) time.Time) [32]byte {
	var k [32]byte
	var t time.Time
	first := true
	for h, v := range m {
		if first || at(v).Before(t) {
			k, t, first = h, at(v), false
		}
	}
	return k
}

// sameSecret compares two secrets in constant time; empty never matches.
func sameSecret(a, b string) bool {
	return a != "" && subtle.ConstantTimeCompare([]byte(a), []byte(b)) == 1
}
