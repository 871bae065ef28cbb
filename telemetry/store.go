package telemetry

import (
	"context"
	"errors"
	"strings"
	"sync"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/plexus-gw/plexus"
)

// Observe wraps a store so that every update is timed and every activity
// row it commits is seen: the rows are how metrics count decisions, tokens
// and restarts, and how a span learns the journal's trace id, without a
// line of telemetry in the code that writes them. m and tracer may be nil.
//
// A row counts only once its update returned nil: under group commit a fn
// may run on another caller's goroutine and be rolled back, so rows are
// read after Update returns, from the last run of fn.
func Observe(inner plexus.Store, m *Metrics, tracer trace.Tracer) plexus.Store {
	s := &observed{inner: inner, m: m, tracer: tracer}
	s.updates.New = func() any {
		u := new(update)
		u.runFn = u.run
		return u
	}
	return s
}

type observed struct {
	inner  plexus.Store
	m      *Metrics
	tracer trace.Tracer
	// updates recycles the per-Update state (and its bound run func):
	// every /invoke commits through here, and the two allocations it cost
	// were a tenth of the journal's own.
	updates sync.Pool
}

// update is one Update call's view of its transaction: it passes every
// operation through to the real one and keeps the rows Record accepted.
type update struct {
	plexus.StateTx
	fn    func(plexus.StateTx) error
	runFn func(plexus.StateTx) error // u.run, bound once
	fnErr error
	rows  []*plexus.Activity
	buf   [2]*plexus.Activity // most updates record one or two rows
}

func (u *update) run(tx plexus.StateTx) error {
	u.StateTx, u.rows = tx, u.buf[:0]
	u.fnErr = u.fn(u)
	return u.fnErr
}

// Record passes a to the real transaction and keeps it once accepted.
func (u *update) Record(a *plexus.Activity) error {
	if err := u.StateTx.Record(a); err != nil {
		return err
	}
	u.rows = append(u.rows, a)
	return nil
}

func (s *observed) Update(ctx context.Context, durable bool, fn func(plexus.StateTx) error) error {
	u, _ := s.updates.Get().(*update)
	u.fn = fn
	// The store returns only once fn has run (or never will): u is free
	// again after the rows are read.
	defer s.release(u)
	start := time.Now()
	err := s.inner.Update(ctx, durable, u.runFn)
	end := time.Now()
	if s.m != nil {
		s.m.commit(durable, end.Sub(start), journalFailed(err, u.fnErr))
	}
	if err != nil {
		return err
	}
	for _, a := range u.rows {
		if s.m != nil {
			s.m.row(a)
		}
		s.trace(ctx, a, start, end)
	}
	return nil
}

// appender is the journal's cheaper commit of one activity row (see
// journal.DB.Append); the gateway uses it when its store has it, so the
// wrapper must pass it on or the daemon never gets it.
type appender interface {
	Append(ctx context.Context, a *plexus.Activity) error
}

// Append commits a as the inner store's Append when it has one (as an
// Update recording a otherwise), observed as Update observes: timed,
// counted and traced once committed.
func (s *observed) Append(ctx context.Context, a *plexus.Activity) error {
	ap, ok := s.inner.(appender)
	if !ok {
		return s.Update(ctx, false, func(tx plexus.StateTx) error { return tx.Record(a) })
	}
	start := time.Now()
	err := ap.Append(ctx, a)
	end := time.Now()
	if s.m != nil {
		s.m.commit(false, end.Sub(start), journalFailed(err, nil))
	}
	if err != nil {
		return err
	}
	if s.m != nil {
		s.m.row(a)
	}
	s.trace(ctx, a, start, end)
	return nil
}

// release clears what u holds of the caller's (its fn, rows and
// transaction) and returns it to the pool.
func (s *observed) release(u *update) {
	clear(u.buf[:])
	u.StateTx, u.fn, u.fnErr, u.rows = nil, nil, nil, nil
	s.updates.Put(u)
}

func (s *observed) View(ctx context.Context, fn func(plexus.StateTx) error) error {
	return s.inner.View(ctx, fn)
}

// sideWrites is what the journal reports of its audit mirror and anchor;
// the gateway's status reads it from its store, so the wrapper passes it on.
type sideWrites interface {
	MirrorErrors() int
	AnchorErrors() int
}

