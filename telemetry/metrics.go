package telemetry

import (
	"context"
	"net/http"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/plexus-gw/plexus"
)

// Outcomes of a call besides its error codes (the closed union of the
// spec): a call either succeeds or answers one code.
const OutcomeOK = "ok"

// Channels a call comes through, the via label of the call metrics.
const (
	ViaHTTP = "http"
	ViaMCP  = "mcp"
)

// callBuckets span an in-process echo (well under a millisecond, the
// DESIGN bar is p99 < 1 ms) to an MCP tool that takes a minute.
func callBuckets() []float64 {
	return []float64{.0001, .00025, .0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60}
}

// commitBuckets span a group commit (tens of microseconds) to a durable
// commit on a slow disk.
func commitBuckets() []float64 {
	return []float64{.00005, .0001, .00025, .0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1}
}

// Probes are what /metrics reads at scrape time rather than counts as it
// goes: state the daemon's parts already hold. Each may be nil (its metric
// is then left out); each must be safe for concurrent use and cheap (a
// scrape every few seconds must not load the daemon).
type Probes struct {
	// Pending counts the decisions waiting for the owner.
	Pending func(ctx context.Context) (int, error)
	// Sources reports each source's last known health (cached, never a
	// fresh probe).
	Sources func() []SourceHealth
	// MCPSessions counts the MCP front door's open sessions.
	MCPSessions func() int
	// RateLimited counts requests refused by the per-agent rate limit,
	// Throttled those refused for a credential that failed too often.
	RateLimited func() uint64
	Throttled   func() uint64
	// MirrorErrors and AnchorErrors count the audit mirror's and the
	// chain anchor's failed writes.
	MirrorErrors func() int
	AnchorErrors func() int
}

// SourceHealth is one source's id, health status, and the sessions or
// processes it re-established after a loss (an MCP server's client).
type SourceHealth struct {
	ID       string
	Status   plexus.HealthStatus
	Restarts int
}

// Metrics is the daemon's Prometheus registry and the metrics it counts
// itself. Its methods are safe for concurrent use. Label values are
// capability ids, source ids, error codes and channels: never an agent's
// credential, input or free text (see the package doc).
type Metrics struct {
	reg         *prometheus.Registry
	calls       *prometheus.CounterVec
	callSeconds *prometheus.HistogramVec
	decisions   *prometheus.CounterVec
	tokens      prometheus.Counter
	restarts    *prometheus.CounterVec
	failures    *prometheus.CounterVec
	commits     *prometheus.HistogramVec
	// commitLone and commitDurable are commits' two series.
	commitLone, commitDurable prometheus.Observer
	commitErrs                prometheus.Counter
	streams                   prometheus.Gauge

	mu      sync.Mutex // guards started
	started map[string]bool

	// series caches each call's children of calls and callSeconds, so a
	// call looks them up without the label-vector allocations.
	seriesMu sync.RWMutex
	series   map[callKey]callSeries
}

type callKey struct{ capability, outcome, via string }

type callSeries struct {
	count   prometheus.Counter
	seconds prometheus.Observer
}

// NewMetrics builds the registry with the daemon's metrics, the probes'
// and the Go runtime's and process's collectors.
func NewMetrics(p Probes) *Metrics {
	m := &Metrics{reg: prometheus.NewRegistry(), started: map[string]bool{}, series: map[callKey]callSeries{}}
	f := factory{m.reg}
	m.calls = f.counterVec("plexus_calls_total", "Capability calls answered, by capability, outcome (ok or the error code) and channel.",
		"capability", "outcome", "via")
	m.callSeconds = prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "plexus_call_duration_seconds",
		Help: "Time from a call's arrival at the gateway to its answer, by capability and channel.", Buckets: callBuckets()},
		[]string{"capability", "via"})
	m.reg.MustRegister(m.callSeconds)
	m.decisions = f.counterVec("plexus_decisions_total",
		"Decided requests, one per journaled decision row (an approval of three capabilities counts three), by kind, outcome and channel.",
		"kind", "outcome", "via")
	m.tokens = f.counter("plexus_tokens_minted_total", "Scoped tokens minted (a grant's token; refreshes count apart).")
	m.restarts = f.counterVec("plexus_source_restarts_total", "Restarts of MCP servers and ipc providers, by source.", "source")
	m.failures = f.counterVec("plexus_source_failures_total", "Failures of MCP servers and ipc providers to start or stay up, by source.", "source")
	m.commits = prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "plexus_journal_commit_duration_seconds",
		Help: "Time a journal update took as its caller saw it (queueing for the writer included), by durability.", Buckets: commitBuckets()},
		[]string{"durable"})
	m.reg.MustRegister(m.commits)
	// Every journal update observes one of these two: resolved once, so a
	// commit pays no label lookup.
	m.commitLone, m.commitDurable = m.commits.WithLabelValues("false"), m.commits.WithLabelValues("true")
	m.commitErrs = f.counter("plexus_journal_commit_errors_total", "Journal updates that failed in the journal itself (not a refusal of the operation).")
	m.streams = prometheus.NewGauge(prometheus.GaugeOpts{Name: "plexus_event_streams_open", Help: "Open /events streams."})
	m.reg.MustRegister(m.streams)
	m.reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	m.probes(p)
	return m
}

