//lint:file-ignore SA1019 sampling, elicitation, roots and logging, deprecated from 2026-07-28 but served through its deprecation window, are what Plexus relays

package mcpclient

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	ssestream "github.com/plexus-gw/plexus/internal/sse" // the tests have an sse helper
	segjson "github.com/segmentio/encoding/json"
	"golang.org/x/oauth2"
)

// A tools/call on a Streamable HTTP session is sent by Plexus itself too,
// as one POST in the SDK's session, its answer read off the response on
// the caller's goroutine (passthrough.go says why: on this path the SDK
// also reads each answer on a goroutine of its own, hands it over to
// another, and decodes it twice, with its 32 KiB buffer each time).
//
// The POST goes through the session's own http.Client: the configured
// headers, the capture's tee (progress and log messages relayed as they
// come, server requests tagged for the call's relay: capture.go, relay.go)
// and the redirect refusal apply as on the SDK's path; its headers are the
// SDK's (session id, protocol version). The SDK's connection cannot be
// handed a message it did not read, so what else comes on the call's
// stream is handled here as the SDK's client would: a server request
// (sampling, elicitation, roots) goes to the same relay handlers and is
// answered with a POST, ping is answered, any other request is Method not
// found; list_changed and resources/updated reach the same handlers. A
// stream that ends before the answer is resumed with Last-Event-ID when
// its events had ids, as the SDK does. A cancelled call tells the server
// notifications/cancelled. A failing status is the SDK's error for it: a
// JSON-RPC error in the body is the server's answer, a 404 the end of the
// session (the liveness check then closes it, and Run reconnects).
//
// A server that signs in (OAuth) has its token set on each request, and
// on a 401 or 403 the sign-in asked to authorize before the request goes
// once more, as the SDK's transport does. Sessionless servers (2026-07-28)
// keep the SDK's call, as over stdio.

// passesHTTP says whether a tools/call on s is sent by Plexus itself over
// Streamable HTTP.
func passesHTTP(s *session) bool { return s.hc != nil && s.pv < sessionless }

// Limits of the HTTP pass-through.
const (
	maxResumes  = 5               // reconnections without a new event (the SDK's default MaxRetries)
	resumeDelay = time.Second     // before a reconnection the server set no retry for (the SDK's)
	finishWait  = time.Second     // for the rest of a stream after its answer
	finishBytes = 64 << 10        // read after an answer, to keep the connection
	answerWait  = 5 * time.Second // to POST an answer or a cancellation
)

// errNoAnswer is the error of a call whose stream ended without its
// answer and cannot be resumed.
var errNoAnswer = errors.New("request terminated without response")

// errBroken marks what fails the SDK's client connection (a malformed
// stream or message, an unsupported content type, a refusal with no
// JSON-RPC error, a stream that cannot be resumed): the pass-through then
// closes the session, so that the call is unavailable and Run reconnects,
// as on the SDK's path.
var errBroken = errors.New("the MCP connection failed")

// callToolHTTP sends one tools/call with params on s and waits for the
// server's result, raw.
func (c *Client) callToolHTTP(ctx context.Context, s *session, params toolCallParams) (json.RawMessage, error) {
	key := idPrefix + strconv.FormatUint(s.sent.Add(1), 10)
	id, err := jsonrpc.MakeID(key)
	if err != nil {
		return nil, err
	}
	body, err := encodeCall(nil, key, "tools/call", params)
	if err != nil {
		return nil, err
	}
	// The relay handlers take the call's relay from ctx (relayOf).
	ctx = context.WithValue(ctx, callKey{}, true)
	resp, err := c.post(ctx, s, body)
	if err == nil {
		// What the server asks on the stream is answered on goroutines
		// that end with the call: a server that answered the call has
		// nothing more to ask for it.
		actx, stop := context.WithCancel(ctx)
		var asks sync.WaitGroup
		var raw json.RawMessage
		raw, err = c.readAnswer(actx, s, resp, id, &asks)
		stop()
		asks.Wait()
		if err == nil {
			return raw, nil
		}
	}
	if ctx.Err() != nil {
		// Best effort, off the caller's way out, as the SDK does; on a
		// goroutine the session owns, which its close ends.
		reason := ctx.Err().Error()
		s.bg.run(func(life context.Context) { c.tellCancelled(life, s, id, reason) })
		return nil, ctx.Err()
	}
	if errors.Is(err, errBroken) {
		if cerr := s.cs.Close(); cerr != nil {
			c.log.Debug("mcp: closing a session whose connection failed", "err", c.red.err(cerr))
		}
	}
	return nil, fmt.Errorf("calling %q: %w", "tools/call", err) // as the SDK's call wraps it
}

