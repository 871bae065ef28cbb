package mcpclient

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/plexus-gw/plexus"
)

// Transport is the mcp transport: it routes each entry to the [Client] of
// its source and makes the call on that client's session. It is safe for
// concurrent use; many calls share one session.
type Transport struct {
	mu      sync.RWMutex
	clients map[string]*Client // by source id; guarded by mu
}

var _ plexus.Transport = (*Transport)(nil)

// NewTransport returns a transport with no client attached.
func NewTransport() *Transport { return &Transport{clients: map[string]*Client{}} }

// Kind returns [plexus.TransportMCP].
func (*Transport) Kind() plexus.TransportKind { return plexus.TransportMCP }

// Attach routes the entries of c.ID() to c, replacing a client attached
// under that id before.
func (t *Transport) Attach(c *Client) {
	t.mu.Lock()
	t.clients[c.ID()] = c
	t.mu.Unlock()
}

// Detach stops routing the entries of sourceID.
func (t *Transport) Detach(sourceID string) {
	t.mu.Lock()
	delete(t.clients, sourceID)
	t.mu.Unlock()
}

// Dispatch calls the entry's primitive on its server: tools/call with the
// input as arguments, resources/read of the URI (of a template, the URI it
// expands to from the input), prompts/get with the input as the prompt's
// string arguments. It sets a progress token on every call and relays the
// server's notifications/progress for it through dc.Report; when ctx ends
// first, the SDK tells the server notifications/cancelled.
//
// The server's result is returned byte for byte in MCPResult (a skill's,
// rebuilt from its verified content only: skills.go), with OK true; for
// a tool, Data is its structuredContent when it has one. A tool result
// with isError true is OK false with mcp_tool_error, MCPResult still
// holding it. Every failure is a result (see the package doc for the
// table): source_unavailable when no session is up, transport_error for a
// JSON-RPC error (the server's message, never the input), a cancelled or
// timed-out call, or a session lost during the call.
func (t *Transport) Dispatch(ctx context.Context, entry plexus.Entry, input map[string]any, dc plexus.DispatchContext) plexus.TransportResult {
	t.mu.RLock()
	c := t.clients[entry.Source]
	t.mu.RUnlock()
	var res plexus.TransportResult
	if c == nil {
		res.Error = plexus.Errorf(plexus.CodeSourceUnavailable, "no MCP server is attached for source %s", entry.Source)
	} else {
		res = c.dispatch(ctx, entry, input, dc)
	}
	if res.Error != nil {
		res.Error.CapabilityID = entry.ID
	}
	return res
}

func (c *Client) dispatch(ctx context.Context, entry plexus.Entry, input map[string]any, dc plexus.DispatchContext) plexus.TransportResult {
	fail := func(e *plexus.Error) plexus.TransportResult { return plexus.TransportResult{Error: e} }
	var rt route
	if err := json.Unmarshal(entry.Route, &rt); err != nil || rt.Primitive == "" {
		return fail(plexus.Errorf(plexus.CodeTransportError, "the entry has no valid mcp route"))
	}
	if err := ctx.Err(); err != nil {
		return fail(c.ctxError(err, entry.ID, false))
	}
	var sr *skillRead // a skill is loaded by reading one of its files, verified (skills.go)
	if rt.Primitive == PrimitiveSkill {
		var perr *plexus.Error
		if sr, perr = c.skillRead(entry, input); perr != nil {
			return fail(perr)
		}
		rt, input = route{Primitive: PrimitiveResource, URI: sr.file.uri}, nil
	}
	s, why := c.current()
	if s == nil {
		return fail(plexus.Errorf(plexus.CodeSourceUnavailable, "the MCP server %s is not connected: %s", c.name, why))
	}

	token := "plexus-" + strconv.FormatUint(c.tokens.Add(1), 10)
	defer s.c.route(token, dc.Report)()
	defer s.c.r.calling(plexus.RelayFrom(ctx))()
	if rt.Primitive == PrimitiveTool {
		if conn := passthrough(s); conn != nil {
			raw, err := s.callRounds(ctx, toolParams(ctx, rt.Name, input, token), conn.callTool)
			return c.passTool(ctx, s, raw, err, entry.ID)
		}
		if passesHTTP(s) {
			raw, err := s.callRounds(ctx, toolParams(ctx, rt.Name, input, token), func(ctx context.Context, p toolCallParams) (json.RawMessage, error) {
				return c.callToolHTTP(ctx, s, p)
			})
			return c.passTool(ctx, s, raw, err, entry.ID)
		}
	}
	return c.viaSDK(ctx, s, rt, sr, input, token, entry.ID)
}

