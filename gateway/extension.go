package gateway

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/plexus-gw/plexus"
	"github.com/plexus-gw/plexus/auth"
	"github.com/plexus-gw/plexus/registry"
)

// SourceKindExtension is the persisted source kind of a registered
// extension: its config is the manifest. cmd/plexus's source factory builds
// it back at every start with the provenance it was stored with.
const SourceKindExtension = plexus.SourceKindExtension

// RegisterExtension is POST /extensions: an agent asks for its manifest to
// be registered. Nothing is registered now: the manifest is validated and
// put up for the owner as a pending decision (an inbox file), and approving
// it — by moving the file, plexus approve or the admin API — registers
// exactly this manifest with extension provenance.
func (g *Gateway) RegisterExtension(ctx context.Context, c Credentials, req plexus.ExtensionRegisterRequest) (plexus.ExtensionRegisterResponse, error) {
	sid := req.SessionID
	if sid == "" {
		sid = c.SessionID
	}
	sess, err := g.session(ctx, sid)
	if err != nil {
		return plexus.ExtensionRegisterResponse{}, err
	}
	if sess.Kind != plexus.SessionAgent {
		return plexus.ExtensionRegisterResponse{}, plexus.Errorf(plexus.CodeUnauthorized,
			"an extension is registered by an enrolled agent (or by the owner: plexus ext add)")
	}
	m := req.Manifest
	if err := registry.ValidateManifest(m, g.d.Registry.Entry); err != nil {
		e := plexus.Errorf(plexus.CodeInvalidRequest, "%v", err)
		var me *registry.ManifestError
		if errors.As(err, &me) {
			e.Detail = map[string]any{"problems": me.Problems}
		}
		return plexus.ExtensionRegisterResponse{OK: false, Source: m.Source, Reason: err.Error()}, e
	}
	if _, exists := g.d.Registry.Source(m.Source); exists {
		return plexus.ExtensionRegisterResponse{}, plexus.Errorf(plexus.CodeConflict,
			"source %s is already registered; choose another source id", m.Source)
	}
	now := g.now()
	p := &plexus.Pending{ID: auth.NewID("pend_"), Kind: plexus.PendingExtension, AgentID: sess.AgentID, SessionID: sess.ID,
		State: plexus.StatePending, CreatedAt: now, ExpiresAt: now.Add(g.cfg.PendingTTL), TraceID: auth.NewTraceID(),
		SameUser: g.sameUser(c), Extension: &m, Narration: extensionNarration(sess.AgentID, m, g.d.Registry.Entry, g.d.Binaries)}
	ids := make([]string, len(m.Capabilities))
	for i, d := range m.Capabilities {
		ids[i] = registry.EntryID(m.Source, d.Name)
	}
	err = g.update(ctx, true, func(tx plexus.StateTx) error {
		if err := tx.PutPending(p); err != nil {
			return err
		}
		return tx.Record(&plexus.Activity{TraceID: p.TraceID, Actor: sess.AgentID, AgentID: sess.AgentID,
			ActionType: "extension.requested", Target: p.ID, Payload: map[string]any{"source": m.Source,
				"entries": ids, "transport": m.Transport, "sessionId": sess.ID, "sameUser": p.SameUser}})
	})
	if err != nil {
		return plexus.ExtensionRegisterResponse{}, plexus.AsError(err)
	}
	g.touch(p.ID)
	return plexus.ExtensionRegisterResponse{OK: false, Source: m.Source, PendingID: p.ID,
		Reason: "waiting for the owner's approval; poll GET /grants/status?pendingId=" + p.ID + " or await grant_resolved"}, nil
}

// extensionNarration is the gateway's words for each entry a registration
// would add: what it reaches and what it requires (the verbs the gateway
// derives, not the author's), over which wire. The author's label is not
// part of it: the owner reads it apart, as the agent's words.
func extensionNarration(agent string, m plexus.ExtensionManifest, present func(string) (plexus.Entry, bool), resolve registry.Resolver) []plexus.PendingNarration {
	var out []plexus.PendingNarration
	verbs, why := registry.DeclVerbs(m, present, resolve)
	for i, d := range m.Capabilities {
		id := registry.EntryID(m.Source, d.Name)
		reach := registry.DeclReach(m, i, verbs[i], why[i], resolve)
		what := fmt.Sprintf("Approving registers %s, a %s over %s", id, d.Kind, reach.Transport)
		if len(verbs[i]) > 0 {
			what += fmt.Sprintf(" that requires %s", verbList(verbs[i]))
		}
		what += "; every grant of it still asks you."
		out = append(out, plexus.PendingNarration{ID: id, Verbs: verbs[i], Provenance: plexus.ProvenanceExtension, Reach: &reach,
			Summary: what, NotificationLine: fmt.Sprintf("%s wants to register the extension %s (%d entries)", agent, m.Source, len(m.Capabilities))})
	}
	return out
}

