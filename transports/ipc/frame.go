package ipc

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"unicode/utf8"
)

// DefaultMaxFrameBytes is the protocol's default max_frame_bytes (§2.2):
// 4,194,304 bytes, counted over the JSON payload, not the 4-byte prefix.
const DefaultMaxFrameBytes = 4 << 20

// headerLen is the size of the length prefix (§2.1).
const headerLen = 4

// FrameErrorKind names what was wrong with a frame. The values are stable
// strings, fit to be journaled as they are.
type FrameErrorKind string

const (
	// KindZeroLength: the prefix declared an empty payload, which cannot
	// be the one JSON object a frame must carry.
	KindZeroLength FrameErrorKind = "zero_length"
	// KindOversize: the prefix declared more than the limit. The body was
	// neither read nor allocated.
	KindOversize FrameErrorKind = "oversize"
	// KindTruncated: the stream ended inside the prefix or the body.
	KindTruncated FrameErrorKind = "truncated"
	// KindInvalidUTF8: the payload is not valid UTF-8.
	KindInvalidUTF8 FrameErrorKind = "invalid_utf8"
	// KindNotObject: the payload is JSON-ish text whose value is not an
	// object (an array, string, number, true/false/null, or nothing).
	KindNotObject FrameErrorKind = "not_object"
	// KindInvalidJSON: the payload starts like an object but is not valid
	// JSON (including trailing data after the object).
	KindInvalidJSON FrameErrorKind = "invalid_json"
)

// FrameError is a frame that broke the rules of §2. Its fields are sizes and
// offsets only: neither the fields nor Error() ever contain payload bytes,
// so the error can be journaled as is (§2.2: "a safe audit event (no payload
// content)").
type FrameError struct {
	Kind FrameErrorKind
	// Declared is the length the prefix declared; 0 when the prefix itself
	// was cut short.
	Declared uint64
	// Max is the limit in force.
	Max int
	// Got and Want are, for KindTruncated, how many bytes of the cut part
	// (the 4-byte prefix, or the body) arrived and were expected.
	Got, Want int
	// Offset is, for KindInvalidUTF8 and KindInvalidJSON, the byte offset in
	// the payload where the problem was found.
	Offset int64
}

func (e *FrameError) Error() string {
	switch e.Kind {
	case KindZeroLength:
		return "ipc frame: zero length"
	case KindOversize:
		return fmt.Sprintf("ipc frame: oversize: declared %d bytes, max %d", e.Declared, e.Max)
	case KindTruncated:
		if e.Declared == 0 {
			return fmt.Sprintf("ipc frame: truncated length prefix: got %d of %d bytes", e.Got, e.Want)
		}
		return fmt.Sprintf("ipc frame: truncated body: got %d of %d bytes", e.Got, e.Want)
	case KindInvalidUTF8:
		return fmt.Sprintf("ipc frame: invalid UTF-8 at offset %d of %d bytes", e.Offset, e.Declared)
	case KindNotObject:
		return fmt.Sprintf("ipc frame: payload of %d bytes is not a JSON object", e.Declared)
	case KindInvalidJSON:
		return fmt.Sprintf("ipc frame: invalid JSON at offset %d of %d bytes", e.Offset, e.Declared)
	}
	return fmt.Sprintf("ipc frame: %s", e.Kind)
}

// MustClose reports whether the connection has to be closed after this
// error because the stream can no longer be read frame by frame:
//
//   - KindOversize: the body was left unread on purpose (reading it to skip
//     it is what the limit exists to prevent), so the next bytes are not a
//     prefix. §2.2 prefers closing "since parsing may be unsafe".
//   - KindTruncated: the peer stopped sending mid-frame.
//
// After the other kinds the whole declared body was consumed and the stream
// is at a frame boundary; the receiver may answer with a structured error
// instead. The Plexus ipc server closes on every FrameError all the same:
// a peer that cannot frame one JSON object is not one to keep talking to.
func (e *FrameError) MustClose() bool {
	return e.Kind == KindOversize || e.Kind == KindTruncated
}

// effectiveMax is the limit ReadFrame and WriteFrame apply: limit, or
// DefaultMaxFrameBytes when limit <= 0, and never more than a 4-byte prefix
// can declare.
func effectiveMax(limit int) int {
	if limit <= 0 {
		return DefaultMaxFrameBytes
	}
	if uint64(limit) > math.MaxUint32 {
		return math.MaxUint32
	}
	return limit
}

