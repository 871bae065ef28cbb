//lint:file-ignore SA1019 sampling, elicitation, roots and logging, deprecated from 2026-07-28 but served through its deprecation window, are what Plexus relays

package mcpserver

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// The bridge's fast path for a host's tools/call (issue 14's figure for
// plexus mcp serve). On the slow path the call is decoded into the SDK's
// types by the bridge's server session, sent again by its client session,
// and its result decoded and encoded once more on the way back: five
// decodes of the SDK's (32 KB of buffer each) and a goroutine hop per
// call. A host on a session of 2025-11-25 or earlier (what the bridge
// speaks to the daemon) has its tools/call pumped instead: forwarded as
// the host sent it, under an id of the bridge's, as one POST in the same
// daemon session ([pumpConn]) whose answer the call's goroutine reads off
// the response itself (bridgesse.go), with the daemon's answer and the
// call's progress (under the host's own token) sent back as they came. What the daemon asks the host meanwhile (sampling,
// elicitation, roots) and its log messages go through the host's session
// with the same checks as on the slow path ([bridge.askHost]), the host's
// cancellation of the call is forwarded, and a daemon that is down or
// restarted is answered as on the slow path. Every other request, and
// every request of a 2026-07-28 host (which carries its own protocol
// metadata), takes the SDK's sessions.

// pumpIDPrefix starts the id under which a pumped call reaches the daemon:
// the bridge's client session numbers its own requests, and both share
// the daemon session.
const pumpIDPrefix = "plexus-bridge-"

// newMeta marks params carrying the metadata of a 2026-07-28 request,
// which the daemon would read as such: those take the slow path, which
// sends none of the host's _meta.
var newMeta = []byte("io.modelcontextprotocol/")

// cancelWait bounds telling the daemon a call was cancelled.
const cancelWait = 5 * time.Second

// finishWait and finishBytes bound what the bridge reads after the
// daemon's answer to a pumped call, to keep its connection.
const (
	finishWait  = time.Second
	finishBytes = 64 << 10
)

// hostTransport is the host's transport, whose connection hands the
// bridge the messages it pumps before the SDK's server reads them.
type hostTransport struct {
	mcp.Transport
	b *bridge
}

func (t hostTransport) Connect(ctx context.Context) (mcp.Connection, error) {
	c, err := t.Transport.Connect(ctx)
	if err != nil {
		return nil, err
	}
	t.b.mu.Lock()
	t.b.host = c
	t.b.mu.Unlock()
	return &hostConn{Connection: c, b: t.b}, nil
}

// hostConn is the host's connection; Write is the SDK's, safe for
// concurrent use, which the pumped calls share.
type hostConn struct {
	mcp.Connection
	b *bridge
}

func (c *hostConn) Read(ctx context.Context) (jsonrpc.Message, error) {
	for {
		msg, err := c.Connection.Read(ctx)
		if err != nil || !c.b.pump(msg) {
			return msg, err
		}
	}
}

// pump takes msg from the host when it is a tools/call the fast path
// serves, or the cancellation of one; it reports whether it took it.
func (b *bridge) pump(msg jsonrpc.Message) bool {
	req, ok := msg.(*jsonrpc.Request)
	if !ok {
		return false
	}
	switch {
	case req.Method == "notifications/cancelled" && !req.IsCall():
		return b.cancelPumped(req.Params)
	case req.Method != "tools/call" || !req.IsCall() || bytes.Contains(req.Params, newMeta):
		return false
	}
	ss := b.hostSession()
	if ss == nil {
		return false
	}
	if ip := ss.InitializeParams(); ip == nil || ip.ProtocolVersion >= newProtocol {
		return false
	}
	ctx, cancel := context.WithCancel(b.ctx)
	b.mu.Lock()
	b.pumped[req.ID] = cancel
	b.mu.Unlock()
	b.wg.Add(1)
	go func() {
		reserveStack(false) // a goroutine of its own, like the front door's calls (stack.go)
		defer b.wg.Done()
		defer cancel()
		resp, rest := b.pumpCall(ctx, ss, req)
		// The call is over before the host has its answer: from then on the
		// host may use the id again, and a cancellation must not find this
		// call under it.
		b.mu.Lock()
		delete(b.pumped, req.ID)
		b.mu.Unlock()
		if resp != nil {
			// A copy: the SDK's connection still reads the one it delivered.
			out := *resp
			out.ID = req.ID
			if err := b.hostWrite(&out); err != nil {
				b.o.Logger.Debug("answer the host", "err", err)
			}
		}
		if rest != nil {
			rest()
		}
	}()
	return true
}

