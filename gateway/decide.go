package gateway

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/plexus-gw/plexus"
	"github.com/plexus-gw/plexus/auth"
)

// Decide applies one decision to a pending request. It is the single code
// path behind every channel (admin API, CLI, a file moved in the inbox): each
// records who decided and via which channel, and the state change, its
// journal row and its event commit in one durable transaction.
//
// Narrowing fields (Capabilities, Verbs) may only narrow what was asked; a
// widening decision is refused with invalid_request and changes nothing. The
// trust window the owner picks is authoritative, except that execute is never
// standing.
func (g *Gateway) Decide(ctx context.Context, d plexus.Decision) (plexus.Pending, error) {
	if err := checkDecision(&d); err != nil {
		return plexus.Pending{}, err
	}
	now := g.now()
	var eff decided
	err := g.update(ctx, true, func(tx plexus.StateTx) error {
		var err error
		eff, err = g.decide(tx, d, now)
		return err
	})
	if err != nil {
		return plexus.Pending{}, plexus.AsError(err)
	}
	g.afterDecision(ctx, &eff)
	return eff.out, nil
}

// decided is what a committed decision leaves for after its transaction.
type decided struct {
	out        plexus.Pending
	events     []*plexus.Event     // committed with the decision, to publish live
	minted     *plexus.ScopedToken // an approval's token, for the asking session's poll
	registered plexus.Source       // an approved extension, brought online after the commit
	refresh    string              // the source of an approved definition, rescanned after the commit
	signIn     string              // the server of an approved sign-in request, started after the commit
}

// checkDecision refuses a decision that cannot be applied to any request
// and fills in who decided when the channel does not say.
func checkDecision(d *plexus.Decision) error {
	if d.DecidedBy == "" {
		d.DecidedBy = plexus.ActorHuman
	}
	if d.Via == "" {
		return plexus.Errorf(plexus.CodeInvalidRequest, "a decision must say via which channel it was made")
	}
	if d.Withdraw && d.Approve {
		return plexus.Errorf(plexus.CodeInvalidRequest, "a decision cannot both approve and withdraw")
	}
	if d.TrustWindow != nil && !auth.ValidWindow(*d.TrustWindow) {
		return plexus.Errorf(plexus.CodeInvalidRequest,
			"trust window %+v is not valid (kinds: once, 1h, 1d, 7d, until-revoked, custom with ms > 0)", *d.TrustWindow)
	}
	return nil
}

// decide applies d inside tx: the pending request is read and checked, then
// stamped with who decided, and the step for its kind and answer writes the
// state change with its journal row and event.
func (g *Gateway) decide(tx plexus.StateTx, d plexus.Decision, now time.Time) (decided, error) {
	p, err := tx.Pending(d.PendingID)
	if errors.Is(err, plexus.ErrNotFound) {
		return decided{}, plexus.Errorf(plexus.CodeNotFound, "no pending decision %q", d.PendingID)
	} else if err != nil {
		return decided{}, err
	}
	if err := decidable(p, now); err != nil {
		return decided{}, err
	}
	p.DecidedAt, p.DecidedBy, p.Via, p.Reason = &now, d.DecidedBy, d.Via, auth.CleanPurpose(d.Reason)
	actor := deciderActor(d.Via)
	switch {
	case p.Kind == plexus.PendingDefinition:
		pinned, err := g.decideDefinition(tx, p, d, actor, now)
		if err != nil {
			return decided{}, err
		}
		return decided{out: *p, refresh: pinned}, nil
	case p.Kind == plexus.PendingSignIn:
		server, err := decideSignIn(tx, p, d, actor)
		if err != nil {
			return decided{}, err
		}
		return decided{out: *p, signIn: server}, nil
	case !d.Approve:
		row, ev := refusal(p, d, actor)
		if err := commitDecision(tx, p, row, ev); err != nil {
			return decided{}, err
		}
		return decided{out: *p, events: []*plexus.Event{ev}}, nil
	case p.Kind == plexus.PendingExtension:
		src, err := g.approveExtension(tx, p, d, now)
		if err != nil {
			return decided{}, err
		}
		p.State = plexus.StateApproved
		row := &plexus.Activity{TraceID: p.TraceID, Actor: actor, AgentID: p.AgentID, ActionType: "extension.approved",
			Target: p.ID, Payload: map[string]any{"decidedBy": d.DecidedBy, "via": d.Via, "source": p.Extension.Source,
				"reason": p.Reason}}
		ev := resolvedEvent(p, nil)
		if err := commitDecision(tx, p, row, ev); err != nil {
			return decided{}, err
		}
		return decided{out: *p, events: []*plexus.Event{ev}, registered: src}, nil
	}
	return g.approveGrants(tx, p, d, actor, now)
}

