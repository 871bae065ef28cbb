package client

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/plexus-gw/plexus"
)

// TestWriteResult checks what a call's answer prints and returns: the
// output, a pending grant as a *PendingError (exit 3 at the command line),
// the gateway's error as "code: message", an MCP tool's error text on
// stderr, and any other error as it is.
func TestWriteResult(t *testing.T) {
	pending := &Error{Status: 202, Body: plexus.ErrorBody{Code: plexus.CodeGrantPendingUser, PendingID: "pend_1"}, Resumed: true}
	failed := &Error{Status: 403, Body: plexus.ErrorBody{Code: plexus.CodeGrantRequired, Message: "no grant"}}
	toolErr := &plexus.InvokeResponse{MCPResult: []byte(`{"content":[{"type":"text","text":"tool says no"}],"isError":true}`)}
	other := errors.New("connection reset")
	for _, tt := range []struct {
		name               string
		pendingID          string
		resp               *plexus.InvokeResponse
		err                error
		asJSON             bool
		wantOut, wantErrW  string
		wantErrText        string // "" for no error
		wantPending, isErr bool
	}{
		{name: "Output", resp: &plexus.InvokeResponse{Output: "hello"}, wantOut: "hello\n"},
		{name: "OutputJSON", resp: &plexus.InvokeResponse{Output: "hello"}, asJSON: true, wantOut: `"output": "hello"`},
		{name: "Pending", err: pending, wantPending: true, wantErrText: "grant pending: pend_1 (requested earlier; not asked again)"},
		{name: "PendingJSON", err: pending, asJSON: true, wantPending: true, wantOut: `"pendingId": "pend_1"`, wantErrText: "plexus approve pend_1"},
		{name: "StoppedWaiting", pendingID: "pend_2", err: fmt.Errorf("wait: %w", context.Canceled), wantPending: true,
			wantErrText: "stopped waiting; grant still pending: pend_2"},
		{name: "GatewayError", err: failed, wantErrText: "grant_required: no grant"},
		{name: "ToolError", resp: toolErr, err: failed, wantErrW: "tool says no", wantErrText: "grant_required: no grant"},
		{name: "Other", err: other, isErr: true, wantErrText: "connection reset"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var out, errw bytes.Buffer
			err := WriteResult(&out, &errw, "notes.read", tt.pendingID, tt.resp, tt.err, tt.asJSON)
			if IsPending(err) != tt.wantPending {
				t.Errorf("IsPending(%v) = %v, want %v", err, !tt.wantPending, tt.wantPending)
			}
			if tt.isErr && !errors.Is(err, other) {
				t.Errorf("err = %v, want the call's own error", err)
			}
			if tt.wantErrText == "" && err != nil || tt.wantErrText != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErrText)) {
				t.Errorf("err = %v, want %q", err, tt.wantErrText)
			}
			if !strings.Contains(out.String(), tt.wantOut) || !strings.Contains(errw.String(), tt.wantErrW) {
				t.Errorf("stdout %q, stderr %q; want %q and %q in them", out.String(), errw.String(), tt.wantOut, tt.wantErrW)
			}
		})
	}
}
