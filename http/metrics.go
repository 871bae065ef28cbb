package http

import (
	"context"
	nethttp "net/http"

	"github.com/plexus-gw/plexus/gateway"
)

// metricsPath is where Prometheus scrapes the daemon.
const metricsPath = "/metrics"

// MetricsAPI serves /metrics: the backend decides who may scrape (the
// owner's connection-key, or the scrape token of auth-config.json; never an
// agent's credential), and Handler writes the exposition. Both are safe for
// concurrent use.
type MetricsAPI interface {
	AuthorizeScrape(ctx context.Context, c gateway.Credentials) error
	Handler() nethttp.Handler
}

// handleMetrics answers a scrape the backend authorized. Like every route
// it is reached only through the Host/Origin guard.
func (s *Server) handleMetrics(w nethttp.ResponseWriter, r *nethttp.Request) {
	if err := s.opts.Metrics.AuthorizeScrape(r.Context(), credentials(r)); err != nil {
		s.writeError(w, r, err)
		return
	}
	s.opts.Metrics.Handler().ServeHTTP(w, r)
}
