// Package sse reads Server-Sent Events (text/event-stream) as the HTML
// standard's event stream interpretation says: data lines joined with
// newlines, the event, id and retry fields, comments, CR, LF and CRLF line
// ends, a leading byte order mark. It is the one reader of the daemon's
// streams (the agent client, `plexus mcp serve`) and of an MCP server's
// (the Streamable HTTP pass-through).
//
// It reads lines in place in its buffer and keeps one buffer for an
// event's values, so that a stream of small events costs no allocation per
// event. It never reads past the blank line that ends an event, and never
// holds more of an event than its bound.
package sse

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"math"
)

// Event is one dispatched event. Its slices are the [Reader]'s, valid until
// its next call of Next: copy what is kept.
type Event struct {
	Type  []byte // the event field; empty is the standard's default, "message"
	ID    []byte // the event's id field (the last one), empty when it has none
	Retry []byte // the retry field as written: all ASCII digits in the standard reading
	Data  []byte // the data lines joined with "\n"
}

// Options are a reader's bound and its departure from the standard; the
// zero value reads as the standard does, without a bound.
type Options struct {
	// MaxEvent bounds an event: the bytes of its lines, their ends,
	// comments and unknown fields included. An event beyond it is a
	// *TooLargeError, found before more than MaxEvent bytes of it are
	// held. 0 is no bound.
	MaxEvent int

	// GoSDK reads as the MCP Go SDK's client reads a stream (its
	// mcp/event.go scanner), for a caller that must answer as that client
	// would: only LF ends a line (CRs before it are dropped) and a byte
	// order mark is not skipped; a line without a colon is a
	// *MalformedError; field values are trimmed of white space, not of one
	// leading space; an id with NUL is kept, a retry kept as written; an
	// event is dispatched when any of its values is not empty (an id alone
	// too, empty data not); and an event the stream ends without its blank
	// line is dispatched.
	GoSDK bool
}

// TooLargeError is an event beyond [Options.MaxEvent].
type TooLargeError struct{ Max int }

func (e *TooLargeError) Error() string {
	return fmt.Sprintf("sse: an event larger than %d bytes", e.Max)
}

// MalformedError is a line without a colon, in the [Options.GoSDK] reading.
type MalformedError struct {
	Line []byte // the line's first 128 bytes
}

func (e *MalformedError) Error() string {
	return fmt.Sprintf("sse: malformed line %q", e.Line)
}

// Reader reads the events of one stream. It is not safe for concurrent use.
type Reader struct {
	br   bufio.Reader // by value: a Reader on its caller's stack costs no allocation
	o    Options
	long []byte // a line longer than br's buffer, gathered

	// The current event's values: data, and the other fields until its
	// first data line, in buf, the fields after it in late (so that the
	// data stays in one piece and is never moved).
	buf, late         []byte
	data              span
	typ, id, retry    span
	hasData           bool
	skipLF, pastFirst bool  // a CR ended the last line; the first line (its BOM) is read
	err               error // the stream's end or failure, which Next returns from then on
}

// span is a value of an event: buf[off:end], or late's.
type span struct {
	off, end int
	late     bool
}

// NewReader returns a reader of rd's events.
func NewReader(rd io.Reader, o Options) *Reader {
	r := &Reader{}
	r.Reset(rd, o)
	return r
}

// Reset makes r a reader of rd's events, as NewReader would, keeping the
// buffers it has.
func (r *Reader) Reset(rd io.Reader, o Options) {
	r.br.Reset(rd) // a 4 KiB buffer
	r.o, r.skipLF, r.pastFirst, r.err = o, false, false, nil
}

// newReaderSize is NewReader with a buffer of size bytes, for tests. (rd
// is hidden from bufio, which would hand back a *bufio.Reader.)
func newReaderSize(rd io.Reader, size int, o Options) *Reader {
	return &Reader{br: *bufio.NewReaderSize(struct{ io.Reader }{rd}, size), o: o}
}

// Next reads the next event. At the stream's end it returns io.EOF (an
// event the stream ends within is dropped, unless [Options.GoSDK]); a
// broken stream is its reader's error, an event beyond the bound a
// *TooLargeError. After an error, Next returns it again.
func (r *Reader) Next() (Event, error) {
	if r.err != nil {
		return Event{}, r.err
	}
	ev, err := r.next()
	r.err = err
	return ev, err
}

func (r *Reader) next() (Event, error) {
	r.clear()
	size := 0 // bytes of the event read
	for {
		budget := math.MaxInt
		if r.o.MaxEvent > 0 {
			budget = r.o.MaxEvent - size
		}
		line, n, err := r.readLine(budget)
		size += n
		eof := errors.Is(err, io.EOF)
		switch {
		case err != nil && !eof:
			return Event{}, err
		case eof && (n == 0 || !r.o.GoSDK):
			if r.o.GoSDK && r.pending() {
				return r.event(), nil
			}
			return Event{}, io.EOF
		case len(line) == 0:
			if r.pending() {
				return r.event(), nil
			}
			r.clear()
			size = 0
			continue
		}
		if err := r.field(line); err != nil {
			return Event{}, err
		}
		if eof && r.pending() { // GoSDK: the unterminated last event
			return r.event(), nil
		}
	}
}

// clear forgets the current event.
func (r *Reader) clear() {
	r.buf, r.late = r.buf[:0], r.late[:0]
	r.data, r.typ, r.id, r.retry = span{}, span{}, span{}, span{}
	r.hasData = false
}

// pending says whether the event read so far is dispatched at its end.
func (r *Reader) pending() bool {
	if !r.o.GoSDK {
		return r.hasData
	}
	return r.data.end > r.data.off || r.typ.end > r.typ.off || r.id.end > r.id.off || r.retry.end > r.retry.off
}

