package client

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"

	"github.com/plexus-gw/plexus"
)

// Error is a failure the gateway reported, decoded from its uniform error
// envelope ({"error":{…}}) or from a denied InvokeResponse, or a grant request
// that ended without a grant. Callers branch on Body.Code.
type Error struct {
	// Status is the HTTP status of the response that carried the failure.
	Status int
	// Body is the wire error. A pending request carries Body.PendingID and
	// Body.GrantStatusURL.
	Body plexus.ErrorBody
	// State is set when the error ends a grant request: the pending
	// decision's state (pending when it still waits, or denied, expired,
	// withdrawn). It is empty for every other error.
	State string
	// Resumed is set when the outcome (still pending, or denied) is that of
	// an earlier request which the call took up through GET /grants/status
	// instead of asking the owner again.
	Resumed bool
}

func (e *Error) Error() string {
	if e.Body.Message == "" {
		return string(e.Body.Code)
	}
	return string(e.Body.Code) + ": " + e.Body.Message
}

// CodeOf returns the protocol code of the first [*Error] in err's chain, or ""
// when err is nil or not a gateway error (a network failure, say).
func CodeOf(err error) plexus.ErrorCode {
	var ce *Error
	if errors.As(err, &ce) {
		return ce.Body.Code
	}
	return ""
}

// IsPending reports whether err says a grant request is still waiting for the
// owner.
func IsPending(err error) bool {
	var ce *Error
	var pe *PendingError
	return errors.As(err, &pe) || (errors.As(err, &ce) && ce.Body.Code == plexus.CodeGrantPendingUser)
}

// RevokedError says the owner revoked the grant behind the agent's token
// for CapabilityID. Asking again puts a new request before the same owner,
// so a call does it only when it says why ([CallOptions.Purpose]); without
// one, Call returns this error instead of filing a request with no purpose.
type RevokedError struct {
	CapabilityID string
}

func (e *RevokedError) Error() string {
	return fmt.Sprintf("the owner revoked the grant for %s; asking for it again goes to the owner and needs a purpose", e.CapabilityID)
}

// ErrUnreachable is wrapped by errors of requests that could not connect to
// the gateway at all (nothing listens at the address).
var ErrUnreachable = errors.New("gateway unreachable")

// decodeError turns a non-2xx response into an *Error. A body that is not the
// envelope still yields an *Error, without echoing the body (it might hold
// anything).
func decodeError(status int, data []byte) *Error {
	var env plexus.ErrorResponse
	if json.Unmarshal(data, &env) == nil && env.Error != nil && env.Error.Code != "" {
		return &Error{Status: status, Body: *env.Error}
	}
	return &Error{Status: status, Body: plexus.ErrorBody{
		Code:    plexus.CodeInternalError,
		Message: fmt.Sprintf("unexpected HTTP %d %s from the gateway", status, http.StatusText(status)),
	}}
}

func pendingError(p plexus.GrantPendingResponse, capabilityID, msg string) *Error {
	return &Error{Status: http.StatusAccepted, State: plexus.StatePending, Body: plexus.ErrorBody{
		Code:           plexus.CodeGrantPendingUser,
		Message:        msg,
		CapabilityID:   capabilityID,
		Detail:         p.PendingNarration,
		PendingID:      p.PendingID,
		GrantStatusURL: p.StatusURL,
	}}
}

// deniedError reports a grant request that ended without a grant. The code is
// grant_required, the closed union's word for "no grant covers this call".
func deniedError(status int, state, capabilityID, pendingID, msg string) *Error {
	return &Error{Status: status, State: state, Body: plexus.ErrorBody{
		Code:         plexus.CodeGrantRequired,
		Message:      msg,
		CapabilityID: capabilityID,
		PendingID:    pendingID,
	}}
}
