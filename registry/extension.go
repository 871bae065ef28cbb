package registry

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"

	"github.com/plexus-gw/plexus"
)

// ExtensionSource is an extension manifest materialized as a
// [plexus.Source] (spec §1, §9.3): the same shape as a first-party source,
// so the gateway treats its entries like any other. Entry ids are the
// source's slug and the declaration's name; a capability's route.attachSkills
// become back-links to the skills it names; each entry's Route carries the
// declaration's route with the manifest's service hint and secret
// references ([plexus.ExtensionRoute]) for its transport alone.
//
// It is immutable and safe for concurrent use.
type ExtensionSource struct {
	m       plexus.ExtensionManifest
	prov    plexus.Provenance
	entries []plexus.Entry
	check   HealthCheck
	resolve Resolver
}

// HealthCheck probes what an extension needs (its service answering, its
// binaries installed). The registry calls it through [ExtensionSource.Health],
// caches the answer for a short TTL and reports changes as source_status.
// It must be safe for concurrent use and honour ctx.
type HealthCheck func(ctx context.Context, m plexus.ExtensionManifest) plexus.Health

// WithHealth returns s probing its requirements with check.
func (s *ExtensionSource) WithHealth(check HealthCheck) *ExtensionSource {
	c := *s
	c.check = check
	return &c
}

var _ plexus.Source = (*ExtensionSource)(nil)

// NewExtensionSource validates m (see [ValidateManifest]; present may be nil
// when no gateway is at hand) and materializes it with provenance prov:
// managed when the owner added it, extension when an agent did. resolve
// finds the programs as the daemon runs them, so that an entry whose
// program links to an interpreter requires execute ([DeclVerbs]); nil
// judges the names alone.
func NewExtensionSource(m plexus.ExtensionManifest, prov plexus.Provenance, present func(id string) (plexus.Entry, bool), resolve Resolver) (*ExtensionSource, error) {
	if err := ValidateManifest(m, present); err != nil {
		return nil, err
	}
	s := &ExtensionSource{m: m, prov: prov, resolve: resolve}
	verbs, _ := DeclVerbs(m, present, resolve)
	for i, d := range m.Capabilities {
		e, err := s.entry(d, verbs[i])
		if err != nil {
			return nil, err
		}
		s.entries = append(s.entries, e)
	}
	return s, nil
}

// entry materializes d requiring grants: the verbs the gateway derived
// ([DeclVerbs]), never fewer than d declares.
func (s *ExtensionSource) entry(d plexus.ExtensionCapabilityDecl, grants []plexus.Verb) (plexus.Entry, error) {
	t := declTransport(s.m, d)
	if grants == nil {
		grants = []plexus.Verb{}
	}
	e := plexus.Entry{ID: EntryID(s.m.Source, d.Name), Source: s.m.Source, Kind: d.Kind, Label: d.Label,
		Describe: d.Describe, IO: d.IO, Grants: grants, Transport: t, Members: d.Members, Body: d.Body}
	xr := plexus.ExtensionRoute{Decl: d.Route, ServiceHint: s.m.ServiceHint, Secrets: s.m.Secrets}
	if t == plexus.TransportCLI || t == plexus.TransportStdio {
		if r, err := readRoute(t, d.Route); err == nil {
			xr.Runs = runsFile(r.Bin, s.resolve)
		}
	}
	route, err := json.Marshal(xr)
	if err != nil {
		return plexus.Entry{}, fmt.Errorf("extension %s: route of %s: %w", s.m.Source, d.Name, err)
	}
	e.Route = route
	var r struct {
		AttachSkills []string `json:"attachSkills"`
	}
	if len(d.Route) > 0 {
		_ = json.Unmarshal(d.Route, &r) // validated: an object, and attachSkills a list of names
	}
	for _, name := range r.AttachSkills {
		i := slices.IndexFunc(s.m.Capabilities, func(o plexus.ExtensionCapabilityDecl) bool { return o.Name == name })
		e.Skills = append(e.Skills, plexus.SkillRef{ID: EntryID(s.m.Source, name), Label: s.m.Capabilities[i].Label})
	}
	return e, nil
}

// ID is the manifest's source id.
func (s *ExtensionSource) ID() string { return s.m.Source }

// Provenance is managed for an owner's extension, extension for an agent's.
func (s *ExtensionSource) Provenance() plexus.Provenance { return s.prov }

// Manifest returns the manifest the source was made from.
func (s *ExtensionSource) Manifest() plexus.ExtensionManifest { return s.m }

// Scan returns the materialized entries (copies: the registry stamps them).
func (s *ExtensionSource) Scan(context.Context) ([]plexus.Entry, error) {
	return slices.Clone(s.entries), nil
}

// Health is what the source's health check says of its requirements, or
// ok when it has none (a manifest alone is always there).
func (s *ExtensionSource) Health(ctx context.Context) plexus.Health {
	if s.check == nil {
		return plexus.Health{Status: plexus.HealthOK}
	}
	return s.check(ctx, s.m)
}
