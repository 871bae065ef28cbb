package client

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"

	"github.com/plexus-gw/plexus"
)

// PendingError is a call whose grant waits for the owner, said for a
// person: the pending decision to approve, whether it was requested earlier
// (Resumed), or that the caller stopped waiting for it (Stopped).
// [IsPending] is true of it.
type PendingError struct {
	ID               string
	Resumed, Stopped bool
}

func (e *PendingError) Error() string {
	if e.Stopped {
		return fmt.Sprintf("stopped waiting; grant still pending: %s\nask the owner to approve: plexus approve %s", e.ID, e.ID)
	}
	again := ""
	if e.Resumed {
		again = " (requested earlier; not asked again)"
	}
	return fmt.Sprintf("grant pending: %s%s\nask the owner to approve: plexus approve %s", e.ID, again, e.ID)
}

// WriteResult prints the answer of [Agent.Call] of capability id: its
// output on stdout (with asJSON the whole response). When the call failed
// it prints what a script or a person needs and returns the failure: a
// grant pending as a *[PendingError] (with asJSON its id on stdout too;
// pendingID is the grant the call waited on, if any), the gateway's error
// as "code: message" (an MCP tool's own error text on stderr first). Any
// other error is returned as it is.
func WriteResult(stdout, stderr io.Writer, id, pendingID string, resp *plexus.InvokeResponse, err error, asJSON bool) error {
	var ce *Error
	switch {
	case err == nil:
		if asJSON {
			return writeIndented(stdout, resp)
		}
		return WriteOutput(stdout, resp)
	case errors.As(err, &ce) && ce.Body.Code == plexus.CodeGrantPendingUser:
		if asJSON {
			// A script that cannot read the pending id has nothing to wait on:
			// a failed write is the answer.
			if werr := writeIndented(stdout, map[string]any{"id": id, "status": ce.Body.Code, "pendingId": ce.Body.PendingID,
				"statusUrl": ce.Body.GrantStatusURL, "resumed": ce.Resumed}); werr != nil {
				return werr
			}
		}
		return &PendingError{ID: ce.Body.PendingID, Resumed: ce.Resumed}
	case pendingID != "" && errors.Is(err, context.Canceled):
		// Interrupted while waiting: the request still stands.
		return &PendingError{ID: pendingID, Stopped: true}
	case ce != nil:
		var werr error
		if resp != nil && asJSON {
			werr = writeIndented(stdout, resp)
		} else if resp != nil && len(resp.MCPResult) > 0 {
			werr = WriteOutput(stderr, resp) // an MCP tool's own error text
		}
		if werr != nil {
			return fmt.Errorf("%s: %s (and writing its answer: %w)", ce.Body.Code, ce.Body.Message, werr)
		}
		return fmt.Errorf("%s: %s", ce.Body.Code, ce.Body.Message)
	default:
		return err
	}
}

// writeIndented writes v as indented JSON, the command line's --json form.
func writeIndented(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}
