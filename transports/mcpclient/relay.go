//lint:file-ignore SA1019 sampling, elicitation, roots and logging, deprecated from 2026-07-28 but served through its deprecation window, are what Plexus relays

package mcpclient

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"log/slog"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/plexus-gw/plexus"
)

// How a server's request reaches the caller of the call it belongs to.
//
// A server may ask its client things while a call runs: sampling,
// elicitation, roots; and it may log. Plexus declares those capabilities
// (no more: form elicitation, roots without listChanged, sampling without
// tools) and passes each to the [plexus.Relay] of the call the server is
// working on, which the edge that took the call put in its context. A call
// without one (an HTTP /invoke caller) has nobody to ask, and the server is
// answered so at once.
//
// The SDK hands those requests to its handlers with the connection's
// context, not the call's, and many calls share a session, so the call is
// found where the message comes off the wire:
//
//   - 2026-07-28 (multi round-trip): the server answers the call with its
//     input requests, and Plexus fulfils them with the call's own context,
//     which carries the relay (rounds.go).
//   - Streamable HTTP, earlier versions: the server sends its request on
//     the response stream of the call's POST, whose context carries the
//     relay; the stream's tee ([sseTee]) tags the message.
//   - stdio, earlier versions: the wire does not say which call a request
//     belongs to. When every call in flight on the session has the same
//     relay, that is the one; otherwise nobody is asked (and the server is
//     told Plexus cannot say whose call it is).
//
// A log message is passed on where it comes off the wire, as progress is.
// A tag is a random key that the raw layer writes into the message's
// params._meta (overwriting one the server wrote) and registers for the
// relay; the handler takes it back out. A key the server made up finds no
// relay, and a message inside a call's result is never looked up by key.

// relayMetaKey is the _meta member a tag rides in.
const relayMetaKey = "dev.plexus/relay"

// relayed reports whether method is one a relay carries.
func relayed(method string) bool {
	switch method {
	case plexus.RelaySampling, plexus.RelayElicitation, plexus.RelayRoots, plexus.RelayLog:
		return true
	}
	return false
}

// mentionsRelayed is a cheap test that data may be a message a relay
// carries.
func mentionsRelayed(data []byte) bool {
	for _, m := range []string{plexus.RelaySampling, plexus.RelayElicitation, plexus.RelayRoots, plexus.RelayLog} {
		if bytes.Contains(data, []byte(m)) {
			return true
		}
	}
	return false
}

// relayCapabilities are what Plexus declares to a server: what a relay can
// carry to a host that offers it.
func relayCapabilities() *mcp.ClientCapabilities {
	return &mcp.ClientCapabilities{
		RootsV2:     &mcp.RootCapabilities{},
		Sampling:    &mcp.SamplingCapabilities{},
		Elicitation: &mcp.ElicitationCapabilities{Form: &mcp.FormElicitationCapabilities{}},
	}
}

// relayOptions sets in opts what Plexus declares to a server and the
// handlers of what it asks. The SDK's multi round-trip middleware is
// replaced by Plexus's ([session.answerInputs]), which asks the host for
// its roots too.
func (s *session) relayOptions(opts *mcp.ClientOptions) *mcp.ClientOptions {
	opts.Capabilities = relayCapabilities()
	opts.CreateMessageWithToolsHandler = s.relaySampling
	opts.ElicitationHandler = s.relayElicitation
	opts.MultiRoundTrip = &mcp.MultiRoundTripOptions{Disabled: true}
	return opts
}

// Offerer is a relay that knows what its caller can answer: the edge that
// took the call, which knows what its host declared. A call whose relay is
// an Offerer tells the server so ([declareCaller]).
type Offerer interface {
	// Offers reports whether the caller can answer method (one of the
	// Relay* requests).
	Offers(method string) bool
}