// hostSession is the host's session, once it connected.
func (b *bridge) hostSession() *mcp.ServerSession {
	for ss := range b.srv.Sessions() {
		return ss
	}
	return nil
}

// cancelPumped cancels the pumped call the host's notifications/cancelled
// names, if it names one.
func (b *bridge) cancelPumped(params json.RawMessage) bool {
	var p struct {
		RequestID any `json:"requestId"`
	}
	if json.Unmarshal(params, &p) != nil {
		return false
	}
	id, err := jsonrpc.MakeID(p.RequestID)
	if err != nil {
		return false
	}
	b.mu.Lock()
	cancel, ok := b.pumped[id]
	b.mu.Unlock()
	if ok {
		cancel()
	}
	return ok
}

// pumpCall forwards the host's call req and answers the daemon's response
// to it, or an error saying why there is none; nil when ctx ended first
// (the host cancelled the call: the daemon is told). rest, when not nil,
// reads what follows the answer on its response (finish): the caller runs
// it once the host has the answer, which so does not wait for the end of
// the daemon's stream.
func (b *bridge) pumpCall(ctx context.Context, ss *mcp.ServerSession, req *jsonrpc.Request) (answer *jsonrpc.Response, rest func()) {
	up, err := b.sessionFor(ctx, ss)
	if err != nil {
		return &jsonrpc.Response{Error: err}, nil
	}
	pc := b.pumpConn(up)
	id, err := jsonrpc.MakeID(pumpIDPrefix + strconv.FormatUint(b.counter.Add(1), 10))
	if err != nil {
		return &jsonrpc.Response{Error: err}, nil
	}
	body, err := jsonrpc.EncodeMessage(&jsonrpc.Request{ID: id, Method: req.Method, Params: req.Params})
	if err != nil {
		return &jsonrpc.Response{Error: fmt.Errorf("encode the call: %w", err)}, nil
	}
	// The POST ends with the call, or when finish gives up on it; an
	// answered call's POST ends in rest.
	pctx, abort := context.WithCancel(ctx)
	resp, err := pc.post(pctx, body)
	if err == nil {
		var bad *answerError
		answer, err = b.readAnswer(pc, ss, id, resp)
		if errors.As(err, &bad) {
			b.drop(resp, abort)
			return &jsonrpc.Response{Error: &jsonrpc.Error{Code: jsonrpc.CodeInternalError,
				Message: "the answer to this call was refused (the call may have run): " + bad.Error()}}, nil
		}
		if answer != nil {
			return answer, func() {
				b.finish(resp, abort)
				abort()
			}
		}
		b.finish(resp, abort)
	}
	abort()
	if ctx.Err() != nil {
		// The host cancelled: the call may run all the same.
		b.tellCancelled(pc, id)
		return nil, nil
	}
	return &jsonrpc.Response{Error: b.failed(up, pc.lost(err))}, nil
}

// drop closes resp unread, and its connection with it (abort cancels the
// POST): the rest of an answer the bridge refused is not read.
func (b *bridge) drop(resp *http.Response, abort context.CancelFunc) {
	abort()
	if err := resp.Body.Close(); err != nil {
		b.o.Logger.Debug("close a refused answer", "err", err)
	}
}

