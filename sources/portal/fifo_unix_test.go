//go:build unix

package portal_test

import (
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/plexus-gw/plexus"
)

// TestFIFONeverBlocks: naming a FIFO must not hang a call waiting for a
// writer that never comes.
func TestFIFONeverBlocks(t *testing.T) {
	fx := newFixture(t)
	if err := syscall.Mkfifo(filepath.Join(fx.root, "pipe"), 0o600); err != nil {
		t.Skipf("mkfifo: %v", err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		wantCode(t, fx.call("read", map[string]any{"path": "pipe"}), plexus.CodeTransportError, "not a regular file")
		wantCode(t, fx.call("write", map[string]any{"path": "pipe", "content": "x"}), plexus.CodeTransportError, "not a regular file")
		res := fx.call("search", map[string]any{"query": "pipe"})
		wantOK(t, res)
		res = fx.call("list", map[string]any{})
		wantOK(t, res)
	}()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("a call on a FIFO blocked")
	}
}
