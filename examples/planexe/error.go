package planexe

import (
	"fmt"
)

// Code is a stable, machine-readable error code of spec §11.
type Code string

// The error codes of spec §11.1, plus [CodeInvalidArgument].
const (
	CodeSessionNotFound    Code = "SESSION_NOT_FOUND"
	CodeRunNotFound        Code = "RUN_NOT_FOUND"
	CodeRunAlreadyActive   Code = "RUN_ALREADY_ACTIVE"
	CodeRunNotActive       Code = "RUN_NOT_ACTIVE"
	CodeInvalidTarget      Code = "INVALID_TARGET"
	CodeInvalidArtifactURI Code = "INVALID_ARTIFACT_URI"
	CodeConflict           Code = "CONFLICT"
	CodePermissionDenied   Code = "PERMISSION_DENIED"
	CodeRunningReadonly    Code = "RUNNING_READONLY"
	CodeInternal           Code = "INTERNAL_ERROR"

	// CodeInvalidArgument is not in the spec's list: it answers a request that
	// is malformed in a way none of the spec's codes names (a missing idea, a
	// negative range, an unknown stop mode, a cursor this server never issued).
	// §11.1 lists the codes a server must use, not all it may use, and §16.2
	// asks clients to tolerate what they do not know.
	CodeInvalidArgument Code = "INVALID_ARGUMENT"
)

// Error is the error every [Engine] method returns for a refused request. Its
// Code, Message and Details are what the caller sees (spec §11); Err is the
// operational cause, kept for logs and never sent, because it may name server
// paths (§6.6: never expose arbitrary server filesystem paths).
type Error struct {
	Code    Code
	Message string
	Details map[string]any
	Err     error
}

func (e *Error) Error() string {
	if e.Err != nil {
		return fmt.Sprintf("%s: %s: %v", e.Code, e.Message, e.Err)
	}
	return fmt.Sprintf("%s: %s", e.Code, e.Message)
}

func (e *Error) Unwrap() error { return e.Err }

func newError(code Code, details map[string]any, format string, args ...any) *Error {
	return &Error{Code: code, Message: fmt.Sprintf(format, args...), Details: details}
}

// internalError hides cause from the caller: the message is generic and the
// cause stays in Err for the log.
func internalError(op string, cause error) *Error {
	return &Error{Code: CodeInternal, Message: "internal error while " + op, Err: fmt.Errorf("%s: %w", op, cause)}
}