// decidable refuses a request that is no longer pending or has expired.
func decidable(p *plexus.Pending, now time.Time) error {
	if p.State != plexus.StatePending {
		return plexus.Errorf(plexus.CodeConflict, "pending decision %s is already %s", p.ID, p.State)
	}
	if !now.Before(p.ExpiresAt) {
		return plexus.Errorf(plexus.CodeConflict, "pending decision %s expired at %s", p.ID, p.ExpiresAt.Format("2006-01-02 15:04:05Z"))
	}
	return nil
}

// deciderActor is the journal's actor for a decision made via a channel:
// the gateway itself for the system channel, the owner for every other.
func deciderActor(via string) string {
	if via == plexus.ViaSystem {
		return plexus.ActorSystem
	}
	return plexus.ActorHuman
}

// refusal sets p denied (or withdrawn) and returns the row and the event
// that record it. It performs no I/O.
func refusal(p *plexus.Pending, d plexus.Decision, actor string) (*plexus.Activity, *plexus.Event) {
	action := actionOf(p.Kind, "denied")
	p.State = plexus.StateDenied
	if d.Withdraw {
		p.State, action = plexus.StateWithdrawn, actionOf(p.Kind, "withdrawn")
	}
	row := &plexus.Activity{TraceID: p.TraceID, Actor: actor, AgentID: p.AgentID, ActionType: action,
		Target: p.ID, Payload: map[string]any{"decidedBy": d.DecidedBy, "via": d.Via, "reason": p.Reason, "capabilities": pendingIDs(p)}}
	return row, resolvedEvent(p, nil)
}

// resolvedEvent is the grant_resolved event of decided request p; tok, an
// approval's token, rides only to the live subscriber of the asking
// session, never into the journal.
func resolvedEvent(p *plexus.Pending, tok *plexus.ScopedToken) *plexus.Event {
	return newEvent(plexus.EventGrantResolved, p.AgentID, p.SessionID,
		plexus.GrantResolvedEvent{Type: plexus.EventGrantResolved, PendingID: p.ID, Decision: p.State},
		optionalResolved(p.ID, tok))
}

// commitDecision writes decided request p with its journal row and its
// event, in the decision's transaction.
func commitDecision(tx plexus.StateTx, p *plexus.Pending, row *plexus.Activity, ev *plexus.Event) error {
	if err := tx.PutPending(p); err != nil {
		return err
	}
	if err := tx.Record(row); err != nil {
		return err
	}
	return tx.Publish(ev)
}

