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
	records map[string]cacheEntry
	claims  map[string]*auth.Claims // token string → verified claims (immutable)
}

type cacheEntry struct {
	gen uint64
	v   any
}

func newAuthCache() *authCache {
	return &authCache{records: make(map[string]cacheEntry), claims: make(map[string]*auth.Claims)}
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
	return cachedLoad(r, "t\x00"+jti, func(tx plexus.StateTx) (*plexus.TokenRecord, error) { return tx.Token(jti) })
}

func (r cachedReader) Session(id string) (*plexus.Session, error) {
	return cachedLoad(r, "s\x00"+id, func(tx plexus.StateTx) (*plexus.Session, error) { return tx.Session(id) })
}

func (r cachedReader) Agent(id string) (*plexus.Agent, error) {
	return cachedLoad(r, "a\x00"+id, func(tx plexus.StateTx) (*plexus.Agent, error) { return tx.Agent(id) })
}

func (r cachedReader) Grant(agentID, capabilityID string) (*plexus.Grant, error) {
	return cachedLoad(r, "g\x00"+agentID+"\x00"+capabilityID, func(tx plexus.StateTx) (*plexus.Grant, error) {
		return tx.Grant(agentID, capabilityID)
	})
}

// cachedLoad returns the cached value of key if it was loaded under the
// current generation, else loads it. Lookups that fail (not found included)
// are not cached.
func cachedLoad[T any](r cachedReader, key string, load func(tx plexus.StateTx) (*T, error)) (*T, error) {
	c := r.g.cache
	gen := c.gen.Load()
	c.mu.RLock()
	e, ok := c.records[key]
	c.mu.RUnlock()
	if ok && e.gen == gen {
		return e.v.(*T), nil
	}
	var v *T
	if err := r.g.d.Store.View(r.ctx, func(tx plexus.StateTx) error {
		var err error
		v, err = load(tx)
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