// passTool is the result of a tools/call Plexus sent itself
// (passthrough.go, passhttp.go), which answered raw or failed with err.
func (c *Client) passTool(ctx context.Context, s *session, raw json.RawMessage, err error, id string) plexus.TransportResult {
	if err != nil {
		return plexus.TransportResult{Error: c.failure(ctx, s, err, "tools/call", id)}
	}
	res, err := c.toolResult(raw)
	if err != nil {
		return plexus.TransportResult{Error: c.callError(ctx, err, "tools/call", id)}
	}
	return res
}

// viaSDK makes the call rt names through the SDK's session, its raw result
// captured (capture.go); sr is the skill whose file it reads, if any.
func (c *Client) viaSDK(ctx context.Context, s *session, rt route, sr *skillRead, input map[string]any, token, id string) plexus.TransportResult {
	sl := &slot{}
	defer s.c.done(sl)
	cctx := context.WithValue(withSlot(ctx, sl), callKey{}, true)
	typed, method, perr, err := request(cctx, s.cs, rt, input, token)
	if perr != nil {
		return plexus.TransportResult{Error: perr}
	}
	if err != nil {
		return plexus.TransportResult{Error: c.failure(ctx, s, err, method, id)}
	}
	res := c.result(rt, s.rawResult(sl, typed), typed)
	if sr != nil {
		return c.verified(sr, res, typed)
	}
	return res
}

// failure is the error of a call on s that failed with err: a server that
// wants a sign-in, or no longer answers, is unavailable; anything else is
// the call's own error ([Client.callError]).
func (c *Client) failure(ctx context.Context, s *session, err error, method, id string) *plexus.Error {
	if ctx.Err() == nil && c.needsSignIn(err) {
		c.lostToSignIn(s)
		return plexus.Errorf(plexus.CodeSourceUnavailable, "the MCP server %s %s", c.name, c.signInDetail())
	}
	if ctx.Err() == nil && !answered(err) && c.unreachable(s, err) {
		return plexus.Errorf(plexus.CodeSourceUnavailable, "the MCP server %s does not answer; reconnecting", c.name)
	}
	return c.callError(ctx, err, method, id)
}

// request sends the call rt names with input on cs, its progress reported
// under token, and answers the SDK's typed result and the method it called.
// An input the route cannot take is refused (perr) before anything is sent.
func request(ctx context.Context, cs *mcp.ClientSession, rt route, input map[string]any, token string) (typed any, method string, perr *plexus.Error, err error) {
	switch rt.Primitive {
	case PrimitiveTool:
		params := &mcp.CallToolParams{Name: rt.Name, Arguments: input}
		params.SetProgressToken(token)
		logEverything(ctx, &params.Meta)
		typed, err = cs.CallTool(ctx, params)
		return typed, "tools/call", nil, err
	case PrimitiveResource, PrimitiveResourceTemplate:
		uri := rt.URI
		if rt.Primitive == PrimitiveResourceTemplate {
			tmpl, terr := parseTemplate(rt.Template)
			if terr != nil {
				return nil, "", plexus.Errorf(plexus.CodeTransportError, "the entry's resource template cannot be expanded: %v", terr), nil
			}
			if uri, terr = tmpl.expand(input); terr != nil {
				return nil, "", plexus.Errorf(plexus.CodeSchemaValidationFailed, "%v", terr), nil
			}
		}
		params := &mcp.ReadResourceParams{URI: uri}
		params.SetProgressToken(token)
		typed, err = cs.ReadResource(ctx, params)
		return typed, "resources/read", nil, err
	case PrimitivePrompt:
		args := make(map[string]string, len(input))
		for k, v := range input {
			str, ok := v.(string)
			if !ok {
				return nil, "", plexus.Errorf(plexus.CodeSchemaValidationFailed, "input.%s must be a string: prompt arguments are strings", k), nil
			}
			args[k] = str
		}
		params := &mcp.GetPromptParams{Name: rt.Name, Arguments: args}
		params.SetProgressToken(token)
		typed, err = cs.GetPrompt(ctx, params)
		return typed, "prompts/get", nil, err
	}
	return nil, "", plexus.Errorf(plexus.CodeTransportError, "the entry's mcp route names an unknown primitive %q", rt.Primitive), nil
}

