package gateway

// The owner's view of agents: connecting one (a one-time code), revoking
// one, listing them, and the integration snippet an agent installs.

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/plexus-gw/plexus"
	"github.com/plexus-gw/plexus/auth"
)

// ConnectAgent names an agent, gives it the owner's starting standing grants
// and mints its one-time enrollment code (returned once, stored hashed).
// Connecting an existing, unrevoked agent again issues a new code; redeeming
// it replaces the agent's PAT.
func (g *Gateway) ConnectAgent(ctx context.Context, c Credentials, req plexus.ConnectRequest) (plexus.ConnectResponse, error) {
	if err := g.AdminCheck(ctx, c); err != nil {
		return plexus.ConnectResponse{}, err
	}
	if !agentIDPattern.MatchString(req.AgentID) {
		return plexus.ConnectResponse{}, plexus.Errorf(plexus.CodeInvalidRequest,
			"agentId %q must be 1-64 characters of letters, digits, '.', '_' or '-', starting with a letter or digit", req.AgentID)
	}
	grants, declined, err := expandWildcards(g.d.Registry.Entries(), req.Grants)
	if err != nil {
		return plexus.ConnectResponse{}, err
	}
	asks, err := g.startingAsks(grants)
	if err != nil {
		return plexus.ConnectResponse{}, err
	}
	code, err := auth.NewEnrollCode()
	if err != nil {
		return plexus.ConnectResponse{}, plexus.WrapError(plexus.CodeInternalError, err, "could not mint a code")
	}
	now := g.now()
	traceID := auth.NewTraceID()
	resp := plexus.ConnectResponse{AgentID: req.AgentID, Code: code, ExpiresAt: now.Add(g.cfg.EnrollCodeTTL),
		InstallCommand: g.installCommand(code), Grants: []plexus.StandingGrant{}, Declined: declined}
	via := g.adminVia(c)
	err = g.update(ctx, true, func(tx plexus.StateTx) error {
		agent, err := tx.Agent(req.AgentID)
		if agent, err = connectingAgent(agent, err, req, now); err != nil {
			return err
		}
		if err := tx.PutAgent(agent); err != nil {
			return err
		}
		if err := tx.PutEnrollCode(&plexus.EnrollCode{Hash: g.d.Hasher.Hash(code), AgentID: agent.ID, CreatedAt: now,
			ExpiresAt: resp.ExpiresAt, TraceID: traceID}); err != nil {
			return err
		}
		if resp.Grants, err = g.putStartingGrants(tx, agent.ID, asks, via, now, traceID); err != nil {
			return err
		}
		ids := make([]string, 0, len(asks))
		for _, a := range asks {
			ids = append(ids, a.entry.ID)
		}
		return tx.Record(&plexus.Activity{TraceID: traceID, Actor: plexus.ActorHuman, AgentID: agent.ID, ActionType: "agent.connected",
			Target: agent.ID, Payload: map[string]any{"grants": ids, "codeExpiresAt": resp.ExpiresAt, "via": via}})
	})
	if err != nil {
		return plexus.ConnectResponse{}, plexus.AsError(err)
	}
	return resp, nil
}

// startingAsks validates the starting grants of a connect request. Any
// grant it cannot give refuses the whole request, naming each.
func (g *Gateway) startingAsks(grants []plexus.ConnectGrant) ([]grantAsk, error) {
	var asks []grantAsk
	var declined []plexus.Declined
	for _, cg := range grants {
		a, reason := g.validateAsk(cg.CapabilityID, plexus.GrantDecision{Decision: plexus.DecisionAllow, Verbs: cg.Verbs,
			TrustWindow: cg.TrustWindow, Constraint: cg.Constraint})
		if reason == "" && slices.Contains(a.verbs, plexus.VerbExecute) {
			// Execute is approved per use, when the agent asks: a starting
			// grant could never be used (a once grant never short-circuits).
			reason = "execute is never standing: the owner approves each use when the agent asks"
		}
		if reason != "" {
			declined = append(declined, plexus.Declined{ID: cg.CapabilityID, Reason: reason})
			continue
		}
		asks = append(asks, a)
	}
	if len(declined) > 0 {
		e := plexus.Errorf(plexus.CodeInvalidRequest, "cannot grant: %s", declinedText(declined))
		e.Detail = map[string]any{"declined": declined}
		return nil, e
	}
	return asks, nil
}

