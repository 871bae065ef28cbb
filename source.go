package plexus

import (
	"context"
	"encoding/json"
)

// Source is one origin of entries: a first-party adapter, an extension, an MCP
// server. The registry aggregates sources; the core never branches on which
// source it is talking to.
//
// Implementations must be safe for concurrent use: the registry may call Scan
// and Health from different goroutines.
type Source interface {
	// ID is the source id; every entry it returns carries it in Entry.Source.
	ID() string
	// Provenance is the source-class of every entry the source contributes.
	Provenance() Provenance
	// Scan enumerates the source's entries. Route carries transport-private
	// configuration; the registry stamps provenance, sensitivity and windows.
	Scan(ctx context.Context) ([]Entry, error)
	// Health is a cheap availability probe; the registry caches it briefly.
	Health(ctx context.Context) Health
}

// InvokeContext is the authorization context of one call, threaded through
// re-entrant dispatch so a workflow member runs under the same token.
type InvokeContext struct {
	JTI       string
	SessionID string
	AgentID   string
	TraceID   string
	Scopes    []TokenScope
	// IdempotencyKey is the key the caller gave this call on /invoke
	// (empty when none), for transports whose wire carries one (ipc's
	// core.tool.call). The gateway sets it per call: a workflow member
	// gets its own request's, never the workflow's.
	IdempotencyKey string
}

// DispatchContext is handed to every dispatch. Leaf transports ignore
// InvokeByID; the workflow transport re-enters the pipeline through it.
type DispatchContext struct {
	Invoke     InvokeContext
	InvokeByID func(ctx context.Context, req InvokeRequest, ic InvokeContext) InvokeResponse
	// Progress relays a piece of the running call to its caller. It may be
	// nil (use Report); it never blocks for long and is safe to call from
	// any goroutine until Dispatch returns, and ignored after.
	Progress func(InvokeProgress)
}

// Report relays p through Progress when the caller gave one.
func (dc DispatchContext) Report(p InvokeProgress) {
	if dc.Progress != nil {
		dc.Progress(p)
	}
}

// TransportResult is what a transport returns. A failed call is a result
// (OK false with Error), not a Go error escaping the pipeline.
type TransportResult struct {
	OK        bool
	Data      any
	MCPResult json.RawMessage
	Error     *Error
}

// DispatchResult is the result of a call to capability id that returned
// data or failed with perr: a failure is a result with OK false (never a Go
// error escaping the pipeline), its error stamped with the capability id.
func DispatchResult(id string, data any, perr *Error) TransportResult {
	if perr != nil {
		perr.CapabilityID = id
		return TransportResult{OK: false, Error: perr}
	}
	return TransportResult{OK: true, Data: data}
}

// Transport reaches the software behind entries of one kind.
//
// Dispatch may be called concurrently; it must honour ctx cancellation.
type Transport interface {
	Kind() TransportKind
	Dispatch(ctx context.Context, entry Entry, input map[string]any, dc DispatchContext) TransportResult
}

// Authorizer decides a requested grant: allow, deny or pending. Swapping the
// policy never changes the wire. Implementations must be safe for concurrent
// use and must not block on I/O.
type Authorizer interface {
	Policy() string
	Authorize(ctx context.Context, ac AuthorizationContext) AuthorizationDecision
}
