package ipc

import (
	"encoding/json"
	"maps"
	"sync"
	"time"

	"github.com/plexus-gw/plexus"
)

// session is the hub's state of one welcomed connection: the calls in
// flight on it and its heartbeats. The connection goroutine (through the
// Handler methods) and Dispatch goroutines share it; mu guards every field
// below it and is never held while writing to the connection.
type session struct {
	s    *Session
	p    *provider
	proc *process // the launch this session belongs to

	mu       sync.Mutex
	calls    map[string]*call // by call_id; in flight
	ended    endedRing        // call_ids that ended recently
	lastSeen time.Time        // the welcome, then each heartbeat
	status   string           // the last heartbeat's status
	missed   bool             // heartbeats were missed: sticky
	closed   bool
}

func (s *session) heartbeatState() (status string, missed bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.status, s.missed
}

// checkMissed reports how long the session has been silent and whether
// that just crossed limit (true once per session).
func (s *session) checkMissed(now time.Time, limit time.Duration) (time.Duration, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	silent := now.Sub(s.lastSeen)
	if s.missed || s.closed || silent <= limit {
		return silent, false
	}
	s.missed = true
	return silent, true
}

func (s *session) inflight() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.calls)
}

func (h *Hub) session(s *Session) *session {
	h.mu.Lock()
	defer h.mu.Unlock()
	p := h.providers[s.ProviderID()]
	if p == nil {
		return nil
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.sess != nil && p.sess.s == s {
		return p.sess
	}
	return nil
}

// Opened binds a welcomed session to its provider's current launch. A
// session with no launch waiting for it (its provider was removed, or
// another session of the same launch is open) is closed with core.goodbye.
func (h *Hub) Opened(s *Session) {
	p := h.provider(s.ProviderID())
	refuse := func(why string) {
		h.opts.Note("ipc.refused", s.ProviderID(), "", map[string]any{"reason": why, "session_id": s.ID()})
		s.Goodbye(why)
	}
	if p == nil {
		refuse(goodbyeRemoved)
		return
	}
	p.mu.Lock()
	if p.proc == nil || p.sess != nil || p.launched {
		p.mu.Unlock()
		refuse("session_exists")
		return
	}
	ss := &session{s: s, p: p, proc: p.proc, calls: make(map[string]*call), lastSeen: h.opts.Clock()}
	p.sess, p.launched, p.fresh, p.version = ss, true, true, s.AgentVersion()
	p.state, p.since, p.down = plexus.ProviderConnected, h.opts.Clock(), ""
	pid := p.proc.pid
	p.mu.Unlock()
	h.note("provider.connected", p, "", map[string]any{"session_id": s.ID(), "agent_version": clip(s.AgentVersion()), "pid": pid})
	p.pushHealth()
}

// Heartbeat records a heartbeat and pushes the health it implies. After
// heartbeats were missed the session stays unavailable: its process is
// being stopped.
func (h *Hub) Heartbeat(s *Session, hb Heartbeat) {
	ss := h.session(s)
	if ss == nil {
		return
	}
	ss.mu.Lock()
	if !ss.missed {
		ss.lastSeen, ss.status = h.opts.Clock(), hb.Status
	}
	ss.mu.Unlock()
	ss.p.pushHealth()
}

// Closed fails the session's calls in flight with source_unavailable and
// unbinds it. A process that closed its connection is expected to exit,
// and its exit status decides what its restart policy does; one that does
// not exit is stopped. A process whose connection Plexus closed (a frame
// that broke the protocol) is stopped, and that counts as a failure.
func (h *Hub) Closed(s *Session) {
	ss := h.session(s)
	if ss == nil {
		return
	}
	ss.close(plexus.Errorf(plexus.CodeSourceUnavailable, "the provider %s disconnected during the call", ss.p.id))
	p := ss.p
	p.mu.Lock()
	p.sess = nil
	current := p.proc == ss.proc
	if current {
		// Otherwise the supervisor has already said why it is down
		// (exited, restarting in …), which stands.
		p.down = "disconnected"
	}
	p.mu.Unlock()
	h.note("provider.disconnected", p, "", map[string]any{"session_id": s.ID()})
	p.pushHealth()
	if current {
		why := stopSessionLost
		if s.ClosedByPeer() {
			why = stopPeerClosed
		}
		ss.proc.requestStop(why)
	}
}

// Message handles a session's tool messages (§4.2, §4.3, §4.4).
func (h *Hub) Message(s *Session, env Envelope) error {
	ss := h.session(s)
	if ss == nil {
		return nil // the session is being closed
	}
	switch env.Type {
	case TypeAgentToolsRegister:
		return h.register(ss, env)
	case TypeAgentToolsUnregister:
		return h.unregister(ss, env)
	case TypeAgentToolStream:
		return h.stream(ss, env)
	case TypeAgentToolResult:
		return h.result(ss, env)
	case TypeAgentToolCancelAck:
		if ack, err := DecodePayload[ToolCancelAck](env); err == nil {
			h.log.Debug("ipc: cancel acknowledged", "provider", ss.p.id, "call_id", clip(ack.CallID), "accepted", ack.Accepted)
		}
	}
	return nil // agent.pong: nothing to do
}

// badPayload answers a message whose payload does not decode.
func badPayload(s *Session, env Envelope, err error) error {
	code := CodeInvalidEnvelope
	if ee, ok := err.(*EnvelopeError); ok {
		code = ee.Code()
	}
	return s.Send(ErrorReply(env, code, err.Error()))
}

// register handles agent.tools.register: each tool is checked on its own
// (§4.2.2: accepted ids, rejections with reasons), the accepted ones are
// merged (or replace the set), the source is refreshed when the set
// changed, and core.tools.registered answers. The first registration of a
// session replaces the previous session's tools.
func (h *Hub) register(ss *session, env Envelope) error {
	reg, err := DecodePayload[ToolsRegister](env)
	if err != nil {
		return badPayload(ss.s, env, err)
	}
	p := ss.p
	out := ToolsRegistered{Registered: []string{}}
	reject := func(id, code, msg string) {
		out.Rejected = append(out.Rejected, RejectedTool{ToolID: clip(id), Error: Error{Code: code, Message: msg}})
	}
	var accepted []toolDef
	seen := map[string]bool{}
	for _, t := range reg.Tools {
		def, rej := checkTool(p.id, t)
		switch {
		case rej != nil:
			reject(t.ToolID, rej.Code, rej.Message)
		case seen[def.Name]:
			reject(t.ToolID, CodeToolDuplicate, "the tool is listed twice in this message")
		default:
			seen[def.Name] = true
			accepted = append(accepted, def)
		}
	}

	p.mu.Lock()
	if p.sess != ss {
		p.mu.Unlock()
		return nil // closed meanwhile
	}
	replace := reg.Replace || p.fresh
	next := make(map[string]*toolDef, len(p.tools))
	if !replace {
		maps.Copy(next, p.tools)
	}
	for _, def := range accepted {
		switch {
		case next[def.Name] != nil:
			reject(def.ToolID, CodeToolDuplicate, "the tool is already registered; send replace: true to change it")
		case len(next) >= MaxTools:
			reject(def.ToolID, CodeToolLimit, "a provider may register at most 256 tools")
		default:
			next[def.Name] = &def
			out.Registered = append(out.Registered, def.ToolID)
		}
	}
	changed := !sameTools(p.tools, next)
	p.tools, p.fresh = next, false
	p.mu.Unlock()

	if changed {
		h.opts.OnTools(p.id)
	}
	h.note("provider.tools_registered", p, "", map[string]any{
		"session_id": ss.s.ID(), "replace": replace, "registered": out.Registered,
		"rejected": rejectedCodes(out.Rejected), "changed": changed,
	})
	pl, _ := json.Marshal(out)
	return ss.s.Send(Envelope{Type: TypeCoreToolsRegistered, Payload: pl, InReplyTo: env.ID, RequestID: env.RequestID, CorrelationID: env.CorrelationID})
}

// unregister handles agent.tools.unregister and answers
// core.tools.unregistered.
func (h *Hub) unregister(ss *session, env Envelope) error {
	un, err := DecodePayload[ToolsUnregister](env)
	if err != nil {
		return badPayload(ss.s, env, err)
	}
	p := ss.p
	out := ToolsUnregistered{Unregistered: []string{}}
	p.mu.Lock()
	if p.sess != ss {
		p.mu.Unlock()
		return nil
	}
	next := maps.Clone(p.tools)
	for _, id := range un.ToolIDs {
		prefix, name, ok := cutToolID(id)
		switch {
		case !ok || prefix != p.id:
			out.Rejected = append(out.Rejected, RejectedTool{ToolID: clip(id), Error: Error{Code: CodeToolInvalidID, Message: "tool_id must be <this provider's id>/<tool_name>"}})
		case next[name] == nil:
			out.Rejected = append(out.Rejected, RejectedTool{ToolID: clip(id), Error: Error{Code: CodeToolUnknown, Message: "no such tool is registered"}})
		default:
			delete(next, name)
			out.Unregistered = append(out.Unregistered, id)
		}
	}
	changed := len(next) != len(p.tools)
	p.tools, p.fresh = next, false
	p.mu.Unlock()
	if changed {
		h.opts.OnTools(p.id)
	}
	h.note("provider.tools_unregistered", p, "", map[string]any{
		"session_id": ss.s.ID(), "unregistered": out.Unregistered, "rejected": rejectedCodes(out.Rejected),
	})
	pl, _ := json.Marshal(out)
	return ss.s.Send(Envelope{Type: TypeCoreToolsUnregistered, Payload: pl, InReplyTo: env.ID, RequestID: env.RequestID, CorrelationID: env.CorrelationID})
}

func cutToolID(id string) (prefix, name string, ok bool) {
	for i := 0; i < len(id); i++ {
		if id[i] == '/' {
			return id[:i], id[i+1:], true
		}
	}
	return "", "", false
}

// rejectedCodes is a rejection list for the journal: ids and codes.
func rejectedCodes(rs []RejectedTool) []map[string]string {
	out := make([]map[string]string, 0, len(rs))
	for _, r := range rs {
		out = append(out, map[string]string{"tool_id": r.ToolID, "code": r.Error.Code})
	}
	return out
}

func sameTools(a, b map[string]*toolDef) bool {
	if len(a) != len(b) {
		return false
	}
	for k, x := range a {
		y, ok := b[k]
		if !ok || !sameTool(x, y) {
			return false
		}
	}
	return true
}

// endedRing remembers the last call_ids that ended on a session, so that
// a second agent.tool.result for one is told (and journaled) apart from the
// late first result of a call its caller gave up on (§4.3.3: exactly one
// per call_id).
type endedRing struct {
	ids  map[string]*endedCall
	ring []string // the ids in ids, oldest at next once full
	next int
}

type endedCall struct {
	trace    string
	answered bool // its agent.tool.result arrived
}

const endedRemembered = 4096

func (r *endedRing) add(id, trace string, answered bool) {
	if r.ids == nil {
		r.ids = make(map[string]*endedCall)
	}
	if len(r.ring) < endedRemembered {
		r.ring = append(r.ring, id)
	} else {
		delete(r.ids, r.ring[r.next])
		r.ring[r.next] = id
		r.next = (r.next + 1) % endedRemembered
	}
	r.ids[id] = &endedCall{trace: trace, answered: answered}
}

func (r *endedRing) lookup(id string) *endedCall { return r.ids[id] }
