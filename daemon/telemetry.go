package daemon

import (
	"context"
	"crypto/subtle"
	"log/slog"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"go.opentelemetry.io/otel/trace"

	"github.com/plexus-gw/plexus"
	"github.com/plexus-gw/plexus/gateway"
	plexushttp "github.com/plexus-gw/plexus/http"
	"github.com/plexus-gw/plexus/scaffold"
	"github.com/plexus-gw/plexus/telemetry"
)

// observability is the daemon's metrics and tracer, and what /metrics
// accepts as a scrape credential.
type observability struct {
	metrics *telemetry.Metrics
	tracing *telemetry.Tracing
	tracer  trace.Tracer
	gw      *gateway.Gateway
	// scrapeToken reads the home's scrape-token file ("" when there is
	// none) at each scrape, so that a new token needs no restart.
	scrapeToken func() (string, error)
	log         *slog.Logger
}

// newObservability builds the metrics, whose probes read the daemon's
// parts at scrape time, and the tracer: o.Tracing, else OTLP when the
// environment asks for it, else none.
func (d *Daemon) newObservability(o Options, deps gateway.Deps) (*observability, error) {
	home := d.home.Dir
	ob := &observability{scrapeToken: func() (string, error) { return scaffold.ReadScrapeToken(home) }, tracing: o.Tracing, log: d.log}
	if ob.tracing == nil {
		ob.tracing = telemetry.NoTracing()
		env := o.Env
		if env == nil {
			env = os.Environ()
		}
		if telemetry.TracingEnabled(env) {
			// The exporter connects lazily: no context outlives this call.
			t, err := telemetry.NewOTLPTracing(context.Background())
			if err != nil {
				return nil, err
			}
			ob.tracing = t
		}
	}
	ob.tracer = ob.tracing.Tracer()
	ob.metrics = telemetry.NewMetrics(telemetry.Probes{
		Pending:      d.pendingCount,
		Sources:      d.sourceHealth,
		MCPSessions:  func() int { return d.front.Sessions() },
		RateLimited:  deps.Limiter.Refused,
		Throttled:    deps.Throttle.Refused,
		MirrorErrors: d.db.MirrorErrors,
		AnchorErrors: d.db.AnchorErrors,
	})
	return ob, nil
}

// storeTracer is the tracer the journal's store decorator gets: none when
// tracing is off, so an update costs no span work at all.
func (ob *observability) storeTracer() trace.Tracer {
	if !ob.tracing.Enabled() {
		return nil
	}
	return ob.tracer
}

// mcpMiddleware is the front door's tracing middleware, none when tracing
// is off.
func (ob *observability) mcpMiddleware() []mcp.Middleware {
	if !ob.tracing.Enabled() {
		return nil
	}
	return []mcp.Middleware{telemetry.MCPServerSpans(ob.tracer, telemetry.MCPOverHTTP)}
}

// pendingCount counts the decisions waiting for the owner.
func (d *Daemon) pendingCount(ctx context.Context) (int, error) {
	n := 0
	err := d.db.View(ctx, func(tx plexus.StateTx) error {
		p, err := tx.PendingList(plexus.StatePending)
		n = len(p)
		return err
	})
	return n, err
}

// sourceHealth is each source's cached health.
func (d *Daemon) sourceHealth() []telemetry.SourceHealth {
	ids := d.reg.Sources()
	out := make([]telemetry.SourceHealth, 0, len(ids))
	for _, id := range ids {
		h := d.reg.SourceHealth(id)
		out = append(out, telemetry.SourceHealth{ID: id, Status: h.Status, Restarts: h.Restarts})
	}
	return out
}

// AuthorizeScrape admits the scrape token (the scrape-token file as it is
// now, compared in constant time) or the connection-key (the gateway's
// check, throttled and journaled when wrong). An agent's PAT or token is
// refused: metrics are the owner's.
func (ob *observability) AuthorizeScrape(ctx context.Context, c gateway.Credentials) error {
	if c.ConnectionKey == "" && !strings.HasPrefix(c.Bearer, plexus.PrefixConnectionKey) {
		if c.Bearer != "" && ob.scrapeTokenIs(c.Bearer) {
			return nil
		}
		return plexus.Errorf(plexus.CodeUnauthorized,
			"/metrics needs the connection-key or the token in the home's scrape-token file: Authorization: Bearer <it>")
	}
	return ob.gw.AdminCheck(ctx, c)
}

