package registry

import (
	"context"
	"slices"
	"strings"

	"github.com/plexus-gw/plexus"
)

// CheckRequirements is the [HealthCheck] of an extension whose capabilities
// run on the registry's transports (the spec's checkRequirements): each
// capability's transport that implements [plexus.RequirementsChecker] says
// what it needs, each requirement is checked once, and the worst answer
// wins; the detail lists the requirements that failed. A transport that
// says nothing needs nothing checked ahead of a call.
func (r *Registry) CheckRequirements(ctx context.Context, m plexus.ExtensionManifest) plexus.Health {
	var reqs []plexus.Requirement
	seen := map[string]bool{}
	for _, c := range m.Capabilities {
		kind := c.Transport
		if kind == "" {
			kind = m.Transport
		}
		r.mu.RLock()
		t := r.transports[kind]
		r.mu.RUnlock()
		rc, ok := t.(plexus.RequirementsChecker)
		if !ok {
			continue
		}
		for _, q := range rc.Requirements(m, c) {
			if !seen[q.Key] {
				seen[q.Key] = true
				reqs = append(reqs, q)
			}
		}
	}
	slices.SortStableFunc(reqs, func(a, b plexus.Requirement) int { return int(a.Stage) - int(b.Stage) })
	worst := plexus.Health{Status: plexus.HealthOK}
	var problems []string
	for _, q := range reqs {
		h := q.Check(ctx)
		if h.Status == plexus.HealthOK || h.Status == plexus.HealthUnknown {
			continue
		}
		if h.Detail != "" && !slices.Contains(problems, h.Detail) {
			problems = append(problems, h.Detail)
		}
		if h.Status == plexus.HealthUnavailable || worst.Status == plexus.HealthOK {
			worst.Status = h.Status
		}
	}
	if len(problems) > 0 {
		worst.Detail = strings.Join(problems, "; ")
	}
	return worst
}