// ReadFrame reads one frame from r and returns its payload: one UTF-8 JSON
// object of at most limit bytes (DefaultMaxFrameBytes when limit <= 0).
//
// It returns io.EOF, unwrapped, when r ends cleanly at a frame boundary,
// and a *FrameError when the frame breaks §2 (see [FrameError.MustClose]).
// The body is allocated only once its declared length is known to be
// within limit, so a hostile prefix costs at most limit bytes of memory and
// never makes ReadFrame read past the 4-byte prefix. Other read errors
// (a deadline, a reset connection) are returned wrapped.
//
// ReadFrame must not be called concurrently on the same reader (§2.3: one
// connection is read in order).
func ReadFrame(r io.Reader, limit int) ([]byte, error) {
	limit = effectiveMax(limit)
	var hdr [headerLen]byte
	n, err := io.ReadFull(r, hdr[:])
	switch {
	case err == io.EOF:
		return nil, io.EOF
	case err == io.ErrUnexpectedEOF:
		return nil, &FrameError{Kind: KindTruncated, Max: limit, Got: n, Want: headerLen}
	case err != nil:
		return nil, fmt.Errorf("read ipc frame prefix: %w", err)
	}
	declared := binary.BigEndian.Uint32(hdr[:])
	if declared == 0 {
		return nil, &FrameError{Kind: KindZeroLength, Max: limit}
	}
	if uint64(declared) > uint64(limit) {
		return nil, &FrameError{Kind: KindOversize, Declared: uint64(declared), Max: limit}
	}
	body := make([]byte, declared)
	n, err = io.ReadFull(r, body)
	switch {
	case err == io.EOF || err == io.ErrUnexpectedEOF:
		return nil, &FrameError{Kind: KindTruncated, Declared: uint64(declared), Max: limit, Got: n, Want: int(declared)}
	case err != nil:
		return nil, fmt.Errorf("read ipc frame body: %w", err)
	}
	if err := checkPayload(body, limit); err != nil {
		return nil, err
	}
	return body, nil
}

// WriteFrame writes payload to w as one frame. It refuses, with the same
// *FrameError a reader would return, a payload that is empty, larger than
// limit (DefaultMaxFrameBytes when limit <= 0), or not one UTF-8 JSON object,
// so Plexus never sends what it would itself refuse. Nothing is written
// then.
//
// The prefix and payload go out in one Write, but WriteFrame is not safe for
// concurrent use on the same writer: callers serialize their writes.
func WriteFrame(w io.Writer, payload []byte, limit int) error {
	limit = effectiveMax(limit)
	if len(payload) == 0 {
		return &FrameError{Kind: KindZeroLength, Max: limit}
	}
	if len(payload) > limit {
		return &FrameError{Kind: KindOversize, Declared: uint64(len(payload)), Max: limit}
	}
	if err := checkPayload(payload, limit); err != nil {
		return err
	}
	buf := make([]byte, headerLen, headerLen+len(payload))
	binary.BigEndian.PutUint32(buf, uint32(len(payload)))
	buf = append(buf, payload...)
	if _, err := w.Write(buf); err != nil {
		return fmt.Errorf("write ipc frame: %w", err)
	}
	return nil
}

// checkPayload verifies that b is valid UTF-8 holding exactly one JSON
// object (JSON whitespace around it is allowed).
func checkPayload(b []byte, limit int) error {
	size := uint64(len(b))
	if !utf8.Valid(b) {
		return &FrameError{Kind: KindInvalidUTF8, Declared: size, Max: limit, Offset: int64(invalidUTF8At(b))}
	}
	i := 0
	for i < len(b) && isJSONSpace(b[i]) {
		i++
	}
	if i == len(b) || b[i] != '{' {
		return &FrameError{Kind: KindNotObject, Declared: size, Max: limit}
	}
	if !json.Valid(b) {
		// json.Valid does not say where; Unmarshal into a RawMessage does
		// (and does not build a tree). Its message quotes payload bytes,
		// so only the offset is kept.
		off := int64(-1)
		var raw json.RawMessage
		var se *json.SyntaxError
		if err := json.Unmarshal(b, &raw); errors.As(err, &se) {
			off = se.Offset
		}
		return &FrameError{Kind: KindInvalidJSON, Declared: size, Max: limit, Offset: off}
	}
	return nil
}

func isJSONSpace(c byte) bool {
	return c == ' ' || c == '\t' || c == '\n' || c == '\r'
}

// invalidUTF8At returns the offset of the first byte of b that does not
// start a valid UTF-8 sequence.
func invalidUTF8At(b []byte) int {
	for i := 0; i < len(b); {
		r, size := utf8.DecodeRune(b[i:])
		if r == utf8.RuneError && size == 1 {
			return i
		}
		i += size
	}
	return len(b)
}
