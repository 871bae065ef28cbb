package http

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	nethttp "net/http"
	"strings"

	"github.com/plexus-gw/plexus"
	"github.com/plexus-gw/plexus/gateway"
)

// errEmptyBody marks a missing body where one is required.
var errEmptyBody = errors.New("empty body")

// readBody reads one JSON value from r's body, capped at MaxBodyBytes. It
// returns nil, nil for an empty body or a literal null. Unknown fields are
// the decoder's business, not ours: clients send extra fields and must keep
// working. Anything after the value but whitespace is refused, so two
// concatenated bodies can never be read as one.
//
// The body is read whole first (it is capped anyway) and a body that is
// exactly one valid value, the usual case, is returned after one scan;
// anything else goes through a streaming decoder over the same bytes, whose
// errors tell trailing data from a syntax error.
func (s *Server) readBody(w nethttp.ResponseWriter, r *nethttp.Request) (json.RawMessage, error) {
	data, err := s.readCapped(w, r, nil)
	if err != nil {
		return nil, err
	}
	return oneValue(data)
}

// readCapped reads r's body whole into dst's space, capped at MaxBodyBytes.
func (s *Server) readCapped(w nethttp.ResponseWriter, r *nethttp.Request, dst []byte) ([]byte, error) {
	return readAllCapped(dst, nethttp.MaxBytesReader(w, r.Body, s.opts.MaxBodyBytes), r.ContentLength, s.opts.MaxBodyBytes)
}

// oneValue is readBody's reading of a body read whole: its one JSON value,
// nil for an empty body or a literal null.
func oneValue(data []byte) (json.RawMessage, error) {
	if v := trimJSONSpace(data); len(v) > 0 && json.Valid(v) {
		if string(v) == "null" {
			return nil, nil
		}
		return v, nil
	}
	return decodeOne(bytes.NewReader(data))
}

// readAllCapped reads body to its end into dst's space (from its length
// 0), growing it if it must: sized from the declared Content-Length when
// there is one within the cap (body enforces the cap; a large declared
// length is only trusted up to 64 KiB before bytes arrive).
func readAllCapped(dst []byte, body io.Reader, declared, limit int64) ([]byte, error) {
	size := int64(512)
	if declared > 0 && declared <= limit {
		size = min(declared+1, 64<<10) // +1: room to see EOF without growing
	}
	buf := dst[:0]
	if int64(cap(buf)) < size {
		buf = make([]byte, 0, size)
	}
	for {
		if len(buf) == cap(buf) {
			buf = append(buf, 0)[:len(buf)]
		}
		n, err := body.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+n]
		if errors.Is(err, io.EOF) {
			return buf, nil
		}
		if err != nil {
			return nil, err
		}
	}
}

// trimJSONSpace strips JSON's four whitespace bytes from both ends.
func trimJSONSpace(b []byte) []byte {
	isSpace := func(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }
	for len(b) > 0 && isSpace(b[0]) {
		b = b[1:]
	}
	for len(b) > 0 && isSpace(b[len(b)-1]) {
		b = b[:len(b)-1]
	}
	return b
}

// decodeOne reads exactly one JSON value from rd, as readBody promises.
func decodeOne(rd io.Reader) (json.RawMessage, error) {
	dec := json.NewDecoder(rd)
	var raw json.RawMessage
	if err := dec.Decode(&raw); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, nil
		}
		return nil, err
	}
	var extra json.RawMessage
	switch err := dec.Decode(&extra); {
	case errors.Is(err, io.EOF):
	case err != nil:
		return nil, err
	default:
		return nil, errors.New("trailing data after the JSON body")
	}
	if string(raw) == "null" {
		return nil, nil
	}
	return raw, nil
}

// decode reads the body into v. When optional is false an empty body is an
// error; when true it leaves v as it was. The error is a malformed
// *plexus.Error whose chain keeps any *http.MaxBytesError (→ 413).
func (s *Server) decode(w nethttp.ResponseWriter, r *nethttp.Request, v any, optional bool) error {
	raw, err := s.readBody(w, r)
	if err == nil && raw == nil {
		if optional {
			return nil
		}
		err = errEmptyBody
	}
	if err == nil {
		err = json.Unmarshal(raw, v)
	}
	if err != nil {
		return &plexus.Error{Code: plexus.CodeMalformed, Message: bodyMessage(err), Err: err}
	}
	return nil
}

