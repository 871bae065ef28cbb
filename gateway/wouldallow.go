package gateway

import (
	"context"

	"github.com/plexus-gw/plexus"
)

// WouldAllow answers, for each capability id, whether asking now, in the
// session c names, for the verbs the capability requires would be allowed
// without the owner: the Authorizer's own answer on the session's state (a
// standing approval, a revocation tombstone), read without writing or
// recording anything. An id the gateway does not know, or whose request
// would pend or be denied, answers false. The MCP front door's search shows
// it, so that a host knows what it can call at once.
func (g *Gateway) WouldAllow(ctx context.Context, c Credentials, ids []string) (map[string]bool, error) {
	sess, err := g.session(ctx, c.SessionID)
	if err != nil {
		return nil, err
	}
	out := make(map[string]bool, len(ids))
	err = g.d.Store.View(ctx, func(tx plexus.StateTx) error {
		for _, id := range ids {
			entry, ok := g.d.Registry.Entry(id)
			if !ok {
				continue
			}
			a, reason := g.validateAsk(id, plexus.GrantDecision{Decision: plexus.DecisionAllow, Verbs: entry.Grants})
			if reason != "" {
				continue
			}
			prior, tomb, err := g.priorGrant(tx, sess, a)
			if err != nil {
				return err
			}
			dec := g.d.Authorizer.Authorize(ctx, plexus.AuthorizationContext{
				SessionID: sess.ID, AgentID: sess.AgentID, Anonymous: sess.Kind == plexus.SessionAnon,
				Entry: a.entry, RequestedVerbs: a.verbs, HasPriorApproval: prior != nil, RevokedTombstone: tomb,
			})
			out[id] = dec.Outcome == plexus.OutcomeAllow
		}
		return nil
	})
	if err != nil {
		return nil, plexus.AsError(err)
	}
	return out, nil
}
