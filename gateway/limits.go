package gateway

// The owner's limits: the per-agent call rate and the failed-credential
// throttle, changed while the gateway runs.

import (
	"fmt"
	"sync"

	"github.com/plexus-gw/plexus"
	"github.com/plexus-gw/plexus/auth"
)

// limitsState remembers why the owner's last edit of the limits was not
// applied, for `plexus status`.
type limitsState struct {
	mu  sync.Mutex // guards err
	err string
}

// SetLimits applies the owner's limits to the rate limiter and the
// throttle, both or neither: a setting that cannot be applied is an
// invalid_request error and the limits in force stay. A success clears
// the error a failed edit left in the status.
func (g *Gateway) SetLimits(l plexus.Limits) error {
	if err := auth.CheckLimits(l); err != nil {
		g.LimitsNotApplied(err)
		return plexus.WrapError(plexus.CodeInvalidRequest, err, "limits not applied")
	}
	if g.d.Limiter != nil {
		if err := g.d.Limiter.Set(l.Rate, l.Agents); err != nil {
			return fmt.Errorf("rate limit: %w", err) // unreachable: checked above
		}
	}
	if g.d.Throttle != nil {
		if err := g.d.Throttle.Set(l.FailedCredentials); err != nil {
			return fmt.Errorf("failed-credential throttle: %w", err) // unreachable: checked above
		}
	}
	g.limits.mu.Lock()
	g.limits.err = ""
	g.limits.mu.Unlock()
	return nil
}

// LimitsNotApplied records why an edit of the limits (a file that does not
// read, a bad value) was not applied; the limits in force stay.
func (g *Gateway) LimitsNotApplied(err error) {
	g.limits.mu.Lock()
	defer g.limits.mu.Unlock()
	g.limits.err = err.Error()
}

// Limits are the limits in force, and why the last edit was not applied
// if it was not.
func (g *Gateway) Limits() plexus.Limits {
	var l plexus.Limits
	if g.d.Limiter != nil {
		l.Rate, l.Agents = g.d.Limiter.Limits()
	}
	if g.d.Throttle != nil {
		l.FailedCredentials = g.d.Throttle.Settings()
	}
	g.limits.mu.Lock()
	l.Error = g.limits.err
	g.limits.mu.Unlock()
	return l
}
