package plexustest

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
)

// ForeignUID is the user a foreign listener runs as: nobody.
const ForeignUID = 65534

// foreignEnv marks the test binary run as the foreign listener.
const foreignEnv = "PLEXUS_FOREIGN_LISTENER"

// ServeForeignListener is the body of a package's helper test (named
// helperTest in [ForeignListener]): run as another user, it listens on
// 127.0.0.1, prints its address, and reports how many bytes the one
// connection it takes carried. Outside that run it skips.
func ServeForeignListener(t *testing.T) {
	if os.Getenv(foreignEnv) != "1" {
		t.Skip("the helper process of plexustest.ForeignListener")
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

// ForeignListener runs this test binary's helperTest (which calls
// [ServeForeignListener]) as another user (ForeignUID), and returns its
// address and a function that waits for its one connection to end and
// says what it received ("0 <nil>": nothing). It skips where no other user
// can be had (not root, not Linux), and fails instead under CI=true.
func ForeignListener(t *testing.T, helperTest string) (addr string, received func() string) {
	t.Helper()
	if runtime.GOOS != "linux" || os.Getuid() != 0 {
		msg := "a listener of another user needs root on Linux (setuid to nobody)"
		if os.Getenv("CI") == "true" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	bin := othersCanRun(t, os.Args[0])
	cmd := exec.Command(bin, "-test.run=^"+helperTest+"$", "-test.v")
	cmd.Env = []string{foreignEnv + "=1"}
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: ForeignUID, Gid: ForeignUID}}
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
			t.Log(err) // killed, when the test made no connection
		}
	})
	lines := bufio.NewScanner(out)
	next := func(prefix string) string {
		for lines.Scan() {
			if rest, ok := strings.CutPrefix(lines.Text(), prefix+" "); ok {
				return rest
			}
		}
		t.Fatalf("the foreign listener ended without a %q line: %v", prefix, lines.Err())
		return ""
	}
	return next("addr"), func() string { return next("got") }
}

// othersCanRun copies the binary at path into a folder every user can
// enter (a test binary's own is private), removed at cleanup.
func othersCanRun(t *testing.T, path string) string {
	dir, err := os.MkdirTemp("", "plexus-foreign-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := os.RemoveAll(dir); err != nil {
			t.Error(err)
		}
	})
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, filepath.Base(path))
	if err := os.WriteFile(bin, b, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return bin
}
