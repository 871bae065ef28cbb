package http

import (
	"bytes"
	"mime"
	nethttp "net/http"
	"strings"
	"time"

	"github.com/plexus-gw/plexus"
)

// wantsStream reports whether an /invoke caller asked for the call's
// progress: Accept: text/event-stream, or ?stream=true where it cannot set
// headers.
func wantsStream(r *nethttp.Request) bool {
	if r.URL.RawQuery != "" {
		if v := r.URL.Query().Get("stream"); v == "true" || v == "1" {
			return true
		}
	}
	for part := range strings.SplitSeq(r.Header.Get("Accept"), ",") {
		// A media type that parses as text/event-stream holds it,
		// lower-cased: the parse is skipped for every other one.
		if !strings.Contains(strings.ToLower(part), "text/event-stream") {
			continue
		}
		if mt, _, err := mime.ParseMediaType(strings.TrimSpace(part)); err == nil && mt == "text/event-stream" {
			return true
		}
	}
	return false
}

// invokeStream answers a streamed /invoke the way MCP's Streamable HTTP
// does: a call that relays nothing before its result is answered exactly as
// an unstreamed one (JSON, with its status); once the first progress piece
// arrives the answer becomes Server-Sent Events, 200: one "progress" event
// per piece (an InvokeProgressEvent), then one "result" event carrying the
// InvokeResponse, then the stream ends. The caller reads Content-Type to
// know which it got. A caller that goes away cancels the call.
func (s *Server) invokeStream(w nethttp.ResponseWriter, r *nethttp.Request, req plexus.InvokeRequest) {
	rc := nethttp.NewResponseController(w)
	streaming := false
	broken := false
	var buf, enc bytes.Buffer
	send := func(typ string, data any) {
		if broken {
			return
		}
		enc.Reset()
		b := []byte(`null`)
		if err := encodeJSON(&enc, data); err == nil {
			b = bytes.TrimSuffix(enc.Bytes(), []byte("\n"))
		}
		buf.Reset()
		frameEvent(&buf, plexus.Event{Type: typ, Data: b})
		if _, err := w.Write(buf.Bytes()); err != nil || rc.Flush() != nil {
			broken = true // the caller went away: r.Context() ends the call
		}
	}
	sink := func(ev plexus.InvokeProgressEvent) {
		if !streaming {
			streaming = true
			// A stream lives as long as its call: the whole-response
			// deadline would cut a long call's stream.
			_ = rc.SetWriteDeadline(time.Time{})
			setSSEHeaders(w.Header())
			w.WriteHeader(nethttp.StatusOK)
		}
		send(plexus.EventInvokeProgress, ev)
	}
	resp := s.b.Invoke.InvokeStream(r.Context(), credentials(r), req, sink)
	if streaming {
		send("result", resp)
		return
	}
	s.writeInvoke(w, r, resp)
}

// setSSEHeaders marks a response as an event stream that no cache or proxy
// may hold back.
func setSSEHeaders(h nethttp.Header) {
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-store")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("X-Accel-Buffering", "no")
}
