package gateway

import (
	"context"
	"sort"
	"strings"
	"time"

	"github.com/plexus-gw/plexus"
	"github.com/plexus-gw/plexus/auth"
	"github.com/plexus-gw/plexus/registry"
)

// RequestGrants runs each requested grant through the Authorizer. Allowed
// grants mint a token at once; pending ones become one pending decision (one
// per request, so a task bundle pends as one Approve); denied or invalid ones
// are listed as declined with a reason the agent can act on.
//
// The steps: the request is checked ([requestSession], [checkGrantRequest])
// and sorted into asks ([Gateway.sortAsks]); one durable transaction
// ([Gateway.grantTx]) relinquishes, authorizes each ask, stores the pending
// decision and mints the token; then the events go live and [grantAnswer]
// shapes the reply.
func (g *Gateway) RequestGrants(ctx context.Context, c Credentials, req plexus.GrantRequest) (*plexus.ScopedToken, *plexus.GrantPendingResponse, error) {
	sid, err := requestSession(c, req)
	if err != nil {
		return nil, nil, err
	}
	sess, err := g.session(ctx, sid)
	if err != nil {
		return nil, nil, err
	}
	if err := checkGrantRequest(req); err != nil {
		return nil, nil, err
	}
	sorted := g.sortAsks(req.Grants)
	gr := grantRequest{sess: sess, asks: sorted.asks, relinquish: sorted.relinquish, now: g.now(),
		traceID: auth.NewTraceID(), bundle: req.Bundle, creds: c}
	if req.Bundle != nil {
		gr.bundleID = auth.NewID("bndl_")
	}
	var out granted
	err = g.update(ctx, true, func(tx plexus.StateTx) error {
		var err error
		out, err = g.grantTx(ctx, tx, gr)
		return err
	})
	if err != nil {
		return nil, nil, plexus.AsError(err)
	}
	for _, ev := range out.revokedEvents {
		g.bus.publish(*ev)
	}
	g.touch(out.touched...)
	if out.pend != nil {
		g.touch(out.pend.ID)
	}
	declined := append(sorted.declined, out.declined...)
	return grantAnswer(out.tok, out.pend, declined, len(sorted.relinquish) > 0, g.url)
}

// requestSession is the session a grant request acts for: the body's
// sessionId or the session header, which must agree when both are sent.
func requestSession(c Credentials, req plexus.GrantRequest) (string, error) {
	if req.SessionID == "" {
		return c.SessionID, nil
	}
	if c.SessionID != "" && c.SessionID != req.SessionID {
		return "", plexus.Errorf(plexus.CodeInvalidRequest, "sessionId in the body and the %s header differ", plexus.SessionHeader)
	}
	return req.SessionID, nil
}

// checkGrantRequest refuses a request with no grants, too many, or a bundle
// without a name.
func checkGrantRequest(req plexus.GrantRequest) error {
	if len(req.Grants) == 0 {
		return plexus.Errorf(plexus.CodeInvalidRequest, "grants is empty: send {\"grants\": {\"<capabilityId>\": \"allow\"}}")
	}
	if len(req.Grants) > maxGrantsPerRequest {
		return plexus.Errorf(plexus.CodeInvalidRequest, "at most %d grants per request", maxGrantsPerRequest)
	}
	if req.Bundle != nil && strings.TrimSpace(req.Bundle.Name) == "" {
		return plexus.Errorf(plexus.CodeInvalidRequest, "bundle.name is required")
	}
	return nil
}

// sortedAsks is a grant request sorted by what becomes of each grant, each
// list in capability id order.
type sortedAsks struct {
	asks       []grantAsk        // to authorize
	relinquish []string          // the agent gives these up ("deny")
	declined   []plexus.Declined // invalid asks, with the reason
}

