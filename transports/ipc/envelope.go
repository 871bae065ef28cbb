package ipc

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"time"
)

// Version is the protocol version this package speaks (§3: "For this spec:
// 1").
const Version = 1

// Envelope is the standard message envelope of §3. Field names on the wire
// are the spec's: v, type, id, ts, payload (§3, required); in_reply_to,
// request_id, correlation_id, causation_id (§3.1); actor (§3.2); error
// (§3.3, top-level as v1 standardizes).
type Envelope struct {
	V    int       `json:"v"`
	Type string    `json:"type"`
	ID   string    `json:"id"`
	TS   time.Time `json:"ts"`
	// Payload is the type-specific object, decoded on demand by
	// [DecodePayload] into the struct its Type calls for.
	Payload json.RawMessage `json:"payload"`

	InReplyTo     string `json:"in_reply_to,omitempty"`
	RequestID     string `json:"request_id,omitempty"`
	CorrelationID string `json:"correlation_id,omitempty"`
	CausationID   string `json:"causation_id,omitempty"`

	// Actor is metadata only, never authorization (§3.2).
	Actor *Actor `json:"actor,omitempty"`
	Error *Error `json:"error,omitempty"`
}

// Actor is who a message is on behalf of (§3.2).
type Actor struct {
	Type    string `json:"type"` // "human" | "agent" | "system"
	ID      string `json:"id"`
	Display string `json:"display,omitempty"`
}

// Actor and caller types (§3.2, §4.3.1 caller.type).
const (
	ActorHuman  = "human"
	ActorAgent  = "agent"
	ActorSystem = "system"
)

// Error is the standard error object of §3.3. Every field is secret-free by
// the spec's rule; Debug must stay unset unless debugging was turned on.
type Error struct {
	Code      string          `json:"code"`
	Message   string          `json:"message"`
	Details   json.RawMessage `json:"details,omitempty"`
	Retryable bool            `json:"retryable,omitempty"`
	Where     string          `json:"where,omitempty"`
	Debug     json.RawMessage `json:"debug,omitempty"`
}

// Error codes. The spec names the first three; it names no code for the
// others, so Plexus defines them in the spec's protocol.* namespace.
const (
	CodeUnauthorized     = "protocol.unauthorized" // §3.3, §4.1.2
	CodeToolInvalidInput = "tool.invalid_input"    // §3.3
	CodeToolCanceled     = "tool.canceled"         // §4.3.3

	// CodeUnknownType answers a message whose type is not one of §4's when
	// a reply is expected (§6.2).
	CodeUnknownType = "protocol.unknown_type"
	// CodeInvalidEnvelope answers a message that breaks §3 (see
	// [EnvelopeError]).
	CodeInvalidEnvelope = "protocol.invalid_envelope"
	// CodeUnsupportedVersion answers a v other than [Version], and a hello
	// with no common version (§6.1).
	CodeUnsupportedVersion = "protocol.unsupported_version"
	// CodeInvalidFrame answers a frame that was read whole but is not one
	// UTF-8 JSON object, when the receiver chooses to reply instead of
	// closing (see [FrameError.MustClose]).
	CodeInvalidFrame = "protocol.invalid_frame"
	// CodeUnexpectedType answers a known type that is not acceptable at
	// this point of the session: anything but agent.hello first, a second
	// agent.hello, a core.* type sent by the agent.
	CodeUnexpectedType = "protocol.unexpected_type"
	// CodeUnsupported answers a known agent.* type a [Server] without a
	// [Handler] does not handle (tool messages).
	CodeUnsupported = "protocol.unsupported"
	// CodeInvalidSession answers an agent.heartbeat whose session_id is not
	// the connection's.
	CodeInvalidSession = "protocol.invalid_session"
)

// TypeCoreError is the type of the envelope [ErrorReply] builds. §6.2
// requires "a structured error response" to an unknown type without naming
// the response's type; this one is Plexus's and is not in §4's list.
const TypeCoreError = "core.error"

