package http

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	nethttp "net/http"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/plexus-gw/plexus"
	"github.com/plexus-gw/plexus/gateway"
)

// openStream GETs /events and returns the reader of its body; cancel ends
// the request from the client side.
func openStream(tb testing.TB, addr string, hdr map[string]string, query string) (*nethttp.Response, *bufio.Reader, context.CancelFunc) {
	tb.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	req, err := nethttp.NewRequestWithContext(ctx, "GET", "http://"+addr+"/events"+query, nil)
	if err != nil {
		tb.Fatal(err)
	}
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	client := &nethttp.Client{Transport: &nethttp.Transport{DisableKeepAlives: true}}
	resp, err := client.Do(req)
	if err != nil {
		cancel()
		tb.Fatal(err)
	}
	tb.Cleanup(func() { cancel(); resp.Body.Close() })
	return resp, bufio.NewReader(resp.Body), cancel
}

// readFrame reads one SSE frame (up to a blank line) as its lines.
func readFrame(tb testing.TB, br *bufio.Reader) []string {
	tb.Helper()
	var lines []string
	for {
		line, err := br.ReadString('\n')
		if err != nil {
			tb.Fatalf("read frame: %v (so far %q)", err, lines)
		}
		line = strings.TrimSuffix(line, "\n")
		if line == "" {
			return lines
		}
		lines = append(lines, line)
	}
}

// nextEvent skips heartbeats and returns the next event frame.
func nextEvent(tb testing.TB, br *bufio.Reader) []string {
	tb.Helper()
	for {
		if f := readFrame(tb, br); len(f) != 1 || f[0] != ": ping" {
			return f
		}
	}
}