// post sends body to the server in s's session and returns a successful
// response.
func (c *Client) post(ctx context.Context, s *session, body []byte) (*http.Response, error) {
	return c.send(ctx, s, func() (*http.Request, error) {
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, s.url, bytes.NewReader(body))
		if err != nil {
			return nil, err
		}
		s.setHeaders(req.Header)
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		return req, nil
	})
}

func (s *session) setHeaders(h http.Header) {
	h.Set("Mcp-Protocol-Version", s.pv)
	if sid := s.cs.ID(); sid != "" {
		h.Set("Mcp-Session-Id", sid)
	}
}

// send sends the request newReq makes with the session's client, signed
// as the SDK's transport signs it: the sign-in's token on each request,
// and on a 401 or 403 the sign-in asked to authorize, then the request
// made and sent once more. A failing status is the SDK's error for it
// (statusError).
func (c *Client) send(ctx context.Context, s *session, newReq func() (*http.Request, error)) (*http.Response, error) {
	req, err := c.signed(ctx, newReq)
	if err != nil {
		return nil, err
	}
	resp, err := s.hc.Do(req)
	if err != nil {
		return nil, err // a *url.Error: nothing reached the server
	}
	if (resp.StatusCode == http.StatusUnauthorized || resp.StatusCode == http.StatusForbidden) && c.opts.SignIn != nil {
		if err := c.opts.SignIn.Handler.Authorize(ctx, req, resp); err != nil { // it closes the body
			return nil, fmt.Errorf("authorization: %w", err)
		}
		if req, err = c.signed(ctx, newReq); err != nil {
			return nil, err
		}
		if resp, err = s.hc.Do(req); err != nil {
			return nil, err
		}
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return nil, statusError(resp)
	}
	return resp, nil
}

// signed is the request newReq makes with the sign-in's token, if there
// is one. A token that can no longer be refreshed (invalid_grant) is left
// out, for the server's 401 to start the sign-in, as the SDK does.
func (c *Client) signed(ctx context.Context, newReq func() (*http.Request, error)) (*http.Request, error) {
	req, err := newReq()
	if err != nil || c.opts.SignIn == nil {
		return req, err
	}
	// The SDK asks with its connection's context, which outlives a call.
	ts, err := c.opts.SignIn.Handler.TokenSource(context.WithoutCancel(ctx))
	if err != nil || ts == nil {
		return req, err
	}
	tok, err := ts.Token()
	var rerr *oauth2.RetrieveError
	switch {
	case errors.As(err, &rerr) && rerr.ErrorCode == "invalid_grant":
	case err != nil:
		return nil, err
	case tok != nil:
		req.Header.Set("Authorization", "Bearer "+tok.AccessToken)
	}
	return req, nil
}