// EnvelopeError is a message that breaks §3: a required field missing or a
// field of the wrong type. It names the field and never quotes its value.
type EnvelopeError struct {
	// Field is the JSON name, with "payload." before a payload field's.
	Field   string
	Problem string
}

func (e *EnvelopeError) Error() string {
	return fmt.Sprintf("ipc envelope: field %q: %s", e.Field, e.Problem)
}

// Code is the error code to answer this error with.
func (e *EnvelopeError) Code() string {
	if e.Field == "v" && e.Problem == problemVersion {
		return CodeUnsupportedVersion
	}
	return CodeInvalidEnvelope
}

const (
	problemMissing  = "missing"
	problemVersion  = "unsupported version"
	problemNotObj   = "not a JSON object"
	problemNotRFC   = "not an RFC3339 timestamp"
	problemEmpty    = "empty"
	problemNotInt   = "not an integer"
	problemNotStr   = "not a string"
	problemBadShape = "wrong type"
)

// wireEnvelope is what DecodeEnvelope reads first: the required fields raw,
// so that absent, null and mistyped can be told apart and named.
type wireEnvelope struct {
	V       json.RawMessage `json:"v"`
	Type    json.RawMessage `json:"type"`
	ID      json.RawMessage `json:"id"`
	TS      json.RawMessage `json:"ts"`
	Payload json.RawMessage `json:"payload"`

	InReplyTo     string `json:"in_reply_to"`
	RequestID     string `json:"request_id"`
	CorrelationID string `json:"correlation_id"`
	CausationID   string `json:"causation_id"`
	Actor         *Actor `json:"actor"`
	Error         *Error `json:"error"`
}

// DecodeEnvelope parses one frame's payload as an [Envelope]. Unknown fields
// are ignored (§6.2). The five fields §3 requires (v, type, id, ts,
// payload) must be present with their types: v the integer 1, type and id
// non-empty strings, ts an RFC3339 string, payload an object; otherwise the
// error is an [*EnvelopeError] naming the first bad field. The type is not
// checked against §4's list: that is the receiver's call ([KnownType],
// [ErrorReply]).
func DecodeEnvelope(b []byte) (Envelope, error) {
	if !isObject(b) {
		return Envelope{}, &EnvelopeError{Field: "", Problem: "message " + problemNotObj}
	}
	var w wireEnvelope
	if err := json.Unmarshal(b, &w); err != nil {
		return Envelope{}, fieldError("", err)
	}
	env := Envelope{
		InReplyTo:     w.InReplyTo,
		RequestID:     w.RequestID,
		CorrelationID: w.CorrelationID,
		CausationID:   w.CausationID,
		Actor:         w.Actor,
		Error:         w.Error,
	}
	if isAbsent(w.V) {
		return Envelope{}, &EnvelopeError{Field: "v", Problem: problemMissing}
	}
	if err := json.Unmarshal(w.V, &env.V); err != nil {
		return Envelope{}, &EnvelopeError{Field: "v", Problem: problemNotInt}
	}
	if env.V != Version {
		return Envelope{}, &EnvelopeError{Field: "v", Problem: problemVersion}
	}
	var err error
	if env.Type, err = requiredString("type", w.Type); err != nil {
		return Envelope{}, err
	}
	if env.ID, err = requiredString("id", w.ID); err != nil {
		return Envelope{}, err
	}
	ts, err := requiredString("ts", w.TS)
	if err != nil {
		return Envelope{}, err
	}
	if env.TS, err = time.Parse(time.RFC3339, ts); err != nil {
		return Envelope{}, &EnvelopeError{Field: "ts", Problem: problemNotRFC}
	}
	if isAbsent(w.Payload) {
		return Envelope{}, &EnvelopeError{Field: "payload", Problem: problemMissing}
	}
	if !isObject(w.Payload) {
		return Envelope{}, &EnvelopeError{Field: "payload", Problem: problemNotObj}
	}
	env.Payload = w.Payload
	return env, nil
}

