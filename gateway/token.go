package gateway

import (
	"context"
	"errors"
	"strings"
	"time"

	"github.com/plexus-gw/plexus"
	"github.com/plexus-gw/plexus/auth"
)

// Refresh re-mints a token from its persisted grants, bounded by their
// windows: no connection-key, no re-prompt. The presented token may be
// expired by at most the refresh grace; the old jti is revoked. Scopes whose
// grant no longer stands (revoked, used once grants, windows ended) are not
// carried over; when none remain the agent must go back through PUT /grants.
func (g *Gateway) Refresh(ctx context.Context, c Credentials, req plexus.RefreshRequest) (plexus.RefreshResponse, error) {
	if c.Bearer == "" {
		return plexus.RefreshResponse{}, plexus.Errorf(plexus.CodeTokenRevoked, "present the token to refresh as Authorization: Bearer <token>")
	}
	claims, err := g.d.Signer.VerifyAllowExpired(c.Bearer, g.cfg.RefreshGrace)
	if err != nil {
		return plexus.RefreshResponse{}, err
	}
	if req.JTI != "" && req.JTI != claims.ID {
		return plexus.RefreshResponse{}, plexus.Errorf(plexus.CodeInvalidRequest, "jti does not match the presented token")
	}
	if req.SessionID != "" && req.SessionID != claims.SessionID {
		return plexus.RefreshResponse{}, plexus.Errorf(plexus.CodeSessionExpired, "the token belongs to another session")
	}
	now := g.now()
	var out plexus.RefreshResponse
	err = g.update(ctx, true, func(tx plexus.StateTx) error {
		sess, err := g.liveSession(tx, claims.SessionID)
		if err != nil {
			return err
		}
		rec, err := tx.Token(claims.ID)
		if errors.Is(err, plexus.ErrNotFound) {
			return plexus.Errorf(plexus.CodeTokenRevoked, "unknown token")
		} else if err != nil {
			return err
		}
		if rec.RevokedAt != nil {
			return plexus.Errorf(plexus.CodeTokenRevoked, "token was revoked (%s); request the grant again", rec.RevokeReason)
		}
		var grants []plexus.Grant
		for _, s := range rec.Scopes {
			if s.SynthesizedFor != "" {
				continue // re-derived from the workflow's own grant by mint
			}
			gr, err := tx.Grant(rec.AgentID, s.ID)
			if errors.Is(err, plexus.ErrNotFound) {
				continue
			} else if err != nil {
				return err
			}
			if gr.Standing && gr.Live(now) {
				grants = append(grants, *gr)
			}
		}
		if len(grants) == 0 {
			return plexus.Errorf(plexus.CodeGrantRequired, "no standing grant backs this token any more; request it again with PUT /grants")
		}
		if _, err := tx.RevokeToken(rec.JTI, "refreshed", now); err != nil {
			return err
		}
		tok, err := g.mint(tx, sess, grants, rec.TraceID)
		if err != nil {
			return err
		}
		if err := tx.Record(&plexus.Activity{TraceID: rec.TraceID, Actor: sess.AgentID, AgentID: sess.AgentID,
			ActionType: "token.refreshed", Target: tok.JTI, Payload: map[string]any{"from": rec.JTI}}); err != nil {
			return err
		}
		out = plexus.RefreshResponse{Token: tok.Token, JTI: tok.JTI, ExpiresAt: tok.ExpiresAt, Scopes: tok.Scopes}
		if tok.GrantExpiresAt != nil {
			out.GrantExpiresAt = *tok.GrantExpiresAt
		}
		return nil
	})
	if err != nil {
		return plexus.RefreshResponse{}, plexus.AsError(err)
	}
	return out, nil
}

// Revoke revokes one token by jti, or every token carrying a capability for
// an agent together with the persisted grant (so refresh cannot re-mint).
// The owner (connection-key) may revoke anything; an agent presenting a token
// may revoke its own jti or its own grants. Only the tokens that carry the
// revoked scope die: the agent's other tokens stand.
func (g *Gateway) Revoke(ctx context.Context, c Credentials, req plexus.RevokeRequest) (plexus.RevokeResponse, error) {
	byJTI, err := checkRevokeRequest(req)
	if err != nil {
		return plexus.RevokeResponse{}, err
	}
	actor, agent, via, err := g.revoker(ctx, c)
	if err != nil {
		return plexus.RevokeResponse{}, err
	}
	rv := revokeBy{actor: actor, agent: agent, via: via, reason: auth.CleanPurpose(req.Reason), now: g.now(), traceID: auth.NewTraceID()}
	if rv.reason == "" {
		rv.reason = "revoked by " + actorName(actor)
	}
	var out revoked
	err = g.update(ctx, true, func(tx plexus.StateTx) error {
		var err error
		if byJTI {
			out, err = revokeJTI(tx, rv, req.JTI)
		} else {
			out, err = g.revokeGrant(tx, rv, req.AgentID, req.CapabilityID)
		}
		return err
	})
	if err != nil {
		return plexus.RevokeResponse{}, plexus.AsError(err)
	}
	for _, ev := range out.events {
		g.bus.publish(*ev)
	}
	g.touch(out.decision)
	return out.resp, nil
}

