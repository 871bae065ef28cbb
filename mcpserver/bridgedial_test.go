package mcpserver_test

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/plexus-gw/plexus/internal/plexustest"
	"github.com/plexus-gw/plexus/mcpserver"
)

// slowInitialize is a reverse proxy to the daemon at target that holds
// each initialize until release closes, counting them on inits and
// telling held of each, then answers it 503 when refuse is set; it returns
// the proxy's /mcp URL.
func slowInitialize(t *testing.T, target string, inits *atomic.Int32, held chan<- struct{}, release <-chan struct{}, refuse bool) string {
	t.Helper()
	return faultyDaemon(t, target, `"method":"initialize"`, func(w http.ResponseWriter, r *http.Request, next http.Handler) {
		inits.Add(1)
		held <- struct{}{}
		select {
		case <-release:
		case <-r.Context().Done():
			return
		}
		if refuse {
			http.Error(w, "the daemon is going away", http.StatusServiceUnavailable)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// TestBridgeSlowInitialize: while the daemon is slow to answer the
// bridge's initialize, the host's other messages are still read and
// answered (a ping), and the calls that need the daemon wait for that one
// connection: once it is up they all run in the one session it made, and
// when it fails they are all answered its error.
func TestBridgeSlowInitialize(t *testing.T) {
	for _, tc := range []struct {
		name, version string
		refuse        bool
	}{
		{"pumped", "2025-11-25", false}, {"sessions", "2026-07-28", false},
		{"pumped refused", "2025-11-25", true}, {"sessions refused", "2026-07-28", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, mcpserver.Options{})
			var inits atomic.Int32
			held, release := make(chan struct{}, 8), make(chan struct{})
			var once sync.Once
			free := func() { once.Do(func() { close(release) }) }
			ep := slowInitialize(t, f.base, &inits, held, release, tc.refuse)
			cs := bridgedVersion(t, mcpserver.BridgeOptions{Endpoint: ep, PAT: f.agent("desk")}, "desk", tc.version, nil)
			t.Cleanup(free) // before the bridge's cleanup, should the test fail
			const calls = 4
			errc := make(chan error, calls)
			for i := range calls {
				go func() {
					res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "portal__docs__read", Arguments: map[string]any{"path": "hello.txt"}})
					if err == nil && res.IsError {
						err = fmt.Errorf("call %d: isError: %s", i, text(res))
					}
					errc <- err
				}()
			}
			select {
			case <-held:
			case <-time.After(30 * time.Second):
				t.Fatal("the bridge never sent initialize")
			}
			// A generous bound: a hang, not a speed check.
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			if err := cs.Ping(ctx, nil); err != nil {
				t.Fatalf("a ping while the daemon's initialize is slow: %v", err)
			}
			// Every call waits for the one connection before it is answered.
			for deadline := time.Now().Add(30 * time.Second); plexustest.GoroutinesIn("(*bridge).sessionFor") != calls; time.Sleep(time.Millisecond) {
				if time.Now().After(deadline) {
					t.Fatalf("%d calls wait for the daemon's connection, want %d", plexustest.GoroutinesIn("(*bridge).sessionFor"), calls)
				}
			}
			free()
			for range calls {
				err := <-errc
				switch {
				case tc.refuse && (err == nil || !strings.Contains(err.Error(), "Service Unavailable")):
					t.Errorf("a call while initialize failed: %v, want the daemon's refusal", err)
				case !tc.refuse && err != nil:
					t.Error(err)
				}
			}
			if n := inits.Load(); n != 1 {
				t.Errorf("%d initialize requests for concurrent first calls, want one session", n)
			}
		})
	}
}

// TestBridgeEndsWithCancelStuck: a pumped call the host cancels has the
// daemon told on the bridge's own goroutine; when the daemon does not
// answer that notification and the host goes, the bridge ends all the
// same, the stuck POST aborted and no goroutine of the bridge's left.
func TestBridgeEndsWithCancelStuck(t *testing.T) {
	f := newFixture(t, mcpserver.Options{})
	stuck, aborted := make(chan struct{}, 1), make(chan struct{})
	ep := faultyDaemon(t, f.base, "notifications/cancelled", func(w http.ResponseWriter, r *http.Request, _ http.Handler) {
		stuck <- struct{}{}
		<-r.Context().Done()
		close(aborted)
	})
	hostR, bridgeW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	bridgeR, hostW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		done <- mcpserver.Bridge(context.Background(), &mcp.IOTransport{Reader: bridgeR, Writer: bridgeW},
			mcpserver.BridgeOptions{Endpoint: ep, PAT: f.agent("desk")})
	}()
	c := mcp.NewClient(&mcp.Implementation{Name: "desk", Version: "9.9"}, nil)
	cs, err := c.Connect(context.Background(), &mcp.IOTransport{Reader: hostR, Writer: hostW}, &mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() {
		_, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "mcp__up__block", Arguments: map[string]any{}})
		errc <- err
	}()
	for f.upstream.count("block") == 0 {
		time.Sleep(5 * time.Millisecond)
	}
	cancel()
	if err := <-errc; err == nil {
		t.Fatal("a cancelled call answered no error")
	}
	// A generous bound: a hang, not a speed check.
	select {
	case <-stuck:
	case <-time.After(30 * time.Second):
		t.Fatal("the daemon was never told the call was cancelled")
	}
	if err := cs.Close(); err != nil {
		t.Logf("close the host's session: %v", err)
	}
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("the bridge did not end while its notification to the daemon was stuck")
	}
	select {
	case <-aborted:
	case <-time.After(30 * time.Second):
		t.Error("the bridge ended with its notification's POST still open")
	}
	if n := plexustest.GoroutinesIn("(*bridge)"); n != 0 {
		t.Errorf("%d goroutines of the bridge's left after it ended", n)
	}
}
