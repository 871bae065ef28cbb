package mcpclient

import (
	"context"
	"encoding/json"
	"errors"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/plexus-gw/plexus/internal/plexustest"
)

// until polls cond, failing the test when it stays false past a generous
// bound (a hang, not a speed check).
func until(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(30 * time.Second); !cond(); time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("never: %s", what)
		}
	}
}

// stuckWrite writes a message larger than a pipe holds to c, whose server
// stopped reading, and returns once the write holds the turn (and so is
// stuck in the pipe); its error comes on the channel.
func stuckWrite(t *testing.T, c *stdioConn) <-chan error {
	t.Helper()
	big, err := json.Marshal(map[string]string{"x": strings.Repeat("x", 1<<20)})
	if err != nil {
		t.Fatal(err)
	}
	werr := make(chan error, 1)
	go func() {
		werr <- c.Write(context.Background(), &jsonrpc.Request{Method: "notifications/big", Params: big})
	}()
	until(t, "the large write holds the turn", func() bool { return len(c.turn) == 1 })
	return werr
}

// A server that stops reading its stdin leaves a write stuck in the pipe.
// A call whose caller leaves returns at once, and the notification telling
// the server (waiting for its turn behind the stuck write) runs on a
// goroutine the connection owns: Close ends it, with the stuck write, and
// returns with no such goroutine left. A call still waiting for its turn
// to be written leaves when its caller does, and tells the server nothing.
func TestCancelOwnedByTheConnection(t *testing.T) {
	const cancelling = "(*stdioConn).cancelled"
	t.Run("SentThenCancelled", func(t *testing.T) {
		// The server reads the call, says so, and reads no more.
		c := dial(t, `read line; printf '{"jsonrpc":"2.0","method":"read"}\n'; exec sleep 60`, 0)
		ctx, cancel := context.WithCancel(t.Context())
		errc := make(chan error, 1)
		go func() {
			_, err := c.callTool(ctx, toolParams(ctx, "greet", nil, "tok-1"))
			errc <- err
		}()
		if msg, err := c.Read(t.Context()); err != nil || msg.(*jsonrpc.Request).Method != "read" {
			t.Fatalf("read %v, %v; want the server's word that it read the call", msg, err)
		}
		werr := stuckWrite(t, c)
		cancel()
		if err := <-errc; !errors.Is(err, context.Canceled) {
			t.Fatalf("the cancelled call = %v, want %v", err, context.Canceled)
		}
		until(t, "the cancellation waits for its turn", func() bool { return plexustest.GoroutinesIn(cancelling) == 1 })
		var ee *exec.ExitError
		if err := c.Close(); !errors.As(err, &ee) {
			t.Fatalf("close = %v, want the server's exit (SIGTERM)", err)
		}
		if n := plexustest.GoroutinesIn(cancelling); n != 0 {
			t.Errorf("%d cancellations still run after Close, want none", n)
		}
		if err := <-werr; err == nil {
			t.Error("the stuck write succeeded after Close")
		}
	})
	t.Run("CancelledBeforeSent", func(t *testing.T) {
		c := dial(t, `exec sleep 60`, 0)
		werr := stuckWrite(t, c)
		ctx, cancel := context.WithCancel(t.Context())
		errc := make(chan error, 1)
		go func() {
			_, err := c.callTool(ctx, toolParams(ctx, "greet", nil, "tok-2"))
			errc <- err
		}()
		until(t, "the call waits for its turn", func() bool { return plexustest.GoroutinesIn("(*stdioConn).take") == 1 })
		cancel()
		select {
		case err := <-errc:
			if !errors.Is(err, context.Canceled) {
				t.Fatalf("the cancelled call = %v, want %v", err, context.Canceled)
			}
		case <-time.After(30 * time.Second):
			t.Fatal("a call waiting to be written did not leave with its caller")
		}
		if n := plexustest.GoroutinesIn(cancelling); n != 0 {
			t.Errorf("%d cancellations of a call never sent, want none", n)
		}
		if err := c.Close(); err == nil {
			t.Error("close = nil, want the server's exit (SIGTERM)")
		}
		if err := <-werr; err == nil {
			t.Error("the stuck write succeeded after Close")
		}
	})
}

// background's goroutines run until stop ends their context, wait returns
// once they have, and none starts after stop.
func TestBackground(t *testing.T) {
	var b background
	ended := make(chan struct{}, 2)
	for range 2 {
		if !b.run(func(ctx context.Context) { <-ctx.Done(); ended <- struct{}{} }) {
			t.Fatal("run before stop refused")
		}
	}
	b.stop()
	b.wait()
	if len(ended) != 2 {
		t.Errorf("wait returned with %d of 2 goroutines ended", len(ended))
	}
	if b.run(func(context.Context) { t.Error("ran after stop") }) {
		t.Error("run after stop accepted")
	}
	b.wait()
}
