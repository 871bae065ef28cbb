package daemon

import (
	"context"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
)

func owner() string { return "owner@plexus.test" }

func TestStartRefusesWithoutOwner(t *testing.T) {
	home := filepath.Join(t.TempDir(), "home")
	if _, err := Start(t.Context(), Options{Home: home, Addr: "127.0.0.1:0"}); err == nil || !strings.Contains(err.Error(), "Owner is required") {
		t.Fatalf("Start without Owner: %v", err)
	}
}

// A taken port fails at Start, with the owner's next step, and leaves the
// journal closed: a second Start on the same home then succeeds.
func TestStartOnATakenPort(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	home := filepath.Join(t.TempDir(), "home")
	_, err = Start(t.Context(), Options{Home: home, Addr: ln.Addr().String(), Owner: owner})
	if err == nil || !strings.Contains(err.Error(), "is another plexus running?") {
		t.Fatalf("Start on a taken port: %v", err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	d, err := Start(ctx, Options{Home: home, Addr: "127.0.0.1:0", Owner: owner})
	if err != nil {
		cancel()
		t.Fatalf("Start after the failed one: %v", err)
	}
	cancel()
	if err := d.Run(ctx); err != nil {
		t.Fatalf("Run: %v", err)
	}
}

// Start initializes the home and binds; Run serves discovery at BaseURL
// until its context ends, then returns without error.
func TestRunServesUntilCancelled(t *testing.T) {
	home := filepath.Join(t.TempDir(), "home")
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	d, err := Start(ctx, Options{Home: home, Addr: "127.0.0.1:0", Owner: owner})
	if err != nil {
		t.Fatal(err)
	}
	if d.Home().Dir != home || d.BaseURL() != "http://"+d.Addr() || strings.HasSuffix(d.Addr(), ":0") {
		t.Fatalf("home %s, addr %s, base %s", d.Home().Dir, d.Addr(), d.BaseURL())
	}
	done := make(chan error, 1)
	go func() { done <- d.Run(ctx) }()
	resp, err := http.Get(d.BaseURL() + "/.well-known/plexus")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Errorf("discovery: %d", resp.StatusCode)
	}
	cancel()
	if err := <-done; err != nil {
		t.Errorf("Run after cancel: %v", err)
	}
}
