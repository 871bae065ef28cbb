package http

import (
	"bytes"
	"context"
	"encoding/json"
	nethttp "net/http"
	"strconv"
	"strings"
	"time"

	"github.com/plexus-gw/plexus"
)

// handleEvents streams the session's events as Server-Sent Events. The
// gateway decides who may subscribe and which events reach whom; the edge
// only frames them. Each event carries its journal id, so a reconnecting
// client resumes with Last-Event-ID (or ?lastEventId= where it cannot set
// headers). A Subscribe error is answered in the uniform envelope before any
// stream byte is written.
//
// The stream ends when the gateway closes the channel (it drops a
// subscriber that falls behind), when the client goes away, or when the
// server shuts down. A client over its stream caps is refused with
// rate_limited (429) by Subscribe. A peer that is gone without closing, or
// that stopped reading, is found by the heartbeat: each frame must be taken
// within two heartbeats, else the write fails and the stream ends, giving
// its slot back.
func (s *Server) handleEvents(w nethttp.ResponseWriter, r *nethttp.Request) {
	last, err := lastEventID(r)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	// The subscription lives as long as this handler: cancelling ctx on
	// return tells the gateway to stop sending.
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	stop := context.AfterFunc(s.streams, cancel)
	defer stop()

	events, err := s.b.Events.Subscribe(ctx, credentials(r), last)
	if err != nil {
		s.writeError(w, r, err)
		return
	}

	// A stream outlives any per-request deadline; a read deadline passing
	// would even cancel the request context, so clear it. The write
	// deadline moves with each frame instead.
	rc := nethttp.NewResponseController(w)
	frameTimeout := 2 * s.opts.Heartbeat
	// Without a write deadline a peer that stops reading would hold its
	// slot (the streams are capped) for good: such a stream is not served.
	if err := rc.SetWriteDeadline(time.Now().Add(frameTimeout)); err != nil {
		return
	}
	if err := rc.SetReadDeadline(time.Time{}); err != nil {
		return
	}

	setSSEHeaders(w.Header())
	w.WriteHeader(nethttp.StatusOK)
	if rc.Flush() != nil {
		return
	}

	ping := time.NewTicker(s.opts.Heartbeat)
	defer ping.Stop()
	var buf bytes.Buffer
	for {
		buf.Reset()
		select {
		case <-ctx.Done():
			return
		case <-ping.C:
			buf.WriteString(": ping\n\n")
		case ev, ok := <-events:
			if !ok {
				return
			}
			frameEvent(&buf, ev)
		}
		if err := rc.SetWriteDeadline(time.Now().Add(frameTimeout)); err != nil {
			return
		}
		if _, err := w.Write(buf.Bytes()); err != nil {
			return
		}
		if rc.Flush() != nil {
			return
		}
	}
}

// lastEventID reads the resume point: the Last-Event-ID header, else the
// lastEventId query parameter, else 0 (no replay).
func lastEventID(r *nethttp.Request) (int64, error) {
	v := r.Header.Get("Last-Event-ID")
	if v == "" {
		v = r.URL.Query().Get("lastEventId")
	}
	if v == "" {
		return 0, nil
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n < 0 {
		return 0, plexus.Errorf(plexus.CodeInvalidRequest, "Last-Event-ID must be a non-negative integer event id")
	}
	return n, nil
}

// frameEvent writes one SSE frame. The data is Secret when set (the
// token-carrying variant the gateway addresses to this subscriber alone),
// else Data. JSON is compacted onto one line; anything else is split into
// one data line per line so it cannot forge frame boundaries.
func frameEvent(buf *bytes.Buffer, ev plexus.Event) {
	if ev.ID > 0 {
		buf.WriteString("id: ")
		buf.WriteString(strconv.FormatInt(ev.ID, 10))
		buf.WriteByte('\n')
	}
	if t := oneLine(ev.Type); t != "" {
		buf.WriteString("event: ")
		buf.WriteString(t)
		buf.WriteByte('\n')
	}
	data := ev.Data
	if len(ev.Secret) > 0 {
		data = ev.Secret
	}
	if len(bytes.TrimSpace(data)) == 0 {
		data = json.RawMessage("null")
	}
	buf.WriteString("data: ")
	mark := buf.Len()
	if err := json.Compact(buf, data); err != nil {
		buf.Truncate(mark)
		lines := strings.Split(strings.NewReplacer("\r\n", "\n", "\r", "\n").Replace(string(data)), "\n")
		buf.WriteString(strings.Join(lines, "\ndata: "))
	}
	buf.WriteString("\n\n")
}

func oneLine(s string) string {
	return strings.Map(func(r rune) rune {
		if r == '\n' || r == '\r' {
			return -1
		}
		return r
	}, s)
}
