//lint:file-ignore SA1019 sampling, elicitation and roots, deprecated from 2026-07-28 but served through its deprecation window, are what Plexus relays

package mcpclient

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/plexus-gw/plexus"
	"golang.org/x/sync/errgroup"
)

// A call whose result asks for input (SEP-2322: inputRequests and a
// requestState) is answered as the SDK's client does on every protocol
// version (its multi round-trip middleware): each input request goes to
// the handler the SDK would call (the relay's, with the call's context, so
// to the call's host), and the call is sent again with the answers and the
// server's state, up to the SDK's bounds. That holds for a tools/call
// Plexus sends itself (passthrough.go, passhttp.go) and, in place of the
// SDK's own middleware ([session.answerInputs]), for every call on the
// SDK's path (prompts/get, resources/read, a sessionless session's
// tools/call). A server on a session asks this of Plexus, for instance,
// when its SDK bridged the first round of a multi-round tool in-band and
// the tool asks again.
//
// Two differences are deliberate. A roots/list input request reaches the
// host, as one sent in-band does (relayRequests): the SDK's client would
// answer it from its own list, which Plexus leaves empty. (A call with no
// host, an /invoke caller's, is answered that empty list: it has no roots,
// and a refusal, which in band lets the server decide, would here fail
// the call. A host that refuses fails it.) And the SDK
// checks an elicitation's schema against its own reading of the spec
// before its handler is called; here the host judges it, as it does for
// an elicitation sent in-band. The host's accepted content is checked
// against the schema, and its defaults applied, as the SDK does.

// The SDK's bounds (mcp/mrtr.go).
const (
	maxRounds     = 10 // calls in all
	maxShedRounds = 3  // results asking for no input (the server sheds load)
)

// callRounds sends a tools/call with params through send until its result
// asks for no more input.
func (s *session) callRounds(ctx context.Context, params toolCallParams, send func(context.Context, toolCallParams) (json.RawMessage, error)) (json.RawMessage, error) {
	return inRounds(ctx, s, func(ctx context.Context, answers mcp.InputResponseMap, state string) (json.RawMessage, error) {
		params.InputResponses, params.RequestState = answers, state
		raw, err := send(ctx, params)
		if err == nil {
			err = sdkReadable(raw) // before inputRequired and toolResult hand it to the SDK's decoder
		}
		if err != nil {
			return nil, err
		}
		return raw, nil
	}, inputRequired)
}

// answerInputs is a sending middleware: it answers the input requests of
// a tools/call, prompts/get or resources/read sent through the SDK's
// session as callRounds does, in place of the SDK's middleware, which
// relayOptions disables.
func (s *session) answerInputs(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		if method != "tools/call" && method != "prompts/get" && method != "resources/read" {
			return next(ctx, method, req)
		}
		return inRounds(ctx, s, func(ctx context.Context, answers mcp.InputResponseMap, state string) (mcp.Result, error) {
			if answers != nil {
				again, err := retryRequest(req, answers, state)
				if err != nil {
					return nil, err
				}
				req = again
			}
			return next(ctx, method, req)
		}, resultInputs)
	}
}

// inRounds sends a call through send until its answer asks for no more
// input (asks reads what it asks): the first time with no answers, then
// with the answers to the last round's input requests and the server's
// state.
func inRounds[R any](ctx context.Context, s *session, send func(context.Context, mcp.InputResponseMap, string) (R, error), asks func(R) (mcp.InputRequestMap, string)) (R, error) {
	var none R
	var answers mcp.InputResponseMap
	var state string
	shed := 0
	for round := 1; ; round++ {
		res, err := send(ctx, answers, state)
		if err != nil {
			return res, err
		}
		reqs, st := asks(res)
		if reqs == nil {
			return res, nil
		}
		if len(reqs) == 0 {
			shed++
		}
		if shed >= maxShedRounds {
			return none, fmt.Errorf("multi-round-trip: exceeded maximum load-shedding retries (%d)", maxShedRounds)
		}
		if round >= maxRounds {
			return none, fmt.Errorf("multi-round-trip: exceeded maximum retries (%d)", maxRounds)
		}
		// The relay handlers take the call's relay from ctx (relayOf).
		if answers, err = s.fulfil(context.WithValue(ctx, callKey{}, true), reqs); err != nil {
			return none, err
		}
		state = st
	}
}

