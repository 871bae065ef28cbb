package main

import (
	"context"
	"encoding/json"
	"path/filepath"
	"slices"
	"strings"

	"github.com/plexus-gw/plexus"
	"github.com/plexus-gw/plexus/registry"
)

// Narrow views of the transports and the platform, for the probes.
type (
	binaryResolver interface {
		Resolve(name string) (string, error)
	}
	serviceChecker interface {
		Check(ctx context.Context, hint plexus.LocalServiceHint) plexus.Health
	}
	processHealth interface {
		Health(source string) plexus.Health
	}
)

// extensionHealth is an extension's requirements check (the spec's
// checkRequirements): its local service answering, the binaries its cli
// and stdio entries name installed, and its stdio tool not crash-looping.
// The worst answer wins; the detail says which requirement failed. This is
// wiring knowledge (which transport needs what), so it lives here, not in
// the registry.
func extensionHealth(bins binaryResolver, rest serviceChecker, procs processHealth) registry.HealthCheck {
	return func(ctx context.Context, m plexus.ExtensionManifest) plexus.Health {
		worst := plexus.Health{Status: plexus.HealthOK}
		var problems []string
		note := func(h plexus.Health) {
			if h.Status == plexus.HealthOK || h.Status == plexus.HealthUnknown {
				return
			}
			if h.Detail != "" && !slices.Contains(problems, h.Detail) {
				problems = append(problems, h.Detail)
			}
			if h.Status == plexus.HealthUnavailable || worst.Status == plexus.HealthOK {
				worst.Status = h.Status
			}
		}
		checkedService := false
		var named []string
		usesStdio := false
		for _, d := range m.Capabilities {
			t := d.Transport
			if t == "" {
				t = m.Transport
			}
			switch t {
			case plexus.TransportLocalREST:
				if !checkedService && m.ServiceHint != nil {
					checkedService = true
					note(rest.Check(ctx, *m.ServiceHint))
				}
			case plexus.TransportCLI, plexus.TransportStdio:
				usesStdio = usesStdio || t == plexus.TransportStdio
				var r struct {
					Bin string `json:"bin"`
				}
				if json.Unmarshal(d.Route, &r) == nil && r.Bin != "" && !slices.Contains(named, r.Bin) {
					named = append(named, r.Bin)
				}
			}
		}
		for _, b := range named {
			if filepath.IsAbs(b) {
				continue // run as written; a missing one is reported at the call
			}
			if _, err := bins.Resolve(b); err != nil {
				note(plexus.Health{Status: plexus.HealthUnavailable, Detail: b + " is not installed (not found on the enriched PATH)"})
			}
		}
		if usesStdio {
			note(procs.Health(m.Source))
		}
		if len(problems) > 0 {
			worst.Detail = strings.Join(problems, "; ")
		}
		return worst
	}
}
