package gateway

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/plexus-gw/plexus"
	"github.com/plexus-gw/plexus/auth"
)

// grantAsk is one requested grant after validation.
type grantAsk struct {
	entry      plexus.Entry
	verbs      []plexus.Verb
	window     *plexus.TrustWindow
	constraint *plexus.ScopeConstraint
	purpose    string
	// reach is what the entry touches, looked up before the transaction
	// (resolving a program reads the file system); nil when not an extension's.
	reach *plexus.Reach
}

// validateAsk turns one wire decision into a grantAsk, or a reason to decline.
func (g *Gateway) validateAsk(id string, d plexus.GrantDecision) (grantAsk, string) {
	entry, ok := g.d.Registry.Entry(id)
	if !ok {
		return grantAsk{}, "unknown capability (re-fetch GET /manifest)"
	}
	if entry.Kind == plexus.KindSkill {
		return grantAsk{}, "a skill is read as context from the manifest; it is not granted or invoked"
	}
	verbs := d.Verbs
	if len(verbs) == 0 {
		verbs = []plexus.Verb{plexus.VerbRead}
	}
	for _, v := range verbs {
		if !v.Valid() {
			return grantAsk{}, fmt.Sprintf("unknown verb %q (use read, write or execute)", v)
		}
		if !slices.Contains(entry.Grants, v) {
			return grantAsk{}, fmt.Sprintf("%s does not use the %s verb; it requires %s", id, v, verbList(entry.Grants))
		}
	}
	verbs = plexus.NormalizeVerbs(verbs)
	if !plexus.CoversVerbs(verbs, entry.Grants) {
		if len(d.Verbs) == 0 {
			return grantAsk{}, fmt.Sprintf("a bare allow grants read only, and %s requires %s: name the verbs", id, verbList(entry.Grants))
		}
		return grantAsk{}, fmt.Sprintf("%s requires %s; asking for %s would not let you call it", id, verbList(entry.Grants), verbList(verbs))
	}
	if d.TrustWindow != nil && !auth.ValidWindow(*d.TrustWindow) {
		return grantAsk{}, fmt.Sprintf("trustWindow %+v is not valid (kinds: once, 1h, 1d, 7d, until-revoked, custom with ms > 0)", *d.TrustWindow)
	}
	if d.Constraint != nil {
		if err := auth.ValidateConstraint(d.Constraint); err != nil {
			return grantAsk{}, "invalid constraint: " + err.Error()
		}
	}
	return grantAsk{entry: entry, verbs: verbs, window: d.TrustWindow, constraint: d.Constraint,
		purpose: auth.CleanPurpose(d.Purpose)}, ""
}

// priorGrant finds a live standing grant that already covers a: it
// short-circuits the re-ask. Execute is never standing, so it never matches.
// It also reports a revocation tombstone: the latest grant for the pair was
// revoked and not re-approved since.
func (g *Gateway) priorGrant(tx plexus.StateTx, sess *plexus.Session, a grantAsk) (*plexus.Grant, bool, error) {
	if sess.Kind == plexus.SessionAnon {
		return nil, false, nil
	}
	gr, err := tx.Grant(sess.AgentID, a.entry.ID)
	if errors.Is(err, plexus.ErrNotFound) {
		return nil, false, nil
	} else if err != nil {
		return nil, false, err
	}
	if gr.RevokedAt != nil {
		return nil, true, nil
	}
	if !gr.Standing || !gr.Live(g.now()) || !plexus.CoversVerbs(gr.Verbs, a.verbs) {
		return nil, false, nil
	}
	if !auth.Narrows(a.constraint, gr.Constraint) {
		return nil, false, nil // the standing grant is narrower than what is asked
	}
	return gr, false, nil
}

