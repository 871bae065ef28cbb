package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/plexus-gw/plexus"
)

// testDaemon is a real gateway (journal.db, registry, portal transport,
// loopback server) on 127.0.0.1:0 with a temp home.
type testDaemon struct {
	*daemon
	key    string
	cancel context.CancelFunc
	done   chan error
}

func startTestDaemon(t testing.TB, o daemonOptions) *testDaemon {
	t.Helper()
	if o.Home == "" {
		o.Home = filepath.Join(t.TempDir(), "home")
	}
	if o.Addr == "" {
		o.Addr = "127.0.0.1:0"
	}
	if o.Logger == nil && os.Getenv("PLEXUS_TEST_LOG") != "" {
		o.Logger = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	ctx, cancel := context.WithCancel(context.Background())
	d, err := startDaemon(ctx, o)
	if err != nil {
		cancel()
		t.Fatalf("start daemon: %v", err)
	}
	key, err := readConnectionKey(o.Home)
	if err != nil {
		t.Fatal(err)
	}
	td := &testDaemon{daemon: d, key: key, cancel: cancel, done: make(chan error, 1)}
	go func() { td.done <- d.run(ctx) }()
	t.Cleanup(td.stop)
	return td
}

func (td *testDaemon) stop() {
	if td.cancel == nil {
		return
	}
	td.cancel()
	<-td.done
	td.cancel = nil
}

// call sends one request and decodes the JSON answer into out (when non-nil).
func (td *testDaemon) call(t testing.TB, method, path string, hdr map[string]string, body any, out any) int {
	t.Helper()
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			t.Fatal(err)
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequest(method, td.baseURL()+path, rd)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	if out != nil && len(raw) > 0 {
		if err := json.Unmarshal(raw, out); err != nil {
			t.Fatalf("%s %s: decode %q: %v", method, path, raw, err)
		}
	}
	return resp.StatusCode
}

func (td *testDaemon) admin() map[string]string {
	return map[string]string{"Authorization": "Bearer " + td.key}
}

func bearer(tok string) map[string]string { return map[string]string{"Authorization": "Bearer " + tok} }

func session(id string) map[string]string { return map[string]string{plexus.SessionHeader: id} }

// sseEvent is one parsed server-sent event.
type sseEvent struct {
	ID   string
	Type string
	Data string
}

// openEvents subscribes to /events for a session and streams parsed events
// until the test ends.
func (td *testDaemon) openEvents(t testing.TB, sessionID, lastEventID string) <-chan sseEvent {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, td.baseURL()+"/events", nil)
	req.Header.Set(plexus.SessionHeader, sessionID)
	if lastEventID != "" {
		req.Header.Set("Last-Event-ID", lastEventID)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		cancel()
		t.Fatalf("events: %v", err)
	}
	if resp.StatusCode != http.StatusOK {
		cancel()
		t.Fatalf("events: status %d", resp.StatusCode)
	}
	out := make(chan sseEvent, 64)
	done := make(chan struct{})
	go func() {
		defer close(done)
		defer close(out)
		sc := bufio.NewScanner(resp.Body)
		var ev sseEvent
		for sc.Scan() {
			line := sc.Text()
			switch {
			case line == "":
				if ev.Type != "" {
					out <- ev
				}
				ev = sseEvent{}
			case strings.HasPrefix(line, "id: "):
				ev.ID = strings.TrimPrefix(line, "id: ")
			case strings.HasPrefix(line, "event: "):
				ev.Type = strings.TrimPrefix(line, "event: ")
			case strings.HasPrefix(line, "data: "):
				ev.Data += strings.TrimPrefix(line, "data: ")
			}
		}
	}()
	t.Cleanup(func() { cancel(); resp.Body.Close(); <-done })
	return out
}

// waitEvent returns the first event of type typ, failing after a generous
// deadline (a liveness bound, not a timing assertion).
func waitEvent(t testing.TB, ch <-chan sseEvent, typ string) sseEvent {
	t.Helper()
	deadline := time.After(10 * time.Second)
	for {
		select {
		case ev, ok := <-ch:
			if !ok {
				t.Fatalf("event stream ended before %s", typ)
			}
			if ev.Type == typ {
				return ev
			}
		case <-deadline:
			t.Fatalf("no %s event", typ)
		}
	}
}