// declareCaller is a sending middleware: a tools/call, prompts/get or
// resources/read whose relay is an [Offerer] carries in its _meta the
// client capabilities of its caller (what Plexus declares, less what the
// caller cannot answer). A server reads those before its session's (the
// SDK's do; a 2026-07-28 server reads nothing else), so that a tool that
// needs, say, sampling refuses a caller that cannot answer it
// (MissingRequiredClientCapability, -32021) instead of relying on Plexus's
// declaration, and a server asks a multi-round-trip caller only what it
// can answer.
func declareCaller(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		o, ok := plexus.RelayFrom(ctx).(Offerer)
		if !ok || method != "tools/call" && method != "prompts/get" && method != "resources/read" {
			return next(ctx, method, req)
		}
		p := req.GetParams()
		meta := p.GetMeta()
		if meta == nil {
			meta = map[string]any{}
		}
		meta[mcp.MetaKeyClientCapabilities] = callerCapabilities(o)
		p.SetMeta(meta)
		return next(ctx, method, req)
	}
}

// callerCapabilities are the capabilities of [relayCapabilities] that o's
// caller can answer, in their per-request (2026-07-28) form.
func callerCapabilities(o Offerer) map[string]any {
	caps := map[string]any{}
	if o.Offers(plexus.RelaySampling) {
		caps["sampling"] = map[string]any{}
	}
	if o.Offers(plexus.RelayElicitation) {
		caps["elicitation"] = map[string]any{"form": map[string]any{}}
	}
	if o.Offers(plexus.RelayRoots) {
		caps["roots"] = map[string]any{}
	}
	return caps
}

// missingCapabilities is the requiredCapabilities of a server's
// MissingRequiredClientCapability error, decoded and encoded again so
// that nothing else the server put in its data travels on; nil when there
// are none.
func missingCapabilities(werr *jsonrpc.Error) json.RawMessage {
	if werr.Code != mcp.CodeMissingRequiredClientCapabilities || len(werr.Data) == 0 {
		return nil
	}
	var d struct {
		Required map[string]json.RawMessage `json:"requiredCapabilities"`
	}
	if json.Unmarshal(werr.Data, &d) != nil || len(d.Required) == 0 {
		return nil
	}
	out := map[string]map[string]any{}
	for k := range d.Required {
		if validCapability(k) {
			out[k] = map[string]any{}
		}
	}
	b, err := json.Marshal(out)
	if err != nil || len(out) == 0 {
		return nil
	}
	return b
}

// validCapability reports whether k names a client capability of MCP.
func validCapability(k string) bool {
	switch k {
	case "sampling", "elicitation", "roots", "experimental", "extensions", "tasks":
		return true
	}
	return false
}

// relays is the relay side of a capture: the relays of the calls in flight
// and the tags handed out. The zero value is ready.
type relays struct {
	log    *slog.Logger // nil: discard
	mu     sync.Mutex
	active map[plexus.Relay]int // calls in flight by relay (nil: none)
	tags   map[string]plexus.Relay
}

// calling records a call in flight with r until the returned func is
// called, which also drops the tags of r not yet taken.
func (rs *relays) calling(r plexus.Relay) func() {
	rs.mu.Lock()
	if rs.active == nil {
		rs.active = map[plexus.Relay]int{}
	}
	rs.active[r]++
	rs.mu.Unlock()
	return func() {
		rs.mu.Lock()
		defer rs.mu.Unlock()
		if rs.active[r]--; rs.active[r] == 0 {
			delete(rs.active, r)
			for k, v := range rs.tags {
				if v == r {
					delete(rs.tags, k)
				}
			}
		}
	}
}

// sole is the relay shared by every call in flight, or nil.
func (rs *relays) sole() plexus.Relay {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	if len(rs.active) != 1 {
		return nil
	}
	for r := range rs.active {
		return r
	}
	return nil
}

