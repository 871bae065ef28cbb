package localrest

import (
	"context"
	"errors"
	"net"
	"testing"
	"time"
)

// TestDialerLoopbackOnly: whatever a name resolved to, the dialer refuses a
// non-loopback address before connecting.
func TestDialerLoopbackOnly(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	d := newDialer()
	for _, addr := range []string{"192.0.2.1:80", "[2001:db8::1]:80", "10.0.0.1:80"} {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		conn, err := d.DialContext(ctx, "tcp", addr)
		cancel()
		if err == nil {
			conn.Close()
		}
		if !errors.Is(err, errNotLoopback) {
			t.Errorf("dial %s: got %v, want %v", addr, err, errNotLoopback)
		}
	}
	conn, err := d.DialContext(context.Background(), "tcp", ln.Addr().String())
	if err != nil {
		t.Fatalf("dial loopback: %v", err)
	}
	conn.Close()
}