// statusError is the error of a failing response, as the SDK's transport
// makes it: a transient status says so; else a JSON-RPC error in the body
// is the server's answer; a 404 means the session is gone.
func statusError(resp *http.Response) error {
	head, rerr := io.ReadAll(io.LimitReader(resp.Body, maxRefusal))
	cerr := resp.Body.Close()
	text := http.StatusText(resp.StatusCode)
	switch resp.StatusCode {
	case http.StatusInternalServerError, http.StatusBadGateway, http.StatusServiceUnavailable, http.StatusGatewayTimeout, http.StatusTooManyRequests:
		return errors.New(text) // the body unread, as the SDK leaves it
	}
	if rerr == nil && json.Valid(head) {
		if msg, err := decodeMessage(head); err == nil {
			if r, ok := msg.(*jsonrpc.Response); ok && r.Error != nil {
				return fmt.Errorf("%w: %s", r.Error, text)
			}
		}
	}
	switch resp.StatusCode {
	case http.StatusNotFound:
		return fmt.Errorf("%s: %w", text, mcp.ErrSessionMissing)
	case http.StatusUnauthorized, http.StatusForbidden: // the sign-in's to handle (Client.failure)
		return errors.Join(errors.New(text), rerr, cerr)
	}
	return errors.Join(fmt.Errorf("%w: %s", errBroken, text), rerr, cerr)
}

// readAnswer reads the answer to the call id off its response, a JSON
// body or an event stream; what the server asks meanwhile is answered on
// goroutines counted by asks.
func (c *Client) readAnswer(ctx context.Context, s *session, resp *http.Response, id jsonrpc.ID, asks *sync.WaitGroup) (json.RawMessage, error) {
	mt, _, err := mime.ParseMediaType(resp.Header.Get("Content-Type"))
	if err != nil {
		mt = "" // as the SDK's baseMediaType: unsupported
	}
	switch mt {
	case "application/json":
		data, err := io.ReadAll(io.LimitReader(resp.Body, maxCapture+1))
		err = errors.Join(err, resp.Body.Close())
		if err != nil {
			return nil, err
		}
		if len(data) > maxCapture {
			return nil, errFrameTooLarge
		}
		msg, err := decodeOne(data)
		if err != nil {
			return nil, fmt.Errorf("%w: decode response: %w", errBroken, err)
		}
		if r, ok := msg.(*jsonrpc.Response); ok && r.ID == id {
			return answerOf(r)
		}
		return nil, errors.New("the server's JSON answer is not the call's")
	case "text/event-stream":
		return c.readStream(ctx, s, resp, id, asks)
	}
	return nil, errors.Join(fmt.Errorf("%w: unsupported content type %q", errBroken, mt), resp.Body.Close())
}

// decodeOne decodes one JSON-RPC message as the SDK does.
func decodeOne(data []byte) (jsonrpc.Message, error) {
	if !json.Valid(data) {
		return jsonrpc.DecodeMessage(data) // its error
	}
	return decodeMessage(data)
}

// answerOf is the result of r, or its error.
func answerOf(r *jsonrpc.Response) (json.RawMessage, error) {
	if r.Error != nil {
		return nil, r.Error
	}
	return bytes.Clone(r.Result), nil
}

// readStream reads the call's event stream until its answer, resuming it
// as the SDK does when it ends first.
func (c *Client) readStream(ctx context.Context, s *session, resp *http.Response, id jsonrpc.ID, asks *sync.WaitGroup) (json.RawMessage, error) {
	st := streamState{}
	for tries, prev := 0, ""; ; {
		// The last event id and retry are each stream's, as the SDK's
		// processStream keeps them: an empty resumed stream ends the call.
		st.lastID, st.retry = "", 0
		raw, answered, err := c.events(ctx, s, resp.Body, id, asks, &st)
		if answered || err != nil {
			c.finish(s, resp.Body)
			return raw, err
		}
		if cerr := resp.Body.Close(); cerr != nil {
			c.log.Debug("mcp: closing a call's stream", "err", cerr)
		}
		if st.lastID == "" {
			return nil, errNoAnswer
		}
		if st.lastID == prev {
			if tries++; tries > maxResumes {
				return nil, fmt.Errorf("%w: %w: exceeded %d retries without progress", errBroken, errNoAnswer, maxResumes)
			}
		} else {
			tries, prev = 0, st.lastID
		}
		if resp, err = c.resume(ctx, s, &st); err != nil {
			return nil, err
		}
	}
}

