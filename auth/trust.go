package auth

import (
	"slices"
	"time"

	"github.com/plexus-gw/plexus"
)

// Token-lifetime bounds (§4d "the two clocks"): the lifetime is a security
// invariant, configurable only within [MinTokenLifetime, MaxTokenLifetime].
const (
	DefaultTokenLifetime  = 15 * time.Minute
	MinTokenLifetime      = time.Minute
	MaxTokenLifetime      = time.Hour
	DefaultMaxTrustWindow = 30 * 24 * time.Hour
)

// Fixed trust-window durations.
const (
	hour = time.Hour
	day  = 24 * time.Hour
)

// Policy holds the two configurable clocks of auth-config.json. The zero
// value means the defaults.
type Policy struct {
	// TokenLifetime is how long a minted token lives; 0 means
	// DefaultTokenLifetime; other values are clamped into
	// [MinTokenLifetime, MaxTokenLifetime].
	TokenLifetime time.Duration
	// MaxTrustWindow caps custom trust windows (never until-revoked); 0 means
	// DefaultMaxTrustWindow, and larger values are cut to it: the spec caps
	// custom durations at 30 days.
	MaxTrustWindow time.Duration
}

// Lifetime is the token lifetime p yields, clamped and defaulted.
func (p Policy) Lifetime() time.Duration {
	if p.TokenLifetime == 0 {
		return DefaultTokenLifetime
	}
	return min(max(p.TokenLifetime, MinTokenLifetime), MaxTokenLifetime)
}

func (p Policy) maxTrust() time.Duration {
	if p.MaxTrustWindow <= 0 || p.MaxTrustWindow > DefaultMaxTrustWindow {
		return DefaultMaxTrustWindow
	}
	return p.MaxTrustWindow
}

// trustedProvenance reports whether prov shares the first-party posture.
// Anything else, including an omitted provenance, is treated as extension,
// the strictest class, as the spec says for omitted values.
func trustedProvenance(prov plexus.Provenance) bool {
	return prov == plexus.ProvenanceFirstParty || prov == plexus.ProvenanceManaged
}

// requestVerbs normalizes verbs, reading an empty list as the default
// read-only grant.
func requestVerbs(verbs []plexus.Verb) []plexus.Verb {
	n := plexus.NormalizeVerbs(verbs)
	if len(n) == 0 {
		return []plexus.Verb{plexus.VerbRead}
	}
	return n
}

// DefaultWindow is the §4d ceiling for a grant of verbs on a capability of
// provenance prov: read 7d on first-party/managed and 1d on extension, write
// 1d, execute once. With several verbs the most restrictive wins, so any
// execute makes it once. No verbs means read.
func DefaultWindow(prov plexus.Provenance, verbs []plexus.Verb) plexus.TrustWindow {
	vs := requestVerbs(verbs)
	switch {
	case slices.Contains(vs, plexus.VerbExecute):
		return plexus.TrustWindow{Kind: plexus.WindowOnce}
	case slices.Contains(vs, plexus.VerbWrite):
		return plexus.TrustWindow{Kind: plexus.Window1d}
	case trustedProvenance(prov):
		return plexus.TrustWindow{Kind: plexus.Window7d}
	}
	return plexus.TrustWindow{Kind: plexus.Window1d}
}

// ChooseWindow picks the window a grant is approved under.
//
//   - Any execute verb: once, whatever was requested, even on the admin path
//     (ADR-5: execute is never standing).
//   - No request, an unknown kind or a custom window without a positive Ms:
//     the [DefaultWindow] ceiling.
//   - Agent path (authoritative false): the request may only shorten the
//     ceiling; a longer request, until-revoked included, gets the ceiling.
//   - Admin path (authoritative true): the request stands, until-revoked
//     included, with custom windows capped at MaxTrustWindow.
func (p Policy) ChooseWindow(prov plexus.Provenance, verbs []plexus.Verb, requested *plexus.TrustWindow, authoritative bool) plexus.TrustWindow {
	ceiling := DefaultWindow(prov, verbs)
	if ceiling.Kind == plexus.WindowOnce || requested == nil || !ValidWindow(*requested) {
		return ceiling
	}
	w := *requested
	if w.Kind != plexus.WindowCustom {
		w.Ms = 0
	} else if maxMs := p.maxTrust().Milliseconds(); w.Ms > maxMs {
		w.Ms = maxMs
	}
	if authoritative {
		return w
	}
	if w.Kind == plexus.WindowUntilRevoked || !Narrower(w, ceiling) {
		return ceiling
	}
	return w
}

// ValidWindow reports whether w is a known kind, with a positive Ms when it
// is custom. Ms is ignored on the other kinds.
func ValidWindow(w plexus.TrustWindow) bool {
	switch w.Kind {
	case plexus.WindowOnce, plexus.Window1h, plexus.Window1d, plexus.Window7d, plexus.WindowUntilRevoked:
		return true
	case plexus.WindowCustom:
		return w.Ms > 0
	}
	return false
}

// Expiry returns when a grant approved at grantedAt under w ends and whether
// it is standing. A once grant is (grantedAt, false): it lives until used or
// revoked and never short-circuits a re-ask. until-revoked ends at
// grantedAt+[plexus.UntilRevokedHorizon]. Custom windows are capped at
// MaxTrustWindow again here; an invalid window fails closed to once.
func (p Policy) Expiry(w plexus.TrustWindow, grantedAt time.Time) (expiresAt time.Time, standing bool) {
	if !ValidWindow(w) || w.Kind == plexus.WindowOnce {
		return grantedAt, false
	}
	d := WindowDuration(w)
	if w.Kind == plexus.WindowCustom {
		d = min(d, p.maxTrust())
	}
	return grantedAt.Add(d), true
}

// WindowDuration is how long w stands: 0 for once and for invalid windows,
// [plexus.UntilRevokedHorizon] for until-revoked. It is meant for comparing
// windows; [Policy.Expiry] is the authority on a grant's end.
func WindowDuration(w plexus.TrustWindow) time.Duration {
	switch w.Kind {
	case plexus.Window1h:
		return hour
	case plexus.Window1d:
		return day
	case plexus.Window7d:
		return 7 * day
	case plexus.WindowUntilRevoked:
		return plexus.UntilRevokedHorizon
	case plexus.WindowCustom:
		if w.Ms <= 0 || w.Ms > plexus.UntilRevokedHorizon.Milliseconds() {
			// Beyond the horizon is never produced by ChooseWindow; treat it
			// as the horizon rather than overflow.
			if w.Ms > 0 {
				return plexus.UntilRevokedHorizon
			}
			return 0
		}
		return time.Duration(w.Ms) * time.Millisecond
	}
	return 0
}

// Narrower reports whether a is no longer than b, so that replacing b with a
// does not widen a grant. An invalid a is never narrower: an owner's edit to
// a garbled window is refused rather than guessed at.
func Narrower(a, b plexus.TrustWindow) bool {
	if !ValidWindow(a) {
		return false
	}
	return WindowDuration(a) <= WindowDuration(b)
}
