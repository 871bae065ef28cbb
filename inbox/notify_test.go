package inbox_test

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/plexus-gw/plexus/inbox"
	"github.com/plexus-gw/plexus/platform"
)

// TestNotifier runs the owner's notify command (a real shell) with each
// queued line as its last argument, one at a time, in the order sent.
func TestNotifier(t *testing.T) {
	dir := t.TempDir()
	out := filepath.Join(dir, "out")
	plat := platform.New(platform.Options{Home: dir, Env: []string{"PATH=/usr/bin:/bin"}})
	n := inbox.NewNotifier([]string{"/bin/sh", "-c", `printf '%s\n' "$1" >> "$0"`, out}, plat, slog.New(slog.DiscardHandler), nil)
	n.Send(inbox.Notification{Line: "first"})
	n.Send(inbox.Notification{Line: "second"})
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- n.Run(ctx) }()
	want := "first\nsecond\n"
	var got []byte
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		if got, _ = os.ReadFile(out); string(got) == want {
			break
		}
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("Run: %v", err)
	}
	if string(got) != want {
		t.Errorf("the command wrote %q, want %q", got, want)
	}
}

// TestNotifierWebhook POSTs each notification to the owner's webhook in
// ntfy's JSON publish format, trying again after an answer that may pass
// (503) and never after one that will not (400).
func TestNotifierWebhook(t *testing.T) {
	type got struct {
		status int
		body   map[string]any
	}
	answers := []int{http.StatusServiceUnavailable, http.StatusOK, http.StatusBadRequest, http.StatusOK}
	posts := make(chan got, 10)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		var m map[string]any
		if err := json.Unmarshal(b, &m); err != nil || r.Method != http.MethodPost || r.Header.Get("Content-Type") != "application/json" {
			t.Errorf("%s %s: %q", r.Method, r.Header.Get("Content-Type"), b)
		}
		status := http.StatusBadRequest
		if len(answers) > 0 {
			status, answers = answers[0], answers[1:]
		}
		w.WriteHeader(status)
		posts <- got{status, m}
	}))
	t.Cleanup(srv.Close)

	n := inbox.NewNotifier(nil, nil, slog.New(slog.DiscardHandler),
		&inbox.Webhook{URL: srv.URL, Topic: "my-plexus", Backoff: time.Millisecond})
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- n.Run(ctx) }()
	n.Send(inbox.Notification{Line: "claude asks to write notes (pend_1)", ID: "pend_1", File: "/h/inbox/pend_1.md"})
	n.Send(inbox.Notification{Line: "refused (pend_2)", ID: "pend_2", File: "/h/inbox/pend_2.md"})
	n.Send(inbox.Notification{Line: "next (pend_3)", ID: "pend_3", File: "/h/inbox/pend_3.md"})

	var seen []got
	for range 4 {
		select {
		case g := <-posts:
			seen = append(seen, g)
		case <-time.After(10 * time.Second):
			t.Fatalf("only %d POSTs arrived: %+v", len(seen), seen)
		}
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("Run: %v", err)
	}
	want := map[string]any{"topic": "my-plexus", "title": "Plexus: a decision waits for you",
		"message": "claude asks to write notes (pend_1)", "tags": []any{"plexus"}, "pendingId": "pend_1", "file": "/h/inbox/pend_1.md"}
	if diff := cmp.Diff(want, seen[0].body); diff != "" || seen[0].status != http.StatusServiceUnavailable {
		t.Errorf("first POST (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(want, seen[1].body); diff != "" || seen[1].status != http.StatusOK {
		t.Errorf("the retry after 503 (-want +got):\n%s", diff)
	}
	// One at a time, in order: had pend_2 been tried again after its 400,
	// that POST would come before pend_3's.
	if seen[2].body["pendingId"] != "pend_2" || seen[2].status != http.StatusBadRequest || seen[3].body["pendingId"] != "pend_3" {
		t.Errorf("POSTs after pend_1's = %+v, %+v; want pend_2's once, then pend_3's", seen[2], seen[3])
	}
}
