package auth

import (
	"slices"

	"github.com/plexus-gw/plexus"
)

// CoveringResolved returns the first scope that authorizes calling entry
// with input: its id is the entry's, its verbs include every verb the entry
// requires (an entry that lists none requires read), and its constraint, if
// any, is satisfied by input. A constrained scope is inert outside its
// constraint, so a call it does not cover is denied grant_required unless
// another scope covers it. The returned scope is a copy. resolve resolves
// the paths calls name when the entry's transport can ([ResolvePath]; nil:
// none does): a pathPrefix constraint must then admit both the path named
// and the path reached ([SatisfiedResolved]).
func CoveringResolved(scopes []plexus.TokenScope, entry plexus.Entry, input map[string]any, resolve ResolvePath) (*plexus.TokenScope, bool) {
	need := entry.Grants
	if len(need) == 0 {
		need = []plexus.Verb{plexus.VerbRead}
	}
	for _, s := range scopes {
		if s.ID != entry.ID || !plexus.CoversVerbs(s.Verbs, need) {
			continue
		}
		if s.Constraint != nil && !SatisfiedResolved(s.Constraint, input, resolve) {
			continue
		}
		return &s, true
	}
	return nil, false
}

// SynthesizeMembers returns the transitive member scopes a grant of workflow
// brings (ADR-012), each flagged SynthesizedFor the workflow, in member
// order. A member listed twice gets one scope with the union of its verbs; a
// member without verbs gets read (default read-only); a member naming the
// workflow itself is skipped. The caller checks that every member is present
// in the registry.
func SynthesizeMembers(workflow plexus.Entry) []plexus.TokenScope {
	var out []plexus.TokenScope
	for _, m := range workflow.Members {
		if m.ID == "" || m.ID == workflow.ID {
			continue
		}
		verbs := requestVerbs(m.Verbs)
		if i := slices.IndexFunc(out, func(s plexus.TokenScope) bool { return s.ID == m.ID }); i >= 0 {
			out[i].Verbs = plexus.NormalizeVerbs(append(out[i].Verbs, verbs...))
			continue
		}
		out = append(out, plexus.TokenScope{ID: m.ID, Verbs: verbs, SynthesizedFor: workflow.ID})
	}
	return out
}