// invokeRequest decodes an /invoke body read whole. A body that decodes at
// once is taken (that one scan validates it); any other is read as
// readBody reads it, so that its error is the one it always was, with the
// call's id when it at least is readable.
func invokeRequest(data []byte) (plexus.InvokeRequest, error) {
	if v := trimJSONSpace(data); len(v) > 0 && string(v) != "null" {
		req, err := decodeInvoke(v)
		if err == nil || !isSyntaxError(err) {
			// v is valid JSON: err is already the old reading's error.
			return withReadableID(v, req, err)
		}
	}
	raw, err := oneValue(data)
	if err == nil && raw == nil {
		err = errEmptyBody
	}
	if err != nil {
		return plexus.InvokeRequest{}, err
	}
	req, err := decodeInvoke(raw)
	return withReadableID(raw, req, err)
}

func isSyntaxError(err error) bool {
	var se *json.SyntaxError
	return errors.As(err, &se)
}

func withReadableID(raw []byte, req plexus.InvokeRequest, err error) (plexus.InvokeRequest, error) {
	if err != nil {
		var idOnly struct {
			ID string `json:"id"`
		}
		if json.Unmarshal(raw, &idOnly) == nil {
			req.ID = idOnly.ID
		}
	}
	return req, err
}

// invokeOnce is an InvokeRequest as decoded off the wire when its input is
// named at most once: into an any, which encoding/json builds in the same
// pass (a map[string]any), without reflection per key and value as for the
// map field of plexus.InvokeRequest.
type invokeOnce struct {
	ID             string `json:"id"`
	Input          any    `json:"input"`
	IdempotencyKey string `json:"idempotencyKey"`
}

// invokeWire is invokeOnce for a body that may name its input twice.
type invokeWire struct {
	ID             string      `json:"id"`
	Input          invokeInput `json:"input"`
	IdempotencyKey string      `json:"idempotencyKey"`
}

// invokeInput decodes as json.Unmarshal decodes a map[string]any field:
// null clears it, and an input given twice (or as "Input" too) adds its
// keys to the first. Anything but an object or null is refused with
// errInputType; decodeInvoke then reads the body again for the error the
// map field gives.
type invokeInput struct{ m map[string]any }

var errInputType = errors.New("input is not an object")

func (in *invokeInput) UnmarshalJSON(b []byte) error {
	var v any
	if err := json.Unmarshal(b, &v); err != nil {
		return err
	}
	switch v := v.(type) {
	case nil:
		in.m = nil
	case map[string]any:
		if in.m == nil {
			in.m = v
			return nil
		}
		maps.Copy(in.m, v)
	default:
		return errInputType
	}
	return nil
}

// decodeInvoke reads raw as an InvokeRequest, as json.Unmarshal into one
// would: same fields, same values. A body it cannot take (bad JSON, a wrong
// type, an input that is not an object) is decoded again the old way, so
// the error, and thus the message the caller reads, is the one it always was.
func decodeInvoke(raw []byte) (plexus.InvokeRequest, error) {
	if once, objectish := namesInputOnce(raw); once && objectish {
		var w invokeOnce
		if err := json.Unmarshal(raw, &w); err == nil {
			switch in := w.Input.(type) {
			case nil, map[string]any:
				m, _ := in.(map[string]any)
				return plexus.InvokeRequest{ID: w.ID, Input: m, IdempotencyKey: w.IdempotencyKey}, nil
			}
		}
	} else if !once {
		var w invokeWire
		if err := json.Unmarshal(raw, &w); err == nil {
			return plexus.InvokeRequest{ID: w.ID, Input: w.Input.m, IdempotencyKey: w.IdempotencyKey}, nil
		}
	}
	// The old reading decides: should the look at the input above ever
	// misjudge a body, it costs speed, never a different answer.
	var req plexus.InvokeRequest
	err := json.Unmarshal(raw, &req)
	return req, err
}

