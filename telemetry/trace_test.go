package telemetry_test

import (
	"testing"

	"github.com/plexus-gw/plexus/telemetry"
)

// TestTracingEnabled: traces are on only when the standard endpoint
// variables say so, and OTEL_TRACES_EXPORTER=none turns them off.
func TestTracingEnabled(t *testing.T) {
	for _, c := range []struct {
		name string
		env  []string
		want bool
	}{
		{"Unset", []string{"HOME=/h", "PATH=/bin"}, false},
		{"Empty", []string{"OTEL_EXPORTER_OTLP_ENDPOINT="}, false},
		{"Endpoint", []string{"OTEL_EXPORTER_OTLP_ENDPOINT=http://127.0.0.1:4318"}, true},
		{"TracesEndpoint", []string{"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT=http://127.0.0.1:4318/v1/traces"}, true},
		{"ExporterNone", []string{"OTEL_EXPORTER_OTLP_ENDPOINT=http://127.0.0.1:4318", "OTEL_TRACES_EXPORTER=none"}, false},
		{"LastWins", []string{"OTEL_EXPORTER_OTLP_ENDPOINT=http://x", "OTEL_EXPORTER_OTLP_ENDPOINT="}, false},
		{"OtherPrefix", []string{"XOTEL_EXPORTER_OTLP_ENDPOINT=http://x"}, false},
	} {
		if got := telemetry.TracingEnabled(c.env); got != c.want {
			t.Errorf("%s: TracingEnabled(%v) = %v, want %v", c.name, c.env, got, c.want)
		}
	}
}