// MirrorErrors passes on the inner store's count (0 when it keeps none).
func (s *observed) MirrorErrors() int {
	if sw, ok := s.inner.(sideWrites); ok {
		return sw.MirrorErrors()
	}
	return 0
}

// AnchorErrors passes on the inner store's count (0 when it keeps none).
func (s *observed) AnchorErrors() int {
	if sw, ok := s.inner.(sideWrites); ok {
		return sw.AnchorErrors()
	}
	return 0
}

// journalFailed tells a failure of the journal from the operation's own
// refusal (fn's error, returned as is) and from a caller that went away.
func journalFailed(err, fnErr error) bool {
	if err == nil || (fnErr != nil && errors.Is(err, fnErr)) {
		return false
	}
	return !errors.Is(err, context.Canceled) && !errors.Is(err, context.DeadlineExceeded)
}

// commit records one update's latency, and its failure.
func (m *Metrics) commit(durable bool, d time.Duration, failed bool) {
	obs := m.commitLone
	if durable {
		obs = m.commitDurable
	}
	obs.Observe(d.Seconds())
	if failed {
		m.commitErrs.Inc()
	}
}

// row counts what a committed activity row says happened.
func (m *Metrics) row(a *plexus.Activity) {
	switch a.ActionType {
	case "token.minted":
		m.tokens.Inc()
		return
	case "provider.restarting":
		m.restarts.WithLabelValues(a.Target).Inc()
		return
	case "mcp.server_started":
		// A server's first start in this process is no restart.
		m.mu.Lock()
		again := m.started[a.Target]
		m.started[a.Target] = true
		m.mu.Unlock()
		if again {
			m.restarts.WithLabelValues(a.Target).Inc()
		}
		return
	case "mcp.server_failed", "provider.exited", "provider.start_failed":
		m.failures.WithLabelValues(a.Target).Inc()
		return
	}
	if kind, outcome, via, ok := decisionOf(a); ok {
		m.decisions.WithLabelValues(kind, outcome, via).Inc()
	}
}

// decisionOf reads a decision row: <kind>.approved|denied|withdrawn with
// the channel it came through in its payload. Any other row is no
// decision.
func decisionOf(a *plexus.Activity) (kind, outcome, via string, ok bool) {
	kind, outcome, found := strings.Cut(a.ActionType, ".")
	if !found || (outcome != "approved" && outcome != "denied" && outcome != "withdrawn") {
		return "", "", "", false
	}
	via, _ = a.Payload["via"].(string)
	if via == "" {
		return "", "", "", false
	}
	return kind, outcome, via, true
}

// Span attribute keys of Plexus's own (the MCP ones are in mcp.go).
const (
	attrTraceID    = attribute.Key("plexus.trace_id")
	attrAuditID    = attribute.Key("plexus.audit_id")
	attrCapability = attribute.Key("plexus.capability.id")
	attrOutcome    = attribute.Key("plexus.outcome")
	attrVia        = attribute.Key("plexus.via")
	attrKind       = attribute.Key("plexus.decision.kind")
	attrTarget     = attribute.Key("plexus.decision.target")
)

// trace ties a committed row to the span of the call that wrote it (its
// journal trace id and audit id), and gives each decision a span of its
// own. Nothing of the payload goes into a span but the channel.
func (s *observed) trace(ctx context.Context, a *plexus.Activity, start, end time.Time) {
	if s.tracer == nil {
		return
	}
	if span := trace.SpanFromContext(ctx); span.IsRecording() {
		if a.TraceID != "" {
			span.SetAttributes(attrTraceID.String(a.TraceID))
		}
		span.AddEvent(a.ActionType, trace.WithAttributes(attrAuditID.String(a.AuditID())))
	}
	kind, outcome, via, ok := decisionOf(a)
	if !ok {
		return
	}
	_, span := s.tracer.Start(ctx, "plexus.decision "+kind+"."+outcome, trace.WithTimestamp(start),
		trace.WithAttributes(attrKind.String(kind), attrOutcome.String(outcome), attrVia.String(via),
			attrTarget.String(a.Target), attrTraceID.String(a.TraceID), attrAuditID.String(a.AuditID())))
	span.End(trace.WithTimestamp(end))
}