// result is the server's answer raw (typed, as the SDK decoded it) as a
// result: byte for byte in MCPResult; for a tool, its structuredContent as
// Data, and isError as mcp_tool_error with the first text, redacted.
func (c *Client) result(rt route, raw json.RawMessage, typed any) plexus.TransportResult {
	res := plexus.TransportResult{OK: true, MCPResult: raw}
	if rt.Primitive != PrimitiveTool {
		return res
	}
	tr, _ := typed.(*mcp.CallToolResult) // decoded by the SDK from these bytes
	if tr == nil {
		return res
	}
	if tr.IsError {
		msg := "the tool reported an error"
		for _, b := range tr.Content {
			if tc, ok := b.(*mcp.TextContent); ok && strings.TrimSpace(tc.Text) != "" {
				msg += ": " + clip(c.red.string(tc.Text), 500)
				break
			}
		}
		return plexus.TransportResult{MCPResult: raw, Error: plexus.Errorf(plexus.CodeMCPToolError, "%s", msg)}
	}
	if tr.StructuredContent != nil {
		res.Data = structuredContent(raw)
	}
	return res
}

// structuredContent is raw's structuredContent, read with the exact key
// (the last, if repeated) as the SDK reads it; nil if there is none.
func structuredContent(raw json.RawMessage) any {
	var sc json.RawMessage
	if members(raw, func(key, val []byte) {
		if string(key) == "structuredContent" {
			sc = val
		}
	}) != nil || nonNull(sc) == nil {
		return nil
	}
	return sc
}

// toolResult is the result of a tools/call as the server wrote it (raw),
// as [Client.result] makes it of the SDK's decoding: byte for byte in
// MCPResult, its structuredContent as Data, and isError as mcp_tool_error
// with the first text, redacted. A plain result (passthrough.go's
// readPlain: text blocks only, members the SDK reads without a doubt) is
// read in place; any other is decoded by the SDK into its CallToolResult
// as its client does, and what it refuses is refused with the error its
// call gave. So a result that reaches a host has passed the SDK's decoder.
func (c *Client) toolResult(raw json.RawMessage) (plexus.TransportResult, error) {
	p, ok := readPlain(raw)
	if !ok {
		var typed mcp.CallToolResult
		if err := json.Unmarshal(raw, &typed); err != nil { // its UnmarshalJSON, the SDK's own decoder
			return plexus.TransportResult{}, fmt.Errorf("calling %q: %w", "tools/call", err) // as the SDK's call wraps it
		}
		return c.result(route{Primitive: PrimitiveTool}, raw, &typed), nil
	}
	if p.isError {
		msg := "the tool reported an error"
		if text := p.firstText(); text != "" {
			msg += ": " + clip(c.red.string(text), 500)
		}
		return plexus.TransportResult{MCPResult: raw, Error: plexus.Errorf(plexus.CodeMCPToolError, "%s", msg)}, nil
	}
	res := plexus.TransportResult{OK: true, MCPResult: raw}
	if sc := nonNull(p.structured); sc != nil {
		res.Data = sc // never a nil RawMessage in the interface
	}
	return res, nil
}

