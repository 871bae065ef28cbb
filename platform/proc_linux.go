package platform

import (
	"bytes"
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
)

// childAttr is how every child starts: leading its own process group, and
// killed by the kernel when the daemon dies.
//
// Pdeathsig fires when the OS thread that forked the child exits, not the
// process (Go issue 27505). The Go runtime never ends a thread except when
// a goroutine locked to it with runtime.LockOSThread returns without
// unlocking, and nothing in the daemon does that, so in Plexus the thread
// lives as long as the process. A dedicated locked thread for every start
// was not chosen: the MCP SDK starts its server's command itself, on its
// own goroutine.
func childAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}

// procTracking reports whether this system can identify a process by pid
// and start time (/proc).
const procTracking = true

// procInfo is what /proc/<pid>/stat says about a process that identifies
// it: its process group and session, and its start time in clock ticks
// since boot (field 22), which, with the boot, makes a pid unambiguous.
type procInfo struct {
	pgid, sid int
	start     uint64
	zombie    bool // it has exited; only its parent's wait is missing
}

// readProc reads /proc/<pid>/stat. An error wrapping fs.ErrNotExist means
// no such process.
func readProc(pid int) (procInfo, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return procInfo{}, err
	}
	return parseStat(b)
}

// parseStat parses a /proc/<pid>/stat line. The command name (field 2) is
// in parentheses and may hold spaces and parentheses itself, so the fields
// are counted from the last ')'.
func parseStat(b []byte) (procInfo, error) {
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return procInfo{}, fmt.Errorf("malformed /proc stat line")
	}
	f := strings.Fields(string(b[i+1:])) // f[0] is field 3, the state
	if len(f) < 20 {
		return procInfo{}, fmt.Errorf("malformed /proc stat line: %d fields", len(f)+2)
	}
	pgid, err1 := strconv.Atoi(f[5-3])
	sid, err2 := strconv.Atoi(f[6-3])
	start, err3 := strconv.ParseUint(f[22-3], 10, 64)
	if err1 != nil || err2 != nil || err3 != nil {
		return procInfo{}, fmt.Errorf("malformed /proc stat line")
	}
	return procInfo{pgid: pgid, sid: sid, start: start, zombie: f[0] == "Z"}, nil
}

// bootID identifies this boot: start times count from it.
func bootID() (string, error) {
	b, err := os.ReadFile("/proc/sys/kernel/random/boot_id")
	if err != nil {
		return "", err
	}
	return strings.TrimSpace(string(b)), nil
}

// pids lists the processes of the system.
func pids() ([]int, error) {
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return nil, err
	}
	var out []int
	for _, e := range ents {
		if pid, err := strconv.Atoi(e.Name()); err == nil && pid > 0 {
			out = append(out, pid)
		}
	}
	return out, nil
}