func TestEvents(t *testing.T) {
	t.Run("Delivery", func(t *testing.T) {
		api := &stubAPI{Events: make(chan plexus.Event, 4), SubCtx: make(chan context.Context, 1)}
		ts := mustServe(t, Backend{Events: stubEvents{api}}, Options{})
		resp, br, _ := openStream(t, ts.Addr, map[string]string{"Last-Event-ID": "41", plexus.SessionHeader: "sess_1"}, "")
		if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "text/event-stream" {
			t.Fatalf("status %d content-type %q", resp.StatusCode, resp.Header.Get("Content-Type"))
		}
		_, c, arg := api.Last(t)
		if arg != int64(41) || c.SessionID != "sess_1" {
			t.Errorf("Subscribe(session %q, last %v), want sess_1, 41", c.SessionID, arg)
		}

		api.Events <- plexus.Event{ID: 42, Type: plexus.EventManifestChanged, Data: []byte("{\n  \"type\": \"manifest_changed\",\n  \"revision\": 3\n}")}
		api.Events <- plexus.Event{ID: 43, Type: plexus.EventGrantResolved,
			Data:   []byte(`{"type":"grant_resolved","pendingId":"p"}`),
			Secret: []byte(`{"type":"grant_resolved","pendingId":"p","token":{"token":"eyJ"}}`)}
		api.Events <- plexus.Event{ID: 44, Type: plexus.EventTokenRevoked, Data: []byte("not\njson")}

		want := [][]string{
			{"id: 42", "event: manifest_changed", `data: {"type":"manifest_changed","revision":3}`},
			{"id: 43", "event: grant_resolved", `data: {"type":"grant_resolved","pendingId":"p","token":{"token":"eyJ"}}`},
			{"id: 44", "event: token_revoked", "data: not", "data: json"},
		}
		for i, w := range want {
			if diff := cmp.Diff(w, nextEvent(t, br)); diff != "" {
				t.Errorf("frame %d (-want +got):\n%s", i, diff)
			}
		}

		close(api.Events)
		if rest, err := io.ReadAll(br); err != nil || len(rest) != 0 {
			t.Errorf("after close: %q, %v; want clean EOF", rest, err)
		}
	})

	t.Run("LastEventIDQuery", func(t *testing.T) {
		api := &stubAPI{Events: make(chan plexus.Event)}
		close(api.Events)
		ts := mustServe(t, Backend{Events: stubEvents{api}}, Options{})
		openStream(t, ts.Addr, nil, "?lastEventId=7")
		if _, _, arg := api.Last(t); arg != int64(7) {
			t.Errorf("last = %v, want 7", arg)
		}
		openStream(t, ts.Addr, map[string]string{"Last-Event-ID": "9"}, "?lastEventId=7")
		if _, _, arg := api.Last(t); arg != int64(9) {
			t.Errorf("last = %v, want the header's 9", arg)
		}
	})

	t.Run("BadLastEventID", func(t *testing.T) {
		api := &stubAPI{}
		ts := mustServe(t, Backend{Events: stubEvents{api}}, Options{})
		for _, v := range []string{"x", "-1", "1.5"} {
			resp := ts.do(t, "GET", "/events", map[string]string{"Last-Event-ID": v}, "")
			if resp.Status != 400 || errorOf(t, resp).Code != plexus.CodeInvalidRequest {
				t.Errorf("Last-Event-ID %q: %d %s", v, resp.Status, resp.Body)
			}
		}
		if len(api.Calls()) != 0 {
			t.Errorf("gateway called: %v", api.Calls())
		}
	})

	t.Run("SubscribeError", func(t *testing.T) {
		api := &stubAPI{Err: &plexus.Error{Code: plexus.CodeSessionExpired, Message: "gone"}}
		ts := mustServe(t, Backend{Events: stubEvents{api}}, Options{})
		resp := ts.do(t, "GET", "/events", nil, "")
		if resp.Status != 401 || resp.Header.Get("Content-Type") != "application/json" {
			t.Fatalf("got %d %q", resp.Status, resp.Header.Get("Content-Type"))
		}
		if got := errorOf(t, resp).Code; got != plexus.CodeSessionExpired {
			t.Errorf("code = %q", got)
		}
	})

	t.Run("HeartbeatOutlivesDeadlines", func(t *testing.T) {
		api := &stubAPI{Events: make(chan plexus.Event, 1)}
		// A Debug logger puts the status-recording writer in the chain, so
		// the deadlines are cleared through its Unwrap.
		debug := slog.New(slog.NewTextHandler(io.Discard, &slog.HandlerOptions{Level: slog.LevelDebug}))
		ts := mustServe(t, Backend{Events: stubEvents{api}}, Options{Logger: debug, Heartbeat: 20 * time.Millisecond, WriteTimeout: 100 * time.Millisecond, ReadTimeout: 100 * time.Millisecond})
		_, br, _ := openStream(t, ts.Addr, nil, "")
		deadline := time.Now().Add(400 * time.Millisecond)
		pings := 0
		for time.Now().Before(deadline) {
			if diff := cmp.Diff([]string{": ping"}, readFrame(t, br)); diff != "" {
				t.Fatalf("frame (-want +got):\n%s", diff)
			}
			pings++
		}
		if pings < 3 {
			t.Errorf("%d pings in 400ms at 20ms", pings)
		}
		api.Events <- plexus.Event{ID: 1, Type: plexus.EventSourceStatus, Data: []byte(`{}`)}
		if diff := cmp.Diff([]string{"id: 1", "event: source_status", "data: {}"}, nextEvent(t, br)); diff != "" {
			t.Errorf("event after deadlines (-want +got):\n%s", diff)
		}
	})

	t.Run("ClientGoesAway", func(t *testing.T) {
		api := &stubAPI{Events: make(chan plexus.Event), SubCtx: make(chan context.Context, 1)}
		ts := mustServe(t, Backend{Events: stubEvents{api}}, Options{})
		ts.do(t, "GET", "/nope", nil, "") // the accept loop is up
		baseline := settledGoroutines()
		_, _, cancel := openStream(t, ts.Addr, nil, "")
		subCtx := <-api.SubCtx
		cancel()
		select {
		case <-subCtx.Done():
		case <-time.After(5 * time.Second):
			t.Fatal("subscription context not cancelled after the client left")
		}
		waitGoroutines(t, baseline)
	})

	t.Run("PeerStopsReading", func(t *testing.T) {
		// A client that keeps its connection open but reads nothing would
		// hold its stream (and its slot) forever once the socket buffers
		// fill: the frame deadline ends it.
		api := &stubAPI{Events: make(chan plexus.Event), SubCtx: make(chan context.Context, 1)}
		ts := mustServe(t, Backend{Events: stubEvents{api}}, Options{Heartbeat: 20 * time.Millisecond})
		conn, err := net.Dial("tcp", ts.Addr)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		if _, err := fmt.Fprintf(conn, "GET /events HTTP/1.1\r\nHost: %s\r\n\r\n", ts.Addr); err != nil {
			t.Fatal(err)
		}
		subCtx := <-api.SubCtx
		big := plexus.Event{Type: "x", Data: []byte(strconv.Quote(strings.Repeat("a", 1<<20)))}
		limit := time.After(30 * time.Second)
		for {
			select {
			case api.Events <- big:
			case <-subCtx.Done():
				return
			case <-limit:
				t.Fatal("a stream whose peer reads nothing was not ended")
			}
		}
	})

	t.Run("ShutdownEndsStreams", func(t *testing.T) {
		api := &stubAPI{Events: make(chan plexus.Event), SubCtx: make(chan context.Context, 1)}
		srv := New(Backend{Events: stubEvents{api}}, Options{Addr: "127.0.0.1:0", ShutdownTimeout: 5 * time.Second})
		ln, err := srv.Listen()
		if err != nil {
			t.Fatal(err)
		}
		ctx, stop := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- srv.Serve(ctx, ln) }()
		_, br, _ := openStream(t, ln.Addr().String(), nil, "")
		<-api.SubCtx
		start := time.Now()
		stop()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("Serve = %v", err)
			}
		case <-time.After(5 * time.Second):
			t.Fatal("Serve did not return")
		}
		if d := time.Since(start); d > 2*time.Second {
			t.Errorf("shutdown took %v with a stream open", d)
		}
		if _, err := io.ReadAll(br); err != nil && !errors.Is(err, io.ErrUnexpectedEOF) {
			t.Errorf("stream after shutdown: %v", err)
		}
	})
}