// readAnswer reads the daemon's answer to call id from resp: one JSON
// message, or an SSE stream whose other messages (the call's progress, its
// log messages, what the daemon asks the host meanwhile) go where they
// belong as they come, until the answer.
func (b *bridge) readAnswer(pc *pumpConn, ss *mcp.ServerSession, id jsonrpc.ID, resp *http.Response) (*jsonrpc.Response, error) {
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("the daemon answered the call %s", resp.Status)
	}
	var answer *jsonrpc.Response
	take := func(data []byte) (bool, error) {
		msg, err := jsonrpc.DecodeMessage(data)
		if err != nil {
			return false, &answerError{fmt.Errorf("decode the daemon's message: %w", err)}
		}
		switch m := msg.(type) {
		case *jsonrpc.Response:
			if m.ID != id {
				return false, &answerError{fmt.Errorf("the daemon answered %v on the stream of %v", m.ID.Raw(), id.Raw())}
			}
			answer = m
			return true, nil
		case *jsonrpc.Request:
			b.fromDaemon(pc, ss, m)
		}
		return false, nil
	}
	if mediaType(resp.Header.Get("Content-Type")) == "application/json" {
		data, err := io.ReadAll(io.LimitReader(resp.Body, bridgeMaxEvent+1))
		if err == nil && len(data) > bridgeMaxEvent {
			err = &answerError{errEventTooLarge}
		}
		if err == nil {
			_, err = take(data)
		}
		if err == nil && answer == nil {
			err = &answerError{errors.New("the daemon's answer was not a response")}
		}
		return answer, err
	}
	err := sseData(resp.Body, bridgeMaxEvent, take)
	if errors.Is(err, errEventTooLarge) {
		err = &answerError{err}
	}
	if err != nil {
		return nil, err
	}
	if answer == nil {
		return nil, errors.New("the daemon's stream ended before its answer")
	}
	return answer, nil
}

// finish reads what follows the answer on resp (the stream's end, which
// the daemon sends right after it) and closes it, so that its connection
// serves the next call: a connection whose response is closed unread is
// closed, and the next call would dial anew. After finishWait it aborts
// the POST (abort cancels its context) instead.
func (b *bridge) finish(resp *http.Response, abort context.CancelFunc) {
	t := time.AfterFunc(finishWait, abort)
	defer t.Stop()
	if _, err := io.Copy(io.Discard, io.LimitReader(resp.Body, finishBytes)); err != nil {
		b.o.Logger.Debug("read the end of the daemon's answer", "err", err)
	}
	if err := resp.Body.Close(); err != nil {
		b.o.Logger.Debug("close the daemon's answer", "err", err)
	}
}

// fromDaemon hands on what the daemon sends during a pumped call: a
// notification to the host, a request to be asked of the host.
func (b *bridge) fromDaemon(pc *pumpConn, ss *mcp.ServerSession, m *jsonrpc.Request) {
	if !m.IsCall() {
		b.daemonNotice(pc, ss, m)
		return
	}
	b.wg.Add(1)
	go func() {
		defer b.wg.Done()
		b.answerDaemon(pc, ss, m)
	}()
}

// tellCancelled tells the daemon the host cancelled call id, as the SDK's
// client does for the slow path.
func (b *bridge) tellCancelled(pc *pumpConn, id jsonrpc.ID) {
	if b.ctx.Err() != nil {
		return // the bridge ends, and its session with it
	}
	params, err := json.Marshal(map[string]any{"requestId": id.Raw(), "reason": "cancelled by the host"})
	if err != nil {
		return
	}
	ctx, cancel := context.WithTimeout(b.ctx, cancelWait)
	defer cancel()
	if err := pc.send(ctx, &jsonrpc.Request{Method: "notifications/cancelled", Params: params}); err != nil {
		b.o.Logger.Debug("tell the daemon a call was cancelled", "err", err)
	}
}

