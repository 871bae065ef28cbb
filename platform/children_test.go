//go:build linux

package platform_test

import (
	"bufio"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/plexus-gw/plexus/platform"
)

// startShell starts sh -c script through s, the way a transport starts a
// child, and returns it, its done and the pid the script prints first.
func startShell(t *testing.T, s *platform.Services, script string) (cmd *exec.Cmd, done func(), printed int) {
	t.Helper()
	sh, err := exec.LookPath("sh")
	if err != nil {
		t.Skip("no sh")
	}
	r, w := pipe(t)
	cmd = s.Command(context.Background(), sh, []string{"-c", script}, s.Env())
	cmd.Stdout = w
	done, err = s.Start(cmd)
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	w.Close()
	exited := make(chan struct{})
	go func() { cmd.Wait(); close(exited) }() // the test is the parent: reap what the reaper stops
	t.Cleanup(func() {
		syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		<-exited
	})
	line, err := bufio.NewReader(r).ReadString('\n')
	if err != nil {
		t.Fatalf("read the script's pid: %v", err)
	}
	printed, err = strconv.Atoi(strings.TrimSpace(line))
	if err != nil {
		t.Fatalf("the script printed %q", line)
	}
	return cmd, done, printed
}

// gone reports whether pid has ended (a zombie has).
func gone(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return true
	}
	s := string(b)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	return len(f) == 0 || f[0] == "Z"
}

// waitGone waits, up to a generous bound, for pid to end.
func waitGone(t *testing.T, pid int, what string) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); !gone(pid); {
		if time.Now().After(deadline) {
			t.Fatalf("%s (pid %d) still runs", what, pid)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// records reads run/children.json.
func records(t *testing.T, home string) map[string]any {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(home, "run", "children.json"))
	if err != nil {
		t.Fatal(err)
	}
	var st map[string]any
	if err := json.Unmarshal(b, &st); err != nil {
		t.Fatal(err)
	}
	return st
}

// editRecords changes run/children.json as edit says.
func editRecords(t *testing.T, home string, edit func(st map[string]any)) {
	t.Helper()
	st := records(t, home)
	edit(st)
	b, err := json.Marshal(st)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(home, "run", "children.json"), b, 0o600); err != nil {
		t.Fatal(err)
	}
}

func newReaper(home string) *platform.Services {
	return platform.New(platform.Options{Home: home, StopGrace: 5 * time.Second, Env: []string{"PATH=/usr/bin:/bin"}})
}

func TestStartRecordsTheChild(t *testing.T) {
	home := t.TempDir()
	s := newReaper(home)
	cmd, done, _ := startShell(t, s, "echo $$; exec sleep 300")
	fi, err := os.Stat(filepath.Join(home, "run", "children.json"))
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o600 {
		t.Errorf("children.json is mode %04o; want 0600", fi.Mode().Perm())
	}
	kids := records(t, home)["children"].([]any)
	if len(kids) != 1 || int(kids[0].(map[string]any)["pid"].(float64)) != cmd.Process.Pid {
		t.Fatalf("children = %v; want the child %d", kids, cmd.Process.Pid)
	}
	done()
	if kids := records(t, home)["children"].([]any); len(kids) != 0 {
		t.Errorf("after done, children = %v; want none", kids)
	}
}

