//lint:file-ignore SA1019 sampling, elicitation and roots, deprecated from 2026-07-28 but served through its deprecation window, are what Plexus relays

package mcpserver

import (
	"context"
	"crypto/rand"
	"crypto/subtle"
	"encoding/json"
	"fmt"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// A sessionless (2026-07-28) host cannot be sent a request: what a server
// asks while its call runs (sampling, elicitation, roots) reaches it as an
// input_required result instead (SEP-2322, multi round-trip). The call
// runs on, held by Plexus, while the host answers: the first round
// answers input_required with the server's questions and a request state;
// the host calls again with its answers (inputResponses) and that state,
// the answers go to the server, and the round answers what comes next
// (more questions, or the call's result).
//
// The request state is opaque and server-held: a random key to the held
// call, good for one round (each round gets a new one), for the agent
// whose PAT made the call and for the same method and name, and for as
// long as the call may wait ([Options.InputWait]). Any other state (made
// up, altered, another agent's, spent, expired) is refused with -32602
// and changes nothing.

// inputSettle is how long a round waits, after the server's first
// question, for the others it asks at the same time (a server asking
// several at once sends them together), so the host gets them in one
// round rather than one round each.
const inputSettle = 100 * time.Millisecond

// exchange is one held call of a sessionless host.
type exchange struct {
	ctx    context.Context // the held call's
	cancel context.CancelFunc
	pat    [32]byte // the sha256 of the PAT that made the call
	method string
	name   string
	asks   chan *ask    // the server's questions, as they come
	done   chan heldEnd // the call's end (buffered)
	// open are the questions put to the host and not answered, by key;
	// only the round holding the exchange touches them (a state serves
	// one round).
	open map[string]*ask
	seq  int
}

// ask is one question of the server, waiting for the host's answer.
type ask struct {
	req   mcp.InputRequest
	reply chan json.RawMessage // buffered
}

type heldEnd struct {
	res mcp.Result
	err error
}

// exchanges are the held calls by their current request state.
type exchanges struct {
	mu      sync.Mutex
	byState map[string]*exchange
}

type exchangeKey struct{}

// exchangeOf is the held call ctx runs in, or nil.
func exchangeOf(ctx context.Context) *exchange {
	x, _ := ctx.Value(exchangeKey{}).(*exchange)
	return x
}

// multiRound answers a sessionless host's tools/call, prompts/get or
// resources/read (name its tool, prompt or URI) in rounds: a request
// without state starts do, held; one with state resumes the call it
// names with the host's answers. Any other host's is do at once.
func (s *Server) multiRound(ctx context.Context, l *link, req mcp.Request, method, name string, do func(context.Context) (mcp.Result, error)) (mcp.Result, error) {
	if _, sessionless := declared(sessionOf(req), nil); !sessionless {
		return do(ctx)
	}
	state, responses := roundParams(req)
	if state == "" {
		return s.round(ctx, s.startExchange(ctx, l, method, name, do))
	}
	x, err := s.inputs.resume(l, method, name, state)
	if err != nil {
		return nil, err
	}
	x.answer(responses)
	return s.round(ctx, x)
}

func sessionOf(req mcp.Request) *mcp.ServerSession {
	ss, _ := req.GetSession().(*mcp.ServerSession)
	return ss
}

// roundParams are the request state and answers a round carries.
func roundParams(req mcp.Request) (string, mcp.InputResponseMap) {
	switch p := req.GetParams().(type) {
	case *mcp.CallToolParamsRaw:
		return p.RequestState, p.InputResponses
	case *mcp.GetPromptParams:
		return p.RequestState, p.InputResponses
	case *mcp.ReadResourceParams:
		return p.RequestState, p.InputResponses
	}
	return "", nil
}

// startExchange runs do held: for as long as the host may take to answer,
// whatever becomes of the round that started it.
func (s *Server) startExchange(ctx context.Context, l *link, method, name string, do func(context.Context) (mcp.Result, error)) *exchange {
	xctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), s.opts.InputWait)
	x := &exchange{ctx: xctx, cancel: cancel, pat: l.patHash, method: method, name: name,
		asks: make(chan *ask), done: make(chan heldEnd, 1), open: map[string]*ask{}}
	context.AfterFunc(xctx, func() { s.inputs.drop(x) })
	go func() {
		res, err := do(context.WithValue(xctx, exchangeKey{}, x))
		x.done <- heldEnd{res, err}
	}()
	return x
}