// callError maps a failed SDK call to its code: the one table between the
// MCP wire and the protocol's codes.
//
//	the caller's context ended        transport_error ("cancelled", "timed out")
//	a JSON-RPC error response         transport_error with the server's message; detail {"code": n}
//	the session ended during the call transport_error
//	anything else                     transport_error
func (c *Client) callError(ctx context.Context, err error, method, id string) *plexus.Error {
	if cerr := ctx.Err(); cerr != nil {
		return c.ctxError(cerr, id, true)
	}
	var werr *jsonrpc.Error
	switch {
	case errors.As(err, &werr):
		msg := strings.TrimSpace(c.red.string(werr.Message))
		if msg == "" {
			msg = "the server answered with an error"
		}
		e := plexus.Errorf(plexus.CodeTransportError, "MCP server %s: %s: %s", c.name, method, clip(msg, 1000))
		e.Detail = map[string]any{"code": werr.Code}
		if caps := missingCapabilities(werr); caps != nil {
			e.Detail = map[string]any{"code": werr.Code, "requiredCapabilities": caps}
		}
		return e
	case errors.Is(err, mcp.ErrConnectionClosed) || errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF):
		return plexus.WrapError(plexus.CodeTransportError, err, fmt.Sprintf("the session with the MCP server %s ended during the call", c.name))
	}
	return &plexus.Error{Code: plexus.CodeTransportError, Message: fmt.Sprintf("MCP server %s: %s failed: %s", c.name, method, clip(c.red.err(err), 1000))}
}

// pingTimeout bounds the liveness check after a failed call.
const pingTimeout = 2 * time.Second

// answered says whether a failed request got a JSON-RPC error reply: the
// server is there and said no, so its session is alive and its error is
// the call's answer. The SDK also dresses its own local failures as
// JSON-RPC errors: those are no answer.
func answered(err error) bool {
	var werr *jsonrpc.Error
	if !errors.As(err, &werr) {
		return false
	}
	return werr.Code != sdkRejected && werr.Code != sdkClientClosing
}

// unsent says whether a failed request never got an HTTP reply: the
// SDK wraps the HTTP client's own error (a refused connection, a reset),
// where a reply with a failing status carries no *url.Error.
func unsent(err error) bool {
	var uerr *url.Error
	return errors.As(err, &uerr)
}

// The codes of the SDK's local errors (its internal jsonrpc2.ErrRejected,
// for an HTTP 5xx or 429 without a JSON-RPC body, and ErrClientClosing),
// which never came from a server. A failed HTTP request is ErrRejected too.
const (
	sdkClientClosing = -32003
	sdkRejected      = -32005
)

// unreachable checks, after a call failed with err and no JSON-RPC answer,
// whether an HTTP server is still there. A Streamable HTTP session has no
// connection whose loss would show: a server that went away fails each
// call (the SDK rejects it) while the session looks alive until the next
// keep-alive ping. So a failed call pings at once, and a server that does
// not answer at all has its session closed: Run marks the source
// unavailable and reconnects with backoff. Any reply to the ping, an error
// reply included, is an answer. From 2026-07-28 ping is a removed method
// and there is no session to keep alive: the failed request was itself the
// probe, and only one that got no HTTP reply at all means the server is
// gone. A stdio session's loss shows by itself (the process exits).
func (c *Client) unreachable(s *session, err error) bool {
	if s.cmd != nil {
		return false
	}
	if s.pv >= sessionless {
		if !unsent(err) {
			return false
		}
	} else {
		pctx, cancel := context.WithTimeout(context.Background(), pingTimeout)
		defer cancel()
		if perr := s.cs.Ping(pctx, nil); perr == nil || answered(perr) {
			return false
		}
	}
	if cerr := s.cs.Close(); cerr != nil {
		c.log.Debug("mcp: closing a session that does not answer", "err", cerr)
	}
	return true // Run sees the session lost
}

// ctxError is the failure of a call whose context ended; sent says whether
// the request had gone out (and so the server was told to cancel it).
func (c *Client) ctxError(err error, id string, sent bool) *plexus.Error {
	what := "was cancelled"
	if errors.Is(err, context.DeadlineExceeded) {
		what = "timed out"
	}
	if !sent {
		return plexus.WrapError(plexus.CodeTransportError, err, fmt.Sprintf("the call to %s %s before it was made", id, what))
	}
	return plexus.WrapError(plexus.CodeTransportError, err, fmt.Sprintf("the call to %s %s; the MCP server was told to cancel it", id, what))
}

// clip cuts s to at most n bytes of valid UTF-8.
func clip(s string, n int) string {
	if len(s) > n {
		s = s[:n] + "…"
	}
	return strings.ToValidUTF8(s, "\uFFFD")
}
