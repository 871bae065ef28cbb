package plexus

import (
	"errors"
	"fmt"
)

// ErrorCode is a stable machine error code. The first thirteen form the closed
// union of the protocol (§4) and are the only codes /invoke ever answers with.
// The others are used by endpoints where the spec names them (enrollment) or
// is silent (admin and malformed requests); docs/errors.md lists every code
// with its HTTP status.
type ErrorCode string

// The closed protocol union.
const (
	CodeTokenExpired           ErrorCode = "token_expired"
	CodeTokenRevoked           ErrorCode = "token_revoked"
	CodeGrantRequired          ErrorCode = "grant_required"
	CodeGrantPendingUser       ErrorCode = "grant_pending_user"
	CodeSessionExpired         ErrorCode = "session_expired"
	CodeUnknownCapability      ErrorCode = "unknown_capability"
	CodeSchemaValidationFailed ErrorCode = "schema_validation_failed"
	CodeSourceUnavailable      ErrorCode = "source_unavailable"
	CodeMCPToolError           ErrorCode = "mcp_tool_error"
	CodeTransportError         ErrorCode = "transport_error"
	CodeHostForbidden          ErrorCode = "host_forbidden"
	CodeRateLimited            ErrorCode = "rate_limited"
	CodeInternalError          ErrorCode = "internal_error"
)

// Codes outside the invoke union.
const (
	// Enrollment (POST /agents/enroll), as the spec names them.
	CodeMalformed     ErrorCode = "malformed"
	CodeUnknownCode   ErrorCode = "unknown_code"
	CodeCodeExpired   ErrorCode = "code_expired"
	CodeCodeConsumed  ErrorCode = "code_consumed"
	CodePersistFailed ErrorCode = "persist_failed"

	// CodeUnauthorized: a missing or wrong PAT or connection-key.
	CodeUnauthorized ErrorCode = "unauthorized"
	// CodeNotFound: an unknown pending id, agent, grant or route.
	CodeNotFound ErrorCode = "not_found"
	// CodeConflict: the request is valid but the state forbids it (a pending
	// decision already decided, an agent id already taken).
	CodeConflict ErrorCode = "conflict"
	// CodeInvalidRequest: a well-formed body whose values are wrong.
	CodeInvalidRequest ErrorCode = "invalid_request"
)

// InvokeCodes is the closed union, in spec order.
var InvokeCodes = []ErrorCode{
	CodeTokenExpired, CodeTokenRevoked, CodeGrantRequired, CodeGrantPendingUser,
	CodeSessionExpired, CodeUnknownCapability, CodeSchemaValidationFailed,
	CodeSourceUnavailable, CodeMCPToolError, CodeTransportError, CodeHostForbidden,
	CodeRateLimited, CodeInternalError,
}

// Error is an error carrying a protocol code. Callers branch on Code with
// [CodeOf]; Err keeps operational context for logs (never for the wire).
type Error struct {
	Code         ErrorCode
	Message      string
	CapabilityID string
	Detail       any
	Err          error
}

func (e *Error) Error() string {
	if e.Err != nil {
		return fmt.Sprintf("%s: %s: %v", e.Code, e.Message, e.Err)
	}
	return fmt.Sprintf("%s: %s", e.Code, e.Message)
}

func (e *Error) Unwrap() error { return e.Err }

// Errorf returns an *Error with a formatted message.
func Errorf(code ErrorCode, format string, args ...any) *Error {
	return &Error{Code: code, Message: fmt.Sprintf(format, args...)}
}

// WrapError returns an *Error with code and message wrapping err.
func WrapError(code ErrorCode, err error, message string) *Error {
	return &Error{Code: code, Message: message, Err: err}
}

// CodeOf returns the code of the first *Error in err's chain, or
// internal_error for any other non-nil error.
func CodeOf(err error) ErrorCode {
	if err == nil {
		return ""
	}
	var pe *Error
	if errors.As(err, &pe) {
		return pe.Code
	}
	return CodeInternalError
}

// AsError returns err as an *Error, converting an unknown error into an
// internal_error whose message does not leak the underlying text.
func AsError(err error) *Error {
	var pe *Error
	if errors.As(err, &pe) {
		return pe
	}
	return &Error{Code: CodeInternalError, Message: "internal error", Err: err}
}

// ErrorBody is the wire form of an error (ErrorResponse.error and
// InvokeResponse.error).
type ErrorBody struct {
	Code            ErrorCode `json:"code"`
	Message         string    `json:"message"`
	CapabilityID    string    `json:"capabilityId,omitempty"`
	Detail          any       `json:"detail,omitempty"`
	PendingID       string    `json:"pendingId,omitempty"`
	GrantStatusURL  string    `json:"grantStatusUrl,omitempty"`
	GrantRequestURL string    `json:"grantRequestUrl,omitempty"`
	SessionHeader   string    `json:"sessionHeader,omitempty"`
	Discovery       string    `json:"discovery,omitempty"`
}

// Body converts e to its wire form.
func (e *Error) Body() *ErrorBody {
	return &ErrorBody{Code: e.Code, Message: e.Message, CapabilityID: e.CapabilityID, Detail: e.Detail}
}

// ErrorResponse is the uniform error envelope of every endpoint but /invoke.
type ErrorResponse struct {
	Error *ErrorBody `json:"error"`
}