// approveExtension registers an approved registration, inside Decide's
// transaction: the source is persisted (with extension provenance, so it
// comes back at every start) together with the decision and its row. The
// caller brings the source online after the commit.
func (g *Gateway) approveExtension(tx plexus.StateTx, p *plexus.Pending, d plexus.Decision, now time.Time) (plexus.Source, error) {
	if p.Extension == nil {
		return nil, plexus.Errorf(plexus.CodeConflict, "decision %s carries no manifest", p.ID)
	}
	if len(d.Items) > 0 || len(d.Verbs) > 0 || len(d.Capabilities) > 0 || d.TrustWindow != nil {
		return nil, plexus.Errorf(plexus.CodeInvalidRequest, "an extension registration is approved or denied as a whole")
	}
	m := *p.Extension
	if _, exists := g.d.Registry.Source(m.Source); exists {
		return nil, plexus.Errorf(plexus.CodeConflict, "source %s was registered meanwhile; deny this request", m.Source)
	}
	cfgJSON, err := json.Marshal(m)
	if err != nil {
		return nil, err
	}
	cfg := plexus.SourceConfig{ID: m.Source, Kind: SourceKindExtension, Provenance: plexus.ProvenanceExtension, Config: cfgJSON, CreatedAt: now}
	// Built by the same factory that brings it back at every start.
	src, err := g.d.Sources(cfg)
	if err != nil {
		return nil, plexus.Errorf(plexus.CodeConflict, "the manifest no longer registers: %v", err)
	}
	if src.Provenance() != plexus.ProvenanceExtension {
		return nil, fmt.Errorf("approve extension %s: the source factory gave provenance %q", m.Source, src.Provenance())
	}
	if err := tx.PutSource(&cfg); err != nil {
		return nil, err
	}
	return src, nil
}

// actionOf names a decision's journal action by its kind: grant.denied,
// extension.approved, …
func actionOf(kind, what string) string {
	switch kind {
	case plexus.PendingExtension:
		return "extension." + what
	case plexus.PendingDefinition:
		return "definition." + what
	case plexus.PendingSignIn:
		return "signin." + what
	}
	return "grant." + what
}

// AddExtension is POST /admin/api/extensions: the owner registers a
// manifest at once, with managed provenance, persisted like `plexus ext
// add`; one of the owner's extensions registered again is replaced in
// place. It answers the ids that entered the registry and the revision.
func (g *Gateway) AddExtension(ctx context.Context, c Credentials, m plexus.ExtensionManifest) (plexus.ExtensionRegisterResponse, error) {
	if err := g.AdminCheck(ctx, c); err != nil {
		return plexus.ExtensionRegisterResponse{}, err
	}
	cfgJSON, err := json.Marshal(m)
	if err != nil {
		return plexus.ExtensionRegisterResponse{}, plexus.WrapError(plexus.CodeInvalidRequest, err, "the manifest cannot be encoded")
	}
	cfg, err := g.AddSource(ctx, c, plexus.SourceConfig{ID: m.Source, Kind: SourceKindExtension, Config: cfgJSON}, SourceOptions{Replace: true})
	if err != nil {
		var pe *plexus.Error
		if errors.As(err, &pe) && pe.Code == plexus.CodeInvalidRequest {
			return plexus.ExtensionRegisterResponse{OK: false, Source: m.Source, Reason: pe.Message}, err
		}
		return plexus.ExtensionRegisterResponse{}, err
	}
	out := plexus.ExtensionRegisterResponse{OK: true, Source: cfg.ID, Revision: g.d.Registry.Revision(), Registered: []string{}}
	for _, e := range g.d.Registry.Entries() {
		if e.Source == cfg.ID {
			out.Registered = append(out.Registered, e.ID)
		}
	}
	return out, nil
}

// RemoveExtension is DELETE /extensions/{source}: the owner removes an
// extension (theirs or an agent's they approved), revoking every grant of
// it; it does not come back at the next start. Any other source is not an
// extension and is refused.
func (g *Gateway) RemoveExtension(ctx context.Context, c Credentials, source string) error {
	if err := g.AdminCheck(ctx, c); err != nil {
		return err
	}
	cfg, err := g.ownerSource(ctx, source)
	if err != nil || cfg.Kind != SourceKindExtension {
		return plexus.Errorf(plexus.CodeNotFound, "no extension %q", source)
	}
	return g.removeSource(ctx, source, true, plexus.ActorHuman, g.adminVia(c))
}