// newGrant builds a grant for an allowed ask. authoritative is true when the
// owner picked the window.
func (g *Gateway) newGrant(sess *plexus.Session, a grantAsk, now time.Time, traceID, bundleID string, authoritative bool) *plexus.Grant {
	w := g.d.Trust.ChooseWindow(a.entry.Provenance, a.verbs, a.window, authoritative)
	if sess.Kind == plexus.SessionAnon {
		w = plexus.TrustWindow{Kind: plexus.WindowOnce} // anon:* never holds standing trust
	}
	exp, standing := g.d.Trust.Expiry(w, now)
	return &plexus.Grant{ID: auth.NewID("grant_"), StandingGrant: plexus.StandingGrant{
		AgentID: sess.AgentID, CapabilityID: a.entry.ID, Verbs: a.verbs, Provenance: a.entry.Provenance,
		Sensitivity: a.entry.Sensitivity, GrantedAt: now, ExpiresAt: exp, TrustWindow: w, Standing: standing,
		Constraint: a.constraint, BundleID: bundleID}, TraceID: traceID}
}

// mint issues one token for sess covering grants (and the member scopes their
// workflows synthesize), records it in the jti registry and journals it. The
// token never outlives the shortest standing window it carries.
func (g *Gateway) mint(tx plexus.StateTx, sess *plexus.Session, grants []plexus.Grant, traceID string) (*plexus.ScopedToken, error) {
	now := g.now()
	exp := now.Add(g.d.Trust.Lifetime())
	var gexp time.Time
	scopes := make([]plexus.TokenScope, 0, len(grants))
	var transitive []plexus.TransitiveGrant
	allOnce := true
	for _, gr := range grants {
		scopes = append(scopes, plexus.TokenScope{ID: gr.CapabilityID, Verbs: gr.Verbs, Constraint: gr.Constraint})
		if entry, ok := g.d.Registry.Entry(gr.CapabilityID); ok {
			if members := auth.SynthesizeMembers(entry); len(members) > 0 {
				scopes = append(scopes, members...)
				plain := make([]plexus.TokenScope, len(members))
				for i, m := range members {
					plain[i] = plexus.TokenScope{ID: m.ID, Verbs: m.Verbs}
				}
				transitive = append(transitive, plexus.TransitiveGrant{WorkflowID: entry.ID, MemberScopes: plain})
			}
		}
		if gr.Standing {
			allOnce = false
			if gexp.IsZero() || gr.ExpiresAt.Before(gexp) {
				gexp = gr.ExpiresAt
			}
		}
	}
	if !gexp.IsZero() && gexp.Before(exp) {
		exp = gexp
	}
	jti := auth.NewID("tok_")
	claims := auth.Claims{SessionID: sess.ID, Scopes: scopes, RegisteredClaims: jwt.RegisteredClaims{
		Subject: sess.AgentID, ID: jti, IssuedAt: jwt.NewNumericDate(now), ExpiresAt: jwt.NewNumericDate(exp)}}
	if !gexp.IsZero() {
		claims.GrantExpiresAt = jwt.NewNumericDate(gexp)
	}
	token, err := g.d.Signer.Mint(claims)
	if err != nil {
		return nil, fmt.Errorf("mint token: %w", err)
	}
	rec := &plexus.TokenRecord{JTI: jti, AgentID: sess.AgentID, SessionID: sess.ID, Scopes: scopes,
		IssuedAt: now, ExpiresAt: exp, GrantExpiresAt: gexp, TraceID: traceID}
	if err := tx.PutToken(rec); err != nil {
		return nil, err
	}
	ids := make([]string, len(scopes))
	for i, s := range scopes {
		ids[i] = s.ID
	}
	if err := tx.Record(&plexus.Activity{TraceID: traceID, Actor: plexus.ActorSystem, AgentID: sess.AgentID,
		ActionType: "token.minted", Target: jti, Payload: map[string]any{"scopes": ids, "sessionId": sess.ID,
			"expiresAt": exp}}); err != nil {
		return nil, err
	}
	st := &plexus.ScopedToken{Token: token, JTI: jti, ExpiresAt: exp, Scopes: scopes, Transitive: transitive}
	if !allOnce {
		st.GrantExpiresAt = &gexp
	}
	if len(grants) == 1 {
		w := grants[0].TrustWindow
		st.TrustWindow = &w
	}
	return st, nil
}

