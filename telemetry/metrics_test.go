package telemetry_test

import (
	"testing"

	"github.com/plexus-gw/plexus"
	"github.com/plexus-gw/plexus/telemetry"
)

// TestSourceProbes: each source's health is a state set, and a source that
// re-established its session (an MCP server's client) reports how many
// times; one that never did adds no series.
func TestSourceProbes(t *testing.T) {
	m := telemetry.NewMetrics(telemetry.Probes{Sources: func() []telemetry.SourceHealth {
		return []telemetry.SourceHealth{
			{ID: "mcp:flaky", Status: plexus.HealthOK, Restarts: 3},
			{ID: "portal:notes", Status: plexus.HealthUnavailable},
		}
	}})
	fams, err := m.Registry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	reconnects := map[string]float64{}
	healthy := map[string]float64{}
	for _, f := range fams {
		for _, s := range f.GetMetric() {
			labels := map[string]string{}
			for _, lp := range s.GetLabel() {
				labels[lp.GetName()] = lp.GetValue()
			}
			switch f.GetName() {
			case "plexus_source_reconnects_total":
				reconnects[labels["source"]] = s.GetCounter().GetValue()
			case "plexus_source_health":
				if labels["status"] == string(plexus.HealthOK) {
					healthy[labels["source"]] = s.GetGauge().GetValue()
				}
			}
		}
	}
	if len(reconnects) != 1 || reconnects["mcp:flaky"] != 3 {
		t.Errorf("reconnects = %v, want mcp:flaky 3 and nothing for the portal", reconnects)
	}
	if healthy["mcp:flaky"] != 1 || healthy["portal:notes"] != 0 {
		t.Errorf("ok state = %v, want mcp:flaky 1, portal:notes 0", healthy)
	}
}
