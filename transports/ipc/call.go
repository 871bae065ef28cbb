package ipc

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/plexus-gw/plexus"
)

// streamBuffer is how many agent.tool.stream chunks of one call may wait
// for its caller. A tool that streams faster than that is canceled: the
// connection's reader never waits for one slow caller, and a chunk is never
// dropped silently.
const streamBuffer = 256

// cancelDeadline is the deadline_ms core.tool.cancel suggests.
const cancelDeadline = 5 * time.Second

// call is one core.tool.call in flight. Its events channel has one slot
// more than streamBuffer, kept for the terminal event (a result or a
// failure), which is queued exactly once, under session.mu, by whoever
// takes the call out of the session's table.
type call struct {
	id      string
	trace   string
	events  chan callEvent
	lastSeq int64 // guarded by session.mu
}

type callEvent struct {
	progress *plexus.InvokeProgress
	result   *ToolResult
	fail     *plexus.Error
}

// begin registers a new call on s, or refuses it: source_unavailable when
// the connection is gone, rate_limited at max calls in flight (§2.2
// max_inflight_requests).
func (s *session) begin(max int, trace string) (*call, *plexus.Error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case s.closed:
		return nil, plexus.Errorf(plexus.CodeSourceUnavailable, "the provider %s disconnected", s.p.id)
	case len(s.calls) >= max:
		return nil, plexus.Errorf(plexus.CodeRateLimited, "the provider %s has %d calls in flight, its limit; retry shortly", s.p.id, max)
	}
	c := &call{id: newID(), trace: trace, events: make(chan callEvent, streamBuffer+1)}
	s.calls[c.id] = c
	return c, nil
}

// finishLocked takes c out of the table and queues its terminal event,
// which never blocks (the last slot is c's). s.mu is held.
func (s *session) finishLocked(c *call, ev callEvent) {
	delete(s.calls, c.id)
	s.ended.add(c.id, c.trace, ev.result != nil)
	c.events <- ev
}

// abandon takes c out of the table if it is still there (its caller gave
// up) and reports whether it was; when it was not, c's terminal event is
// queued already.
func (s *session) abandon(c *call) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.calls[c.id] != c {
		return false
	}
	delete(s.calls, c.id)
	s.ended.add(c.id, c.trace, false)
	return true
}

// close fails every call in flight with cause and refuses new ones.
func (s *session) close(cause *plexus.Error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.closed = true
	for _, c := range s.calls {
		s.finishLocked(c, callEvent{fail: cause})
	}
}

// route picks the session to call tool on: the provider must be
// connected, not unavailable, and have registered the tool in this
// session.
func (p *provider) route(tool string) (*session, *plexus.Error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.sess == nil {
		return nil, plexus.Errorf(plexus.CodeSourceUnavailable, "the provider %s is not connected (%s)", p.id, p.down)
	}
	if h := p.healthLocked(); h.Status == plexus.HealthUnavailable {
		return nil, plexus.Errorf(plexus.CodeSourceUnavailable, "the provider %s is unavailable: %s", p.id, h.Detail)
	}
	if p.tools[tool] == nil {
		return nil, plexus.Errorf(plexus.CodeUnknownCapability, "the provider %s has no tool %s any more (re-fetch GET /manifest)", p.id, tool)
	}
	if p.fresh {
		return nil, plexus.Errorf(plexus.CodeSourceUnavailable, "the provider %s restarted and has not registered its tools yet", p.id)
	}
	return p.sess, nil
}

// Dispatch calls the entry's tool on its provider (core.tool.call) and
// waits for its agent.tool.result, relaying agent.tool.stream chunks
// through dc as they come. Every failure is a result with OK false: a
// provider that is not connected, unavailable or disconnects during the
// call is source_unavailable; a full connection is rate_limited; a failed
// or canceled tool, a timeout and a caller that went away are
// transport_error (the latter two send core.tool.cancel).
func (h *Hub) Dispatch(ctx context.Context, entry plexus.Entry, input map[string]any, dc plexus.DispatchContext) plexus.TransportResult {
	data, perr := h.dispatch(ctx, entry, input, dc)
	return plexus.DispatchResult(entry.ID, data, perr)
}

