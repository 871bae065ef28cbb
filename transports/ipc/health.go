package ipc

import (
	"context"
	"maps"
	"slices"
	"time"

	"github.com/plexus-gw/plexus"
)

// Health of a provider, as its source reports it and as calls are routed:
//
//   - no session: unavailable, with why (starting, restarting in …,
//     exited: …);
//   - a session whose heartbeats stopped (none for MissedHeartbeats ×
//     HeartbeatInterval since the last one, or since the welcome):
//     unavailable, "heartbeats missed" — and the process is stopped, so
//     that its restart policy applies;
//   - otherwise the status of the last agent.heartbeat: ok → ok,
//     degraded → degraded, unhealthy → unavailable (§4.5.1: Core stops
//     routing to an unhealthy agent). Before the first heartbeat a fresh
//     session is ok.
//
// Calls are refused with source_unavailable whenever the health is
// unavailable; a degraded provider is still called.

func (p *provider) health() plexus.Health {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.healthLocked()
}

func (p *provider) healthLocked() plexus.Health {
	if p.sess == nil || p.sess.proc != p.proc {
		// No session, or one whose process the supervisor has seen end
		// (its connection's close may not have been read yet).
		return plexus.Health{Status: plexus.HealthUnavailable, Detail: p.down}
	}
	status, missed := p.sess.heartbeatState()
	switch {
	case missed:
		return plexus.Health{Status: plexus.HealthUnavailable, Detail: "heartbeats missed"}
	case status == HealthUnhealthy:
		return plexus.Health{Status: plexus.HealthUnavailable, Detail: "the provider reports unhealthy"}
	case status == HealthDegraded:
		return plexus.Health{Status: plexus.HealthDegraded, Detail: "the provider reports degraded"}
	}
	return plexus.Health{Status: plexus.HealthOK}
}

// pushHealth hands p's health to OnHealth when it changed since the last
// push. healthMu keeps pushes for one provider in order.
func (p *provider) pushHealth() {
	p.healthMu.Lock()
	defer p.healthMu.Unlock()
	h := p.health()
	if h.Status == p.reported.Status && h.Detail == p.reported.Detail {
		return
	}
	p.reported = h
	p.h.opts.OnHealth(p.id, h)
}

// requestStop asks the supervisor to stop p's current process for reason
// (its restart policy then applies). It never blocks.
func (p *provider) requestStop(reason string) {
	p.mu.Lock()
	proc := p.proc
	p.mu.Unlock()
	if proc != nil {
		proc.requestStop(reason)
	}
}

// monitor checks the sessions' heartbeats until ctx ends.
func (h *Hub) monitor(ctx context.Context) {
	every := min(max(h.opts.HeartbeatInterval/2, 10*time.Millisecond), time.Second)
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			h.checkHeartbeats()
		}
	}
}

// checkHeartbeats marks each session that has gone silent for
// MissedHeartbeats intervals, once: it is journaled, its provider becomes
// unavailable, and its process is stopped.
func (h *Hub) checkHeartbeats() {
	now := h.opts.Clock()
	limit := h.opts.HeartbeatInterval * time.Duration(h.opts.MissedHeartbeats)
	h.mu.Lock()
	ps := slices.Collect(maps.Values(h.providers))
	h.mu.Unlock()
	for _, p := range ps {
		p.mu.Lock()
		s := p.sess
		p.mu.Unlock()
		if s == nil {
			continue
		}
		silent, missed := s.checkMissed(now, limit)
		if !missed {
			continue
		}
		h.note("provider.heartbeat_missed", p, "", map[string]any{
			"session_id":            s.s.ID(),
			"silent_ms":             silent.Milliseconds(),
			"heartbeat_interval_ms": h.opts.HeartbeatInterval.Milliseconds(),
			"missed":                h.opts.MissedHeartbeats,
		})
		h.log.Debug("ipc: heartbeats missed; stopping the provider", "provider", p.id, "silent", silent)
		p.pushHealth()
		p.requestStop(stopHeartbeats)
	}
}