// pumpConn is the fast path's way to the daemon session of up: plain POSTs
// in that session (each with the PAT, the session's id and protocol
// version), each call reading the daemon's answer off its own response, on
// the keep-alive connections of up's transport.
type pumpConn struct {
	client   *http.Client
	endpoint string
	// header is every POST's: its type, the PAT, the session's id and
	// protocol version.
	header http.Header
	up     *mcp.ClientSession
	// gone is set when the daemon answered that the session is unknown
	// (it restarted).
	gone *atomic.Bool

	mu   sync.Mutex                        // guards asks
	asks map[jsonrpc.ID]context.CancelFunc // the daemon's requests being asked of the host
}

// pumpConn is the fast path's way to the daemon session of up, made when
// there is none for it ([bridge.failed] forgets one whose session is lost).
func (b *bridge) pumpConn(up *mcp.ClientSession) *pumpConn {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.pc != nil && b.pc.up == up {
		return b.pc
	}
	gone := &atomic.Bool{}
	version := "2025-11-25"
	if ir := up.InitializeResult(); ir != nil {
		version = ir.ProtocolVersion
	}
	b.pc = &pumpConn{client: bridgeClient(pumpRoundTripper{base: b.upTransport, gone: gone}), endpoint: b.o.Endpoint,
		header: pumpHeader(b.o.PAT, up.ID(), version), up: up, gone: gone, asks: map[jsonrpc.ID]context.CancelFunc{}}
	return b.pc
}

// pumpHeader is the header of every POST in the daemon session session
// (none: no session's id and version).
func pumpHeader(pat, session, version string) http.Header {
	h := http.Header{"Content-Type": {"application/json"}, "Accept": {"application/json, text/event-stream"},
		"Authorization": {"Bearer " + pat}}
	if session != "" {
		h[sessionHeader] = []string{session}
		h["Mcp-Protocol-Version"] = []string{version}
	}
	return h
}

// post sends one message to the daemon session; the response is the
// caller's to read and close.
func (pc *pumpConn) post(ctx context.Context, body []byte) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, pc.endpoint, bytes.NewReader(body))
	if err != nil {
		return nil, fmt.Errorf("the daemon's request: %w", err)
	}
	req.Header = pc.header.Clone()
	resp, err := pc.client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("send to the daemon: %w", err)
	}
	return resp, nil
}

// send sends msg, a notification or an answer to the daemon's request,
// which the daemon accepts with no answer of its own.
func (pc *pumpConn) send(ctx context.Context, msg jsonrpc.Message) error {
	body, err := jsonrpc.EncodeMessage(msg)
	if err != nil {
		return fmt.Errorf("encode for the daemon: %w", err)
	}
	resp, err := pc.post(ctx, body)
	if err != nil {
		return err
	}
	_, err = io.Copy(io.Discard, io.LimitReader(resp.Body, bridgeMaxEvent))
	if cerr := resp.Body.Close(); err == nil {
		err = cerr
	}
	if err == nil && resp.StatusCode/100 != 2 {
		err = fmt.Errorf("the daemon answered %s", resp.Status)
	}
	return err
}

// daemonNotice hands a notification of a pumped call to the host:
// progress as it came (the token is the host's own), a log message
// through the host's session (which applies the host's log level), a
// cancellation to the request it withdraws.
func (b *bridge) daemonNotice(pc *pumpConn, ss *mcp.ServerSession, m *jsonrpc.Request) {
	switch m.Method {
	case "notifications/progress":
		if err := b.hostWrite(m); err != nil {
			b.o.Logger.Debug("relay progress to the host", "err", err)
		}
	case "notifications/message":
		var p mcp.LoggingMessageParams
		if err := json.Unmarshal(m.Params, &p); err != nil {
			return
		}
		if err := ss.Log(b.ctx, &p); err != nil {
			b.o.Logger.Debug("relay a log message to the host", "err", err)
		}
	case "notifications/cancelled":
		var p struct {
			RequestID any `json:"requestId"`
		}
		if json.Unmarshal(m.Params, &p) == nil {
			if id, err := jsonrpc.MakeID(p.RequestID); err == nil {
				pc.cancelAsk(id)
			}
		}
	}
}

