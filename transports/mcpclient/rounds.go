//lint:file-ignore SA1019 sampling, elicitation and roots, deprecated from 2026-07-28 but served through its deprecation window, are what Plexus relays

package mcpclient

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"sync"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"golang.org/x/sync/errgroup"
)

// A tools/call Plexus sends itself (passthrough.go, passhttp.go) answers a
// result that asks for input (SEP-2322: inputRequests and a requestState)
// as the SDK's client does on every protocol version (its multi round-trip
// middleware): each input request goes to the handler the SDK would call
// (the relay's, with the call's context, so to the call's host), and the
// call is sent again with the answers and the server's state, up to the
// SDK's bounds. A server on a session asks this of Plexus, for instance,
// when its SDK bridged the first round of a multi-round tool in-band and
// the tool asks again.
//
// One difference is deliberate: the SDK checks an elicitation's schema
// against its own reading of the spec before its handler is called; here
// the host judges it, as it does for an elicitation sent in-band
// (relayRequests). The host's accepted content is checked against the
// schema, and its defaults applied, as the SDK does.

// The SDK's bounds (mcp/mrtr.go).
const (
	maxRounds     = 10 // calls in all
	maxShedRounds = 3  // results asking for no input (the server sheds load)
)

// callRounds sends a tools/call with params through send until its result
// asks for no more input.
func (s *session) callRounds(ctx context.Context, params toolCallParams, send func(context.Context, toolCallParams) (json.RawMessage, error)) (json.RawMessage, error) {
	shed := 0
	for round := 1; ; round++ {
		raw, err := send(ctx, params)
		if err != nil {
			return nil, err
		}
		reqs, state := inputRequired(raw)
		if reqs == nil {
			return raw, nil
		}
		if len(reqs) == 0 {
			shed++
		}
		if shed >= maxShedRounds {
			return nil, fmt.Errorf("multi-round-trip: exceeded maximum load-shedding retries (%d)", maxShedRounds)
		}
		if round >= maxRounds {
			return nil, fmt.Errorf("multi-round-trip: exceeded maximum retries (%d)", maxRounds)
		}
		// The relay handlers take the call's relay from ctx (relayOf).
		answers, err := s.fulfil(context.WithValue(ctx, callKey{}, true), reqs)
		if err != nil {
			return nil, err
		}
		params.InputResponses, params.RequestState = answers, state
	}
}

// inputRequired is the input requests and state of a result that asks for
// input, read as the SDK reads them; nil for any other result (one the
// SDK cannot read fails where the result is read: toolResult).
func inputRequired(raw json.RawMessage) (mcp.InputRequestMap, string) {
	if !bytes.Contains(raw, []byte(`"inputRequests"`)) {
		return nil, "" // most results, read no further
	}
	if _, plain := readPlain(raw); plain {
		return nil, ""
	}
	var res mcp.CallToolResult
	if json.Unmarshal(raw, &res) != nil { // its UnmarshalJSON, the SDK's own decoder
		return nil, ""
	}
	return res.InputRequests, res.RequestState
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
		// The SDK's client answers from its own list, which Plexus leaves
		// empty: the host is not asked.
		return &mcp.ListRootsResult{Roots: []*mcp.Root{}}, nil
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
