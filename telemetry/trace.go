package telemetry

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/plexus-gw/plexus"
)

// ScopeName is the instrumentation scope of Plexus's spans.
const ScopeName = "github.com/plexus-gw/plexus"

// Tracing is the daemon's tracer provider: the OTLP exporter's when the
// environment names an endpoint, a no-op otherwise (spans then cost a
// context lookup and nothing else). It is never installed as OpenTelemetry's
// global provider.
type Tracing struct {
	tp       trace.TracerProvider
	shutdown func(context.Context) error
	enabled  bool
}

// TracingEnabled reports whether env (KEY=value pairs) asks for traces:
// the standard OTEL_EXPORTER_OTLP_ENDPOINT or its traces-only form is set
// and OTEL_TRACES_EXPORTER does not say "none".
func TracingEnabled(env []string) bool {
	get := func(k string) string {
		for _, kv := range slices.Backward(env) {
			if v, ok := strings.CutPrefix(kv, k+"="); ok {
				return v
			}
		}
		return ""
	}
	if get("OTEL_TRACES_EXPORTER") == "none" {
		return false
	}
	return get("OTEL_EXPORTER_OTLP_ENDPOINT") != "" || get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") != ""
}

// NewOTLPTracing exports spans over OTLP/HTTP (protobuf) in batches. The
// exporter reads the endpoint, headers, timeout and TLS settings from the
// standard OTEL_EXPORTER_OTLP_* variables of the process; it connects
// lazily, so a collector that is down costs dropped spans, never a failed
// start.
func NewOTLPTracing(ctx context.Context) (*Tracing, error) {
	exp, err := otlptracehttp.New(ctx)
	if err != nil {
		return nil, fmt.Errorf("OTLP trace exporter: %w", err)
	}
	return NewTracing(exp), nil
}

// NewTracing sends spans to exp in batches (tests pass an in-memory
// exporter and read it after Shutdown). Every span is sampled: see
// [ownerSampler].
func NewTracing(exp sdktrace.SpanExporter) *Tracing {
	res := resource.NewSchemaless(attribute.String("service.name", "plexus"), attribute.String("service.version", plexus.Version))
	tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp), sdktrace.WithResource(res), sdktrace.WithSampler(ownerSampler()))
	return &Tracing{tp: tp, shutdown: tp.Shutdown, enabled: true}
}

// ownerSampler samples every span, whatever a remote parent says. A client's
// traceparent (an agent's, in params._meta) is still continued, so its calls
// join its own trace, but its sampled flag decides nothing: with the SDK's
// default (ParentBased) an agent sending "not sampled" kept its calls, and
// the plexus.invoke spans under them, out of the owner's traces. It also
// overrides OTEL_TRACES_SAMPLER: the owner's traces are the record of what
// agents did, not a sample of it.
func ownerSampler() sdktrace.Sampler {
	return sdktrace.ParentBased(sdktrace.AlwaysSample(),
		sdktrace.WithRemoteParentSampled(sdktrace.AlwaysSample()),
		sdktrace.WithRemoteParentNotSampled(sdktrace.AlwaysSample()))
}

// NoTracing is the provider of a daemon that exports nothing.
func NoTracing() *Tracing {
	return &Tracing{tp: noop.NewTracerProvider(), shutdown: func(context.Context) error { return nil }}
}

// Enabled reports whether spans go anywhere: callers skip building a span
// (its context and attributes) when they do not.
func (t *Tracing) Enabled() bool { return t.enabled }

// Tracer is Plexus's tracer.
func (t *Tracing) Tracer() trace.Tracer { return t.tp.Tracer(ScopeName) }

// Shutdown flushes the spans still batched, waiting at most 5 seconds.
func (t *Tracing) Shutdown(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	if err := t.shutdown(ctx); err != nil {
		return fmt.Errorf("flush traces: %w", err)
	}
	return nil
}

// StartCall opens the span of one capability call. The capability id is
// the one the caller named, checked against the catalog by the caller of
// StartCall (an unknown id comes as "unknown"). EndCall closes it.
func StartCall(ctx context.Context, tracer trace.Tracer, capability, via string) (context.Context, trace.Span) {
	return tracer.Start(ctx, "plexus.invoke", trace.WithSpanKind(trace.SpanKindInternal),
		trace.WithAttributes(attrCapability.String(capability), attrVia.String(via)))
}

// EndCall records a call's outcome (OutcomeOK or its error code) and its
// audit id on span and ends it.
func EndCall(span trace.Span, outcome, auditID string) {
	if !span.IsRecording() {
		return
	}
	span.SetAttributes(attrOutcome.String(outcome))
	if auditID != "" {
		span.SetAttributes(attrAuditID.String(auditID))
	}
	if outcome != OutcomeOK {
		span.SetAttributes(attribute.String("error.type", outcome))
		span.SetStatus(codes.Error, outcome)
	}
	span.End()
}
