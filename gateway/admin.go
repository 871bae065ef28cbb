package gateway

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/plexus-gw/plexus"
	"github.com/plexus-gw/plexus/auth"
)

// AdminCheck verifies the connection-key, presented as Authorization: Bearer
// plx_live_… or X-Plexus-Connection-Key. Failures are throttled, by the key
// presented, and journaled.
func (g *Gateway) AdminCheck(ctx context.Context, c Credentials) error {
	key := c.ConnectionKey
	if key == "" && strings.HasPrefix(c.Bearer, plexus.PrefixConnectionKey) {
		key = c.Bearer
	}
	if key == "" {
		return plexus.Errorf(plexus.CodeUnauthorized, "the admin API needs the connection-key: Authorization: Bearer plx_live_…")
	}
	bucket := g.credentialBucket("key", plexus.PrefixConnectionKey, key)
	if err := g.throttled(bucket); err != nil {
		return err
	}
	if !g.checkKey(key) {
		g.credentialFailed(ctx, bucket, c.Remote, "admin", "wrong connection-key")
		return plexus.Errorf(plexus.CodeUnauthorized, "wrong connection-key")
	}
	g.credentialOK(bucket)
	return nil
}

func (g *Gateway) adminVia(c Credentials) string {
	if c.Via != "" {
		return c.Via
	}
	return plexus.ViaAdminAPI
}

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