// checkRevokeRequest tells a revocation by jti from one by agent and
// capability, and refuses a request that names both, or neither, or half a
// scope.
func checkRevokeRequest(req plexus.RevokeRequest) (byJTI bool, err error) {
	byJTI = req.JTI != ""
	byScope := req.AgentID != "" || req.CapabilityID != ""
	switch {
	case byJTI && byScope:
		return false, plexus.Errorf(plexus.CodeInvalidRequest, "revoke by jti, or by agentId and capabilityId, not both")
	case !byJTI && !byScope:
		return false, plexus.Errorf(plexus.CodeInvalidRequest, "name a jti, or an agentId and a capabilityId")
	case byScope && (req.AgentID == "" || req.CapabilityID == ""):
		return false, plexus.Errorf(plexus.CodeInvalidRequest, "revoke by scope needs both agentId and capabilityId")
	}
	return byJTI, nil
}

// revokeBy is who revokes, why and when. agent, when set, is the only
// agent whose tokens and grants the revoker may touch (an agent revoking its
// own).
type revokeBy struct {
	actor, agent, via, reason string
	now                       time.Time
	traceID                   string // the row's trace when the revoked record has none
}

// revoked is what a revocation committed.
type revoked struct {
	resp     plexus.RevokeResponse
	events   []*plexus.Event // committed token_revoked events, to publish live
	decision string          // the decision whose grant was revoked, if any
}

// revokeJTI revokes one token in tx and journals token.revoked (even when
// it was revoked already: the request is on record).
func revokeJTI(tx plexus.StateTx, rv revokeBy, jti string) (revoked, error) {
	out := revoked{resp: plexus.RevokeResponse{RevokedJTIs: []string{}}}
	rec, err := tx.Token(jti)
	if errors.Is(err, plexus.ErrNotFound) {
		return revoked{}, plexus.Errorf(plexus.CodeNotFound, "unknown jti")
	} else if err != nil {
		return revoked{}, err
	}
	if rv.agent != "" && rec.AgentID != rv.agent {
		return revoked{}, plexus.Errorf(plexus.CodeNotFound, "unknown jti") // never confirm another agent's token exists
	}
	traceID := rv.traceID
	if rec.TraceID != "" {
		traceID = rec.TraceID
	}
	ok, err := tx.RevokeToken(rec.JTI, rv.reason, rv.now)
	if err != nil {
		return revoked{}, err
	}
	a := &plexus.Activity{TraceID: traceID, Actor: rv.actor, AgentID: rec.AgentID, ActionType: "token.revoked",
		Target: rec.JTI, Payload: map[string]any{"reason": rv.reason, "via": rv.via}}
	if err := tx.Record(a); err != nil {
		return revoked{}, err
	}
	out.resp.AuditID = a.AuditID()
	if ok {
		out.resp.RevokedJTIs = append(out.resp.RevokedJTIs, rec.JTI)
		ev := revokedEvent(rec, rv.reason)
		out.events = append(out.events, ev)
		if err := tx.Publish(ev); err != nil {
			return revoked{}, err
		}
	}
	out.resp.OK = ok
	return out, nil
}

// revokeGrant revokes agentID's grant for capabilityID and the live tokens
// carrying it, in tx. When nothing stood it answers not_found and journals
// nothing (the transaction rolls back).
func (g *Gateway) revokeGrant(tx plexus.StateTx, rv revokeBy, agentID, capabilityID string) (revoked, error) {
	if rv.agent != "" && agentID != rv.agent {
		return revoked{}, plexus.Errorf(plexus.CodeNotFound, "no grant for that agent and capability")
	}
	traceID := rv.traceID
	gr, err := tx.Grant(agentID, capabilityID)
	if err == nil && gr.RevokedAt == nil {
		if gr.TraceID != "" {
			traceID = gr.TraceID
		}
	} else if err != nil && !errors.Is(err, plexus.ErrNotFound) {
		return revoked{}, err
	}
	r, err := g.revokeScope(tx, agentID, capabilityID, rv.reason, rv.actor, rv.via, traceID)
	if err != nil {
		return revoked{}, err
	}
	if !r.removed && len(r.jtis) == 0 {
		return revoked{}, plexus.Errorf(plexus.CodeNotFound, "%s holds no grant or live token for %s", agentID, capabilityID)
	}
	resp := plexus.RevokeResponse{RevokedJTIs: append([]string{}, r.jtis...), GrantRemoved: r.removed, AuditID: r.auditID,
		OK: r.removed || len(r.jtis) > 0}
	return revoked{resp: resp, events: r.events, decision: r.pendingID}, nil
}

