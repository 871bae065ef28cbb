package http

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"iter"
	nethttp "net/http"

	"github.com/plexus-gw/plexus"
)

// manifestTail is how an answer whose last field is a manifest with no
// entries ends when encodeJSON writes it: writeManifest writes the entries
// in its place.
const manifestTail = `"entries":null}}` + "\n"

// streamBufSize is the size of the writes a streamed manifest makes: a
// bufio-sized window, whatever the manifest's size.
const streamBufSize = 32 << 10

// writeManifest answers 200 with head, a handshake's or a manifest's answer
// whose manifest's entries are left out, and the entries streamed in their
// place: the bytes are those encodeJSON writes for the whole answer, but the
// handler holds one entry at a time instead of the whole body (tens of
// megabytes on a large registry). The body is sent chunked once it outgrows
// the window.
//
// An entry can fail to encode (its extras are the owner's values: a YAML
// .nan is a float JSON cannot hold), so each is encoded whole before any
// byte of it is written. A failure before the first window is sent is a
// 500 internal_error as from writeJSON; after it, the status and part of the
// body are gone, so the response is aborted (the connection is cut before
// the chunked body's end): the client sees a broken body, never a shorter
// manifest that looks valid.
func (s *Server) writeManifest(w nethttp.ResponseWriter, r *nethttp.Request, head any, entries iter.Seq[*plexus.Entry]) {
	buf := s.encodeBuf()
	defer s.putEncodeBuf(buf)
	if err := encodeJSON(buf, head); err != nil || !bytes.HasSuffix(buf.Bytes(), []byte(manifestTail)) {
		if err == nil {
			err = fmt.Errorf("encode manifest head: %T does not end with the manifest's entries", head)
		}
		s.writeEncoded(w, r, nethttp.StatusOK, buf, err)
		return
	}
	buf.Truncate(buf.Len() - len(manifestTail))
	buf.WriteString(`"entries":[`)

	s.setJSONHeaders(w.Header())
	cw := &committer{w: w}
	bw := bufio.NewWriterSize(cw, streamBufSize)
	if _, err := bw.Write(buf.Bytes()); err != nil {
		return // the client is gone
	}
	err := writeEntries(bw, buf, entries)
	if err == nil {
		_, err = bw.WriteString("]}}\n")
	}
	if err == nil {
		err = bw.Flush()
	}
	var ee *entryError
	switch {
	case errors.As(err, &ee) && !cw.committed:
		s.writeEncoded(w, r, nethttp.StatusOK, buf, err)
	case errors.As(err, &ee):
		s.log.Error("encode response: manifest aborted mid-stream", "method", r.Method, "path", r.URL.Path, "err", err)
		panic(nethttp.ErrAbortHandler) // net/http cuts the connection without ending the body
	case err != nil:
		s.log.Debug("write manifest: client gone", "path", r.URL.Path, "err", err)
	}
}

// entryError is an entry that could not be encoded, as opposed to a write
// that failed.
type entryError struct{ err error }

func (e *entryError) Error() string { return e.err.Error() }
func (e *entryError) Unwrap() error { return e.err }

// writeEntries writes the entries comma-separated to bw, each encoded into
// scratch first.
func writeEntries(bw *bufio.Writer, scratch *bytes.Buffer, entries iter.Seq[*plexus.Entry]) error {
	enc := json.NewEncoder(scratch) // as encodeJSON's, made once
	enc.SetEscapeHTML(false)
	first := true
	for e := range entries {
		scratch.Reset()
		if err := enc.Encode(e); err != nil {
			return &entryError{err: fmt.Errorf("encode manifest entry %q: %w", e.ID, err)}
		}
		if !first {
			if err := bw.WriteByte(','); err != nil {
				return err
			}
		}
		first = false
		if _, err := bw.Write(scratch.Bytes()[:scratch.Len()-1]); err != nil { // encodeJSON's newline
			return err
		}
	}
	return nil
}

// committer writes the status (200) with the first bytes it passes on, so
// a failure before then can still answer another status.
type committer struct {
	w         nethttp.ResponseWriter
	committed bool
}

func (c *committer) Write(p []byte) (int, error) {
	if !c.committed {
		c.committed = true
		c.w.WriteHeader(nethttp.StatusOK)
	}
	return c.w.Write(p)
}