// resultInputs is the input requests and state of a result the SDK
// decoded; nil for one that asks for none.
func resultInputs(res mcp.Result) (mcp.InputRequestMap, string) {
	switch r := res.(type) {
	case *mcp.CallToolResult:
		if r != nil {
			return r.InputRequests, r.RequestState
		}
	case *mcp.GetPromptResult:
		if r != nil {
			return r.InputRequests, r.RequestState
		}
	case *mcp.ReadResourceResult:
		if r != nil {
			return r.InputRequests, r.RequestState
		}
	}
	return nil, ""
}

// retryRequest is req sent again with answers and state, its params a
// shallow copy of req's (the caller's own are left as they were), as the
// SDK's middleware makes it.
func retryRequest(req mcp.Request, answers mcp.InputResponseMap, state string) (mcp.Request, error) {
	var params mcp.Params
	switch p := req.GetParams().(type) {
	case *mcp.CallToolParams:
		cp := *p
		cp.InputResponses, cp.RequestState = answers, state
		params = &cp
	case *mcp.CallToolParamsRaw:
		cp := *p
		cp.InputResponses, cp.RequestState = answers, state
		params = &cp
	case *mcp.GetPromptParams:
		cp := *p
		cp.InputResponses, cp.RequestState = answers, state
		params = &cp
	case *mcp.ReadResourceParams:
		cp := *p
		cp.InputResponses, cp.RequestState = answers, state
		params = &cp
	default:
		return nil, fmt.Errorf("multi-round-trip: unsupported params type %T", p)
	}
	cs, ok := req.GetSession().(*mcp.ClientSession)
	if !ok {
		return nil, fmt.Errorf("multi-round-trip: unsupported session type %T", req.GetSession())
	}
	return &mcp.ClientRequest[mcp.Params]{Session: cs, Params: params}, nil
}

// inputRequired is the input requests and state of a result that asks for
// input, read as the SDK reads them; nil for any other result (one the
// SDK cannot read fails where the result is read: toolResult) and for one
// it must not be handed ([sdkReadable]).
func inputRequired(raw json.RawMessage) (mcp.InputRequestMap, string) {
	vals := inputRequestsValues(raw)
	if len(vals) == 0 || nullInputRequest(vals) != nil {
		return nil, "" // most results, read no further
	}
	var res mcp.CallToolResult
	if json.Unmarshal(raw, &res) != nil { // its UnmarshalJSON, the SDK's own decoder
		return nil, ""
	}
	return res.InputRequests, res.RequestState
}

// errNullInputRequest is the error of a result with an input request that
// is null, which the SDK's decoder panics on (v1.8.0: see docs/mcp.md).
var errNullInputRequest = errors.New("the server's result has an input request that is null (a member of inputRequests), which Plexus cannot read")

// sdkReadable is nil for a result the SDK's decoder can be handed without
// panicking, errNullInputRequest for one it panics on: its
// InputRequestMap.UnmarshalJSON (v1.8.0) dereferences the value of each
// member of inputRequests, which is nil for a member that is null. Every
// result a server sends is checked before the SDK decodes it: on the
// pass-through (callRounds) and, for the SDK's path, as it comes off the
// wire (stdioConn.Read; over Streamable HTTP, the response body's tee:
// refusedAnswer). A panic the SDK's decoding raises all the same fails its
// call alone ([Client.recoverDecoding]).
func sdkReadable(raw []byte) error {
	return nullInputRequest(inputRequestsValues(raw))
}

// inputRequestsValues is the raw value of each member of the result raw
// whose key is inputRequests as the SDK's decoder reads keys (exactly,
// escapes undone; it may be repeated). Most results are passed over with
// no scan: an escape spells a letter only as \u.
func inputRequestsValues(raw []byte) [][]byte {
	if !bytes.Contains(raw, []byte("inputRequests")) && !bytes.Contains(raw, []byte(`\u`)) {
		return nil
	}
	var vals [][]byte
	if err := members(raw, func(key, val []byte) {
		if string(key) == "inputRequests" {
			vals = append(vals, val)
		}
	}); err != nil {
		return nil // not an object: the SDK's decoder refuses it
	}
	return vals
}