func (r *Reader) event() Event {
	return Event{Type: r.value(r.typ), ID: r.value(r.id), Retry: r.value(r.retry), Data: r.value(r.data)}
}

func (r *Reader) value(s span) []byte {
	if s.late {
		return r.late[s.off:s.end:s.end]
	}
	return r.buf[s.off:s.end:s.end]
}

// field takes one line of the event.
func (r *Reader) field(line []byte) error {
	name, value, found := bytes.Cut(line, []byte(":"))
	switch {
	case !found && r.o.GoSDK:
		return &MalformedError{Line: bytes.Clone(line[:min(len(line), 128)])}
	case r.o.GoSDK:
		value = bytes.TrimSpace(value)
	default:
		value = bytes.TrimPrefix(value, []byte(" "))
	}
	switch string(name) {
	case "data":
		if r.hasData {
			r.buf = append(r.buf, '\n')
		} else {
			r.grow(len(value))
			r.data = span{off: len(r.buf)}
			r.hasData = true
		}
		r.buf = append(r.buf, value...)
		r.data.end = len(r.buf)
	case "event":
		r.typ = r.keep(value)
	case "id":
		if r.o.GoSDK || bytes.IndexByte(value, 0) < 0 {
			r.id = r.keep(value)
		}
	case "retry":
		if r.o.GoSDK || digits(value) {
			r.retry = r.keep(value)
		}
	}
	return nil
}

// keep stores a value other than data: in buf before the event's data, in
// late after it.
func (r *Reader) keep(v []byte) span {
	if r.hasData {
		s := span{off: len(r.late), late: true}
		r.late = append(r.late, v...)
		s.end = len(r.late)
		return s
	}
	r.grow(len(v))
	s := span{off: len(r.buf)}
	r.buf = append(r.buf, v...)
	s.end = len(r.buf)
	return s
}

// grow makes buf's first allocation hold what is buffered of the stream
// as well as v: most often the rest of the event, so that buf is
// allocated once.
func (r *Reader) grow(v int) {
	if cap(r.buf) == 0 {
		r.buf = make([]byte, 0, max(64, v+r.br.Buffered()))
	}
}

func digits(v []byte) bool {
	for _, c := range v {
		if c < '0' || c > '9' {
			return false
		}
	}
	return len(v) > 0
}

// readLine reads one line, without its end, and says how many bytes it
// took, refusing a line beyond budget. The line is in br's buffer when it
// fits (valid until br is read again), else gathered in long. At the
// stream's end it returns what it read of an unterminated last line with
// io.EOF.
func (r *Reader) readLine(budget int) (line []byte, n int, err error) {
	if r.skipLF {
		r.skipLF = false
		b, err := r.br.Peek(1)
		if err != nil {
			return nil, 0, err
		}
		if b[0] == '\n' {
			n = 1
			if _, err := r.br.Discard(1); err != nil {
				return nil, n, err
			}
		}
	}
	r.long = r.long[:0]
	scanned := 0 // bytes of br's buffer searched for the line's end
	for {
		b, err := r.br.Peek(max(r.br.Buffered(), scanned+1))
		if i, end := r.lineEnd(b, scanned); i >= 0 {
			if n += end; n > budget {
				return nil, n, &TooLargeError{Max: r.o.MaxEvent}
			}
			line = b[:i]
			if len(r.long) > 0 {
				line = append(r.long, line...)
				r.long = line
			}
			if _, err := r.br.Discard(end); err != nil {
				return nil, n, err
			}
			return r.trim(line), n, nil
		}
		scanned = len(b)
		switch {
		case errors.Is(err, bufio.ErrBufferFull) || err == nil && len(b) == r.br.Size():
			// A line longer than the buffer: gathered, within its bound.
			if n += len(b); n > budget {
				return nil, n, &TooLargeError{Max: r.o.MaxEvent}
			}
			r.long = append(r.long, b...)
			if _, err := r.br.Discard(len(b)); err != nil {
				return nil, n, err
			}
			scanned = 0
		case err != nil:
			if n += len(b); n > budget {
				return nil, n, &TooLargeError{Max: r.o.MaxEvent}
			}
			line = b
			if len(r.long) > 0 {
				line = append(r.long, b...)
				r.long = line
			}
			if _, derr := r.br.Discard(len(b)); derr != nil {
				return nil, n, derr
			}
			return r.trim(line), n, err
		}
	}
}

// lineEnd finds the end of the line b begins with, searching from from:
// the index of its end and the bytes the line takes with it, or -1. A CR
// the buffer ends with ends the line (the standard's reading); an LF that
// follows it is skipped by the next read.
func (r *Reader) lineEnd(b []byte, from int) (i, end int) {
	lf := bytes.IndexByte(b[from:], '\n')
	if r.o.GoSDK {
		if lf < 0 {
			return -1, 0
		}
		return from + lf, from + lf + 1
	}
	seg := b[from:]
	if lf >= 0 {
		seg = seg[:lf]
	}
	if cr := bytes.IndexByte(seg, '\r'); cr >= 0 {
		i = from + cr
		switch {
		case i+1 < len(b) && b[i+1] == '\n':
			return i, i + 2
		case i+1 == len(b):
			r.skipLF = true
		}
		return i, i + 1
	}
	if lf < 0 {
		return -1, 0
	}
	return from + lf, from + lf + 1
}

// trim drops what a line ends with in the GoSDK reading (the CRs before
// its LF), and the byte order mark the standard skips at the start.
func (r *Reader) trim(line []byte) []byte {
	first := !r.pastFirst
	r.pastFirst = true
	if r.o.GoSDK {
		return bytes.TrimRight(line, "\r")
	}
	if first {
		return bytes.TrimPrefix(line, []byte("\xEF\xBB\xBF"))
	}
	return line
}
