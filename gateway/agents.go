package gateway

// The owner's view of agents: connecting one (a one-time code), revoking
// one, listing them, and the integration snippet an agent installs.

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

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
	var asks []grantAsk
	var declined []plexus.Declined
	for _, cg := range req.Grants {
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
		return plexus.ConnectResponse{}, e
	}
	code, err := auth.NewEnrollCode()
	if err != nil {
		return plexus.ConnectResponse{}, plexus.WrapError(plexus.CodeInternalError, err, "could not mint a code")
	}
	now := g.now()
	traceID := auth.NewTraceID()
	resp := plexus.ConnectResponse{AgentID: req.AgentID, Code: code, ExpiresAt: now.Add(g.cfg.EnrollCodeTTL),
		InstallCommand: g.installCommand(code), Grants: []plexus.StandingGrant{}}
	err = g.update(ctx, true, func(tx plexus.StateTx) error {
		resp.Grants = resp.Grants[:0]
		agent, err := tx.Agent(req.AgentID)
		switch {
		case errors.Is(err, plexus.ErrNotFound):
			agent = &plexus.Agent{ID: req.AgentID, Label: clip(req.Label, 80), CreatedAt: now}
		case err != nil:
			return err
		case agent.RevokedAt != nil:
			return plexus.Errorf(plexus.CodeConflict, "agent %s was revoked; agent ids are not reused, pick another", req.AgentID)
		}
		if req.Label != "" {
			agent.Label = clip(req.Label, 80)
		}
		if err := tx.PutAgent(agent); err != nil {
			return err
		}
		if err := tx.PutEnrollCode(&plexus.EnrollCode{Hash: g.d.Hasher.Hash(code), AgentID: agent.ID, CreatedAt: now,
			ExpiresAt: resp.ExpiresAt, TraceID: traceID}); err != nil {
			return err
		}
		sess := &plexus.Session{AgentID: agent.ID, Kind: plexus.SessionAgent}
		ids := make([]string, 0, len(asks))
		for _, a := range asks {
			gr := g.newGrant(sess, a, now, traceID, "", true)
			if err := tx.PutGrant(gr); err != nil {
				return err
			}
			if err := tx.Record(&plexus.Activity{TraceID: traceID, Actor: plexus.ActorHuman, AgentID: agent.ID,
				ActionType: "grant.approved", Target: a.entry.ID, Payload: grantPayload(gr, map[string]any{
					"decidedBy": plexus.ActorHuman, "via": g.adminVia(c), "reason": "starting grant at connect"})}); err != nil {
				return err
			}
			resp.Grants = append(resp.Grants, gr.StandingGrant)
			ids = append(ids, a.entry.ID)
		}
		return tx.Record(&plexus.Activity{TraceID: traceID, Actor: plexus.ActorHuman, AgentID: agent.ID, ActionType: "agent.connected",
			Target: agent.ID, Payload: map[string]any{"grants": ids, "codeExpiresAt": resp.ExpiresAt, "via": g.adminVia(c)}})
	})
	if err != nil {
		return plexus.ConnectResponse{}, plexus.AsError(err)
	}
	return resp, nil
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
	out := plexus.AgentRevokeResponse{AgentID: req.AgentID}
	var events []*plexus.Event
	var touched []string
	err := g.update(ctx, true, func(tx plexus.StateTx) error {
		events, touched = nil, nil
		out = plexus.AgentRevokeResponse{AgentID: req.AgentID, RevokedJTIs: []string{}, RevokedSessions: []string{}}
		agent, err := tx.Agent(req.AgentID)
		if errors.Is(err, plexus.ErrNotFound) {
			return plexus.Errorf(plexus.CodeNotFound, "no agent %q", req.AgentID)
		} else if err != nil {
			return err
		}
		if agent.RevokedAt != nil {
			return plexus.Errorf(plexus.CodeConflict, "agent %s is already revoked", agent.ID)
		}
		agent.RevokedAt = &now
		if err := tx.PutAgent(agent); err != nil {
			return err
		}
		sids, err := tx.RevokeSessions(plexus.SessionAgent, agent.ID, 0, now)
		if err != nil {
			return err
		}
		out.RevokedSessions = append(out.RevokedSessions, sids...)
		toks, err := tx.LiveTokens(agent.ID, "", "", now)
		if err != nil {
			return err
		}
		for i := range toks {
			if ok, err := tx.RevokeToken(toks[i].JTI, reason, now); err != nil {
				return err
			} else if ok {
				out.RevokedJTIs = append(out.RevokedJTIs, toks[i].JTI)
				ev := revokedEvent(&toks[i], reason)
				if err := tx.Publish(ev); err != nil {
					return err
				}
				events = append(events, ev)
			}
		}
		grants, err := tx.Grants(agent.ID, now)
		if err != nil {
			return err
		}
		for _, gr := range grants {
			if err := tx.RevokeGrant(gr.ID, now); err != nil {
				return err
			}
			touched = append(touched, gr.PendingID)
		}
		out.RevokedGrants = len(grants)
		out.OK = true
		return tx.Record(&plexus.Activity{Actor: plexus.ActorHuman, AgentID: agent.ID, ActionType: "agent.revoked", Target: agent.ID,
			Payload: map[string]any{"reason": reason, "via": g.adminVia(c), "sessions": len(sids), "revokedJtis": out.RevokedJTIs,
				"grants": len(grants)}})
	})
	if err != nil {
		return plexus.AgentRevokeResponse{}, plexus.AsError(err)
	}
	for _, ev := range events {
		g.bus.publish(*ev)
	}
	g.bus.end(out.RevokedSessions)
	g.touch(touched...)
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