// probes registers the metrics read at scrape time.
func (m *Metrics) probes(p Probes) {
	if p.Pending != nil {
		m.reg.MustRegister(&pendingCollector{fn: p.Pending, desc: prometheus.NewDesc("plexus_pending_decisions",
			"Decisions waiting for the owner (files in inbox/).", nil, nil)})
	}
	if p.Sources != nil {
		m.reg.MustRegister(&sourceCollector{fn: p.Sources, desc: prometheus.NewDesc("plexus_source_health",
			"Each source's last known health: 1 for its current status, 0 for the others.", []string{"source", "status"}, nil),
			reconnects: prometheus.NewDesc("plexus_source_reconnects_total",
				"Sessions or processes a source re-established after a loss since it started (an MCP server's restarted process or re-opened HTTP session).",
				[]string{"source"}, nil)})
	}
	gauge := func(name, help string, fn func() int) {
		if fn != nil {
			m.reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: name, Help: help}, func() float64 { return float64(fn()) }))
		}
	}
	gauge("plexus_mcp_sessions_open", "Open sessions of the MCP front door (/mcp).", p.MCPSessions)
	counter := func(name, help string, fn func() float64) {
		m.reg.MustRegister(prometheus.NewCounterFunc(prometheus.CounterOpts{Name: name, Help: help}, fn))
	}
	if p.RateLimited != nil {
		counter("plexus_rate_limited_total", "Requests refused by an agent's rate limit.", func() float64 { return float64(p.RateLimited()) })
	}
	if p.Throttled != nil {
		counter("plexus_throttled_total", "Requests refused because their credential failed too often.", func() float64 { return float64(p.Throttled()) })
	}
	if p.MirrorErrors != nil {
		counter("plexus_audit_mirror_errors_total", "Failed writes of the JSONL audit mirror.", func() float64 { return float64(p.MirrorErrors()) })
	}
	if p.AnchorErrors != nil {
		counter("plexus_journal_anchor_errors_total", "Failed writes of the chain anchor.", func() float64 { return float64(p.AnchorErrors()) })
	}
}

// Handler serves the registry in the Prometheus text format. It does no
// authorization: the HTTP edge authorizes a scrape before it gets here.
func (m *Metrics) Handler() http.Handler {
	return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{})
}

// Registry is the registry itself, for tests that gather it directly.
func (m *Metrics) Registry() *prometheus.Registry { return m.reg }

// Call counts one answered call: capability is the capability id the
// caller named (the gateway has checked it exists before dispatch; an
// unknown id is counted as "unknown" so that a caller cannot mint series),
// outcome OutcomeOK or the answer's error code.
func (m *Metrics) Call(capability, outcome, via string, d time.Duration) {
	k := callKey{capability, outcome, via}
	m.seriesMu.RLock()
	s, ok := m.series[k]
	m.seriesMu.RUnlock()
	if !ok {
		s = callSeries{count: m.calls.WithLabelValues(capability, outcome, via), seconds: m.callSeconds.WithLabelValues(capability, via)}
		m.seriesMu.Lock()
		m.series[k] = s
		m.seriesMu.Unlock()
	}
	s.count.Inc()
	s.seconds.Observe(d.Seconds())
}

// StreamOpened counts an /events stream as open until the returned func is
// called (once).
func (m *Metrics) StreamOpened() (closed func()) {
	m.streams.Inc()
	return m.streams.Dec
}

// factory shortens registering the plain counters.
type factory struct{ reg *prometheus.Registry }

func (f factory) counterVec(name, help string, labels ...string) *prometheus.CounterVec {
	c := prometheus.NewCounterVec(prometheus.CounterOpts{Name: name, Help: help}, labels)
	f.reg.MustRegister(c)
	return c
}

func (f factory) counter(name, help string) prometheus.Counter {
	c := prometheus.NewCounter(prometheus.CounterOpts{Name: name, Help: help})
	f.reg.MustRegister(c)
	return c
}

// pendingCollector reads the pending decisions at scrape time; a failed
// read fails the metric (the scrape says so) rather than reporting zero.
type pendingCollector struct {
	fn   func(ctx context.Context) (int, error)
	desc *prometheus.Desc
}

func (c *pendingCollector) Describe(ch chan<- *prometheus.Desc) { ch <- c.desc }

func (c *pendingCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	n, err := c.fn(ctx)
	if err != nil {
		ch <- prometheus.NewInvalidMetric(c.desc, err)
		return
	}
	ch <- prometheus.MustNewConstMetric(c.desc, prometheus.GaugeValue, float64(n))
}

// sourceCollector reports each source's health as a state set, and the
// reconnects of those that keep a session.
type sourceCollector struct {
	fn               func() []SourceHealth
	desc, reconnects *prometheus.Desc
}

func (c *sourceCollector) Describe(ch chan<- *prometheus.Desc) { ch <- c.desc; ch <- c.reconnects }

func (c *sourceCollector) Collect(ch chan<- prometheus.Metric) {
	for _, s := range c.fn() {
		for _, st := range [...]plexus.HealthStatus{plexus.HealthOK, plexus.HealthDegraded, plexus.HealthUnavailable, plexus.HealthUnknown} {
			v := 0.0
			if s.Status == st {
				v = 1
			}
			ch <- prometheus.MustNewConstMetric(c.desc, prometheus.GaugeValue, v, s.ID, string(st))
		}
		if s.Restarts > 0 {
			ch <- prometheus.MustNewConstMetric(c.reconnects, prometheus.CounterValue, float64(s.Restarts), s.ID)
		}
	}
}