// connectingAgent is the agent a connect request stores, from the lookup
// of its id (found, or err): a new one, or the existing one relabelled. A
// revoked agent's id is never reused.
func connectingAgent(agent *plexus.Agent, err error, req plexus.ConnectRequest, now time.Time) (*plexus.Agent, error) {
	switch {
	case errors.Is(err, plexus.ErrNotFound):
		agent = &plexus.Agent{ID: req.AgentID, Label: clip(req.Label, 80), CreatedAt: now}
	case err != nil:
		return nil, err
	case agent.RevokedAt != nil:
		return nil, plexus.Errorf(plexus.CodeConflict, "agent %s was revoked; agent ids are not reused, pick another", req.AgentID)
	}
	if req.Label != "" {
		agent.Label = clip(req.Label, 80)
	}
	return agent, nil
}

// putStartingGrants stores the owner's starting grants of agentID, each
// with its grant.approved row, inside tx.
func (g *Gateway) putStartingGrants(tx plexus.StateTx, agentID string, asks []grantAsk, via string, now time.Time, traceID string) ([]plexus.StandingGrant, error) {
	sess := &plexus.Session{AgentID: agentID, Kind: plexus.SessionAgent}
	out := make([]plexus.StandingGrant, 0, len(asks))
	for _, a := range asks {
		gr := g.newGrant(sess, a, now, traceID, "", true)
		if err := tx.PutGrant(gr); err != nil {
			return nil, err
		}
		if err := tx.Record(&plexus.Activity{TraceID: traceID, Actor: plexus.ActorHuman, AgentID: agentID,
			ActionType: "grant.approved", Target: a.entry.ID, Payload: grantPayload(gr, map[string]any{
				"decidedBy": plexus.ActorHuman, "via": via, "reason": "starting grant at connect"})}); err != nil {
			return nil, err
		}
		out = append(out, gr.StandingGrant)
	}
	return out, nil
}

func (g *Gateway) installCommand(code string) string {
	addr := strings.TrimPrefix(strings.TrimPrefix(g.cfg.BaseURL, "http://"), "https://")
	return fmt.Sprintf("plexus --addr %s agent enroll %s", addr, code)
}

// RevokeAgent ends an agent: its sessions, every live token and every grant.
// Other agents are untouched.
func (g *Gateway) RevokeAgent(ctx context.Context, c Credentials, req plexus.AgentRevokeRequest) (plexus.AgentRevokeResponse, error) {
	if err := g.AdminCheck(ctx, c); err != nil {
		return plexus.AgentRevokeResponse{}, err
	}
	now := g.now()
	reason := auth.CleanPurpose(req.Reason)
	if reason == "" {
		reason = "agent revoked by the owner"
	}
	var ended agentEnded
	err := g.update(ctx, true, func(tx plexus.StateTx) error {
		var err error
		if ended, err = endAgent(tx, req.AgentID, reason, now); err != nil {
			return err
		}
		return tx.Record(&plexus.Activity{Actor: plexus.ActorHuman, AgentID: req.AgentID, ActionType: "agent.revoked", Target: req.AgentID,
			Payload: map[string]any{"reason": reason, "via": g.adminVia(c), "sessions": len(ended.resp.RevokedSessions),
				"revokedJtis": ended.resp.RevokedJTIs, "grants": ended.resp.RevokedGrants}})
	})
	if err != nil {
		return plexus.AgentRevokeResponse{}, plexus.AsError(err)
	}
	for _, ev := range ended.events {
		g.bus.publish(*ev)
	}
	g.bus.end(ended.resp.RevokedSessions)
	g.touch(ended.touched...)
	return ended.resp, nil
}