// sortAsks validates each requested grant and sorts it. What an
// extension's entry reaches is looked up here, before the transaction,
// since resolving a program reads the file system.
func (g *Gateway) sortAsks(grants map[string]plexus.GrantDecision) sortedAsks {
	ids := make([]string, 0, len(grants))
	for id := range grants {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	var s sortedAsks
	for _, id := range ids {
		d := grants[id]
		if d.Decision == plexus.DecisionDeny {
			s.relinquish = append(s.relinquish, id)
			continue
		}
		a, reason := g.validateAsk(id, d)
		if reason != "" {
			s.declined = append(s.declined, plexus.Declined{ID: id, Reason: reason})
			continue
		}
		a.reach = registry.EntryReach(a.entry, g.d.Binaries)
		s.asks = append(s.asks, a)
	}
	return s
}

// grantRequest is a checked grant request, ready for its transaction.
type grantRequest struct {
	sess       *plexus.Session
	asks       []grantAsk
	relinquish []string
	now        time.Time
	traceID    string
	bundleID   string
	bundle     *plexus.BundleRequest
	// creds tell whether the caller is the owner's OS user, looked up only
	// when something pends (the lookup reads the system's socket table).
	creds Credentials
}

// granted is what a grant request's transaction committed.
type granted struct {
	tok           *plexus.ScopedToken // for the allowed asks; nil when none
	pend          *plexus.Pending     // the pending decision; nil when nothing pends
	declined      []plexus.Declined   // asks the Authorizer denied
	revokedEvents []*plexus.Event     // of the relinquished grants, to publish live
	touched       []string            // decisions whose grants were relinquished
}

// grantTx applies a grant request in tx: the relinquished grants are
// revoked, each ask is authorized (allowed: a grant, reused or new;
// pending: an item of one pending decision; denied: a declined reason),
// and one token is minted for everything allowed.
func (g *Gateway) grantTx(ctx context.Context, tx plexus.StateTx, r grantRequest) (granted, error) {
	var out granted
	sess := r.sess
	for _, id := range r.relinquish {
		rv, err := g.revokeScope(tx, sess.AgentID, id, "relinquished by the agent", sess.AgentID, plexus.ViaAgent, r.traceID)
		if err != nil {
			return granted{}, err
		}
		out.revokedEvents = append(out.revokedEvents, rv.events...)
		out.touched = append(out.touched, rv.pendingID)
	}
	var allowed []plexus.Grant
	var items []plexus.PendingItem
	var narration []plexus.PendingNarration
	for _, a := range r.asks {
		prior, tomb, err := g.priorGrant(tx, sess, a)
		if err != nil {
			return granted{}, err
		}
		dec := g.d.Authorizer.Authorize(ctx, plexus.AuthorizationContext{
			SessionID: sess.ID, AgentID: sess.AgentID, Anonymous: sess.Kind == plexus.SessionAnon,
			Entry: a.entry, RequestedVerbs: a.verbs, HasPriorApproval: prior != nil, RevokedTombstone: tomb,
		})
		switch dec.Outcome {
		case plexus.OutcomeAllow:
			gr, err := g.allowAsk(tx, r, a, prior, dec.Reason)
			if err != nil {
				return granted{}, err
			}
			allowed = append(allowed, *gr)
		case plexus.OutcomePending:
			item, n := g.pendingAsk(sess, a)
			items = append(items, item)
			narration = append(narration, n)
		default:
			d, row := g.deniedAsk(r, a, dec.Reason)
			out.declined = append(out.declined, d)
			if err := tx.Record(row); err != nil {
				return granted{}, err
			}
		}
	}
	if len(items) > 0 {
		p, row := g.newGrantPending(r, items, narration)
		if err := tx.PutPending(p); err != nil {
			return granted{}, err
		}
		if err := tx.Record(row); err != nil {
			return granted{}, err
		}
		out.pend = p
	}
	if len(allowed) > 0 {
		tok, err := g.mint(tx, sess, allowed, mintTrace(allowed, r.traceID))
		if err != nil {
			return granted{}, err
		}
		out.tok = tok
	}
	return out, nil
}

// allowAsk is an ask the Authorizer allowed: the standing grant that already
// covers it, or a new grant stored with its grant.approved row.
func (g *Gateway) allowAsk(tx plexus.StateTx, r grantRequest, a grantAsk, prior *plexus.Grant, reason string) (*plexus.Grant, error) {
	if prior != nil {
		return prior, nil
	}
	gr := g.newGrant(r.sess, a, r.now, r.traceID, r.bundleID, false)
	if err := tx.PutGrant(gr); err != nil {
		return nil, err
	}
	if err := tx.Record(&plexus.Activity{TraceID: r.traceID, Actor: plexus.ActorSystem, AgentID: r.sess.AgentID,
		ActionType: "grant.approved", Target: a.entry.ID, Payload: grantPayload(gr, map[string]any{
			"decidedBy": "authorizer:" + g.d.Authorizer.Policy(), "via": plexus.ViaSystem, "reason": reason})}); err != nil {
		return nil, err
	}
	return gr, nil
}

// pendingAsk is an ask left to the owner: its item of the pending decision
// and its narration. An anonymous session is only ever offered once.
func (g *Gateway) pendingAsk(sess *plexus.Session, a grantAsk) (plexus.PendingItem, plexus.PendingNarration) {
	w := g.d.Trust.ChooseWindow(a.entry.Provenance, a.verbs, a.window, false)
	if sess.Kind == plexus.SessionAnon {
		w = plexus.TrustWindow{Kind: plexus.WindowOnce}
	}
	item := plexus.PendingItem{CapabilityID: a.entry.ID, Verbs: a.verbs, TrustWindow: w, Constraint: a.constraint,
		Provenance: a.entry.Provenance, Sensitivity: a.entry.Sensitivity, Members: auth.SynthesizeMembers(a.entry)}
	n := auth.Narrate(a.entry, a.verbs, sess.AgentID, a.purpose, w)
	n.Reach = a.reach
	return item, n
}

// deniedAsk is an ask the Authorizer denied: its declined reason and the
// grant.denied row.
func (g *Gateway) deniedAsk(r grantRequest, a grantAsk, reason string) (plexus.Declined, *plexus.Activity) {
	if reason == "" {
		reason = "denied by policy " + g.d.Authorizer.Policy()
	}
	row := &plexus.Activity{TraceID: r.traceID, Actor: plexus.ActorSystem, AgentID: r.sess.AgentID,
		ActionType: "grant.denied", Target: a.entry.ID, Payload: map[string]any{"reason": reason, "via": plexus.ViaSystem}}
	return plexus.Declined{ID: a.entry.ID, Reason: reason}, row
}

// newGrantPending is the pending decision of a request's pending items, and
// its grant.requested row.
func (g *Gateway) newGrantPending(r grantRequest, items []plexus.PendingItem, narration []plexus.PendingNarration) (*plexus.Pending, *plexus.Activity) {
	sess := r.sess
	p := &plexus.Pending{ID: auth.NewID("pend_"), Kind: plexus.PendingGrant, AgentID: sess.AgentID, SessionID: sess.ID,
		State: plexus.StatePending, CreatedAt: r.now, ExpiresAt: r.now.Add(g.cfg.PendingTTL), Items: items,
		Narration: narration, Purpose: firstPurpose(r.asks), BundleID: r.bundleID, Bundle: r.bundle, TraceID: r.traceID,
		SameUser: g.sameUser(r.creds)}
	payload := map[string]any{"capabilities": pendingIDs(p), "purpose": p.Purpose, "bundle": bundleName(r.bundle), "sessionId": sess.ID}
	if p.SameUser {
		payload["sameUser"] = true
	}
	row := &plexus.Activity{TraceID: r.traceID, Actor: sess.AgentID, AgentID: sess.AgentID,
		ActionType: "grant.requested", Target: p.ID, Payload: payload}
	return p, row
}

// mintTrace is the trace a request's token joins: a token backed by one
// grant joins that grant's story, so the calls made under it are found by
// the approval's trace id.
func mintTrace(allowed []plexus.Grant, traceID string) string {
	if len(allowed) == 1 && allowed[0].TraceID != "" {
		return allowed[0].TraceID
	}
	return traceID
}

// grantAnswer shapes RequestGrants' reply from what its transaction
// committed: a pending notice (carrying any partial token) when something
// pends; else the token with what was declined; else, when only
// relinquishing was asked, an empty token; else grant_required naming why.
func grantAnswer(tok *plexus.ScopedToken, pend *plexus.Pending, declined []plexus.Declined, relinquished bool,
	url func(path string) string) (*plexus.ScopedToken, *plexus.GrantPendingResponse, error) {
	if pend != nil {
		if tok != nil {
			tok.Declined = nil
		}
		return nil, &plexus.GrantPendingResponse{Status: plexus.CodeGrantPendingUser, PendingID: pend.ID,
			Pending: pendingIDs(pend), StatusURL: url("/grants/status?pendingId=" + pend.ID),
			PartialToken: tok, PendingNarration: pend.Narration, Declined: declined}, nil
	}
	if tok == nil {
		if relinquished && len(declined) == 0 {
			return &plexus.ScopedToken{Scopes: []plexus.TokenScope{}}, nil, nil
		}
		e := plexus.Errorf(plexus.CodeGrantRequired, "no grant could be issued: %s", declinedText(declined))
		e.Detail = map[string]any{"declined": declined}
		return nil, nil, e
	}
	tok.Declined = declined
	return tok, nil, nil
}