// AdminGrants lists every agent's standing grants.
func (g *Gateway) AdminGrants(ctx context.Context, c Credentials) (plexus.GrantsListResponse, error) {
	if err := g.AdminCheck(ctx, c); err != nil {
		return plexus.GrantsListResponse{}, err
	}
	return g.grantsList(ctx, "")
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

func (g *Gateway) keyEpoch(tx plexus.StateTx) (int64, error) {
	v, err := tx.Meta(metaKeyEpoch)
	if errors.Is(err, plexus.ErrNotFound) {
		return 1, nil
	} else if err != nil {
		return 0, err
	}
	return strconv.ParseInt(v, 10, 64)
}

// RotateKey replaces the connection-key. Every admin- and anon-session
// bootstrapped under the old key ends and their tokens are revoked; agent
// sessions, bootstrapped under PATs, are untouched.
func (g *Gateway) RotateKey(ctx context.Context, c Credentials) (plexus.KeyRotateResponse, error) {
	if err := g.AdminCheck(ctx, c); err != nil {
		return plexus.KeyRotateResponse{}, err
	}
	key, err := auth.NewConnectionKey()
	if err != nil {
		return plexus.KeyRotateResponse{}, plexus.WrapError(plexus.CodeInternalError, err, "could not generate a key")
	}
	now := g.now()
	out := plexus.KeyRotateResponse{ConnectionKey: key}
	var events []*plexus.Event
	newHash := g.d.Hasher.Hash(key)
	var prevHash []byte
	err = g.update(ctx, true, func(tx plexus.StateTx) error {
		events = nil
		out.RevokedSessions, out.RevokedJTIs = []string{}, []string{}
		epoch, err := g.keyEpoch(tx)
		if err != nil {
			return err
		}
		epoch++
		if err := tx.SetMeta(metaKeyEpoch, strconv.FormatInt(epoch, 10)); err != nil {
			return err
		}
		for _, kind := range []plexus.SessionKind{plexus.SessionAdmin, plexus.SessionAnon} {
			sids, err := tx.RevokeSessions(kind, "", epoch, now)
			if err != nil {
				return err
			}
			out.RevokedSessions = append(out.RevokedSessions, sids...)
			for _, sid := range sids {
				toks, err := tx.LiveTokens("", "", sid, now)
				if err != nil {
					return err
				}
				for i := range toks {
					if ok, err := tx.RevokeToken(toks[i].JTI, "connection-key rotated", now); err != nil {
						return err
					} else if ok {
						out.RevokedJTIs = append(out.RevokedJTIs, toks[i].JTI)
						ev := revokedEvent(&toks[i], "connection-key rotated")
						if err := tx.Publish(ev); err != nil {
							return err
						}
						events = append(events, ev)
					}
				}
			}
		}
		if err := tx.Record(&plexus.Activity{Actor: plexus.ActorHuman, ActionType: "key.rotated", Target: "connection-key",
			Payload: map[string]any{"epoch": epoch, "sessions": len(out.RevokedSessions), "revokedJtis": out.RevokedJTIs,
				"via": g.adminVia(c)}}); err != nil {
			return err
		}
		// Last, so that a failure to persist the key rolls everything back
		// and the old key stays in force.
		if g.d.SaveConnectionKey != nil {
			if err := g.d.SaveConnectionKey(key); err != nil {
				return fmt.Errorf("save connection-key: %w", err)
			}
		}
		// The key changes in memory inside this transaction, under the
		// writer lock: an admin handshake checks the key again inside its
		// own transaction, so it either committed before this one (and its
		// session was ended above) or sees the new key.
		g.mu.Lock()
		if !bytes.Equal(g.keyHash, newHash) {
			prevHash = g.keyHash
		}
		g.keyHash = newHash
		g.mu.Unlock()
		return nil
	})
	if err != nil {
		g.mu.Lock()
		if prevHash != nil && bytes.Equal(g.keyHash, newHash) {
			g.keyHash = prevHash // the commit failed: the old key stays in force
		}
		g.mu.Unlock()
		return plexus.KeyRotateResponse{}, plexus.AsError(err)
	}
	for _, ev := range events {
		g.bus.publish(*ev)
	}
	g.bus.end(out.RevokedSessions)
	return out, nil
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

var sourceIDPattern = regexp.MustCompile(`^[a-z0-9][a-z0-9:._-]{0,63}$`)

// AddSource persists an owner-configured source and brings it online. The
// factory decides what the kind means; the gateway does not. With
// opts.Replace, a source the owner added before, of the same kind, is
// re-registered in place.
func (g *Gateway) AddSource(ctx context.Context, c Credentials, cfg plexus.SourceConfig, opts SourceOptions) (plexus.SourceConfig, error) {
	if err := g.AdminCheck(ctx, c); err != nil {
		return plexus.SourceConfig{}, err
	}
	src, err := g.d.Sources(cfg)
	if err != nil {
		return plexus.SourceConfig{}, plexus.WrapError(plexus.CodeInvalidRequest, err, err.Error())
	}
	cfg.ID, cfg.Provenance = src.ID(), src.Provenance()
	if !sourceIDPattern.MatchString(cfg.ID) {
		return plexus.SourceConfig{}, plexus.Errorf(plexus.CodeInvalidRequest, "source id %q is not valid", cfg.ID)
	}
	action := "source.added"
	if _, exists := g.d.Registry.Source(cfg.ID); exists {
		if !opts.Replace {
			return plexus.SourceConfig{}, plexus.Errorf(plexus.CodeConflict, "source %s already exists; remove it first", cfg.ID)
		}
		prev, err := g.ownerSource(ctx, cfg.ID)
		if err != nil {
			return plexus.SourceConfig{}, err
		}
		if prev.Kind != cfg.Kind {
			return plexus.SourceConfig{}, plexus.Errorf(plexus.CodeConflict, "source %s is a %s, not a %s; remove it first", cfg.ID, prev.Kind, cfg.Kind)
		}
		action = "source.replaced"
	}
	cfg.CreatedAt = g.now()
	if err := g.update(ctx, true, func(tx plexus.StateTx) error {
		if err := tx.PutSource(&cfg); err != nil {
			return err
		}
		return tx.Record(&plexus.Activity{Actor: plexus.ActorHuman, ActionType: action, Target: cfg.ID,
			Payload: map[string]any{"kind": cfg.Kind, "provenance": cfg.Provenance, "via": g.adminVia(c)}})
	}); err != nil {
		return plexus.SourceConfig{}, plexus.AsError(err)
	}
	add := g.d.Registry.Add
	if action == "source.replaced" {
		add = g.d.Registry.Replace
	}
	res, err := add(ctx, src)
	if err != nil {
		return plexus.SourceConfig{}, plexus.WrapError(plexus.CodeInternalError, err, "source saved but could not be scanned: "+err.Error())
	}
	for _, col := range res.Skipped {
		g.recordAnyway(ctx, &plexus.Activity{Actor: plexus.ActorSystem, ActionType: "source.collision", Target: cfg.ID,
			Payload: map[string]any{"capabilityId": col.ID, "reason": col.Reason}})
	}
	return cfg, nil
}

// ownerSource is the persisted configuration of an owner-added source.
func (g *Gateway) ownerSource(ctx context.Context, id string) (plexus.SourceConfig, error) {
	var cfgs []plexus.SourceConfig
	if err := g.d.Store.View(ctx, func(tx plexus.StateTx) error {
		var err error
		cfgs, err = tx.Sources()
		return err
	}); err != nil {
		return plexus.SourceConfig{}, plexus.WrapError(plexus.CodeInternalError, err, "could not read sources")
	}
	i := slices.IndexFunc(cfgs, func(c plexus.SourceConfig) bool { return c.ID == id })
	if i < 0 {
		return plexus.SourceConfig{}, plexus.Errorf(plexus.CodeConflict, "source %s is built in, not one you added", id)
	}
	return cfgs[i], nil
}

// RemoveSource takes a source offline and forgets its configuration. Its
// grants stay in the ledger flagged topLevelDisabled until revoked, unless
// opts.PurgeGrants: then every grant of its entries is revoked, with the
// tokens carrying them (token_revoked fires), in the same transaction.
func (g *Gateway) RemoveSource(ctx context.Context, c Credentials, id string, opts SourceOptions) error {
	if err := g.AdminCheck(ctx, c); err != nil {
		return err
	}
	if _, ok := g.d.Registry.Source(id); !ok {
		return plexus.Errorf(plexus.CodeNotFound, "no source %q", id)
	}
	return g.removeSource(ctx, id, opts.PurgeGrants, plexus.ActorHuman, g.adminVia(c))
}

// removeSource is RemoveSource once the caller is known to be the owner.
// The decisions that registered the source (an agent's extension) are
// touched, so their files leave active/.
func (g *Gateway) removeSource(ctx context.Context, id string, purge bool, decidedBy, via string) error {
	owned := map[string]bool{}
	if purge {
		for _, e := range g.d.Registry.Entries() {
			if e.Source == id {
				owned[e.ID] = true
			}
		}
	}
	var events []*plexus.Event
	var touched []string
	traceID := auth.NewTraceID()
	if err := g.update(ctx, true, func(tx plexus.StateTx) error {
		events, touched = nil, nil
		if err := tx.DeleteSource(id); err != nil && !errors.Is(err, plexus.ErrNotFound) {
			return err
		}
		purged := 0
		if len(owned) > 0 {
			grants, err := tx.Grants("", g.now())
			if err != nil {
				return err
			}
			for _, gr := range grants {
				if !owned[gr.CapabilityID] {
					continue
				}
				r, err := g.revokeScope(tx, gr.AgentID, gr.CapabilityID, "its source "+id+" was removed", plexus.ActorHuman, via, traceID)
				if err != nil {
					return err
				}
				events = append(events, r.events...)
				touched = append(touched, r.pendingID)
				purged++
			}
		}
		approved, err := tx.PendingList(plexus.StateApproved)
		if err != nil {
			return err
		}
		for _, p := range approved {
			if p.Extension != nil && p.Extension.Source == id {
				touched = append(touched, p.ID)
			}
		}
		return tx.Record(&plexus.Activity{TraceID: traceID, Actor: plexus.ActorHuman, ActionType: "source.removed", Target: id,
			Payload: map[string]any{"via": via, "decidedBy": decidedBy, "purgedGrants": purged}})
	}); err != nil {
		return plexus.AsError(err)
	}
	for _, ev := range events {
		g.bus.publish(*ev)
	}
	if err := g.d.Registry.Remove(ctx, id); err != nil {
		return plexus.WrapError(plexus.CodeInternalError, err, "could not take the source offline")
	}
	g.touch(touched...) // after the registry dropped it: the files leave active/
	return nil
}

// Sources lists the owner-configured sources.
func (g *Gateway) Sources(ctx context.Context, c Credentials) ([]plexus.SourceConfig, error) {
	if err := g.AdminCheck(ctx, c); err != nil {
		return nil, err
	}
	var out []plexus.SourceConfig
	err := g.d.Store.View(ctx, func(tx plexus.StateTx) error {
		var err error
		out, err = tx.Sources()
		return err
	})
	if err != nil {
		return nil, plexus.WrapError(plexus.CodeInternalError, err, "could not list sources")
	}
	if out == nil {
		out = []plexus.SourceConfig{}
	}
	return out, nil
}

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
		gr, err := tx.Grants("", g.now())
		out.Grants = len(gr)
		return err
	})
	if err != nil {
		return plexus.StatusResponse{}, plexus.WrapError(plexus.CodeInternalError, err, "could not read status")
	}
	return out, nil
}
