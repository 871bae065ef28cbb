package e2e

import (
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"

	"github.com/plexus-gw/plexus/auth"
	"github.com/plexus-gw/plexus/daemon"
	"github.com/plexus-gw/plexus/scaffold"
)

// TestAttackAddressFile: what is planted as daemon.addr in a home never
// sends a command, and the connection-key it carries, anywhere but a
// loopback address written as a regular file; nor does it hang the
// command. Each command fails saying why.
func TestAttackAddressFile(t *testing.T) {
	var hits atomic.Int64
	lure := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { hits.Add(1) }))
	t.Cleanup(lure.Close)
	lureAddr := strings.TrimPrefix(lure.URL, "http://")

	for _, tt := range []struct {
		name  string
		plant func(t *testing.T, path string)
		want  string
	}{
		{"Remote", func(t *testing.T, path string) { writeFile(t, path, "192.0.2.1:80\n") }, "not a loopback host:port"},
		{"Hostname", func(t *testing.T, path string) { writeFile(t, path, "localhost.example.com:7077") }, "not a loopback host:port"},
		{"SymlinkToLure", func(t *testing.T, path string) {
			other := filepath.Join(t.TempDir(), "addr")
			writeFile(t, other, lureAddr)
			if err := os.Symlink(other, path); err != nil {
				t.Fatal(err)
			}
		}, "symlink"},
		{"FIFO", func(t *testing.T, path string) {
			if err := syscall.Mkfifo(path, 0o600); err != nil {
				t.Fatal(err)
			}
		}, "fifo"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			home := t.TempDir()
			if _, err := scaffold.Init(home, scaffold.InitOptions{NewConnectionKey: auth.NewConnectionKey}); err != nil {
				t.Fatal(err)
			}
			tt.plant(t, filepath.Join(home, daemon.AddressFile))
			for _, args := range [][]string{{"status"}, {"pending"}} {
				r := runHomeOnly(t, home, args...)
				if r.code != exitError || !strings.Contains(r.stderr, tt.want) {
					t.Errorf("%s with a planted address file: %s", args[0], r)
				}
			}
		})
	}
	if n := hits.Load(); n != 0 {
		t.Errorf("the lure got %d requests", n)
	}
}

func writeFile(t *testing.T, path, s string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(s), 0o600); err != nil {
		t.Fatal(err)
	}
}