// GrantStatus answers a poll on a pending decision. Only the agent that asked
// may poll it, and only the asking session receives the approved token.
func (g *Gateway) GrantStatus(ctx context.Context, c Credentials, pendingID string) (plexus.GrantStatusResponse, error) {
	sess, err := g.session(ctx, c.SessionID)
	if err != nil {
		return plexus.GrantStatusResponse{}, err
	}
	if pendingID == "" {
		return plexus.GrantStatusResponse{}, plexus.Errorf(plexus.CodeInvalidRequest, "pendingId query parameter is required")
	}
	var p *plexus.Pending
	if err := g.d.Store.View(ctx, func(tx plexus.StateTx) error {
		var err error
		p, err = tx.Pending(pendingID)
		return err
	}); err != nil {
		if errors.Is(err, plexus.ErrNotFound) {
			return plexus.GrantStatusResponse{}, plexus.Errorf(plexus.CodeNotFound, "unknown pendingId")
		}
		return plexus.GrantStatusResponse{}, plexus.WrapError(plexus.CodeInternalError, err, "could not read the pending decision")
	}
	// A decision no agent asked for (a sign-in, a changed definition) has
	// no agent: it is nobody's to poll.
	if p.AgentID == "" || p.AgentID != sess.AgentID {
		return plexus.GrantStatusResponse{}, plexus.Errorf(plexus.CodeNotFound, "unknown pendingId")
	}
	resp := plexus.GrantStatusResponse{PendingID: p.ID, State: p.State, Capabilities: pendingIDs(p),
		PendingNarration: p.Narration, Reason: p.Reason}
	if p.State == plexus.StateApproved && p.SessionID == sess.ID {
		tok, err := g.approvedToken(ctx, sess, p)
		if err != nil {
			return plexus.GrantStatusResponse{}, err
		}
		resp.Token = tok
	}
	return resp, nil
}

// approvedToken returns the token minted when p was approved, minting a fresh
// one if this process no longer holds it (after a restart) or the one it holds
// was revoked; nil once nothing p granted stands (revoked, used, its window
// ended). The agent is never handed back a token that can no longer work.
func (g *Gateway) approvedToken(ctx context.Context, sess *plexus.Session, p *plexus.Pending) (*plexus.ScopedToken, error) {
	g.mu.RLock()
	tok := g.resolved[p.ID]
	g.mu.RUnlock()
	if tok != nil && g.now().Before(tok.ExpiresAt) {
		var stands bool
		err := g.d.Store.View(ctx, func(tx plexus.StateTx) error {
			grants, err := g.decisionGrants(tx, p)
			if err != nil || len(grants) == 0 {
				return err
			}
			rec, err := tx.Token(tok.JTI)
			if errors.Is(err, plexus.ErrNotFound) {
				return nil
			} else if err != nil {
				return err
			}
			stands = rec.RevokedAt == nil
			return nil
		})
		if err != nil {
			return nil, plexus.WrapError(plexus.CodeInternalError, err, "could not read the approved grants")
		}
		if stands {
			return tok, nil
		}
	}
	var out *plexus.ScopedToken
	err := g.update(ctx, true, func(tx plexus.StateTx) error {
		out = nil
		grants, err := g.decisionGrants(tx, p)
		if err != nil || len(grants) == 0 {
			return err
		}
		out, err = g.mint(tx, sess, grants, p.TraceID)
		return err
	})
	if err != nil {
		return nil, plexus.WrapError(plexus.CodeInternalError, err, "could not mint the approved token")
	}
	g.mu.Lock()
	if out != nil {
		g.resolved[p.ID] = out
	} else {
		delete(g.resolved, p.ID)
	}
	g.mu.Unlock()
	return out, nil
}