// round waits for what comes next of x: its result, or the server's
// questions (with those still open), which it answers as input_required
// under a new state. The host's leaving ends the call.
func (s *Server) round(ctx context.Context, x *exchange) (mcp.Result, error) {
	if len(x.open) == 0 {
		select {
		case o := <-x.done:
			x.cancel()
			return o.res, o.err
		case a := <-x.asks:
			x.add(a)
		case <-ctx.Done():
			x.cancel()
			return nil, ctx.Err()
		}
		x.settle(ctx)
	}
	if err := ctx.Err(); err != nil {
		x.cancel() // the host left: nobody will answer
		return nil, err
	}
	state := s.inputs.park(x)
	reqs := make(mcp.InputRequestMap, len(x.open))
	for k, a := range x.open {
		reqs[k] = a.req
	}
	switch x.method {
	case "prompts/get":
		return &mcp.GetPromptResult{InputRequests: reqs, RequestState: state}, nil
	case "resources/read":
		return &mcp.ReadResourceResult{InputRequests: reqs, RequestState: state}, nil
	}
	return &mcp.CallToolResult{InputRequests: reqs, RequestState: state}, nil
}

// settle takes the questions the server asks along with the first.
func (x *exchange) settle(ctx context.Context) {
	t := time.NewTimer(inputSettle)
	defer t.Stop()
	for {
		select {
		case a := <-x.asks:
			x.add(a)
		case <-t.C:
			return
		case <-ctx.Done():
			return
		}
	}
}

func (x *exchange) add(a *ask) {
	x.seq++
	x.open[fmt.Sprintf("input-%d", x.seq)] = a
}

// answer passes each of the host's answers to the question it answers;
// an answer to no open question, or of the wrong kind, is ignored (the
// question stays open and is asked again).
func (x *exchange) answer(responses mcp.InputResponseMap) {
	for k, r := range responses {
		a := x.open[k]
		if a == nil || !answers(a.req, r) {
			continue
		}
		raw, err := json.Marshal(r)
		if err != nil {
			continue
		}
		a.reply <- raw
		delete(x.open, k)
	}
}

// answers reports whether r is the kind of answer req asks for.
func answers(req mcp.InputRequest, r mcp.InputResponse) bool {
	switch req.(type) {
	case *mcp.ElicitParams:
		_, ok := r.(*mcp.ElicitResult)
		return ok
	case *mcp.CreateMessageWithToolsParams, *mcp.CreateMessageParams:
		switch r.(type) {
		case *mcp.CreateMessageResult, *mcp.CreateMessageWithToolsResult:
			return true
		}
	case *mcp.ListRootsParams:
		_, ok := r.(*mcp.ListRootsResult)
		return ok
	}
	return false
}

// ask puts a question of the server to the host and waits for its
// answer, for as long as both the server's request and the held call
// last.
func (x *exchange) ask(ctx context.Context, req mcp.InputRequest) (json.RawMessage, error) {
	a := &ask{req: req, reply: make(chan json.RawMessage, 1)}
	select {
	case x.asks <- a:
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-x.ctx.Done():
		return nil, refuse("the host did not answer in time")
	}
	select {
	case raw := <-a.reply:
		return raw, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-x.ctx.Done():
		return nil, refuse("the host did not answer in time")
	}
}

// park files x under a new state, for the host's next round.
func (xs *exchanges) park(x *exchange) string {
	state := rand.Text() + rand.Text()
	xs.mu.Lock()
	defer xs.mu.Unlock()
	if xs.byState == nil {
		xs.byState = map[string]*exchange{}
	}
	xs.byState[state] = x
	return state
}

// resume takes (and spends) the exchange state names, when l's agent
// made it for this method and name. Any other state is refused and
// changes nothing: the held call it may name still waits for its own
// host, and that host's state stays good.
func (xs *exchanges) resume(l *link, method, name, state string) (*exchange, error) {
	xs.mu.Lock()
	defer xs.mu.Unlock()
	x := xs.byState[state]
	if x == nil || subtle.ConstantTimeCompare(x.pat[:], l.patHash[:]) != 1 || x.method != method || x.name != name || x.ctx.Err() != nil {
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams,
			Message: "requestState is not valid: unknown, altered, already used, expired, or not for this call"}
	}
	delete(xs.byState, state)
	return x, nil
}

// stop ends every held call.
func (xs *exchanges) stop() {
	xs.mu.Lock()
	held := make([]*exchange, 0, len(xs.byState))
	for _, x := range xs.byState {
		held = append(held, x)
	}
	xs.mu.Unlock()
	for _, x := range held {
		x.cancel() // AfterFunc drops it
	}
}

// drop forgets x's states.
func (xs *exchanges) drop(x *exchange) {
	xs.mu.Lock()
	defer xs.mu.Unlock()
	for k, v := range xs.byState {
		if v == x {
			delete(xs.byState, k)
		}
	}
}
