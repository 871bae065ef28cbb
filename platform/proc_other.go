//go:build !linux

package platform

import (
	"errors"
	"syscall"
)

// childAttr is how every child starts: leading its own process group.
// Outside Linux there is no parent-death signal; a child outlives a
// daemon killed with SIGKILL until something stops it.
func childAttr() *syscall.SysProcAttr { return &syscall.SysProcAttr{Setpgid: true} }

// procTracking reports whether this system can identify a process by pid
// and start time: without /proc it cannot, so nothing is recorded and
// nothing reaped.
const procTracking = false

type procInfo struct {
	pgid, sid int
	start     uint64
	zombie    bool
}

var errNoProc = errors.New("no /proc on this system")

func readProc(int) (procInfo, error) { return procInfo{}, errNoProc }
func bootID() (string, error)        { return "", errNoProc }
func pids() ([]int, error)           { return nil, errNoProc }