// agentEnded is what revoking an agent ended, inside the transaction: the
// answer, the token_revoked events to publish after commit and the
// decisions whose grants were revoked.
type agentEnded struct {
	resp    plexus.AgentRevokeResponse
	events  []*plexus.Event
	touched []string
}

// endAgent marks agentID revoked and ends its sessions, its live tokens and
// its grants, inside tx. An unknown or already revoked agent is refused.
func endAgent(tx plexus.StateTx, agentID, reason string, now time.Time) (agentEnded, error) {
	out := agentEnded{resp: plexus.AgentRevokeResponse{AgentID: agentID, RevokedJTIs: []string{}, RevokedSessions: []string{}}}
	agent, err := tx.Agent(agentID)
	if errors.Is(err, plexus.ErrNotFound) {
		return agentEnded{}, plexus.Errorf(plexus.CodeNotFound, "no agent %q", agentID)
	} else if err != nil {
		return agentEnded{}, err
	}
	if agent.RevokedAt != nil {
		return agentEnded{}, plexus.Errorf(plexus.CodeConflict, "agent %s is already revoked", agent.ID)
	}
	agent.RevokedAt = &now
	if err := tx.PutAgent(agent); err != nil {
		return agentEnded{}, err
	}
	sids, err := tx.RevokeSessions(plexus.SessionAgent, agent.ID, 0, now)
	if err != nil {
		return agentEnded{}, err
	}
	out.resp.RevokedSessions = append(out.resp.RevokedSessions, sids...)
	toks, err := tx.LiveTokens(agent.ID, "", "", now)
	if err != nil {
		return agentEnded{}, err
	}
	jtis, events, err := revokeTokens(tx, toks, reason, now)
	if err != nil {
		return agentEnded{}, err
	}
	out.resp.RevokedJTIs = append(out.resp.RevokedJTIs, jtis...)
	out.events = events
	grants, err := tx.Grants(agent.ID, now)
	if err != nil {
		return agentEnded{}, err
	}
	for _, gr := range grants {
		if err := tx.RevokeGrant(gr.ID, now); err != nil {
			return agentEnded{}, err
		}
		out.touched = append(out.touched, gr.PendingID)
	}
	out.resp.RevokedGrants = len(grants)
	out.resp.OK = true
	return out, nil
}

// AdminAgents lists every agent, enrolled or not, revoked or not.
func (g *Gateway) AdminAgents(ctx context.Context, c Credentials) ([]plexus.Agent, error) {
	if err := g.AdminCheck(ctx, c); err != nil {
		return nil, err
	}
	var agents []plexus.Agent
	err := g.d.Store.View(ctx, func(tx plexus.StateTx) error {
		var err error
		agents, err = tx.Agents()
		return err
	})
	if err != nil {
		return nil, plexus.WrapError(plexus.CodeInternalError, err, "could not list agents")
	}
	if agents == nil {
		agents = []plexus.Agent{}
	}
	return agents, nil
}

// Integration serves the copy-able install command for an agent. The code
// itself is shown only once, at connect; this tells the owner how to reissue.
func (g *Gateway) Integration(ctx context.Context, c Credentials, agentID string) (plexus.IntegrationResponse, error) {
	if err := g.AdminCheck(ctx, c); err != nil {
		return plexus.IntegrationResponse{}, err
	}
	var agent *plexus.Agent
	err := g.d.Store.View(ctx, func(tx plexus.StateTx) error {
		var err error
		agent, err = tx.Agent(agentID)
		return err
	})
	if errors.Is(err, plexus.ErrNotFound) {
		return plexus.IntegrationResponse{}, plexus.Errorf(plexus.CodeNotFound, "no agent %q", agentID)
	} else if err != nil {
		return plexus.IntegrationResponse{}, plexus.WrapError(plexus.CodeInternalError, err, "could not read the agent")
	}
	return plexus.IntegrationResponse{AgentID: agent.ID, BaseURL: g.cfg.BaseURL, Enrolled: agent.EnrolledAt != nil,
		InstallCommand: g.installCommand("<code from: plexus agents connect " + agent.ID + ">"),
		Instructions: "Run the install command once in the agent's environment. It redeems the one-time code at POST /agents/enroll " +
			"and stores the agent's PAT (0600) under PLEXUS_AGENT_HOME. Then the agent calls capabilities with: plexus agent call <capability> key=value…"}, nil
}