func TestReapChildren(t *testing.T) {
	t.Run("LeaderRunning", func(t *testing.T) {
		home := t.TempDir()
		cmd, _, grandchild := startShell(t, newReaper(home), "sleep 300 & echo $!; wait")
		// The daemon "crashed": done was never called. The next start:
		got, err := newReaper(home).ReapChildren(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != 1 || got[0].PID != cmd.Process.Pid || got[0].PGID != cmd.Process.Pid {
			t.Fatalf("reaped %+v; want the group of %d", got, cmd.Process.Pid)
		}
		waitGone(t, cmd.Process.Pid, "the child")
		waitGone(t, grandchild, "the grandchild")
		if _, err := os.Stat(filepath.Join(home, "run", "children.json")); !os.IsNotExist(err) {
			t.Errorf("the record is still there: %v", err)
		}
	})

	t.Run("GrandchildOfDeadLeader", func(t *testing.T) {
		// What Pdeathsig leaves: the leader killed, its descendant alive
		// in the leader's group.
		home := t.TempDir()
		cmd, _, grandchild := startShell(t, newReaper(home), "sleep 300 & echo $!; wait")
		if err := syscall.Kill(cmd.Process.Pid, syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		waitGone(t, cmd.Process.Pid, "the killed leader")
		if gone(grandchild) {
			t.Fatal("the grandchild died with its parent; the test proves nothing")
		}
		got, err := newReaper(home).ReapChildren(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != 1 || len(got[0].Members) != 1 || got[0].Members[0] != grandchild {
			t.Fatalf("reaped %+v; want the group of %d with member %d", got, cmd.Process.Pid, grandchild)
		}
		waitGone(t, grandchild, "the grandchild")
	})

	t.Run("PidReusedIsLeftAlone", func(t *testing.T) {
		// The recorded pid now belongs to another process: same pid and
		// group, another start time. It must survive the reaper.
		home := t.TempDir()
		cmd, _, _ := startShell(t, newReaper(home), "echo $$; exec sleep 300")
		editRecords(t, home, func(st map[string]any) {
			kid := st["children"].([]any)[0].(map[string]any)
			kid["start"] = kid["start"].(float64) - 1
		})
		got, err := newReaper(home).ReapChildren(context.Background())
		if err != nil || len(got) != 0 {
			t.Fatalf("ReapChildren = %+v, %v; want nothing reaped", got, err)
		}
		if gone(cmd.Process.Pid) {
			t.Fatal("a process whose pid was recorded with another start time was killed")
		}
	})

	t.Run("OtherBoot", func(t *testing.T) {
		home := t.TempDir()
		cmd, _, _ := startShell(t, newReaper(home), "echo $$; exec sleep 300")
		editRecords(t, home, func(st map[string]any) { st["boot"] = "another-boot" })
		got, err := newReaper(home).ReapChildren(context.Background())
		if err != nil || len(got) != 0 {
			t.Fatalf("ReapChildren = %+v, %v; want nothing reaped", got, err)
		}
		if gone(cmd.Process.Pid) {
			t.Fatal("a record of another boot killed a process")
		}
	})

	t.Run("ErrOwnerStillRuns", func(t *testing.T) {
		// Another plexus on the same home wrote the record and still
		// runs: its children are its own.
		home := t.TempDir()
		cmd, _, _ := startShell(t, newReaper(home), "echo $$; exec sleep 300")
		editRecords(t, home, func(st map[string]any) {
			kid := st["children"].([]any)[0].(map[string]any)
			st["owner"] = kid // a live process that is not the reaper
		})
		got, err := newReaper(home).ReapChildren(context.Background())
		if err == nil || !strings.Contains(err.Error(), "still runs") || len(got) != 0 {
			t.Fatalf("ReapChildren = %+v, %v; want an error saying the owner still runs", got, err)
		}
		if gone(cmd.Process.Pid) {
			t.Fatal("the children of a running plexus were killed")
		}
		if _, err := os.Stat(filepath.Join(home, "run", "children.json")); err != nil {
			t.Errorf("the record was not kept: %v", err)
		}
	})

	t.Run("ErrNotARegularFile", func(t *testing.T) {
		// A FIFO under the record's name neither hangs the start nor is
		// removed; a child cannot be recorded over it, so it is not run.
		home := t.TempDir()
		p := filepath.Join(home, "run", "children.json")
		if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := syscall.Mkfifo(p, 0o600); err != nil {
			t.Fatal(err)
		}
		s := newReaper(home)
		got, err := s.ReapChildren(context.Background())
		if err == nil || !strings.Contains(err.Error(), "not a regular file") || len(got) != 0 {
			t.Fatalf("ReapChildren = %+v, %v; want a not-a-regular-file error", got, err)
		}
		sleep, err := exec.LookPath("sleep")
		if err != nil {
			t.Skip("no sleep")
		}
		cmd := s.Command(context.Background(), sleep, []string{"300"}, s.Env())
		if _, err := s.Start(cmd); err == nil {
			cmd.Process.Kill()
			cmd.Wait()
			t.Fatal("Start recorded a child over a FIFO")
		} else if !gone(cmd.Process.Pid) {
			t.Errorf("the child that could not be recorded still runs")
		}
		if fi, err := os.Lstat(p); err != nil || fi.Mode()&os.ModeNamedPipe == 0 {
			t.Errorf("the FIFO is gone or replaced: %v, %v", fi, err)
		}
	})

	t.Run("NoRecord", func(t *testing.T) {
		got, err := newReaper(t.TempDir()).ReapChildren(context.Background())
		if err != nil || len(got) != 0 {
			t.Fatalf("ReapChildren = %+v, %v; want nothing", got, err)
		}
	})
}

// TestParentDeathKillsTheChild: a child started through platform dies with
// the process that started it, even by SIGKILL, which no cleanup code sees.
func TestParentDeathKillsTheChild(t *testing.T) {
	r, w := pipe(t)
	spawner := exec.Command(testExe(t))
	spawner.Env = append(os.Environ(), childModeVar+"=spawner", "PLATFORM_TEST_HOME="+t.TempDir())
	spawner.Stdout = w
	if err := spawner.Start(); err != nil {
		t.Fatal(err)
	}
	w.Close()
	line, err := bufio.NewReader(r).ReadString('\n')
	if err != nil {
		spawner.Process.Kill()
		spawner.Wait()
		t.Fatalf("read the child's pid: %v", err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(line))
	if err != nil {
		t.Fatalf("the spawner printed %q", line)
	}
	t.Cleanup(func() { syscall.Kill(-pid, syscall.SIGKILL) })
	if err := spawner.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	spawner.Wait()
	waitGone(t, pid, "the child of the killed spawner")
}