func (h *Hub) dispatch(ctx context.Context, entry plexus.Entry, input map[string]any, dc plexus.DispatchContext) (any, *plexus.Error) {
	var rt route
	if err := json.Unmarshal(entry.Route, &rt); err != nil || rt.Provider == "" || rt.Tool == "" {
		return nil, plexus.Errorf(plexus.CodeTransportError, "the entry %s has no ipc route", entry.ID)
	}
	if err := ctx.Err(); err != nil {
		return nil, plexus.WrapError(plexus.CodeTransportError, err, "call cancelled")
	}
	p := h.provider(rt.Provider)
	if p == nil {
		return nil, plexus.Errorf(plexus.CodeSourceUnavailable, "the provider %s is not declared", rt.Provider)
	}
	ss, perr := p.route(rt.Tool)
	if perr != nil {
		return nil, perr
	}
	timeout := h.opts.CallTimeout
	if dl, ok := ctx.Deadline(); ok {
		timeout = min(time.Until(dl), MaxCallTimeout)
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	if input == nil {
		input = map[string]any{}
	}
	in, err := json.Marshal(input)
	if err != nil {
		return nil, plexus.WrapError(plexus.CodeTransportError, err, "the input cannot be encoded as JSON")
	}
	c, perr := ss.begin(h.opts.MaxInflight, dc.Invoke.TraceID)
	if perr != nil {
		return nil, perr
	}
	tc := ToolCall{
		CallID:         c.id,
		ToolID:         ToolID(p.id, rt.Tool),
		Input:          in,
		TimeoutMS:      max(timeout.Milliseconds(), 1),
		IdempotencyKey: dc.Invoke.IdempotencyKey,
	}
	if dc.Invoke.AgentID != "" {
		tc.Caller = &Caller{Type: ActorAgent, ID: dc.Invoke.AgentID}
	}
	pl, err := json.Marshal(tc)
	if err != nil {
		ss.abandon(c)
		return nil, plexus.WrapError(plexus.CodeTransportError, err, "encode the call")
	}
	// §3.1: request_id set, correlation_id the trace that ties the call to
	// its grant and invoke rows in the journal.
	env := Envelope{Type: TypeCoreToolCall, Payload: pl, RequestID: newID(), CorrelationID: dc.Invoke.TraceID, CausationID: c.id}
	if err := ss.s.Send(env); err != nil {
		ss.abandon(c)
		var fe *FrameError
		if errors.As(err, &fe) && fe.Kind == KindOversize {
			return nil, plexus.Errorf(plexus.CodeTransportError, "the call is %d bytes, over the provider's frame limit of %d", fe.Declared, fe.Max)
		}
		return nil, plexus.WrapError(plexus.CodeSourceUnavailable, err, "the call could not be sent to the provider "+p.id)
	}
	return h.await(ctx, ss, c, dc, timeout)
}

// await relays c's stream to the caller until its terminal event, or
// until ctx ends; then the call is abandoned and core.tool.cancel sent.
func (h *Hub) await(ctx context.Context, ss *session, c *call, dc plexus.DispatchContext, timeout time.Duration) (any, *plexus.Error) {
	for {
		select {
		case ev := <-c.events:
			switch {
			case ev.progress != nil:
				dc.Report(*ev.progress)
			case ev.fail != nil:
				return nil, ev.fail
			default:
				return mapResult(ss.p.id, ev.result)
			}
		case <-ctx.Done():
			if !ss.abandon(c) {
				// The end raced in: better an answer than a cancel.
				for ev := range c.events {
					if ev.fail != nil {
						return nil, ev.fail
					}
					if ev.result != nil {
						return mapResult(ss.p.id, ev.result)
					}
				}
			}
			reason, msg := "caller_gone", "call cancelled: the caller went away"
			if errors.Is(ctx.Err(), context.DeadlineExceeded) {
				reason, msg = "timeout", fmt.Sprintf("timed out after %s", timeout.Round(time.Millisecond))
			}
			h.cancelCall(ss, c, reason)
			return nil, plexus.WrapError(plexus.CodeTransportError, ctx.Err(), msg)
		}
	}
}

// cancelCall sends core.tool.cancel for c (best effort, §4.4) and
// journals it.
func (h *Hub) cancelCall(ss *session, c *call, reason string) {
	pl, _ := json.Marshal(ToolCancel{CallID: c.id, Reason: reason, DeadlineMS: cancelDeadline.Milliseconds()})
	err := ss.s.Send(Envelope{Type: TypeCoreToolCancel, Payload: pl, CorrelationID: c.trace, CausationID: c.id})
	payload := map[string]any{"call_id": c.id, "session_id": ss.s.ID(), "reason": reason}
	if err != nil {
		payload["sent"] = false
	}
	h.note("ipc.call_canceled", ss.p, c.trace, payload)
}

// mapResult turns an agent.tool.result into the call's outcome.
func mapResult(provider string, r *ToolResult) (any, *plexus.Error) {
	switch r.Status {
	case StatusSucceeded:
		var out any
		if len(r.Output) > 0 {
			if err := json.Unmarshal(r.Output, &out); err != nil {
				return nil, plexus.WrapError(plexus.CodeTransportError, err, "the provider's output is not JSON")
			}
		}
		return out, nil
	case StatusCanceled:
		e := plexus.Errorf(plexus.CodeTransportError, "the provider %s canceled the call", provider)
		e.Detail = toolErrorDetail(r.Error, CodeToolCanceled)
		return nil, e
	case StatusFailed:
		msg := "the tool failed"
		if r.Error != nil && strings.TrimSpace(r.Error.Message) != "" {
			msg += ": " + clipN(r.Error.Message, 1024)
		}
		e := plexus.Errorf(plexus.CodeTransportError, "%s", msg)
		e.Detail = toolErrorDetail(r.Error, "")
		return nil, e
	}
	return nil, plexus.Errorf(plexus.CodeTransportError, "the provider sent a result with an unknown status")
}

// toolErrorDetail is the detail of a failed or canceled call: the tool's
// error code (def when it sent none) and whether a retry may succeed.
func toolErrorDetail(e *Error, def string) map[string]any {
	d := map[string]any{}
	code := def
	if e != nil && e.Code != "" {
		code = clipN(e.Code, 128)
	}
	if code != "" {
		d["code"] = code
	}
	if e != nil && e.Retryable {
		d["retryable"] = true
	}
	return d
}

func validStatus(s string) bool {
	return s == StatusSucceeded || s == StatusFailed || s == StatusCanceled
}

func knownChannel(c string) bool {
	switch c {
	case ChannelStdout, ChannelStderr, ChannelLog, ChannelPartialResult, ChannelStatus:
		return true
	}
	return false
}

// stream relays one agent.tool.stream chunk to its call's waiting caller.
// A chunk for a call not in flight, or out of order, is dropped (logged at
// debug); a chunk on an unknown channel gets a structured error.
func (h *Hub) stream(ss *session, env Envelope) error {
	st, err := DecodePayload[ToolStream](env)
	if err != nil {
		return badPayload(ss.s, env, err)
	}
	if !knownChannel(st.Channel) {
		return ss.s.Send(ErrorReply(env, CodeInvalidEnvelope, "agent.tool.stream: payload.channel must be one of stdout, stderr, log, partial_result, status"))
	}
	ss.mu.Lock()
	c := ss.calls[st.CallID]
	switch {
	case c == nil:
		ss.mu.Unlock()
		h.log.Debug("ipc: stream chunk for a call not in flight", "provider", ss.p.id, "call_id", clip(st.CallID))
		return nil
	case st.Seq != 0 && st.Seq <= c.lastSeq:
		ss.mu.Unlock()
		h.log.Debug("ipc: stream chunk out of order", "provider", ss.p.id, "call_id", c.id, "seq", st.Seq)
		return nil
	case len(c.events) >= streamBuffer:
		ss.finishLocked(c, callEvent{fail: plexus.Errorf(plexus.CodeTransportError,
			"the tool streamed more than %d chunks ahead of its caller; the call was canceled", streamBuffer)})
		ss.mu.Unlock()
		h.cancelCall(ss, c, "stream_overflow")
		return nil
	}
	if st.Seq != 0 {
		c.lastSeq = st.Seq
	}
	c.events <- callEvent{progress: &plexus.InvokeProgress{Channel: st.Channel, Data: st.Data, Done: st.Done}}
	ss.mu.Unlock()
	return nil
}

// result ends a call with its agent.tool.result. A second result for a
// call is ignored and journaled (ipc.result_duplicate); the late result of
// a call its caller abandoned is ignored.
func (h *Hub) result(ss *session, env Envelope) error {
	r, err := DecodePayload[ToolResult](env)
	if err != nil {
		return badPayload(ss.s, env, err)
	}
	ss.mu.Lock()
	c := ss.calls[r.CallID]
	if c == nil {
		ended := ss.ended.lookup(r.CallID)
		var trace string
		dup := false
		if ended != nil {
			trace, dup = ended.trace, ended.answered
			ended.answered = true
		}
		ss.mu.Unlock()
		switch {
		case dup:
			h.note("ipc.result_duplicate", ss.p, trace, map[string]any{"call_id": r.CallID, "session_id": ss.s.ID(), "status": clip(r.Status)})
		case ended != nil:
			h.log.Debug("ipc: late result of an abandoned call", "provider", ss.p.id, "call_id", r.CallID, "status", clip(r.Status))
		default:
			h.log.Debug("ipc: result for an unknown call", "provider", ss.p.id, "call_id", clip(r.CallID))
		}
		return nil
	}
	if !validStatus(r.Status) {
		ss.finishLocked(c, callEvent{fail: plexus.Errorf(plexus.CodeTransportError, "the provider sent a result with an unknown status")})
		ss.mu.Unlock()
		return ss.s.Send(ErrorReply(env, CodeInvalidEnvelope, "agent.tool.result: payload.status must be succeeded, failed or canceled"))
	}
	ss.finishLocked(c, callEvent{result: &r})
	ss.mu.Unlock()
	return nil
}

// clipN bounds a peer-chosen string to n bytes (valid UTF-8).
func clipN(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return strings.ToValidUTF8(s[:n], "") + "…"
}
