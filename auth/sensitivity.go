package auth

import "github.com/plexus-gw/plexus"

// Sensitivity derives the risk tier of a grant of verbs on a capability
// (§4d), computed by the gateway so every surface agrees:
//
//   - low: read on first-party/managed;
//   - elevated: write/execute on first-party/managed, or read on extension;
//   - high: write/execute on extension, or write/execute over a cli or
//     local-rest transport whatever the provenance.
//
// No verbs means read; an omitted provenance is treated as extension.
func Sensitivity(prov plexus.Provenance, transport plexus.TransportKind, verbs []plexus.Verb) plexus.Sensitivity {
	mutating := false
	for _, v := range requestVerbs(verbs) {
		mutating = mutating || v.Mutating()
	}
	switch {
	case mutating && (transport == plexus.TransportCLI || transport == plexus.TransportLocalREST):
		return plexus.SensitivityHigh
	case !trustedProvenance(prov) && mutating:
		return plexus.SensitivityHigh
	case !trustedProvenance(prov) || mutating:
		return plexus.SensitivityElevated
	}
	return plexus.SensitivityLow
}

// ProvenanceOf is e's provenance, or extension, the strictest class, when the
// entry carries none.
func ProvenanceOf(e plexus.Entry) plexus.Provenance {
	switch e.Provenance {
	case plexus.ProvenanceFirstParty, plexus.ProvenanceManaged:
		return e.Provenance
	}
	return plexus.ProvenanceExtension
}
