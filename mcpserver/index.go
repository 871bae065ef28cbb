package mcpserver

import (
	"context"
	"slices"
)

// cachedCatalog is a link's catalog as built at one catalog revision and
// one view: what a request reads while neither changed, instead of
// fetching the whole manifest (two read transactions and a copy of every
// entry) and sorting it through the view on every call.
//
// It is only ever served at the revision, state generation and view it was
// built at: the gateway's revision grows with every change of the entry set
// (a source added, removed or rescanned, a definition held or released),
// its state generation with every change of a token, session, agent or
// grant (so a revocation, or a standing grant that changes what a search
// calls callable, rebuilds it through the manifest's session check), the
// owner's view is read (from memory) on every request, and each request
// compares all three first. A name the catalog no longer shows is refused
// as unknown, and nothing runs.
type cachedCatalog struct {
	rev  int64
	gen  uint64
	view View
	c    *catalog
}

// catalog is the link's catalog now: the cached one when the catalog's
// revision and the agent's view are those it was built at, else one built
// from a fresh manifest (which is then kept).
func (s *Server) catalog(ctx context.Context, l *link) (*catalog, error) {
	v, err := s.view(ctx, l)
	if err != nil {
		return nil, err
	}
	// Read before the manifest: a catalog is never stamped with a
	// generation later than the state it was built from.
	gen := s.b.Sessions.StateGeneration()
	if cc := l.cat.Load(); cc != nil && cc.rev == s.b.Sessions.Revision() && cc.gen == gen && cc.view.equal(v) {
		return cc.c, nil
	}
	m, err := s.manifest(ctx, l)
	if err != nil {
		return nil, err
	}
	c := buildCatalog(m.Entries, v)
	l.keepCatalog(&cachedCatalog{rev: m.Revision, gen: gen, view: v, c: c})
	return c, nil
}

// keepCatalog makes cc the link's cached catalog unless a concurrent
// request already kept one of a later revision or state generation. The manifest reads the
// revision before the entries, so a catalog is never stamped later than
// its entries are.
func (l *link) keepCatalog(cc *cachedCatalog) {
	for {
		old := l.cat.Load()
		if old != nil && (old.rev > cc.rev || old.rev == cc.rev && old.gen > cc.gen) || l.cat.CompareAndSwap(old, cc) {
			return
		}
	}
}

// equal reports whether v and o show the same catalog.
func (v View) equal(o View) bool {
	return v.Names == o.Names && v.Mode == o.Mode && v.SearchAbove == o.SearchAbove && slices.Equal(v.Only, o.Only)
}
