package auth

import (
	"context"
	"fmt"
	"slices"

	"github.com/plexus-gw/plexus"
)

// PolicyUserConfirm is the shipped policy's id, surfaced in audit detail.
const PolicyUserConfirm = "user-confirm"

var _ plexus.Authorizer = UserConfirmAuthorizer{}

// UserConfirmAuthorizer is the shipped confirm-risky policy (ADR-007
// revised):
//
//   - read-only on first-party/managed: allow;
//   - anything with write or execute, and any verb on an extension: pend;
//   - a prior standing approval covering the verbs (HasPriorApproval) allows
//     without a re-prompt, except for execute, which is never standing;
//   - a revocation tombstone pends what would otherwise be allowed, so a
//     still-running agent cannot silently re-acquire what was just revoked;
//   - anonymous sessions hold no standing trust: first-party/managed reads
//     are allowed (the gateway caps them at once), everything else pends.
//
// A requested verb that is not read, write or execute is denied. It holds no
// state and is safe for concurrent use.
type UserConfirmAuthorizer struct{}

// Policy returns "user-confirm".
func (UserConfirmAuthorizer) Policy() string { return PolicyUserConfirm }

// Authorize decides one requested grant.
func (UserConfirmAuthorizer) Authorize(_ context.Context, ac plexus.AuthorizationContext) plexus.AuthorizationDecision {
	d, ok := baseDecision(ac)
	if !ok {
		return d
	}
	prov := d.Provenance
	readOnly := !slices.ContainsFunc(d.Verbs, plexus.Verb.Mutating)
	execute := slices.Contains(d.Verbs, plexus.VerbExecute)
	switch {
	case ac.RevokedTombstone:
		return pend(d, "revoked earlier and not re-approved since; the owner must approve again")
	case ac.Anonymous && readOnly && trustedProvenance(prov):
		return allow(d, "read on a "+string(prov)+" capability, for this anonymous session only")
	case ac.Anonymous:
		return pend(d, "an anonymous session holds no standing trust; the owner must approve")
	case execute:
		return pend(d, "execute is approved per use; the owner must approve")
	case ac.HasPriorApproval:
		return allow(d, "covered by a standing approval")
	case readOnly && trustedProvenance(prov):
		return allow(d, "read on a "+string(prov)+" capability is auto-approved")
	case !trustedProvenance(prov):
		return pend(d, "capabilities from an extension need the owner's approval")
	}
	return pend(d, "write needs the owner's approval")
}

// baseDecision fills the narration fields of a decision and denies a
// request naming an unknown verb. Verbs are the requested ones, normalized,
// with an empty request read as the read-only default.
func baseDecision(ac plexus.AuthorizationContext) (plexus.AuthorizationDecision, bool) {
	prov := ProvenanceOf(ac.Entry)
	verbs := requestVerbs(ac.RequestedVerbs)
	d := plexus.AuthorizationDecision{
		ID:                     ac.Entry.ID,
		Verbs:                  verbs,
		Provenance:             prov,
		Sensitivity:            Sensitivity(prov, ac.Entry.Transport, verbs),
		RecommendedTrustWindow: DefaultWindow(prov, verbs),
	}
	for _, v := range ac.RequestedVerbs {
		if !v.Valid() {
			d.Outcome = plexus.OutcomeDeny
			d.Verbs = nil
			d.Reason = fmt.Sprintf("unknown verb %q", v)
			return d, false
		}
	}
	return d, true
}

func allow(d plexus.AuthorizationDecision, reason string) plexus.AuthorizationDecision {
	d.Outcome, d.Reason = plexus.OutcomeAllow, reason
	return d
}

func pend(d plexus.AuthorizationDecision, reason string) plexus.AuthorizationDecision {
	d.Outcome, d.Reason = plexus.OutcomePending, reason
	return d
}
