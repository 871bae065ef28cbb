package inbox_test

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/plexus-gw/plexus/inbox"
	"github.com/plexus-gw/plexus/platform"
)

// TestNotifier runs the owner's notify command (a real shell) with each
// queued line as its last argument, one at a time, in the order sent.
func TestNotifier(t *testing.T) {
	dir := t.TempDir()
	out := filepath.Join(dir, "out")
	plat := platform.New(platform.Options{Home: dir, Env: []string{"PATH=/usr/bin:/bin"}})
	n := inbox.NewNotifier([]string{"/bin/sh", "-c", `printf '%s\n' "$1" >> "$0"`, out}, plat, slog.New(slog.DiscardHandler))
	n.Send("first")
	n.Send("second")
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