// answerDaemon answers the daemon's request m, made during a pumped call,
// with the host's answer.
func (b *bridge) answerDaemon(pc *pumpConn, ss *mcp.ServerSession, m *jsonrpc.Request) {
	ctx, cancel := context.WithCancel(b.ctx)
	defer cancel()
	pc.track(m.ID, cancel)
	defer pc.untrack(m.ID)
	resp := &jsonrpc.Response{ID: m.ID}
	res, err := b.askHost(ctx, ss, m.Method, m.Params)
	if err == nil {
		resp.Result, err = json.Marshal(res)
	}
	resp.Error = err
	if err := pc.send(b.ctx, resp); err != nil {
		b.o.Logger.Debug("answer the daemon", "err", err)
	}
}

// askHost asks the host what the daemon asks during a pumped call, as the
// bridge's client session does on the slow path (clientOptions,
// relayRoots): sampling and elicitation only when the host declared them,
// and no more than Plexus relays.
func (b *bridge) askHost(ctx context.Context, ss *mcp.ServerSession, method string, params json.RawMessage) (any, error) {
	var caps mcp.ClientCapabilities
	if ip := ss.InitializeParams(); ip != nil && ip.Capabilities != nil {
		caps = *ip.Capabilities
	}
	switch {
	case method == "sampling/createMessage" && caps.Sampling != nil:
		var p mcp.CreateMessageWithToolsParams
		if err := unmarshalParams(params, &p); err != nil {
			return nil, err
		}
		if err := undeclared(&p); err != nil {
			return nil, err
		}
		return ss.CreateMessageWithTools(ctx, &p)
	case method == "elicitation/create" && caps.Elicitation != nil:
		var p mcp.ElicitParams
		if err := unmarshalParams(params, &p); err != nil {
			return nil, err
		}
		if err := undeclared(&p); err != nil {
			return nil, err
		}
		return ss.Elicit(ctx, &p)
	case method == "roots/list":
		var p mcp.ListRootsParams
		if err := unmarshalParams(params, &p); err != nil {
			return nil, err
		}
		return ss.ListRoots(ctx, &p)
	case method == "ping":
		return struct{}{}, nil
	}
	return nil, &jsonrpc.Error{Code: jsonrpc.CodeMethodNotFound, Message: "method not found: " + clip(method, 80)}
}

// hostWrite sends m to the host.
func (b *bridge) hostWrite(m jsonrpc.Message) error {
	b.mu.Lock()
	host := b.host
	b.mu.Unlock()
	if host == nil {
		return errors.New("the host is not connected")
	}
	return host.Write(b.ctx, m)
}

func (pc *pumpConn) track(id jsonrpc.ID, cancel context.CancelFunc) {
	pc.mu.Lock()
	pc.asks[id] = cancel
	pc.mu.Unlock()
}

func (pc *pumpConn) untrack(id jsonrpc.ID) {
	pc.mu.Lock()
	delete(pc.asks, id)
	pc.mu.Unlock()
}

func (pc *pumpConn) cancelAsk(id jsonrpc.ID) {
	pc.mu.Lock()
	cancel, ok := pc.asks[id]
	pc.mu.Unlock()
	if ok {
		cancel()
	}
}

// lost is err, said to be the session's loss when the daemon answered
// that it does not know the session, as the SDK's client says it on the
// slow path (where the connection knows the session it speaks in).
func (pc *pumpConn) lost(err error) error {
	if err == nil {
		err = mcp.ErrConnectionClosed
	}
	if pc.gone.Load() && !errors.Is(err, mcp.ErrSessionMissing) {
		return errors.Join(err, mcp.ErrSessionMissing)
	}
	return err
}