// streamState is what a call's streams said of their resumption, and the
// server's requests being answered.
type streamState struct {
	lastID string
	retry  time.Duration
	asking chan struct{} // a slot per request answered on a goroutine of its own

	// pending cancels the server's requests being answered, by id, for a
	// notifications/cancelled naming one (as the SDK's connection cancels
	// an incoming request). Written by the stream's reader and by the
	// goroutines answering, hence mu.
	mu      sync.Mutex
	pending map[jsonrpc.ID]context.CancelFunc
}

// answering registers the server's request id for cancellation and
// returns its context and the func that forgets it.
func (st *streamState) answering(ctx context.Context, id jsonrpc.ID) (context.Context, func()) {
	rctx, cancel := context.WithCancel(ctx)
	st.mu.Lock()
	defer st.mu.Unlock()
	if st.pending == nil {
		st.pending = map[jsonrpc.ID]context.CancelFunc{}
	}
	st.pending[id] = cancel
	return rctx, func() {
		st.mu.Lock()
		delete(st.pending, id)
		st.mu.Unlock()
		cancel()
	}
}

// withdrawn cancels the server's request that its notifications/cancelled
// m names, if it is being answered.
func (st *streamState) withdrawn(m *jsonrpc.Request) {
	var p mcp.CancelledParams
	if json.Unmarshal(m.Params, &p) != nil {
		return
	}
	id, err := jsonrpc.MakeID(p.RequestID)
	if err != nil {
		return
	}
	st.mu.Lock()
	cancel := st.pending[id]
	st.mu.Unlock()
	if cancel != nil {
		cancel()
	}
}

// maxAsks bounds the server's requests of one call answered at once; past
// it the stream waits for each answer, which slows a flood to its pace.
const maxAsks = 8

// ask answers a server's request with answer, on a goroutine of its own
// while fewer than maxAsks are.
func (st *streamState) ask(asks *sync.WaitGroup, answer func()) {
	if st.asking == nil {
		st.asking = make(chan struct{}, maxAsks)
	}
	select {
	case st.asking <- struct{}{}:
		asks.Go(func() {
			defer func() { <-st.asking }()
			answer()
		})
	default:
		answer()
	}
}

// resume waits and asks for the rest of a stream after its last event.
func (c *Client) resume(ctx context.Context, s *session, st *streamState) (*http.Response, error) {
	delay := cmpOr(st.retry, resumeDelay)
	t := time.NewTimer(delay)
	select {
	case <-ctx.Done():
		t.Stop()
		return nil, ctx.Err()
	case <-t.C:
	}
	resp, err := c.send(ctx, s, func() (*http.Request, error) {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, s.url, nil)
		if err != nil {
			return nil, err
		}
		s.setHeaders(req.Header)
		req.Header.Set("Last-Event-ID", st.lastID)
		req.Header.Set("Accept", "text/event-stream")
		return req, nil
	})
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, fmt.Errorf("%w: resume the call's stream: %w", errBroken, err) // the SDK fails its connection
	}
	if mt, _, err := mime.ParseMediaType(resp.Header.Get("Content-Type")); err != nil || mt != "text/event-stream" {
		return nil, errors.Join(fmt.Errorf("%w: resume the call's stream: unsupported content type %q", errBroken, resp.Header.Get("Content-Type")), resp.Body.Close())
	}
	return resp, nil
}

// finish ends a stream after its answer without holding the caller: what
// is left of it is read on a goroutine the session owns, within bounds, so
// that its connection is kept (as the SDK drains it on its stream's
// goroutine), and the body closed.
func (c *Client) finish(s *session, body io.ReadCloser) {
	if s.bg.run(func(life context.Context) { c.drain(life, body) }) {
		return
	}
	if err := body.Close(); err != nil {
		c.log.Debug("mcp: closing a call's stream", "err", err)
	}
}

// drain reads the rest of body, at most finishBytes and finishWait, or
// until life ends, and closes it. Its errors are the stream's end: a
// closed body is all they could change.
func (c *Client) drain(life context.Context, body io.ReadCloser) {
	ctx, cancel := context.WithTimeout(life, finishWait)
	defer cancel()
	stop := context.AfterFunc(ctx, func() {
		if err := body.Close(); err != nil {
			c.log.Debug("mcp: closing a call's stream", "err", err)
		}
	})
	n, err := io.CopyN(io.Discard, body, finishBytes)
	stop()
	if cerr := body.Close(); err != nil && err != io.EOF || cerr != nil || n == finishBytes {
		c.log.Debug("mcp: the rest of a call's stream was not read", "err", errors.Join(err, cerr))
	}
}

