package mcpserver

import (
	"context"
	"errors"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// A call lives no longer than its caller: one whose host has gone must not
// wait on and then run when the owner approves later, for no one (issue
// 14; the grant the owner approved stands for the agent's later calls).
// The SDK's session handler ends neither on its own: ending a session
// (DELETE) closes it only once its calls have returned, so a call waiting
// for the owner outlives it; and a POST whose connection dropped leaves
// its call running for the stream to be resumed, which the front door
// never offers (it keeps no event store, so the answer could reach no
// one). So each call of a host on a session (2025-11-25 and earlier) is
// tied here to the POST that carried it and to its session. A sessionless
// (2026-07-28) call is its POST's already (PropagateRequestCancellation).

var (
	// errPostDropped ends a call whose POST's connection dropped.
	errPostDropped = errors.New("the host's request was dropped before its answer")
	// errSessionEnded ends a call whose host ended its session.
	errSessionEnded = errors.New("the host ended its MCP session")
)

// postKey is the TokenInfo.Extra key of the context of the POST that
// carried a request (linkToken).
const postKey = "plexus/post"

// inflight holds the calls the hosts' sessions have in flight.
type inflight struct {
	mu   sync.Mutex // guards next, byID and ended
	next uint64
	// byID cancels each call, by MCP session id and a number of its own:
	// one map for every session, so a call adds an entry and nothing else.
	byID map[heldKey]context.CancelCauseFunc
	// ended are the sessions being ended: a call that reaches the front
	// door after its session's end began is cancelled at once.
	ended map[string]bool
}

type heldKey struct {
	session string
	n       uint64
}

// held is a call inflight holds; release forgets it. The zero value holds
// nothing.
type held struct {
	f      *inflight
	key    heldKey
	stop   func() bool
	cancel context.CancelCauseFunc
}

// hold ties ctx, a call's, to its caller: it ends when the POST that
// carried the call drops or its session is ended. Releasing the held call
// forgets it.
func (f *inflight) hold(ctx context.Context, req mcp.Request) (context.Context, held) {
	ss := sessionOf(req)
	if _, sessionless := declared(ss, nil); sessionless || ss == nil || ss.ID() == "" {
		return ctx, held{}
	}
	ctx, cancel := context.WithCancelCause(ctx)
	h := held{f: f, key: heldKey{session: ss.ID()}, cancel: cancel}
	if post := postOf(req); post != nil {
		h.stop = context.AfterFunc(post, func() { cancel(errPostDropped) })
	}
	f.mu.Lock()
	f.lazy()
	if f.ended[h.key.session] {
		cancel(errSessionEnded)
	}
	f.next++
	h.key.n = f.next
	f.byID[h.key] = cancel
	f.mu.Unlock()
	return ctx, h
}

// release forgets the call and ends its context.
func (h held) release() {
	if h.f == nil {
		return
	}
	if h.stop != nil {
		h.stop()
	}
	h.cancel(nil)
	h.f.mu.Lock()
	delete(h.f.byID, h.key)
	h.f.mu.Unlock()
}

// end cancels the calls of session id, which its host is ending, and any
// that reaches the front door before forget.
func (f *inflight) end(id string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.lazy()
	f.ended[id] = true
	for k, cancel := range f.byID {
		if k.session == id {
			cancel(errSessionEnded)
		}
	}
}

// lazy makes the maps of the zero value; f.mu is held.
func (f *inflight) lazy() {
	if f.byID == nil {
		f.byID, f.ended = map[heldKey]context.CancelCauseFunc{}, map[string]bool{}
	}
}

// forget drops what end kept of session id, once the session is closed
// (the SDK refuses its requests from then on).
func (f *inflight) forget(id string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.ended, id)
}

// postOf is the context of the HTTP request that carried req, nil when
// there is none (a request the SDK made up, a test over another
// transport).
func postOf(req mcp.Request) context.Context {
	extra := req.GetExtra()
	if extra == nil || extra.TokenInfo == nil {
		return nil
	}
	post, _ := extra.TokenInfo.Extra[postKey].(context.Context)
	return post
}