// pass handles a message a relay carries as it comes off the wire, and
// returns its params for the SDK. A log message goes to r at once, in the
// order the server sent it (the SDK would hand it to a handler on another
// goroutine, after the call's result may have ended the call); a request
// is tagged for r.
func (rs *relays) pass(r plexus.Relay, method string, params json.RawMessage) json.RawMessage {
	if method != plexus.RelayLog {
		return rs.tag(r, params)
	}
	params = rs.tag(nil, params)
	if r == nil {
		return params
	}
	if err := r.Notify(context.Background(), method, params); err != nil && rs.log != nil {
		rs.log.Debug("mcp: a log message could not be relayed", "err", err)
	}
	return params
}

// tag returns params with the tag of r in its _meta, or without any tag
// when r is nil. Params that are not an object come back as they were.
func (rs *relays) tag(r plexus.Relay, params json.RawMessage) json.RawMessage {
	var p map[string]json.RawMessage
	if len(bytes.TrimSpace(params)) == 0 {
		p = map[string]json.RawMessage{}
	} else if err := json.Unmarshal(params, &p); err != nil || p == nil {
		return params
	}
	var meta map[string]any
	if m := p["_meta"]; len(m) > 0 {
		if err := json.Unmarshal(m, &meta); err != nil {
			return params
		}
	}
	if _, forged := meta[relayMetaKey]; !forged && r == nil {
		return params
	}
	delete(meta, relayMetaKey)
	if r != nil {
		if meta == nil {
			meta = map[string]any{}
		}
		key := rand.Text()
		rs.mu.Lock()
		if rs.tags == nil {
			rs.tags = map[string]plexus.Relay{}
		}
		rs.tags[key] = r
		rs.mu.Unlock()
		meta[relayMetaKey] = key
	}
	if len(meta) == 0 {
		delete(p, "_meta")
	} else if b, err := json.Marshal(meta); err == nil {
		p["_meta"] = b
	}
	out, err := json.Marshal(p)
	if err != nil {
		return params
	}
	return out
}

// take returns the relay the tag in meta names, forgetting the tag, and
// removes it from meta.
func (rs *relays) take(meta mcp.Meta) plexus.Relay {
	key, _ := meta[relayMetaKey].(string)
	delete(meta, relayMetaKey)
	if key == "" {
		return nil
	}
	rs.mu.Lock()
	defer rs.mu.Unlock()
	r := rs.tags[key]
	delete(rs.tags, key)
	return r
}

// tagMessage tags one JSON-RPC message of a response stream when it is a
// request or notification a relay carries; anything else comes back as it
// was.
func (rs *relays) tagMessage(r plexus.Relay, data []byte) []byte {
	if !mentionsRelayed(data) {
		return data // most messages: results, progress
	}
	var msg map[string]json.RawMessage
	if json.Unmarshal(data, &msg) != nil {
		return data
	}
	var method string
	if json.Unmarshal(msg["method"], &method) != nil || !relayed(method) {
		return data
	}
	params := rs.pass(r, method, msg["params"])
	if bytes.Equal(params, msg["params"]) {
		return data
	}
	msg["params"] = params
	out, err := json.Marshal(msg)
	if err != nil {
		return data
	}
	return out
}

// callKey marks the context of a call made through Dispatch, so that a
// request fulfilled with it (multi round-trip) goes to its relay alone.
type callKey struct{}

// relayOf is the relay a server's message belongs to.
func (s *session) relayOf(ctx context.Context, meta mcp.Meta) plexus.Relay {
	if ctx.Value(callKey{}) != nil {
		// The tag the tee set for this call's relay is forgotten, as the
		// SDK's path forgets it (take), though the call's own relay answers.
		s.c.r.take(meta)
		return plexus.RelayFrom(ctx)
	}
	return s.c.r.take(meta)
}

// noCaller is the answer to a server whose request nobody can take.
func noCaller(method string) error {
	return &jsonrpc.Error{Code: jsonrpc.CodeInvalidRequest,
		Message: fmt.Sprintf("Plexus cannot relay %s: the caller of this call cannot answer it (it is not an MCP host session, or several calls share this session)", method)}
}