// scrapeTokenIs compares bearer with the scrape token. A scrape-token file
// that went bad while the daemon runs admits nothing and is logged (never
// its content).
func (ob *observability) scrapeTokenIs(bearer string) bool {
	tok, err := ob.scrapeToken()
	if err != nil {
		ob.log.Warn("scrape token refused", "err", err)
		return false
	}
	return tok != "" && subtle.ConstantTimeCompare([]byte(bearer), []byte(tok)) == 1
}

// Handler serves the exposition.
func (ob *observability) Handler() http.Handler { return ob.metrics.Handler() }

// invoker is the gateway's call entry, as both edges use it.
type invoker interface {
	Invoke(ctx context.Context, c gateway.Credentials, req plexus.InvokeRequest) plexus.InvokeResponse
	InvokeStream(ctx context.Context, c gateway.Credentials, req plexus.InvokeRequest, sink func(plexus.InvokeProgressEvent)) plexus.InvokeResponse
}

// observedInvoke counts and traces each call an edge hands the gateway:
// its capability (or "unknown", so that a caller naming made-up ids cannot
// mint series), its outcome and its time.
type observedInvoke struct {
	invoker
	ob    *observability
	via   string
	known func(id string) bool
}

func (d *Daemon) observeInvoke(in invoker, via string) *observedInvoke {
	return &observedInvoke{invoker: in, ob: d.obs, via: via, known: func(id string) bool { _, ok := d.reg.Entry(id); return ok }}
}

func (o *observedInvoke) Invoke(ctx context.Context, c gateway.Credentials, req plexus.InvokeRequest) plexus.InvokeResponse {
	call := o.begin(ctx, req.ID)
	return call.end(o.invoker.Invoke(call.ctx, c, req))
}

func (o *observedInvoke) InvokeStream(ctx context.Context, c gateway.Credentials, req plexus.InvokeRequest, sink func(plexus.InvokeProgressEvent)) plexus.InvokeResponse {
	call := o.begin(ctx, req.ID)
	return call.end(o.invoker.InvokeStream(call.ctx, c, req, sink))
}

// observedCall is one call between begin and end.
type observedCall struct {
	o          *observedInvoke
	ctx        context.Context
	span       trace.Span
	capability string
	start      time.Time
}

func (o *observedInvoke) begin(ctx context.Context, id string) observedCall {
	capability := id
	if !o.known(capability) {
		capability = "unknown"
	}
	var span trace.Span
	if o.ob.tracing.Enabled() {
		ctx, span = telemetry.StartCall(ctx, o.ob.tracer, capability, o.via)
	}
	return observedCall{o: o, ctx: ctx, span: span, capability: capability, start: time.Now()}
}

func (c observedCall) end(resp plexus.InvokeResponse) plexus.InvokeResponse {
	outcome := telemetry.OutcomeOK
	if !resp.OK && resp.Error != nil {
		outcome = string(resp.Error.Code)
	}
	c.o.ob.metrics.Call(c.capability, outcome, c.o.via, time.Since(c.start))
	if c.span != nil {
		telemetry.EndCall(c.span, outcome, resp.AuditID)
	}
	return resp
}

// observedEvents counts the /events streams open: one from a subscription
// until its request ends (the stream's handler returns, whatever closed it).
type observedEvents struct {
	plexushttp.EventsAPI
	m *telemetry.Metrics
}

func (e observedEvents) Subscribe(ctx context.Context, c gateway.Credentials, lastEventID int64) (<-chan plexus.Event, error) {
	ch, err := e.EventsAPI.Subscribe(ctx, c, lastEventID)
	if err == nil {
		context.AfterFunc(ctx, e.m.StreamOpened())
	}
	return ch, err
}

// observeHTTP hands the HTTP edge the observed call and event entries.
func (d *Daemon) observeHTTP(b plexushttp.Backend) plexushttp.Backend {
	b.Invoke = d.observeInvoke(b.Invoke, telemetry.ViaHTTP)
	b.Events = observedEvents{EventsAPI: b.Events, m: d.obs.metrics}
	return b
}