// settledGoroutines returns the goroutine count once it stops changing.
func settledGoroutines() int {
	n := runtime.NumGoroutine()
	for i := 0; i < 100; i++ {
		time.Sleep(20 * time.Millisecond)
		m := runtime.NumGoroutine()
		if m == n {
			return n
		}
		n = m
	}
	return n
}

// waitGoroutines waits for the goroutine count to fall back to baseline.
func waitGoroutines(tb testing.TB, baseline int) {
	tb.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for runtime.NumGoroutine() > baseline {
		if time.Now().After(deadline) {
			buf := make([]byte, 1<<16)
			tb.Fatalf("goroutines: %d > baseline %d\n%s", runtime.NumGoroutine(), baseline, buf[:runtime.Stack(buf, true)])
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// Compile-time check that the stub's Subscribe matches the interface's
// channel direction.
var _ func(context.Context, gateway.Credentials, int64) (<-chan plexus.Event, error) = stubEvents{&stubAPI{}}.Subscribe

// stubEvents is the EventsAPI of a stubAPI.
type stubEvents struct{ *stubAPI }

func (s stubEvents) Subscribe(ctx context.Context, c gateway.Credentials, last int64) (<-chan plexus.Event, error) {
	s.record("Subscribe", c, last)
	if s.Err != nil {
		return nil, s.Err
	}
	if s.SubCtx != nil {
		s.SubCtx <- ctx
	}
	return s.Events, nil
}