// Selection is the TypeScript implementation's form of a connect request's
// starting grants: capability ids, the side-effecting ones among them the
// owner lets stand, and one trust window for all (docs/protocol.md).
type Selection struct {
	Capabilities []string
	Standing     []string
	TrustWindow  *plexus.TrustWindow
}

// ConnectSelected connects an agent as [Gateway.ConnectAgent] does, with
// sel's capabilities added to req's grants the way that implementation
// reads them: one needing only read becomes a standing read grant; one that
// writes does too when sel.Standing names it, and is otherwise skipped (not
// granted: the agent's first call asks the owner, as any write does here).
// An unknown id, a Standing id not among the capabilities, and a Standing
// capability that executes (never standing here) refuse the whole request.
// skipped lists what was selected but not granted, with the reason.
func (g *Gateway) ConnectSelected(ctx context.Context, c Credentials, req plexus.ConnectRequest, sel Selection) (plexus.ConnectResponse, []plexus.Declined, error) {
	if err := g.AdminCheck(ctx, c); err != nil {
		return plexus.ConnectResponse{}, nil, err
	}
	grants, skipped, err := g.selectionGrants(sel)
	if err != nil {
		return plexus.ConnectResponse{}, nil, err
	}
	req.Grants = append(req.Grants, grants...)
	resp, err := g.ConnectAgent(ctx, c, req)
	return resp, skipped, err
}

// selectionGrants turns sel into starting grants and the capabilities it
// skips (see [Gateway.ConnectSelected]).
func (g *Gateway) selectionGrants(sel Selection) ([]plexus.ConnectGrant, []plexus.Declined, error) {
	var unknown []string
	for _, id := range sel.Capabilities {
		if _, ok := g.d.Registry.Entry(id); !ok {
			unknown = append(unknown, id)
		}
	}
	if len(unknown) > 0 {
		return nil, nil, plexus.Errorf(plexus.CodeUnknownCapability, "unknown capability id(s): %s", strings.Join(unknown, ", "))
	}
	var grants []plexus.ConnectGrant
	var skipped []plexus.Declined
	for _, id := range sel.Standing {
		if !slices.Contains(sel.Capabilities, id) {
			return nil, nil, plexus.Errorf(plexus.CodeInvalidRequest, "standing names %s, which is not among the capabilities", id)
		}
	}
	for _, id := range sel.Capabilities {
		e, _ := g.d.Registry.Entry(id)
		need := requiredOf(e)
		switch {
		case e.Kind == plexus.KindSkill:
			skipped = append(skipped, plexus.Declined{ID: id, Reason: "a skill is read as context from the manifest; it is not granted"})
		case slices.Contains(need, plexus.VerbExecute) && slices.Contains(sel.Standing, id):
			return nil, nil, plexus.Errorf(plexus.CodeInvalidRequest,
				"standing names %s, which executes: execute is never standing here, the owner approves each use", id)
		case slices.Contains(need, plexus.VerbExecute):
			skipped = append(skipped, plexus.Declined{ID: id, Reason: "execute is never standing: the owner approves each use when the agent asks"})
		case slices.ContainsFunc(need, plexus.Verb.Mutating) && !slices.Contains(sel.Standing, id):
			skipped = append(skipped, plexus.Declined{ID: id, Reason: "it writes: the agent's first call asks the owner (name it in standing to grant it now)"})
		default:
			grants = append(grants, plexus.ConnectGrant{CapabilityID: id, Verbs: need, TrustWindow: sel.TrustWindow})
		}
	}
	return grants, skipped, nil
}
