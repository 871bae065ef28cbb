package daemon

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"testing"
)

// The address file: written 0600 with the bound address when Start
// returns, overwriting one a crash left; removed by a clean stop.
func TestAddressFile(t *testing.T) {
	home := filepath.Join(t.TempDir(), "home")
	if err := os.MkdirAll(home, 0o700); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(home, AddressFile)
	// What a crashed daemon left: an address where nothing listens.
	if err := os.WriteFile(path, []byte("127.0.0.1:1\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	d, err := Start(ctx, Options{Home: home, Addr: "127.0.0.1:0", Owner: owner})
	if err != nil {
		t.Fatalf("Start over a stale address file: %v", err)
	}
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o600 {
		t.Errorf("mode %04o, want 0600", fi.Mode().Perm())
	}
	if addr, ok, err := ReadAddress(home); err != nil || !ok || addr != d.Addr() {
		t.Errorf("ReadAddress = %q, %v, %v; want %q", addr, ok, err, d.Addr())
	}
	cancel()
	if err := d.Run(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(path); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("after a clean stop the address file is still there (%v)", err)
	}
	if _, ok, err := ReadAddress(home); ok || err != nil {
		t.Errorf("ReadAddress after the stop = %v, %v; want none", ok, err)
	}
}

func TestReadAddressRefuses(t *testing.T) {
	for _, content := range []string{"example.com:80", "10.0.0.1:7077", "http://127.0.0.1:7077", "garbage"} {
		home := t.TempDir()
		if err := os.WriteFile(filepath.Join(home, AddressFile), []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		if addr, ok, err := ReadAddress(home); err == nil || ok {
			t.Errorf("ReadAddress of %q = %q, %v, %v; want an error", content, addr, ok, err)
		}
	}
}
