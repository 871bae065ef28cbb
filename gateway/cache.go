package gateway

import (
	"context"
	"sync"
	"sync/atomic"

	"github.com/plexus-gw/plexus"
	"github.com/plexus-gw/plexus/auth"
)

// cacheCapacity bounds each cache; a full cache is simply emptied.
const cacheCapacity = 10000

// authCache keeps the records the invoke pipeline reads on every call (the
// token's jti record, its session, its agent, the backing grant) and the
// verified claims of token strings, so a call costs no read transaction.
//
// Correctness rests on one fact: every change to those records is made by
// this gateway, through [Gateway.update], which bumps gen after its
// transaction ends. An entry is served only when it was loaded under the
// current gen, and the gen is read before the load: a load that raced a
// commit is stamped with the old gen and never served after the bump. The
// CLI and scripts open journal.db read-only.
type authCache struct {
	gen atomic.Uint64

	mu      sync.RWMutex // guards records and claims
	records map[cacheKey]cacheEntry
	claims  map[string]*auth.Claims // token string → verified claims (immutable)
}

// cacheKey names a record: its kind ('t'oken, 's'ession, 'a'gent,
// 'g'rant) and its id (an agent and a capability for a grant). A struct
// rather than a joined string, so a lookup allocates nothing.
type cacheKey struct {
	kind byte
	id   string
	cap  string
}

type cacheEntry struct {
	gen uint64
	v   any
}

func newAuthCache() *authCache {
	return &authCache{records: make(map[cacheKey]cacheEntry), claims: make(map[string]*auth.Claims)}
}

// invalidate makes every cached record stale.
func (c *authCache) invalidate() { c.gen.Add(1) }

// update runs fn in a write transaction and then invalidates the cache. Every
// transaction that may change a token, session, agent or grant goes through
// here; pure audit rows (record) do not need to.
func (g *Gateway) update(ctx context.Context, durable bool, fn func(tx plexus.StateTx) error) error {
	defer g.cache.invalidate()
	return g.d.Store.Update(ctx, durable, fn)
}

// authReader is the slice of state the liveness checks read, served by a
// transaction or by the cache.
type authReader interface {
	Token(jti string) (*plexus.TokenRecord, error)
	Session(id string) (*plexus.Session, error)
	Agent(id string) (*plexus.Agent, error)
	Grant(agentID, capabilityID string) (*plexus.Grant, error)
}

// cachedReader serves authReader from the cache, loading misses in their own
// read transaction. The records it returns are shared: callers must not
// modify them.
type cachedReader struct {
	ctx context.Context
	g   *Gateway
}

var _ authReader = cachedReader{}

func (r cachedReader) Token(jti string) (*plexus.TokenRecord, error) {
	return cachedLoad(r, cacheKey{kind: 't', id: jti}, loadToken)
}

func (r cachedReader) Session(id string) (*plexus.Session, error) {
	return cachedLoad(r, cacheKey{kind: 's', id: id}, loadSession)
}

func (r cachedReader) Agent(id string) (*plexus.Agent, error) {
	return cachedLoad(r, cacheKey{kind: 'a', id: id}, loadAgent)
}

func (r cachedReader) Grant(agentID, capabilityID string) (*plexus.Grant, error) {
	return cachedLoad(r, cacheKey{kind: 'g', id: agentID, cap: capabilityID}, loadGrant)
}

// The loaders of a cache miss, by key. They capture nothing, so a hit
// allocates nothing.
func loadToken(tx plexus.StateTx, k cacheKey) (*plexus.TokenRecord, error) { return tx.Token(k.id) }
func loadSession(tx plexus.StateTx, k cacheKey) (*plexus.Session, error)   { return tx.Session(k.id) }
func loadAgent(tx plexus.StateTx, k cacheKey) (*plexus.Agent, error)       { return tx.Agent(k.id) }
func loadGrant(tx plexus.StateTx, k cacheKey) (*plexus.Grant, error)       { return tx.Grant(k.id, k.cap) }

// cachedLoad returns the cached value of key if it was loaded under the
// current generation, else loads it. Lookups that fail (not found included)
// are not cached. No lock is held while a miss reads the journal.
func cachedLoad[T any](r cachedReader, key cacheKey, load func(plexus.StateTx, cacheKey) (*T, error)) (*T, error) {
	c := r.g.cache
	gen := c.gen.Load()
	c.mu.RLock()
	e, ok := c.records[key]
	c.mu.RUnlock()
	if ok && e.gen == gen {
		return e.v.(*T), nil
	}
	return loadMiss(r, key, gen, load)
}

// loadMiss reads key in a read transaction of its own and caches it,
// stamped with gen, the generation read before the load.
func loadMiss[T any](r cachedReader, key cacheKey, gen uint64, load func(plexus.StateTx, cacheKey) (*T, error)) (*T, error) {
	c := r.g.cache
	var v *T
	if err := r.g.d.Store.View(r.ctx, func(tx plexus.StateTx) error {
		var err error
		v, err = load(tx, key)
		return err
	}); err != nil {
		return nil, err
	}
	c.mu.Lock()
	if len(c.records) >= cacheCapacity {
		clear(c.records)
	}
	c.records[key] = cacheEntry{gen: gen, v: v}
	c.mu.Unlock()
	return v, nil
}

// verify checks a token's signature and expiry, remembering the claims of
// tokens already verified: a token string's claims never change, only the
// clock moves, so a cached token is re-checked for expiry only.
func (g *Gateway) verify(token string) (*auth.Claims, error) {
	c := g.cache
	c.mu.RLock()
	cl := c.claims[token]
	c.mu.RUnlock()
	if cl != nil && cl.ExpiresAt != nil && g.now().Before(cl.ExpiresAt.Time) {
		return cl, nil
	}
	cl, err := g.d.Signer.Verify(token)
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	if len(c.claims) >= cacheCapacity {
		clear(c.claims)
	}
	c.claims[token] = cl
	c.mu.Unlock()
	return cl, nil
}