// approveGrants approves a grant request: each (narrowed) item becomes a
// grant with its grant.approved row, the request is stored approved, and a
// token is minted at once when the asking session is still live.
func (g *Gateway) approveGrants(tx plexus.StateTx, p *plexus.Pending, d plexus.Decision, actor string, now time.Time) (decided, error) {
	items, err := narrowItems(p.Items, d)
	if err != nil {
		return decided{}, err
	}
	sess := &plexus.Session{ID: p.SessionID, AgentID: p.AgentID, Kind: plexus.SessionAgent}
	if s, err := tx.Session(p.SessionID); err == nil {
		sess = s
	}
	var grants []plexus.Grant
	for i, it := range items {
		entry, ok := g.d.Registry.Entry(it.CapabilityID)
		if !ok {
			return decided{}, plexus.Errorf(plexus.CodeConflict, "capability %s is no longer offered; deny this request instead", it.CapabilityID)
		}
		w := it.TrustWindow
		if d.TrustWindow != nil {
			w = *d.TrustWindow
		}
		a := grantAsk{entry: entry, verbs: it.Verbs, window: &w, constraint: it.Constraint}
		gr := g.newGrant(sess, a, now, p.TraceID, p.BundleID, true)
		gr.PendingID = p.ID
		items[i].TrustWindow = gr.TrustWindow // the decided window, as stored and shown
		if err := tx.PutGrant(gr); err != nil {
			return decided{}, err
		}
		if err := tx.Record(&plexus.Activity{TraceID: p.TraceID, Actor: actor, AgentID: p.AgentID, ActionType: "grant.approved",
			Target: it.CapabilityID, Payload: grantPayload(gr, map[string]any{"decidedBy": d.DecidedBy, "via": d.Via,
				"pendingId": p.ID, "reason": p.Reason})}); err != nil {
			return decided{}, err
		}
		grants = append(grants, *gr)
	}
	p.State = plexus.StateApproved
	p.Items = items
	if err := tx.PutPending(p); err != nil {
		return decided{}, err
	}
	var minted *plexus.ScopedToken
	if _, err := g.liveSession(tx, p.SessionID); err == nil {
		if minted, err = g.mint(tx, sess, grants, p.TraceID); err != nil {
			return decided{}, err
		}
	}
	ev := resolvedEvent(p, minted)
	if err := tx.Publish(ev); err != nil {
		return decided{}, err
	}
	return decided{out: *p, events: []*plexus.Event{ev}, minted: minted}, nil
}

// afterDecision does what follows a committed decision: the approved token
// is held for the asking session's poll, the events go live, an approved
// definition's source is rescanned, an approved extension brought online
// and an approved sign-in started (its URL kept on the decision before
// the inbox is told, so the file shows it).
func (g *Gateway) afterDecision(ctx context.Context, eff *decided) {
	if eff.minted != nil {
		g.mu.Lock()
		g.resolved[eff.out.ID] = eff.minted
		g.mu.Unlock()
	}
	for _, ev := range eff.events {
		g.bus.publish(*ev)
	}
	if eff.refresh != "" {
		g.refreshSource(ctx, eff.refresh)
	}
	if eff.registered != nil {
		// Persisted with the decision: should this fail, the next start
		// brings it online from the stored manifest.
		if err := g.bringOnlineSource(ctx, eff.registered); err != nil {
			g.log.Error("register an approved extension", "source", eff.registered.ID(), "err", err)
		}
	}
	if eff.signIn != "" {
		eff.out = g.startSignIn(ctx, eff.out)
	}
	g.touch(eff.out.ID)
}

// RevokeDecision revokes every grant an approved decision gave that still
// stands, and every live token carrying one (token_revoked fires), as when
// the owner removes the decision's file from active/. For an approved
// extension registration it removes the extension, purging its grants. It reports how many
// grants it revoked; none is not an error (they may have ended already).
func (g *Gateway) RevokeDecision(ctx context.Context, pendingID, decidedBy, via, reason string) (int, error) {
	decidedBy, reason, err := checkRevocation(decidedBy, via, reason)
	if err != nil {
		return 0, err
	}
	var eff decisionRevoked
	err = g.update(ctx, true, func(tx plexus.StateTx) error {
		var err error
		eff, err = g.revokeDecided(tx, pendingID, decidedBy, via, reason)
		return err
	})
	if err != nil {
		return 0, plexus.AsError(err)
	}
	return g.afterRevokeDecision(ctx, pendingID, eff, decidedBy, via)
}

// decisionRevoked is what revoking a decision did inside the transaction,
// and what remains to do after commit.
type decisionRevoked struct {
	events    []*plexus.Event // token_revoked, to publish
	grants    int             // grants revoked
	uninstall string          // the source of an approved extension decision
	refresh   string          // the source of an approved definition, unpinned
}

// checkRevocation refuses a revocation that names no channel and fills the
// defaults of who revoked and why.
func checkRevocation(decidedBy, via, reason string) (string, string, error) {
	if via == "" {
		return "", "", plexus.Errorf(plexus.CodeInvalidRequest, "a revocation must say via which channel it was made")
	}
	if decidedBy == "" {
		decidedBy = plexus.ActorHuman
	}
	reason = auth.CleanPurpose(reason)
	if reason == "" {
		reason = "revoked by the owner"
	}
	return decidedBy, reason, nil
}

