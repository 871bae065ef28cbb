// Package telemetry is how Plexus is watched while it runs: Prometheus
// metrics on a registry the daemon owns ([Metrics], served at /metrics) and
// OpenTelemetry spans of calls and decisions ([Tracing]), exported over OTLP
// only when OTEL_EXPORTER_OTLP_ENDPOINT is set.
//
// It observes from the outside: a [plexus.Store] decorator sees every
// committed activity row and each commit's latency ([Metrics.Store]), and the
// daemon reports calls and streams from thin wrappers around the gateway, so
// the hot path carries no telemetry code of its own.
//
// It must never put a secret or a raw input into a label, a span or a log:
// labels and attributes are ids the owner bounds (capability and source ids),
// closed sets (outcomes, error codes, channels) and the journal's trace ids;
// never a token, a PAT, a key, a call's input or output, or an agent's
// free text. It uses no package-level registry or provider: everything hangs
// off values the daemon creates and closes.
package telemetry