// EncodeEnvelope is the JSON of e, ready for [WriteFrame]. It refuses an
// envelope DecodeEnvelope would refuse (an unstamped ID or TS included),
// so Plexus never sends what it would not accept. A nil Payload is sent as
// {}.
func EncodeEnvelope(e Envelope) ([]byte, error) {
	if e.Payload == nil {
		e.Payload = json.RawMessage("{}")
	}
	switch {
	case e.V != Version:
		return nil, &EnvelopeError{Field: "v", Problem: problemVersion}
	case e.Type == "":
		return nil, &EnvelopeError{Field: "type", Problem: problemEmpty}
	case e.ID == "":
		return nil, &EnvelopeError{Field: "id", Problem: problemEmpty}
	case e.TS.IsZero():
		return nil, &EnvelopeError{Field: "ts", Problem: problemMissing}
	case !isObject(e.Payload):
		return nil, &EnvelopeError{Field: "payload", Problem: problemNotObj}
	}
	b, err := json.Marshal(e)
	if err != nil {
		return nil, fmt.Errorf("encode ipc envelope %s: %w", e.Type, err)
	}
	return b, nil
}

// DecodePayload decodes e's payload into T, one of the payload structs of
// §4. Unknown payload fields are ignored (§6.2); a known field of the wrong
// type is an [*EnvelopeError] naming it ("payload.tool_id"). Which fields a
// message type requires is for its handler to check.
func DecodePayload[T any](e Envelope) (T, error) {
	var v T
	if !isObject(e.Payload) {
		return v, &EnvelopeError{Field: "payload", Problem: problemNotObj}
	}
	if err := json.Unmarshal(e.Payload, &v); err != nil {
		var zero T
		return zero, fieldError("payload", err)
	}
	return v, nil
}

// ErrorReply is the structured error answering req (§6.2: an unknown type
// "MUST result in a structured error response if it expects a reply"; also
// fit for an [EnvelopeError] once req's id is known). It has type
// [TypeCoreError], in_reply_to req's id, req's request_id, correlation_id
// and causation_id echoed (§3.1), an empty payload, and the top-level error
// {code, message} (§3.3). message must be secret-free.
//
// ID and TS are left for the sender to stamp, as on every envelope it
// sends; [EncodeEnvelope] refuses the reply until they are.
func ErrorReply(req Envelope, code, message string) Envelope {
	return Envelope{
		V:             Version,
		Type:          TypeCoreError,
		Payload:       json.RawMessage("{}"),
		InReplyTo:     req.ID,
		RequestID:     req.RequestID,
		CorrelationID: req.CorrelationID,
		CausationID:   req.CausationID,
		Error:         &Error{Code: code, Message: message},
	}
}

func requiredString(field string, raw json.RawMessage) (string, error) {
	if isAbsent(raw) {
		return "", &EnvelopeError{Field: field, Problem: problemMissing}
	}
	var s string
	if err := json.Unmarshal(raw, &s); err != nil {
		return "", &EnvelopeError{Field: field, Problem: problemNotStr}
	}
	if s == "" {
		return "", &EnvelopeError{Field: field, Problem: problemEmpty}
	}
	return s, nil
}

// isAbsent: a field left out or set to null.
func isAbsent(raw json.RawMessage) bool {
	return len(raw) == 0 || bytes.Equal(raw, []byte("null"))
}

func isObject(b []byte) bool {
	b = bytes.TrimLeft(b, " \t\r\n")
	return len(b) > 0 && b[0] == '{'
}

// fieldError turns a decoding error into an EnvelopeError naming the field,
// without the value json's own message would quote.
func fieldError(prefix string, err error) error {
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) {
		field := te.Field
		switch {
		case field == "":
			field = prefix
		case prefix != "":
			field = prefix + "." + field
		}
		return &EnvelopeError{Field: field, Problem: problemBadShape + ", want " + te.Type.String()}
	}
	return &EnvelopeError{Field: prefix, Problem: "invalid JSON"}
}
