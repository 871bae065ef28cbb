package client

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"

	"github.com/plexus-gw/plexus"
)

// foreignUID is the user the squatting listener runs as (nobody).
const foreignUID = 65534

// TestForeignListenerHelper is the squatter, run by
// TestAdminRefusesForeignListener as another user: it listens, prints its
// address, and reports how many bytes the one connection it takes carried.
func TestForeignListenerHelper(t *testing.T) {
	if os.Getenv("PLEXUS_FOREIGN_LISTENER") != "1" {
		t.Skip("helper process of TestAdminRefusesForeignListener")
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	fmt.Println("addr", ln.Addr())
	c, err := ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	n, err := io.Copy(io.Discard, c)
	fmt.Println("got", n, err)
}

// startForeignListener runs the helper above as another user and returns
// its address and a function reporting what it received. It skips where
// no other user can be had (not root, not Linux), except under CI=true.
func startForeignListener(t *testing.T) (string, func() string) {
	t.Helper()
	if runtime.GOOS != "linux" || os.Getuid() != 0 {
		msg := "starting a listener as another user needs root on Linux"
		if os.Getenv("CI") == "true" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	// The test binary, where the other user can run it.
	dir, err := os.MkdirTemp("", "plexus-foreign-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := os.RemoveAll(dir); err != nil {
			t.Error(err)
		}
	})
	bin := filepath.Join(dir, "helper.test")
	self, err := os.ReadFile(os.Args[0])
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(bin, self, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "-test.run=^TestForeignListenerHelper$", "-test.v")
	cmd.Env = []string{"PLEXUS_FOREIGN_LISTENER=1"}
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: foreignUID, Gid: foreignUID}}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := cmd.Process.Kill(); err != nil && !errors.Is(err, os.ErrProcessDone) {
			t.Error(err)
		}
		if err := cmd.Wait(); err != nil {
			t.Log(err)
		}
	})
	lines := bufio.NewScanner(out)
	next := func(prefix string) string {
		for lines.Scan() {
			if rest, ok := strings.CutPrefix(lines.Text(), prefix+" "); ok {
				return rest
			}
		}
		t.Fatalf("the helper ended without a %q line: %v", prefix, lines.Err())
		return ""
	}
	return next("addr"), func() string { return next("got") }
}

// A listener of another user at the gateway's address gets a connection
// but not one byte: the connection-key never reaches it.
func TestAdminRefusesForeignListener(t *testing.T) {
	addr, received := startForeignListener(t)
	adm, err := NewAdmin("http://"+addr, "ck_secret", WithVia(plexus.ViaCLI))
	if err != nil {
		t.Fatal(err)
	}
	_, err = adm.Status(context.Background())
	var fe *ForeignListenerError
	if !errors.As(err, &fe) || fe.UID != foreignUID || fe.Want != os.Getuid() || fe.Addr != addr {
		t.Fatalf("Status = %v; want a ForeignListenerError naming %s and uid %d", err, addr, foreignUID)
	}
	if errors.Is(err, ErrUnreachable) {
		t.Errorf("%v reads as unreachable", err)
	}
	if !strings.Contains(err.Error(), addr) || !strings.Contains(err.Error(), "uid 65534") {
		t.Errorf("error %q names neither the address nor the uid", err)
	}
	if got := received(); got != "0 <nil>" {
		t.Fatalf("the foreign listener received %s bytes; want none", got)
	}
}

// A listener of this user (the real daemon's case) is reached as before.
func TestAdminReachesOwnListener(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer ck_secret" {
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `{"version":"x"}`)
	}))
	defer srv.Close()
	adm, err := NewAdmin(srv.URL, "ck_secret")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := adm.Status(context.Background()); err != nil {
		t.Fatalf("Status at our own listener: %v", err)
	}
}