// decisionGrants returns the grants approved decision p gave that still
// stand.
func (g *Gateway) decisionGrants(tx plexus.StateTx, p *plexus.Pending) ([]plexus.Grant, error) {
	var grants []plexus.Grant
	for _, it := range p.Items {
		gr, err := tx.Grant(p.AgentID, it.CapabilityID)
		if errors.Is(err, plexus.ErrNotFound) {
			continue
		} else if err != nil {
			return nil, err
		}
		if gr.PendingID == p.ID && gr.Live(g.now()) {
			grants = append(grants, *gr)
		}
	}
	return grants, nil
}

// StandingGrants is the caller's ledger; an admin session sees everyone's.
func (g *Gateway) StandingGrants(ctx context.Context, c Credentials) (plexus.GrantsListResponse, error) {
	sess, err := g.session(ctx, c.SessionID)
	if err != nil {
		return plexus.GrantsListResponse{}, err
	}
	agent := sess.AgentID
	if sess.Kind == plexus.SessionAnon {
		agent = "" // a key-holder's session that names no agent sees everyone's
	}
	return g.grantsList(ctx, agent)
}

func (g *Gateway) grantsList(ctx context.Context, agentID string) (plexus.GrantsListResponse, error) {
	var grants []plexus.Grant
	if err := g.d.Store.View(ctx, func(tx plexus.StateTx) error {
		var err error
		grants, err = tx.Grants(agentID, g.now())
		return err
	}); err != nil {
		return plexus.GrantsListResponse{}, plexus.WrapError(plexus.CodeInternalError, err, "could not read grants")
	}
	out := make([]plexus.StandingGrant, 0, len(grants))
	for _, gr := range grants {
		sg := gr.StandingGrant
		if _, ok := g.d.Registry.Entry(gr.CapabilityID); !ok {
			sg.TopLevelDisabled = true // granted, but its source is gone
		}
		out = append(out, sg)
	}
	return plexus.GrantsListResponse{Grants: out}, nil
}

func grantPayload(gr *plexus.Grant, extra map[string]any) map[string]any {
	p := map[string]any{"grantId": gr.ID, "verbs": gr.Verbs, "trustWindow": gr.TrustWindow,
		"expiresAt": gr.ExpiresAt, "standing": gr.Standing}
	if gr.Constraint != nil {
		p["constraint"] = gr.Constraint
	}
	if gr.BundleID != "" {
		p["bundleId"] = gr.BundleID
	}
	for k, v := range extra {
		if v != "" && v != nil {
			p[k] = v
		}
	}
	return p
}

func pendingIDs(p *plexus.Pending) []string {
	ids := make([]string, len(p.Items))
	for i, it := range p.Items {
		ids[i] = it.CapabilityID
	}
	return ids
}

func firstPurpose(asks []grantAsk) string {
	for _, a := range asks {
		if a.purpose != "" {
			return a.purpose
		}
	}
	return ""
}

func bundleName(b *plexus.BundleRequest) string {
	if b == nil {
		return ""
	}
	return auth.CleanPurpose(b.Name)
}

func verbList(vs []plexus.Verb) string {
	s := make([]string, len(vs))
	for i, v := range vs {
		s[i] = string(v)
	}
	return strings.Join(s, "+")
}

func declinedText(ds []plexus.Declined) string {
	parts := make([]string, len(ds))
	for i, d := range ds {
		parts[i] = d.ID + ": " + d.Reason
	}
	return strings.Join(parts, "; ")
}

// AdminGrants lists every agent's standing grants.
func (g *Gateway) AdminGrants(ctx context.Context, c Credentials) (plexus.GrantsListResponse, error) {
	if err := g.AdminCheck(ctx, c); err != nil {
		return plexus.GrantsListResponse{}, err
	}
	return g.grantsList(ctx, "")
}