// events reads the events of one stream until the call's answer (answered)
// or the stream's end.
func (c *Client) events(ctx context.Context, s *session, body io.Reader, id jsonrpc.ID, asks *sync.WaitGroup, st *streamState) (raw json.RawMessage, answered bool, err error) {
	er := eventReader{r: body}
	for {
		ev, err := er.next()
		switch {
		case err == nil:
		case ctx.Err() != nil:
			return nil, false, ctx.Err()
		case errors.Is(err, errFrameTooLarge), errors.Is(err, errBroken):
			return nil, false, err
		default: // the stream ended or broke: the caller resumes it if it can, as the SDK does
			return nil, false, nil
		}
		if ev.id != "" {
			st.lastID = ev.id
		}
		if n, err := strconv.ParseInt(ev.retry, 10, 64); err == nil {
			st.retry = time.Duration(n) * time.Millisecond
		}
		if len(ev.data) == 0 || ev.name != "" && ev.name != "message" {
			continue
		}
		msg, err := decodeOne(ev.data)
		if err != nil {
			return nil, false, fmt.Errorf("%w: failed to decode event: %w", errBroken, err)
		}
		switch m := msg.(type) {
		case *jsonrpc.Response:
			if m.ID == id {
				raw, err := answerOf(m)
				return raw, true, err
			}
		case *jsonrpc.Request:
			switch {
			case m.IsCall():
				rctx, forget := st.answering(ctx, m.ID)
				st.ask(asks, func() {
					defer forget()
					c.answerServer(rctx, ctx, s, m)
				})
			case m.Method == "notifications/cancelled":
				st.withdrawn(m)
			default:
				c.noticed(s, m)
			}
		}
	}
}

// event is one server-sent event.
type event struct {
	name, id, retry string
	data            []byte
}

// eventReader reads server-sent events as the MCP Go SDK's client reads
// them (its scanner's departures from the HTML standard: the GoSDK option),
// an event at most maxCapture bytes.
type eventReader struct {
	r       io.Reader
	sr      ssestream.Reader
	started bool
}

func (e *eventReader) next() (event, error) {
	if !e.started {
		e.sr.Reset(e.r, ssestream.Options{MaxEvent: maxCapture, GoSDK: true})
		e.started = true
	}
	ev, err := e.sr.Next()
	if err != nil {
		return event{}, eventError(err)
	}
	return event{name: eventName(ev.Type), id: string(ev.ID), retry: string(ev.Retry), data: append([]byte(nil), ev.Data...)}, nil
}

// eventError is the pass-through's error for the SSE reader's: a line
// without a colon fails the connection, as the SDK's scanner has it.
func eventError(err error) error {
	var large *ssestream.TooLargeError
	var malformed *ssestream.MalformedError
	switch {
	case errors.As(err, &large):
		return errFrameTooLarge
	case errors.As(err, &malformed):
		return fmt.Errorf("%w: malformed line in SSE stream: %q", errBroken, clip(string(malformed.Line), 100))
	}
	return err
}

// eventName is an event's name, the usual one without an allocation.
func eventName(b []byte) string {
	if string(b) == "message" {
		return "message"
	}
	return string(b)
}

