package gateway

import (
	"errors"
	"time"

	"github.com/plexus-gw/plexus"
)

// admitted is what the journal's state says of a call before anything runs:
// the token's record, the scope covering the call and the grant backing it,
// or the denial that stops it.
type admitted struct {
	rec     *plexus.TokenRecord // nil when the token is unknown or unreadable
	scope   *plexus.TokenScope
	backing *plexus.Grant
	denial  *plexus.Error
	// usedOnce: the backing once grant served its call already; the call is
	// refused unless it is a retry of that call.
	usedOnce bool
}

// once reports whether the call consumes its backing grant: a once grant
// (not a standing one) that the call holds directly, not through a
// workflow's synthesized member scope.
func (a admitted) once() bool {
	return !a.backing.Standing && a.scope.SynthesizedFor == ""
}

// admit checks the jti registry, the session's liveness, the capability, the
// covering scope and the grant backing it, re-read on every call (and before
// every workflow member, so a revoke mid-fan-out halts the rest). A denial is
// a value in the answer; an error means the state could not be read.
func (g *Gateway) admit(tx authReader, req plexus.InvokeRequest, ic plexus.InvokeContext, entry plexus.Entry, known, member bool, now time.Time) (admitted, error) {
	var a admitted
	rec, err := tx.Token(ic.JTI)
	if errors.Is(err, plexus.ErrNotFound) {
		a.denial = plexus.Errorf(plexus.CodeTokenRevoked, "token is not known to this gateway; request the grant again")
		return a, nil
	} else if err != nil {
		return a, err
	}
	a.rec = rec
	if rec.RevokedAt != nil {
		a.denial = plexus.Errorf(plexus.CodeTokenRevoked, "token was revoked (%s); request the grant again with PUT /grants", rec.RevokeReason)
		return a, nil
	}
	if _, err := g.liveSession(tx, ic.SessionID); err != nil {
		a.denial = plexus.AsError(err)
		return a, nil
	}
	if !known {
		a.denial = plexus.Errorf(plexus.CodeUnknownCapability, "no capability %q (re-fetch GET /manifest)", req.ID)
		return a, nil
	}
	a.scope = g.covering(ic.Scopes, entry, req.Input, member)
	if a.scope == nil {
		a.denial = plexus.Errorf(plexus.CodeGrantRequired, "no grant covers %s (%s) for this input", entry.ID, verbList(entry.Grants))
		return a, nil
	}
	grantFor := a.scope.ID
	if a.scope.SynthesizedFor != "" {
		grantFor = a.scope.SynthesizedFor
	}
	backing, err := tx.Grant(ic.AgentID, grantFor)
	if errors.Is(err, plexus.ErrNotFound) {
		a.denial = plexus.Errorf(plexus.CodeGrantRequired, "no grant backs this token for %s", grantFor)
		return a, nil
	} else if err != nil {
		return a, err
	}
	a.backing = backing
	a.denial, a.usedOnce = backingState(backing, a.scope, grantFor, now)
	return a, nil
}

// backingState judges the grant backing a call's scope at now: revoked or
// past its trust window denies the call; a once grant already used is
// reported as usedOnce (a member scope of a workflow rides its workflow's
// grant and never consumes it).
func backingState(backing *plexus.Grant, scope *plexus.TokenScope, grantFor string, now time.Time) (denial *plexus.Error, usedOnce bool) {
	switch {
	case backing.RevokedAt != nil:
		return plexus.Errorf(plexus.CodeTokenRevoked, "the grant for %s was revoked", grantFor), false
	case backing.Standing && !now.Before(backing.ExpiresAt):
		return plexus.Errorf(plexus.CodeGrantRequired, "the trust window for %s ended; request it again", grantFor), false
	case backing.UsedAt != nil && scope.SynthesizedFor == "":
		return nil, true
	}
	return nil, false
}