// namesInputOnce reports whether raw can name the input field at most once.
// encoding/json matches a key to a field in any ASCII letter case (no other
// rune folds to those of "input"), after unescaping: so a body without a
// backslash and with "input" in it at most once, in any case, cannot.
func namesInputOnce(raw []byte) (once, objectish bool) {
	if bytes.IndexByte(raw, '\\') >= 0 {
		return false, false
	}
	const name = "input"
	at := -1
	for i := 0; i+len(name) <= len(raw); i++ {
		// Only a whole key counts: "0input" or "xinput" is another key.
		if raw[i]|0x20 == 'i' && i > 0 && raw[i-1] == '"' && bytes.EqualFold(raw[i:i+len(name)], []byte(name)) {
			if at >= 0 {
				return false, false
			}
			at = i
		}
	}
	if at < 0 {
		return true, true
	}
	rest := trimJSONSpace(raw[at+len(name):])
	if len(rest) < 2 || rest[0] != '"' {
		return true, true // not a key: the value is no input
	}
	rest = trimJSONSpace(rest[1:])
	if len(rest) < 2 || rest[0] != ':' {
		return true, true
	}
	rest = trimJSONSpace(rest[1:])
	if len(rest) == 0 {
		return true, true // no value: the decoder reports the syntax error
	}
	// Anything but an object or null fails as an input: the old reading
	// refuses it at its first byte instead of building it first.
	return true, rest[0] == '{' || rest[0] == 'n'
}

// bodyMessage describes a body error for the client without Go type names.
func bodyMessage(err error) string {
	var (
		mbe *nethttp.MaxBytesError
		se  *json.SyntaxError
		ute *json.UnmarshalTypeError
	)
	switch {
	case errors.As(err, &mbe):
		return fmt.Sprintf("request body exceeds %d bytes", mbe.Limit)
	case errors.Is(err, errEmptyBody):
		return "a JSON request body is required"
	case errors.As(err, &se), errors.Is(err, io.ErrUnexpectedEOF):
		return "request body is not valid JSON"
	case errors.As(err, &ute):
		if ute.Field == "" {
			return "request body must be a JSON object"
		}
		return fmt.Sprintf("body field %q has the wrong type (got %s)", ute.Field, ute.Value)
	}
	return "invalid request body: " + err.Error()
}

// bodyStatus is the status of a decode error: 413 for an oversize body,
// else the status of its code.
func bodyStatus(err error, code func(plexus.ErrorCode) int) int {
	var mbe *nethttp.MaxBytesError
	if errors.As(err, &mbe) {
		return nethttp.StatusRequestEntityTooLarge
	}
	return code(plexus.CodeOf(err))
}

// credentials collects what the caller presented, uninterpreted.
func credentials(r *nethttp.Request) gateway.Credentials {
	c := gateway.Credentials{
		ConnectionKey: r.Header.Get(plexus.ConnectionKeyHeader),
		SessionID:     r.Header.Get(plexus.SessionHeader),
		Remote:        r.RemoteAddr,
		Via:           r.Header.Get(plexus.ViaHeader),
	}
	c.PeerUID = PeerUID(r)
	const scheme = "bearer "
	if a := r.Header.Get("Authorization"); len(a) > len(scheme) && strings.EqualFold(a[:len(scheme)], scheme) {
		c.Bearer = strings.TrimSpace(a[len(scheme):])
	}
	return c
}

// decodeSession decodes the body of a request that names its session into
// req and reconciles sessionID (a field of req) with the header's. When it
// answers false it has written the error.
func (s *Server) decodeSession(w nethttp.ResponseWriter, r *nethttp.Request, req any, sessionID *string) (gateway.Credentials, bool) {
	if err := s.decode(w, r, req, false); err != nil {
		s.writeError(w, r, err)
		return gateway.Credentials{}, false
	}
	c := credentials(r)
	if err := reconcileSession(&c, sessionID); err != nil {
		s.writeError(w, r, err)
		return gateway.Credentials{}, false
	}
	return c, true
}

// reconcileSession lets a session id arrive in the body or the header. A
// missing one is filled from the other; two different ones are refused
// rather than guessing which the caller meant.
func reconcileSession(c *gateway.Credentials, body *string) error {
	switch {
	case *body == "":
		*body = c.SessionID
	case c.SessionID == "":
		c.SessionID = *body
	case *body != c.SessionID:
		return plexus.Errorf(plexus.CodeInvalidRequest, "sessionId in the body differs from the %s header", plexus.SessionHeader)
	}
	return nil
}