// revocable refuses to revoke a decision that granted nothing.
func revocable(p *plexus.Pending) error {
	if p.State != plexus.StateApproved {
		return plexus.Errorf(plexus.CodeConflict, "decision %s is %s: it granted nothing to revoke", p.ID, p.State)
	}
	return nil
}

// revokeDecided revokes, inside tx, what the approved decision pendingID
// gave: an extension is left to uninstall after commit, a definition is
// unpinned, and each grant still standing from it is revoked with its
// tokens, under one decision.revoked row.
func (g *Gateway) revokeDecided(tx plexus.StateTx, pendingID, decidedBy, via, reason string) (decisionRevoked, error) {
	p, err := tx.Pending(pendingID)
	if errors.Is(err, plexus.ErrNotFound) {
		return decisionRevoked{}, plexus.Errorf(plexus.CodeNotFound, "no decision %q", pendingID)
	} else if err != nil {
		return decisionRevoked{}, err
	}
	if err := revocable(p); err != nil {
		return decisionRevoked{}, err
	}
	if p.Extension != nil {
		return decisionRevoked{uninstall: p.Extension.Source}, nil
	}
	if p.Definition != nil {
		unpinned, err := g.revokeDefinition(tx, p, decidedBy, via, reason)
		if err != nil {
			return decisionRevoked{}, err
		}
		return decisionRevoked{refresh: unpinned}, nil
	}
	var out decisionRevoked
	now := g.now()
	for _, it := range p.Items {
		gr, err := tx.Grant(p.AgentID, it.CapabilityID)
		if errors.Is(err, plexus.ErrNotFound) {
			continue
		} else if err != nil {
			return decisionRevoked{}, err
		}
		if gr.PendingID != p.ID || !gr.Live(now) {
			continue // ended already, or replaced by a newer decision
		}
		r, err := g.revokeScope(tx, p.AgentID, it.CapabilityID, reason, plexus.ActorHuman, via, p.TraceID)
		if err != nil {
			return decisionRevoked{}, err
		}
		out.events = append(out.events, r.events...)
		out.grants++
	}
	if out.grants == 0 {
		return out, nil
	}
	return out, tx.Record(&plexus.Activity{TraceID: p.TraceID, Actor: plexus.ActorHuman, AgentID: p.AgentID,
		ActionType: "decision.revoked", Target: p.ID, Payload: map[string]any{"decidedBy": decidedBy, "via": via,
			"reason": reason, "grants": out.grants}})
}

// afterRevokeDecision does, after commit, what a revoked decision leaves:
// refresh the source of an unpinned definition, uninstall an extension, or
// publish the token_revoked events. It answers how many grants (or the one
// definition or extension) it revoked.
func (g *Gateway) afterRevokeDecision(ctx context.Context, pendingID string, eff decisionRevoked, decidedBy, via string) (int, error) {
	if eff.refresh != "" {
		g.refreshSource(ctx, eff.refresh)
		g.touch(pendingID)
		return 1, nil
	}
	if eff.uninstall != "" {
		// An installed extension's decision: revoking it uninstalls the
		// extension, with its grants.
		if _, ok := g.d.Registry.Source(eff.uninstall); !ok {
			return 0, nil
		}
		if err := g.removeSource(ctx, eff.uninstall, true, decidedBy, via); err != nil {
			return 0, err
		}
		return 1, nil
	}
	for _, ev := range eff.events {
		g.bus.publish(*ev)
	}
	g.touch(pendingID)
	return eff.grants, nil
}

func optionalResolved(pendingID string, tok *plexus.ScopedToken) any {
	if tok == nil {
		return nil
	}
	return plexus.GrantResolvedEvent{Type: plexus.EventGrantResolved, PendingID: pendingID, Decision: plexus.StateApproved, Token: tok}
}

