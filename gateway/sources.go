package gateway

// The owner's sources: adding, listing and removing the sources the owner
// configured (a portal, a managed extension).

import (
	"context"
	"errors"
	"regexp"
	"slices"

	"github.com/plexus-gw/plexus"
	"github.com/plexus-gw/plexus/auth"
)

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
