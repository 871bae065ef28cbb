// Package workflow is the transport of kind:"workflow" entries (extension
// spec §4, ADR-013): "just a transport" that re-enters the invoke pipeline
// once per member, in order, under the member scopes the workflow's grant
// synthesized. The pipeline re-checks the originating token (jti and
// session) before each member, so a revoke mid-fan-out halts the rest; what
// already ran is audited (each member call is its own invoke row) and is not
// undone.
//
// Each member receives the workflow's input. When the member's io.input
// schema declares properties, only those keys are passed (so a member whose
// schema forbids additional properties still accepts the call); otherwise
// the whole input is. The result lists every member's output in order:
//
//	{"members": [{"id": "notes.vault.read", "output": …}, {"id": "notes.vault.append", "output": …}]}
//
// A member that fails stops the fan-out: the workflow fails with
// transport_error naming the member and its code, and its detail lists the
// members that completed (their outputs included) and the one that failed.
//
// The package never imports the registry or the gateway: it reaches the
// pipeline through [plexus.DispatchContext.InvokeByID] and member entries
// through the lookup it is given.
package workflow

import (
	"context"
	"encoding/json"

	"github.com/plexus-gw/plexus"
)

// Lookup finds a registered entry by id. It must be safe for concurrent use.
type Lookup func(id string) (plexus.Entry, bool)

// Transport fans a workflow out through the pipeline. It is safe for
// concurrent use; it holds no state of its own.
type Transport struct {
	lookup Lookup
}

var _ plexus.Transport = (*Transport)(nil)

// New returns the workflow transport; lookup finds member entries (for
// their input schemas). It panics on a nil lookup: a wiring bug.
func New(lookup Lookup) *Transport {
	if lookup == nil {
		panic("workflow: nil lookup")
	}
	return &Transport{lookup: lookup}
}

// Kind is workflow.
func (t *Transport) Kind() plexus.TransportKind { return plexus.TransportWorkflow }

// memberResult is one member's line in the workflow's result.
type memberResult struct {
	ID     string `json:"id"`
	Output any    `json:"output,omitempty"`
}

// Dispatch runs the members in order and stops at the first that fails.
func (t *Transport) Dispatch(ctx context.Context, entry plexus.Entry, input map[string]any, dc plexus.DispatchContext) plexus.TransportResult {
	if dc.InvokeByID == nil {
		return plexus.TransportResult{Error: plexus.Errorf(plexus.CodeInternalError, "workflow %s: no pipeline to re-enter", entry.ID)}
	}
	if len(entry.Members) == 0 {
		return plexus.TransportResult{Error: plexus.Errorf(plexus.CodeTransportError, "workflow %s has no members", entry.ID)}
	}
	done := make([]memberResult, 0, len(entry.Members))
	for _, m := range entry.Members {
		if err := ctx.Err(); err != nil {
			return failed(entry.ID, done, m.ID, plexus.Errorf(plexus.CodeTransportError, "stopped before %s: %v", m.ID, err))
		}
		resp := dc.InvokeByID(ctx, plexus.InvokeRequest{ID: m.ID, Input: t.memberInput(m.ID, input)}, dc.Invoke)
		if !resp.OK {
			code, msg := plexus.CodeTransportError, "failed without detail"
			if resp.Error != nil {
				code, msg = resp.Error.Code, resp.Error.Message
			}
			return failed(entry.ID, done, m.ID, &plexus.Error{Code: code, Message: msg})
		}
		out := resp.Output
		if out == nil && len(resp.MCPResult) > 0 {
			out = resp.MCPResult
		}
		done = append(done, memberResult{ID: m.ID, Output: out})
	}
	return plexus.TransportResult{OK: true, Data: map[string]any{"members": done}}
}

// failed is the workflow's result when member id failed with e after the
// members in done completed.
func failed(workflow string, done []memberResult, id string, e *plexus.Error) plexus.TransportResult {
	err := plexus.Errorf(plexus.CodeTransportError, "workflow %s stopped at member %s (%s: %s); %d member(s) before it ran and are not undone",
		workflow, id, e.Code, e.Message, len(done))
	err.Detail = map[string]any{"completed": done, "failed": id, "failedCode": string(e.Code)}
	return plexus.TransportResult{Error: err}
}

// memberInput is what member id receives of the workflow's input: the keys
// its input schema declares, or everything when it declares none.
func (t *Transport) memberInput(id string, input map[string]any) map[string]any {
	e, ok := t.lookup(id)
	if !ok || e.IO == nil || len(e.IO.Input) == 0 {
		return input
	}
	var s struct {
		Properties map[string]json.RawMessage `json:"properties"`
	}
	if json.Unmarshal(e.IO.Input, &s) != nil || len(s.Properties) == 0 {
		return input
	}
	out := make(map[string]any, len(s.Properties))
	for k := range s.Properties {
		if v, ok := input[k]; ok {
			out[k] = v
		}
	}
	return out
}