// narrowItems applies a decision's narrowing to the requested items and
// refuses anything that would widen them.
func narrowItems(items []plexus.PendingItem, d plexus.Decision) ([]plexus.PendingItem, error) {
	if len(d.Items) > 0 {
		if len(d.Capabilities) > 0 || len(d.Verbs) > 0 || d.TrustWindow != nil {
			return nil, plexus.Errorf(plexus.CodeInvalidRequest, "narrow either per capability or for the whole request, not both")
		}
		return narrowEach(items, d.Items)
	}
	out := items
	if len(d.Capabilities) > 0 {
		out = nil
		for _, id := range d.Capabilities {
			i := slices.IndexFunc(items, func(it plexus.PendingItem) bool { return it.CapabilityID == id })
			if i < 0 {
				return nil, plexus.Errorf(plexus.CodeInvalidRequest, "%s was not requested; a decision may only narrow the request", id)
			}
			out = append(out, items[i])
		}
	}
	if len(d.Verbs) > 0 {
		narrowed := make([]plexus.PendingItem, len(out))
		for i, it := range out {
			for _, v := range d.Verbs {
				if !slices.Contains(it.Verbs, v) {
					return nil, plexus.Errorf(plexus.CodeInvalidRequest, "%s was requested with %s, not %s; a decision may only narrow the request",
						it.CapabilityID, verbList(it.Verbs), v)
				}
			}
			it.Verbs = plexus.NormalizeVerbs(d.Verbs)
			narrowed[i] = it
		}
		out = narrowed
	}
	if len(out) == 0 {
		return nil, plexus.Errorf(plexus.CodeInvalidRequest, "nothing left to approve")
	}
	return out, nil
}

// narrowEach applies per-capability narrowing: only capabilities that were
// asked, only verbs that were asked, windows no longer than asked, and
// constraints that narrow what was asked.
func narrowEach(items []plexus.PendingItem, each []plexus.ItemDecision) ([]plexus.PendingItem, error) {
	out := make([]plexus.PendingItem, 0, len(each))
	seen := map[string]bool{}
	for _, n := range each {
		i := slices.IndexFunc(items, func(it plexus.PendingItem) bool { return it.CapabilityID == n.CapabilityID })
		if i < 0 || seen[n.CapabilityID] {
			return nil, plexus.Errorf(plexus.CodeInvalidRequest, "%s was not requested (or is listed twice); a decision may only narrow the request", n.CapabilityID)
		}
		seen[n.CapabilityID] = true
		it := items[i]
		if len(n.Verbs) > 0 {
			for _, v := range n.Verbs {
				if !slices.Contains(it.Verbs, v) {
					return nil, plexus.Errorf(plexus.CodeInvalidRequest, "%s was requested with %s, not %s; a decision may only narrow the request",
						it.CapabilityID, verbList(it.Verbs), v)
				}
			}
			it.Verbs = plexus.NormalizeVerbs(n.Verbs)
		}
		if n.TrustWindow != nil {
			if !auth.ValidWindow(*n.TrustWindow) || !auth.Narrower(*n.TrustWindow, it.TrustWindow) {
				return nil, plexus.Errorf(plexus.CodeInvalidRequest, "%s: window %+v is not a valid narrowing of %+v", it.CapabilityID, *n.TrustWindow, it.TrustWindow)
			}
			it.TrustWindow = *n.TrustWindow
		}
		if n.Constraint != nil {
			if err := auth.ValidateConstraint(n.Constraint); err != nil {
				return nil, plexus.Errorf(plexus.CodeInvalidRequest, "%s: invalid constraint: %v", it.CapabilityID, err)
			}
			if !auth.Narrows(n.Constraint, it.Constraint) {
				return nil, plexus.Errorf(plexus.CodeInvalidRequest, "%s: the constraint does not narrow what was asked", it.CapabilityID)
			}
			it.Constraint = n.Constraint
		}
		out = append(out, it)
	}
	return out, nil
}

// AdminDecide is the admin API's entry into [Gateway.Decide].
func (g *Gateway) AdminDecide(ctx context.Context, c Credentials, pendingID string, req plexus.DecideRequest) (plexus.Pending, error) {
	if err := g.AdminCheck(ctx, c); err != nil {
		return plexus.Pending{}, err
	}
	var approve bool
	switch req.Action {
	case "approve":
		approve = true
	case "deny", "reject":
	default:
		return plexus.Pending{}, plexus.Errorf(plexus.CodeInvalidRequest, "action must be \"approve\" or \"deny\"")
	}
	via := plexus.ViaAdminAPI
	if c.Via != "" {
		via = c.Via
	}
	return g.Decide(ctx, plexus.Decision{PendingID: pendingID, Approve: approve, DecidedBy: plexus.ActorHuman, Via: via,
		Reason: req.Reason, TrustWindow: req.TrustWindow, Verbs: req.Verbs, Capabilities: req.Capabilities})
}