// revoker resolves who is revoking: the owner (connection-key) or an agent
// (its token). It returns the actor, the agent the caller is confined to
// ("" for the owner) and the channel.
func (g *Gateway) revoker(ctx context.Context, c Credentials) (actor, agent, via string, err error) {
	key := c.ConnectionKey
	if strings.HasPrefix(c.Bearer, plexus.PrefixConnectionKey) {
		key = c.Bearer
	}
	if key != "" {
		if err := g.AdminCheck(ctx, Credentials{ConnectionKey: key, Remote: c.Remote}); err != nil {
			return "", "", "", err
		}
		via = plexus.ViaAdminAPI
		if c.Via != "" {
			via = c.Via
		}
		return plexus.ActorHuman, "", via, nil
	}
	if c.Bearer == "" {
		return "", "", "", plexus.Errorf(plexus.CodeUnauthorized, "revoke needs the connection-key or your own token as Authorization: Bearer")
	}
	claims, err := g.d.Signer.VerifyAllowExpired(c.Bearer, g.cfg.RefreshGrace)
	if err != nil {
		return "", "", "", err
	}
	return claims.Subject, claims.Subject, plexus.ViaAgent, nil
}

// revocation is what revokeScope ended.
type revocation struct {
	events []*plexus.Event
	// removed says whether a standing grant was removed; pendingID is the
	// decision that grant came from ("" when none, or not one of the owner's).
	removed   bool
	pendingID string
	jtis      []string
	auditID   string
}

// revokeScope removes the grant for (agentID, capabilityID) and revokes
// every live token carrying that capability, inside tx. The grant row stays
// as a tombstone so an auto-allowable read pends until re-approved.
func (g *Gateway) revokeScope(tx plexus.StateTx, agentID, capabilityID, reason, actor, via, traceID string) (revocation, error) {
	now := g.now()
	var out revocation
	gr, err := tx.Grant(agentID, capabilityID)
	switch {
	case errors.Is(err, plexus.ErrNotFound):
	case err != nil:
		return revocation{}, err
	case gr.RevokedAt == nil:
		if err := tx.RevokeGrant(gr.ID, now); err != nil {
			return revocation{}, err
		}
		out.removed, out.pendingID = true, gr.PendingID
	}
	toks, err := tx.LiveTokens(agentID, capabilityID, "", now)
	if err != nil {
		return revocation{}, err
	}
	if out.jtis, out.events, err = revokeTokens(tx, toks, reason, now); err != nil {
		return revocation{}, err
	}
	a := &plexus.Activity{TraceID: traceID, Actor: actor, AgentID: agentID, ActionType: "grant.revoked", Target: capabilityID,
		Payload: map[string]any{"reason": reason, "via": via, "grantRemoved": out.removed, "revokedJtis": out.jtis}}
	if err := tx.Record(a); err != nil {
		return revocation{}, err
	}
	out.auditID = a.AuditID()
	return out, nil
}

// revokeTokens revokes each of toks still live, inside tx, and queues its
// token_revoked event; it answers the jtis it revoked and the events to
// publish after commit.
func revokeTokens(tx plexus.StateTx, toks []plexus.TokenRecord, reason string, now time.Time) ([]string, []*plexus.Event, error) {
	var jtis []string
	var events []*plexus.Event
	for i := range toks {
		ok, err := tx.RevokeToken(toks[i].JTI, reason, now)
		if err != nil {
			return nil, nil, err
		}
		if !ok {
			continue
		}
		jtis = append(jtis, toks[i].JTI)
		ev := revokedEvent(&toks[i], reason)
		if err := tx.Publish(ev); err != nil {
			return nil, nil, err
		}
		events = append(events, ev)
	}
	return jtis, events, nil
}

func revokedEvent(rec *plexus.TokenRecord, reason string) *plexus.Event {
	return newEvent(plexus.EventTokenRevoked, rec.AgentID, rec.SessionID,
		plexus.TokenRevokedEvent{Type: plexus.EventTokenRevoked, JTI: rec.JTI, Reason: reason}, nil)
}

func actorName(actor string) string {
	if actor == plexus.ActorHuman {
		return "the owner"
	}
	return actor
}
