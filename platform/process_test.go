package platform_test

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/plexus-gw/plexus/platform"
)

// childModeVar makes the test binary a child process (TestMain) playing
// the named part.
const childModeVar = "PLATFORM_TEST_CHILD"

// child plays a part for the Command tests and exits.
func child(mode string) {
	switch mode {
	case "env": // print the environment, then how many bytes stdin held
		for _, kv := range os.Environ() {
			fmt.Println(kv)
		}
		n, err := io.Copy(io.Discard, os.Stdin)
		fmt.Printf("stdin: %d bytes, %v\n", n, err)
	case "trap-term": // say when SIGTERM comes, then exit
		c := make(chan os.Signal, 1)
		signal.Notify(c, syscall.SIGTERM)
		fmt.Println("ready")
		<-c
		fmt.Println("got SIGTERM")
	case "ignore-term": // ignore SIGTERM and start a grandchild that does too
		signal.Ignore(syscall.SIGTERM)
		exe, _ := os.Executable()
		gc := exec.Command(exe)
		gc.Env = append(os.Environ(), childModeVar+"=ignore-term-leaf")
		gc.Stdout = os.Stdout // holds the test's pipe open while it lives
		if err := gc.Start(); err != nil {
			fmt.Println("start grandchild:", err)
			os.Exit(1)
		}
		time.Sleep(time.Hour)
	case "spawner": // start a long child through platform, print its pid, wait
		s := platform.New(platform.Options{Home: os.Getenv("PLATFORM_TEST_HOME"), Env: []string{"PATH=/usr/bin:/bin"}})
		sleep, err := s.Resolve("sleep")
		if err != nil {
			fmt.Println("resolve sleep:", err)
			os.Exit(1)
		}
		cmd := s.Command(context.Background(), sleep, []string{"300"}, s.Env())
		if _, err := s.Start(cmd); err != nil {
			fmt.Println("start:", err)
			os.Exit(1)
		}
		fmt.Println(cmd.Process.Pid)
		time.Sleep(time.Hour)
	case "ignore-term-leaf":
		signal.Ignore(syscall.SIGTERM)
		fmt.Println("ready")
		time.Sleep(time.Hour)
	}
}

// testExe is the test binary, which Command runs as the child.
func testExe(t *testing.T) string {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	return exe
}

func TestCommand(t *testing.T) {
	exe := testExe(t)
	newServices := func(t *testing.T, mode string) *platform.Services {
		return platform.New(platform.Options{Home: t.TempDir(), UserHome: "/home/u", StopGrace: 200 * time.Millisecond,
			Env: []string{"PLEXUS_HOME=/secret/home", "PLEXUS_AGENT_HOME=/a", "PATH=/opt/a", "GITHUB_TOKEN=canary", "LANG=C.UTF-8"}})
	}
	// command is s.Command with the base environment and the mode, as a
	// transport adds what the child's declaration names.
	command := func(ctx context.Context, s *platform.Services, mode string) *exec.Cmd {
		return s.Command(ctx, exe, nil, append(s.Env(), childModeVar+"="+mode))
	}

	t.Run("EnvAndStdin", func(t *testing.T) {
		s := newServices(t, "env")
		cmd := command(context.Background(), s, "env")
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("run: %v", err)
		}
		lines := strings.Split(strings.TrimSpace(string(out)), "\n")
		for _, l := range lines {
			if strings.HasPrefix(l, "PLEXUS_") || strings.HasPrefix(l, "GITHUB_TOKEN=") {
				t.Errorf("the child got %s", l)
			}
		}
		for _, want := range []string{"PATH=" + s.Path(), "LANG=C.UTF-8", childModeVar + "=env", "stdin: 0 bytes, <nil>"} {
			if !strings.Contains("\n"+string(out), "\n"+want+"\n") {
				t.Errorf("the child's output lacks %q:\n%s", want, out)
			}
		}
	})

	t.Run("ErrRelativePath", func(t *testing.T) {
		s := newServices(t, "env")
		for _, p := range []string{"sh", "./sh", "bin/sh"} {
			if err := s.Command(context.Background(), p, nil, nil).Start(); err == nil || !strings.Contains(err.Error(), "not an absolute path") {
				t.Errorf("Start of %q: %v; want refused", p, err)
			}
		}
	})

	t.Run("CancelSendsSIGTERM", func(t *testing.T) {
		const mode = "trap-term"
		s := newServices(t, mode)
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		var out bytes.Buffer
		r, w := pipe(t)
		cmd := command(ctx, s, mode)
		cmd.Stdout = w
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		w.Close()
		br := bufio.NewReader(r)
		waitLine(t, br, "ready")
		cancel()
		err := cmd.Wait()
		io.Copy(&out, br)
		if !strings.Contains(out.String(), "got SIGTERM") {
			t.Errorf("the child did not get SIGTERM (wait: %v), output: %q", err, out.String())
		}
	})

	t.Run("CancelKillsTheGroup", func(t *testing.T) {
		const mode = "ignore-term"
		s := newServices(t, mode)
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		r, w := pipe(t)
		cmd := command(ctx, s, mode)
		cmd.Stdout = w
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		w.Close()
		br := bufio.NewReader(r)
		waitLine(t, br, "ready") // the grandchild ignores SIGTERM now
		cancel()
		err := cmd.Wait()
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
			t.Errorf("Wait = %v; want killed by SIGKILL", err)
		}
		// The pipe ends only when every process holding it is gone: the
		// grandchild too, though it ignored SIGTERM.
		if _, err := io.Copy(io.Discard, br); err != nil {
			t.Errorf("the grandchild outlived the cancel: %v", err)
		}
	})
}

// pipe returns an os.Pipe closed at the end of the test, whose reads give up
// after 10 s.
func pipe(t *testing.T) (r, w *os.File) {
	t.Helper()
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close(); w.Close() })
	if err := r.SetReadDeadline(time.Now().Add(10 * time.Second)); err != nil { // a silent child fails, not hangs
		t.Fatal(err)
	}
	return r, w
}

// waitLine reads lines from br until one is want.
func waitLine(t *testing.T, br *bufio.Reader, want string) {
	t.Helper()
	for {
		l, err := br.ReadString('\n')
		if strings.TrimSpace(l) == want {
			return
		}
		if err != nil {
			t.Fatalf("waiting for %q: %v", want, err)
		}
	}
}
