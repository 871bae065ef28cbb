package ipc

import (
	"context"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/plexus-gw/plexus"
)

// provider is one declared tool provider: its configuration, its current
// process and session, and the tools it registered.
//
// Goroutines: the supervisor (supervise) owns launching and stopping the
// process and writes proc, pid, state, restarts and lastExit; the session's
// connection goroutine (through the Hub's Handler methods) writes sess,
// tools and fresh; Dispatch goroutines only read. mu guards every field
// below it; healthMu serializes health pushes and is taken before mu.
type provider struct {
	h   *Hub
	id  string
	cfg plexus.ProviderConfig
	src *source

	cancel context.CancelFunc // stops the supervisor; set under Hub.mu
	done   chan struct{}      // closed when the supervisor has returned

	healthMu sync.Mutex
	reported plexus.Health // the last health pushed through OnHealth; guarded by healthMu

	mu       sync.Mutex
	state    string
	since    time.Time
	proc     *process // the current process; nil between launches
	sess     *session // the welcomed session; nil when none
	launched bool     // the current process has had a session
	version  string   // agent_version of the latest session
	tools    map[string]*toolDef
	// fresh: the session has not registered yet. Its first registration
	// replaces the tools of the previous session, which are served (as
	// unavailable) until then so that entries do not flicker on restart.
	fresh    bool
	restarts int
	lastExit string
	// down is why the provider is unavailable when it has no session
	// (starting, restarting in …, exited: …), as the supervisor last said.
	down string
}

func newProvider(h *Hub, id string, cfg plexus.ProviderConfig) *provider {
	p := &provider{
		h:     h,
		id:    id,
		cfg:   cfg,
		done:  make(chan struct{}),
		state: plexus.ProviderStarting,
		since: h.opts.Clock(),
		tools: make(map[string]*toolDef),
		down:  "not started yet",
	}
	p.reported = plexus.Health{Status: plexus.HealthUnknown}
	p.src = &source{p: p}
	return p
}

// stop ends the supervisor (which stops the process) and waits for it. A
// provider whose supervisor never started has nothing to wait for.
func (p *provider) stop() {
	p.h.mu.Lock()
	cancel := p.cancel
	if cancel == nil {
		// Never started: make sure it never will.
		p.cancel = func() {}
		close(p.done)
	}
	p.h.mu.Unlock()
	if cancel != nil {
		cancel()
	}
	<-p.done
}

// setState records a supervisor state change. why is the reason the
// provider is unavailable in that state ("" when connected).
func (p *provider) setState(state, why string) {
	p.mu.Lock()
	p.state, p.since, p.down = state, p.h.opts.Clock(), why
	p.mu.Unlock()
	p.pushHealth()
}

// status is p as GET /admin/api/providers shows it.
func (p *provider) status() plexus.ProviderStatus {
	h := p.health()
	p.mu.Lock()
	defer p.mu.Unlock()
	st := plexus.ProviderStatus{
		ID:           p.id,
		Command:      p.cfg.Command,
		Args:         slices.Clone(p.cfg.Args),
		EnvNames:     slices.Sorted(maps.Keys(p.cfg.Env)),
		Restart:      p.cfg.Restart,
		Source:       SourceID(p.id),
		State:        p.state,
		AgentVersion: p.version,
		Tools:        []string{},
		Health:       h,
		Restarts:     p.restarts,
		LastExit:     p.lastExit,
	}
	since := p.since
	st.Since = &since
	if p.proc != nil {
		st.PID = p.proc.pid
	}
	for _, name := range slices.Sorted(maps.Keys(p.tools)) {
		st.Tools = append(st.Tools, EntryID(p.id, name))
	}
	if p.sess != nil {
		st.Inflight = p.sess.inflight()
	}
	return st
}

// entries are the capability entries of p's visible tools.
func (p *provider) entries() []plexus.Entry {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make([]plexus.Entry, 0, len(p.tools))
	for _, name := range slices.Sorted(maps.Keys(p.tools)) {
		out = append(out, p.tools[name].entry(p.id, p.version))
	}
	return out
}

// source is a provider's tools as a registry source: id "ipc:<provider>",
// provenance managed (the owner declared the provider).
type source struct{ p *provider }

var _ plexus.Source = (*source)(nil)

func (s *source) ID() string                           { return SourceID(s.p.id) }
func (s *source) Provenance() plexus.Provenance        { return plexus.ProvenanceManaged }
func (s *source) Health(context.Context) plexus.Health { return s.p.health() }

func (s *source) Scan(context.Context) ([]plexus.Entry, error) { return s.p.entries(), nil }
