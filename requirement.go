package plexus

import (
	"context"
	"encoding/json"
	"path/filepath"
)

// RequirementsChecker is implemented by a transport that can tell, before
// any call, what a capability routed to it needs in place: a local service
// answering, a binary installed, a tool process not crash-looping. An
// extension's health probe asks the transport of each of its capabilities,
// so the probe never branches on a transport's kind.
//
// Requirements is pure (no I/O) and safe for concurrent use; the I/O is in
// each Requirement's Check, which must honour ctx.
type RequirementsChecker interface {
	Requirements(m ExtensionManifest, c ExtensionCapabilityDecl) []Requirement
}

// Requirement is one thing a capability needs.
type Requirement struct {
	// Key names what is needed ("service", "bin:git"): requirements of one
	// key, from any capability or transport, are checked once per probe.
	Key string
	// Stage orders the checks, then the order the capabilities first need
	// them: it keeps the probe's detail in a stable, readable order.
	Stage RequirementStage
	// Check answers ok, or degraded/unavailable with a detail saying which
	// requirement failed; unknown means it cannot tell.
	Check func(ctx context.Context) Health
}

// RequirementStage orders the checks of one probe.
type RequirementStage int

const (
	StageService RequirementStage = iota
	StageBinary
	StageProcess
)

// BinaryRequirement is what a route that runs {"bin": name} needs: name
// found by resolve (on the enriched PATH). A bin given by absolute path is
// run as written (a missing one is reported at the call), so it needs
// nothing checked here; nor does a route that names no bin.
func BinaryRequirement(route json.RawMessage, resolve func(name string) (string, error)) []Requirement {
	var r struct {
		Bin string `json:"bin"`
	}
	if json.Unmarshal(route, &r) != nil || r.Bin == "" || filepath.IsAbs(r.Bin) {
		return nil
	}
	return []Requirement{{Key: "bin:" + r.Bin, Stage: StageBinary, Check: func(context.Context) Health {
		if _, err := resolve(r.Bin); err != nil {
			return Health{Status: HealthUnavailable, Detail: r.Bin + " is not installed (not found on the enriched PATH)"}
		}
		return Health{Status: HealthOK}
	}}}
}
