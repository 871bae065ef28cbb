package gateway

// The owner's health summary, for `plexus status`.

import (
	"context"
	"slices"

	"github.com/plexus-gw/plexus"
)

// Status summarizes the gateway for `plexus status`.
func (g *Gateway) Status(ctx context.Context, c Credentials) (plexus.StatusResponse, error) {
	if err := g.AdminCheck(ctx, c); err != nil {
		return plexus.StatusResponse{}, err
	}
	entries := g.d.Registry.Entries()
	counts := map[string]int{}
	for _, e := range entries {
		counts[e.Source]++
	}
	out := plexus.StatusResponse{Gateway: g.gatewayInfo(), Home: g.cfg.Home, Revision: g.d.Registry.Revision(),
		Entries: len(entries), Started: g.started, Sources: []plexus.SourceStatus{}, Journal: g.journalHealth()}
	limits := g.Limits()
	out.Limits = &limits
	g.mu.RLock()
	for id := range g.sameUserSeen {
		out.SameUserAgents = append(out.SameUserAgents, id)
	}
	g.mu.RUnlock()
	slices.Sort(out.SameUserAgents)
	for _, id := range g.d.Registry.Sources() {
		src, _ := g.d.Registry.Source(id)
		out.Sources = append(out.Sources, plexus.SourceStatus{ID: id, Provenance: src.Provenance(), Entries: counts[id],
			Health: g.d.Registry.SourceHealth(id)})
	}
	err := g.d.Store.View(ctx, func(tx plexus.StateTx) error {
		agents, err := tx.Agents()
		if err != nil {
			return err
		}
		out.Agents = len(agents)
		p, err := tx.PendingList(plexus.StatePending)
		if err != nil {
			return err
		}
		out.Pending = len(p)
		for _, pd := range p {
			if c := pd.Definition; c != nil {
				if i := slices.IndexFunc(out.Sources, func(s plexus.SourceStatus) bool { return s.ID == c.Source }); i >= 0 {
					out.Sources[i].Held = append(out.Sources[i].Held, c.EntryID)
				}
			}
		}
		out.Grants, err = tx.GrantCount(g.now())
		return err
	})
	if err != nil {
		return plexus.StatusResponse{}, plexus.WrapError(plexus.CodeInternalError, err, "could not read status")
	}
	return out, nil
}