// answerServer answers a request the server sent on a call's stream, as
// the SDK's client answers one (relayRequests, the relay handlers), with
// a POST of its own. rctx is the request's (the server may withdraw it),
// ctx the call's: a withdrawn request is still answered, as the SDK's
// connection answers it.
func (c *Client) answerServer(rctx, ctx context.Context, s *session, m *jsonrpc.Request) {
	res, err := s.serve(rctx, m)
	r := &jsonrpc.Response{ID: m.ID, Error: err}
	if err == nil {
		if r.Result, err = json.Marshal(res); err != nil {
			r = &jsonrpc.Response{ID: m.ID, Error: &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: err.Error()}}
		}
	}
	data, err := jsonrpc.EncodeMessage(r)
	if err == nil {
		wctx, stop := context.WithTimeout(ctx, answerWait)
		defer stop()
		var resp *http.Response
		if resp, err = c.post(wctx, s, data); err == nil {
			err = resp.Body.Close()
		}
	}
	if err != nil {
		c.log.Debug("mcp: an answer to the server could not be sent", "method", m.Method, "err", c.red.err(err))
	}
}

// serve is the answer to the server's request m.
func (s *session) serve(ctx context.Context, m *jsonrpc.Request) (any, error) {
	switch m.Method {
	case "ping":
		return struct{}{}, nil
	case "sampling/createMessage":
		var p mcp.CreateMessageWithToolsParams
		if err := decodeParams(m, &p); err != nil {
			return nil, err
		}
		return s.relaySampling(ctx, &mcp.CreateMessageWithToolsRequest{Params: &p})
	case "elicitation/create":
		var p mcp.ElicitParams
		if err := decodeParams(m, &p); err != nil {
			return nil, err
		}
		return s.relayElicitation(ctx, &mcp.ElicitRequest{Params: &p})
	case "roots/list":
		var p mcp.ListRootsParams
		if err := decodeParams(m, &p); err != nil {
			return nil, err
		}
		return s.relayRoots(ctx, &p)
	}
	return nil, &jsonrpc.Error{Code: jsonrpc.CodeMethodNotFound, Message: fmt.Sprintf("method %q not found", m.Method)}
}

// decodeParams decodes the params of the server's request m into p as
// the SDK's client decodes them (its internal/json): member names matched
// exactly, nesting bounded. (Missing params do not reach here: the
// capture's tee tags each relayed request in its params' _meta.)
func decodeParams(m *jsonrpc.Request, p any) error {
	params := bytes.TrimSpace(m.Params)
	if len(params) == 0 || string(params) == "null" {
		return nil
	}
	err := checkMaxDepth(params)
	if err == nil {
		dec := segjson.NewDecoder(bytes.NewReader(params))
		dec.DontMatchCaseInsensitiveStructFields()
		err = dec.Decode(p)
	}
	if err != nil {
		return &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams,
			Message: fmt.Sprintf("handling '%s': invalid params: unmarshaling %q into a %T: %v", m.Method, params, p, err)}
	}
	return nil
}

// noticed handles a notification the server sent on a call's stream, as
// the SDK's client's handlers would; progress and log messages were
// relayed as they came off the wire (capture.go).
func (c *Client) noticed(s *session, m *jsonrpc.Request) {
	switch m.Method {
	case "notifications/tools/list_changed":
		s.changed.mark(listTools)
	case "notifications/resources/list_changed":
		s.changed.mark(listResources)
	case "notifications/prompts/list_changed":
		s.changed.mark(listPrompts)
	case "notifications/resources/updated":
		var p mcp.ResourceUpdatedNotificationParams
		if json.Unmarshal(m.Params, &p) == nil {
			c.watch.updated(p.URI)
		}
	}
}

// tellCancelled tells the server that the call id was cancelled, for
// reason; life is the session's background's, which its close ends.
func (c *Client) tellCancelled(life context.Context, s *session, id jsonrpc.ID, reason string) {
	params, err := json.Marshal(&mcp.CancelledParams{Reason: reason, RequestID: id.Raw()})
	if err == nil {
		var data []byte
		if data, err = jsonrpc.EncodeMessage(&jsonrpc.Request{Method: "notifications/cancelled", Params: params}); err == nil {
			wctx, stop := context.WithTimeout(life, answerWait)
			defer stop()
			var resp *http.Response
			if resp, err = c.post(wctx, s, data); err == nil {
				err = resp.Body.Close()
			}
		}
	}
	if err != nil {
		c.log.Debug("mcp: notifications/cancelled could not be sent", "err", c.red.err(err))
	}
}
