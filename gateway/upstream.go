package gateway

import (
	"context"
	"encoding/json"

	"github.com/plexus-gw/plexus"
)

// Complete asks the server behind capability id to complete an argument
// of it (params is the completion's argument and context, as JSON). It is
// a read of the entry's metadata, not a call: it needs a live session and
// an entry whose transport can complete, but no grant, and it is neither
// journaled nor approved. Which entries a session may name is the edge's
// business (its agent's view).
func (g *Gateway) Complete(ctx context.Context, c Credentials, id string, params json.RawMessage) (json.RawMessage, error) {
	entry, tr, err := g.upstreamOf(ctx, c, id)
	if err != nil {
		return nil, err
	}
	cp, ok := tr.(plexus.Completer)
	if !ok {
		return nil, plexus.Errorf(plexus.CodeInvalidRequest, "%s's transport (%s) completes no arguments", id, entry.Transport)
	}
	return cp.Complete(ctx, entry, params)
}

// SubscribeResource has the server behind resource capability id call
// updated when the resource at uri changes, until unsubscribe. Like
// [Gateway.Complete] it needs a live session, not a grant: nothing is read
// until the agent reads it, and a read is governed as always.
func (g *Gateway) SubscribeResource(ctx context.Context, c Credentials, id, uri string, updated func()) (func(), error) {
	entry, tr, err := g.upstreamOf(ctx, c, id)
	if err != nil {
		return nil, err
	}
	rs, ok := tr.(plexus.ResourceSubscriber)
	if !ok {
		return nil, plexus.Errorf(plexus.CodeInvalidRequest, "%s's transport (%s) takes no resource subscriptions", id, entry.Transport)
	}
	return rs.SubscribeResource(ctx, entry, uri, updated)
}

// upstreamOf is the entry id names and its transport, for a live agent
// session.
func (g *Gateway) upstreamOf(ctx context.Context, c Credentials, id string) (plexus.Entry, plexus.Transport, error) {
	sess, err := g.session(ctx, c.SessionID)
	if err != nil {
		return plexus.Entry{}, nil, err
	}
	if sess.Kind != plexus.SessionAgent {
		return plexus.Entry{}, nil, plexus.Errorf(plexus.CodeInvalidRequest, "only an agent's session asks a capability's server")
	}
	entry, ok := g.d.Registry.Entry(id)
	if !ok {
		return plexus.Entry{}, nil, plexus.Errorf(plexus.CodeUnknownCapability, "unknown capability %s", id)
	}
	tr, ok := g.d.Registry.Transport(entry.Transport)
	if !ok {
		return plexus.Entry{}, nil, plexus.Errorf(plexus.CodeSourceUnavailable, "no transport %q is installed", entry.Transport)
	}
	return entry, tr, nil
}
