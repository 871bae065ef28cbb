package mcpserver

import (
	"context"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/plexus-gw/plexus"
)

// toolIndex is the tools a link's manifest showed at one catalog revision,
// by name: what tools/call resolves a name by while the catalog stays at
// that revision, instead of fetching the whole manifest (two read
// transactions and a copy of every entry) on every call.
//
// It is only ever served at the revision it was built at: the gateway's
// revision grows with every change of the entry set (a source added,
// removed or rescanned, a definition held or released), and each call
// reads the current one first. A name the index no longer shows is refused
// as unknown, and nothing runs. What the index skips is the session check
// the manifest fetch made; the call's token check makes it (a revoked
// agent's call answers session_expired, runs nothing, and forgets the
// link).
type toolIndex struct {
	rev    int64
	byName map[string]plexus.Entry
}

func newToolIndex(m plexus.Manifest) *toolIndex {
	ps := project(m.Entries)
	ix := &toolIndex{rev: m.Revision, byName: make(map[string]plexus.Entry, len(ps))}
	for _, p := range ps {
		ix.byName[p.tool.Name] = p.entry
	}
	return ix
}

// resolveTool is the entry the link's view shows as the tool name, from
// the link's index when the catalog is still at its revision, else from a
// fresh manifest (which then becomes the link's index).
func (s *Server) resolveTool(ctx context.Context, l *link, name string) (plexus.Entry, error) {
	ix := l.index.Load()
	if ix == nil || ix.rev != s.b.Sessions.Revision() {
		m, err := s.manifest(ctx, l)
		if err != nil {
			return plexus.Entry{}, err
		}
		ix = newToolIndex(m)
		l.keepIndex(ix)
	}
	if e, ok := ix.byName[name]; ok {
		return e, nil
	}
	return plexus.Entry{}, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: "unknown tool: " + clip(name, 80) + " (tools/list shows the tools this agent may call)"}
}

// keepIndex makes ix the link's index unless a concurrent call already
// kept one of a later revision. The manifest reads the revision before the
// entries, so an index is never stamped later than its entries are.
func (l *link) keepIndex(ix *toolIndex) {
	for {
		old := l.index.Load()
		if old != nil && old.rev > ix.rev || l.index.CompareAndSwap(old, ix) {
			return
		}
	}
}