// nullInputRequest is errNullInputRequest when one of the inputRequests
// values vals (the SDK's decoder reads each, when the key is repeated) is
// an object with a member that is null: the last of that name, as the
// SDK's decoder fills its map.
func nullInputRequest(vals [][]byte) error {
	for _, v := range vals {
		if i := skipSpace(v, 0); i >= len(v) || v[i] != '{' {
			continue // null or no object: the SDK reads or refuses it
		}
		null := map[string]bool{}
		if err := members(v, func(k, m []byte) { null[string(k)] = string(m) == "null" }); err != nil {
			return errNullInputRequest
		}
		for _, n := range null {
			if n {
				return errNullInputRequest
			}
		}
	}
	return nil
}

// fulfil answers the input requests reqs at once, as the SDK's client
// does; the first that fails fails them all.
func (s *session) fulfil(ctx context.Context, reqs mcp.InputRequestMap) (mcp.InputResponseMap, error) {
	g, gctx := errgroup.WithContext(ctx)
	var mu sync.Mutex // guards answers
	answers := make(mcp.InputResponseMap, len(reqs))
	for k, ir := range reqs {
		g.Go(func() error {
			r, err := s.fulfilOne(gctx, ir)
			if err != nil {
				return fmt.Errorf("fulfilling input request %q: %w", k, err)
			}
			mu.Lock()
			answers[k] = r
			mu.Unlock()
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return nil, fmt.Errorf("multi round-trip: %w", err)
	}
	return answers, nil
}

// fulfilOne answers one input request with the handler the SDK's client
// calls for it.
func (s *session) fulfilOne(ctx context.Context, ir mcp.InputRequest) (mcp.InputResponse, error) {
	switch p := ir.(type) {
	case *mcp.ElicitParams:
		return s.elicit(ctx, p)
	case *mcp.CreateMessageWithToolsParams:
		return s.relaySampling(ctx, &mcp.CreateMessageWithToolsRequest{Params: p})
	case *mcp.ListRootsParams:
		if plexus.RelayFrom(ctx) == nil {
			// A caller with no host to ask (an /invoke agent) has no
			// roots to offer, and says so, as the SDK's client does. In
			// band it is refused (noCaller) and the server decides what
			// its call answers; here a refusal could only fail the call.
			return &mcp.ListRootsResult{Roots: []*mcp.Root{}}, nil
		}
		return s.relayRoots(ctx, p)
	}
	return nil, fmt.Errorf("unknown input request type: %T", ir)
}

// elicit passes an elicitation input request to the relay, with the SDK
// client's checks of its mode and of the host's accepted content.
func (s *session) elicit(ctx context.Context, p *mcp.ElicitParams) (*mcp.ElicitResult, error) {
	invalid := func(format string, args ...any) error {
		return &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: fmt.Sprintf(format, args...)}
	}
	switch p.Mode {
	case "", "form":
		if p.URL != "" {
			return nil, invalid("URL must not be set for form elicitation")
		}
	case "url":
		if p.RequestedSchema != nil {
			return nil, invalid("requestedSchema must not be set for URL elicitation")
		}
		if p.URL == "" {
			return nil, invalid("URL must be set for URL elicitation")
		}
		return s.relayElicitation(ctx, &mcp.ElicitRequest{Params: p})
	default:
		return nil, invalid("unsupported elicitation mode: %q", p.Mode)
	}
	schema, err := elicitSchema(p.RequestedSchema)
	if err != nil {
		return nil, invalid("%v", err)
	}
	res, err := s.relayElicitation(ctx, &mcp.ElicitRequest{Params: p})
	if err != nil || res.Action != "accept" || schema == nil || res.Content == nil {
		return res, err
	}
	resolved, err := schema.Resolve(nil)
	if err != nil {
		return nil, invalid("failed to resolve requested schema: %v", err)
	}
	if err := resolved.Validate(res.Content); err != nil {
		return nil, invalid("elicitation result content does not match requested schema: %v", err)
	}
	if err := resolved.ApplyDefaults(&res.Content); err != nil {
		return nil, invalid("failed to apply schema defaults to elicitation result: %v", err)
	}
	return res, nil
}

// elicitSchema is an elicitation's requested schema, an object's or none.
func elicitSchema(wire any) (*jsonschema.Schema, error) {
	if wire == nil {
		return nil, nil
	}
	b, err := json.Marshal(wire)
	if err != nil {
		return nil, err
	}
	var schema *jsonschema.Schema
	if err := json.Unmarshal(b, &schema); err != nil {
		return nil, err
	}
	if schema != nil && schema.Type != "" && schema.Type != "object" {
		return nil, fmt.Errorf("elicit schema must be of type 'object', got %q", schema.Type)
	}
	return schema, nil
}