// Sweep expires pending decisions past their deadline and forgets approved
// tokens past their expiry. Run calls it periodically; it is exported so a
// restart can converge at once.
func (g *Gateway) Sweep(ctx context.Context) error {
	now := g.now()
	var list []plexus.Pending
	if err := g.d.Store.View(ctx, func(tx plexus.StateTx) error {
		var err error
		list, err = tx.PendingList(plexus.StatePending)
		return err
	}); err != nil {
		return fmt.Errorf("list pending: %w", err)
	}
	for _, p := range list {
		if now.Before(p.ExpiresAt) {
			continue
		}
		var ev *plexus.Event
		var expired bool
		err := g.update(ctx, true, func(tx plexus.StateTx) error {
			ev, expired = nil, false
			cur, err := tx.Pending(p.ID)
			if err != nil || cur.State != plexus.StatePending {
				return err
			}
			cur.State, cur.DecidedAt, cur.DecidedBy, cur.Via = plexus.StateExpired, &now, plexus.ActorSystem, plexus.ViaSystem
			if err := tx.PutPending(cur); err != nil {
				return err
			}
			payload := map[string]any{"capabilities": pendingIDs(cur)}
			if s := cur.SignIn; s != nil {
				payload = signInPayload(s.SignInRequest, nil)
			}
			if err := tx.Record(&plexus.Activity{TraceID: cur.TraceID, Actor: plexus.ActorSystem, AgentID: cur.AgentID,
				ActionType: actionOf(cur.Kind, "expired"), Target: cur.ID, Payload: payload}); err != nil {
				return err
			}
			expired = true
			if cur.SessionID == "" {
				return nil // a decision no agent asked for (a changed definition): nobody to tell
			}
			ev = newEvent(plexus.EventGrantResolved, cur.AgentID, cur.SessionID,
				plexus.GrantResolvedEvent{Type: plexus.EventGrantResolved, PendingID: cur.ID, Decision: plexus.StateExpired}, nil)
			return tx.Publish(ev)
		})
		if err != nil {
			return fmt.Errorf("expire %s: %w", p.ID, err)
		}
		if ev != nil {
			g.bus.publish(*ev)
		}
		if expired {
			g.touch(p.ID)
		}
	}
	g.mu.Lock()
	for id, tok := range g.resolved {
		if !now.Before(tok.ExpiresAt) {
			delete(g.resolved, id)
		}
	}
	g.mu.Unlock()
	return nil
}

// AdminPending lists the decisions waiting for the owner, oldest first.
func (g *Gateway) AdminPending(ctx context.Context, c Credentials) (plexus.PendingListResponse, error) {
	if err := g.AdminCheck(ctx, c); err != nil {
		return plexus.PendingListResponse{}, err
	}
	var list []plexus.Pending
	if err := g.d.Store.View(ctx, func(tx plexus.StateTx) error {
		var err error
		list, err = tx.PendingList(plexus.StatePending)
		return err
	}); err != nil {
		return plexus.PendingListResponse{}, plexus.WrapError(plexus.CodeInternalError, err, "could not list pending decisions")
	}
	if list == nil {
		list = []plexus.Pending{}
	}
	return plexus.PendingListResponse{Pending: list}, nil
}

// AdminShowPending returns one decision, whatever its state.
func (g *Gateway) AdminShowPending(ctx context.Context, c Credentials, id string) (plexus.Pending, error) {
	if err := g.AdminCheck(ctx, c); err != nil {
		return plexus.Pending{}, err
	}
	var p *plexus.Pending
	err := g.d.Store.View(ctx, func(tx plexus.StateTx) error {
		var err error
		p, err = tx.Pending(id)
		return err
	})
	if errors.Is(err, plexus.ErrNotFound) {
		return plexus.Pending{}, plexus.Errorf(plexus.CodeNotFound, "no decision %q", id)
	} else if err != nil {
		return plexus.Pending{}, plexus.WrapError(plexus.CodeInternalError, err, "could not read the decision")
	}
	return *p, nil
}
