package plexus

import (
	"context"
	"encoding/json"
)

// The requests and notifications an MCP server may send its client while
// a call runs, which a [Relay] carries back to the caller of that call.
const (
	RelaySampling    = "sampling/createMessage"
	RelayElicitation = "elicitation/create"
	RelayRoots       = "roots/list"
	RelayLog         = "notifications/message"
)

// Relay is the way back to the caller of one call in flight, for what the
// server behind the call asks of that caller while it runs: an MCP
// server's sampling, elicitation and roots requests and its log messages.
//
// An edge whose caller can answer (the MCP front door, for a host session)
// puts a Relay in the call's context with [WithRelay]; the gateway passes
// the context through unchanged; a transport whose server asks finds it
// with [RelayFrom]. A call without one (an HTTP /invoke caller) has nobody
// to ask: the transport answers the server that the caller cannot. The
// core never looks inside: what goes through a Relay is the server's
// business with the caller, and an answer through it is never an approval.
type Relay interface {
	// Request asks the caller. method is one of the Relay* requests, params
	// and the answer their JSON. An error says the caller could not or would
	// not answer; it is passed to the server as the request's error.
	Request(ctx context.Context, method string, params json.RawMessage) (json.RawMessage, error)
	// Notify passes a notification (RelayLog) on; it may drop it (the
	// caller asked for less) and never blocks for long.
	Notify(ctx context.Context, method string, params json.RawMessage) error
}

type relayKey struct{}

// WithRelay returns ctx carrying r for the calls made with it.
func WithRelay(ctx context.Context, r Relay) context.Context {
	return context.WithValue(ctx, relayKey{}, r)
}

// RelayFrom returns the relay of the call ctx belongs to, or nil.
func RelayFrom(ctx context.Context) Relay {
	r, _ := ctx.Value(relayKey{}).(Relay)
	return r
}