// ask passes a request to the relay of the call it belongs to and decodes
// the caller's answer into out.
func (s *session) ask(ctx context.Context, method string, meta mcp.Meta, params, out any) error {
	r := s.relayOf(ctx, meta)
	if r == nil {
		return noCaller(method)
	}
	raw, err := json.Marshal(params)
	if err != nil {
		return fmt.Errorf("encode %s: %w", method, err)
	}
	ans, err := r.Request(ctx, method, raw)
	if err != nil {
		return err
	}
	if err := json.Unmarshal(ans, out); err != nil {
		return &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: fmt.Sprintf("the caller's answer to %s is not valid: %v", method, err)}
	}
	return nil
}

func (s *session) relaySampling(ctx context.Context, req *mcp.CreateMessageWithToolsRequest) (*mcp.CreateMessageWithToolsResult, error) {
	var res mcp.CreateMessageWithToolsResult
	if err := s.ask(ctx, plexus.RelaySampling, req.Params.Meta, req.Params, &res); err != nil {
		return nil, err
	}
	return &res, nil
}

func (s *session) relayElicitation(ctx context.Context, req *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
	var res mcp.ElicitResult
	if err := s.ask(ctx, plexus.RelayElicitation, req.Params.Meta, req.Params, &res); err != nil {
		return nil, err
	}
	return &res, nil
}

func (s *session) relayRoots(ctx context.Context, p *mcp.ListRootsParams) (*mcp.ListRootsResult, error) {
	var res mcp.ListRootsResult
	if err := s.ask(ctx, plexus.RelayRoots, p.Meta, p, &res); err != nil {
		return nil, err
	}
	if res.Roots == nil {
		res.Roots = []*mcp.Root{}
	}
	return &res, nil
}

// relayRequests passes the server's requests to the relay before the SDK
// sees them: the SDK's client answers roots/list from its own list, with
// no handler, and checks an elicitation's schema against its own reading
// of the spec, which is the host's to judge (a host that takes a schema
// the SDK does not would never be asked). Input requests of a
// multi-round-trip call reach the same handlers through rounds.go.
func (s *session) relayRequests(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		switch p := req.GetParams().(type) {
		case *mcp.ListRootsParams:
			if p == nil {
				p = &mcp.ListRootsParams{}
			}
			return s.relayRoots(ctx, p)
		case *mcp.ElicitParams:
			if p == nil {
				p = &mcp.ElicitParams{}
			}
			return s.relayElicitation(ctx, &mcp.ElicitRequest{Params: p})
		case *mcp.CreateMessageWithToolsParams:
			if p != nil {
				return s.relaySampling(ctx, &mcp.CreateMessageWithToolsRequest{Params: p})
			}
		}
		return next(ctx, method, req)
	}
}

// sessionless is the first protocol version whose requests carry their
// own log level.
const sessionless = "2026-07-28"

// askAllLogs asks a server that logs, on a session, for every message: each
// goes to the caller of the call it came with, whose host filters it at the
// level it chose. (A sessionless server is asked per call: [logEverything].)
func (c *Client) askAllLogs(ctx context.Context, s *session) {
	if s.caps.Logging == nil || s.pv >= sessionless {
		return
	}
	if err := s.cs.SetLoggingLevel(ctx, &mcp.SetLoggingLevelParams{Level: "debug"}); err != nil {
		c.log.Warn("mcp: the server refused logging/setLevel; its log messages are not relayed", "err", c.red.err(err))
	}
}

// logEverything asks a sessionless server for every log message of a call
// that has a relay to pass them to.
func logEverything(ctx context.Context, meta *mcp.Meta) {
	if plexus.RelayFrom(ctx) == nil {
		return
	}
	if *meta == nil {
		*meta = mcp.Meta{}
	}
	(*meta)[mcp.MetaKeyLogLevel] = "debug"
}
