package platform

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sync"
	"syscall"
	"time"
)

// childrenFile is where the children of the running daemon are recorded,
// under PLEXUS_HOME; maxChildrenFile bounds what is read of it (thousands
// of records).
const (
	childrenFile    = "run/children.json"
	maxChildrenFile = 1 << 20
)

// childRecord identifies one started child and its process group. The
// start time (clock ticks since boot, /proc/<pid>/stat field 22) tells the
// child from a later process that got the same pid; a name is never
// matched.
type childRecord struct {
	PID   int    `json:"pid"`
	PGID  int    `json:"pgid"`
	SID   int    `json:"sid"`
	Start uint64 `json:"start"`
}

// childrenState is the file's content: the children of one daemon process
// (Owner) during one boot.
type childrenState struct {
	Boot     string        `json:"boot"`
	Owner    childRecord   `json:"owner"`
	Children []childRecord `json:"children"`
}

// children is the table of the running daemon's children and its file. mu
// guards recs and every write of the file, so the file always says what
// recs held after some change.
type children struct {
	path string
	log  *slog.Logger

	mu       sync.Mutex
	recs     map[int]childRecord // by pid
	known    bool                // boot and owner have been read
	disabled bool                // they could not be: nothing is recorded
	boot     string
	owner    childRecord
}

// Track records cmd, started by the caller (the MCP SDK starts its
// server's command itself), as a child of this run, so that a start after
// a crash can stop what it left ([Services.ReapChildren]): its pid,
// process group, session and start time are written to
// PLEXUS_HOME/run/children.json (0600, replaced atomically). done forgets
// it; call it once cmd has been waited for and its group stopped. A child
// that exited already (unreaped, so still listed) is recorded all the
// same. Outside Linux nothing is recorded.
func (s *Services) Track(cmd *exec.Cmd) (done func(), err error) {
	c := s.children
	if !procTracking || cmd.Process == nil || !c.identify() {
		return func() {}, nil
	}
	pid := cmd.Process.Pid
	info, err := readProc(pid)
	if err != nil {
		return nil, fmt.Errorf("record child %d: %w", pid, err)
	}
	rec := childRecord{PID: pid, PGID: info.pgid, SID: info.sid, Start: info.start}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.recs[pid] = rec
	if err := c.write(); err != nil {
		delete(c.recs, pid)
		return nil, fmt.Errorf("record child %d: %w", pid, err)
	}
	var once sync.Once
	return func() { once.Do(func() { c.forget(rec) }) }, nil
}

// forget drops rec from the table. A failed write is logged and otherwise
// harmless: the record stays in the file until the next change rewrites
// it, and a start after a crash finds its pid gone or reused and leaves it
// alone.
func (c *children) forget(rec childRecord) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.recs[rec.PID] != rec {
		return
	}
	delete(c.recs, rec.PID)
	if err := c.write(); err != nil {
		c.log.Warn("platform: forget a child in "+childrenFile, "pid", rec.PID, "err", err)
	}
}

// identify reads the boot and the daemon's own record once, and reports
// whether children can be recorded. A system whose /proc does not show
// them (not mounted, a sandbox) records nothing, said once in the log,
// rather than refusing to run any child.
func (c *children) identify() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.known {
		c.known = true
		boot, err := bootID()
		var info procInfo
		if err == nil {
			info, err = readProc(os.Getpid())
		}
		if err != nil {
			c.disabled = true
			c.log.Warn("platform: children cannot be recorded; a crash may leave their descendants running", "err", err)
		}
		c.boot, c.owner = boot, childRecord{PID: os.Getpid(), PGID: info.pgid, SID: info.sid, Start: info.start}
	}
	return !c.disabled
}

// write replaces the file with the table. It is not synced: the records
// matter only while the machine keeps running (no process survives a
// reboot), and a process killed mid-write leaves the old file or the new
// one, never a part.
func (c *children) write() error {
	st := childrenState{Boot: c.boot, Owner: c.owner, Children: make([]childRecord, 0, len(c.recs))}
	for _, r := range c.recs {
		st.Children = append(st.Children, r)
	}
	slices.SortFunc(st.Children, func(a, b childRecord) int { return a.PID - b.PID })
	data, err := json.Marshal(st)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(c.path), 0o700); err != nil {
		return err
	}
	return WriteFileAtomic(c.path, data, WriteOptions{Mode: 0o600, Durability: Volatile})
}

// ReapedChild is a process group a previous run of the daemon left
// running, which [Services.ReapChildren] stopped.
type ReapedChild struct {
	PID     int   // the recorded child, the group's leader
	PGID    int   // its process group
	Members []int // the group's processes found running, the leader among them if it was
	Killed  bool  // SIGTERM was not enough: the group got SIGKILL after the grace
}

// ReapChildren stops what a previous run of the daemon, killed before it
// could stop its children, left behind, and clears the record. cmd calls it
// once at start, before any child is started, and journals what it
// returns; platform itself journals nothing.
//
// A recorded group is stopped when its leader still runs (the pid exists
// with the recorded start time), or when the leader is gone and processes
// of the group remain (the leader died of the parent-death signal, its
// descendants did not) that are in the recorded session and started no
// earlier than the leader. A pid now held by another process (another start
// time) is left alone, and so is its group: while a group has members its
// id is not given to a new process. Each group gets SIGTERM, then SIGKILL
// if a member remains after the stop grace.
//
// Nothing is done when the record is from another boot, or when the daemon
// that wrote it still runs (another plexus on the same home): that is an
// error, and the record is kept.
func (s *Services) ReapChildren(ctx context.Context) ([]ReapedChild, error) {
	if !procTracking {
		return nil, nil
	}
	c := s.children
	// Read as a regular file only: a FIFO planted under the name must not
	// hang the daemon's start, nor be removed.
	data, err := ReadRegular(c.path, maxChildrenFile+1)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	} else if err != nil {
		return nil, fmt.Errorf("read %s: %w", childrenFile, err)
	}
	var st childrenState
	if len(data) > maxChildrenFile {
		err = fmt.Errorf("over %d bytes", maxChildrenFile)
	} else {
		err = json.Unmarshal(data, &st)
	}
	if err != nil {
		return nil, errors.Join(fmt.Errorf("read %s: %w", childrenFile, err), clearRecord(c.path))
	}
	boot, err := bootID()
	if err != nil {
		return nil, fmt.Errorf("reap children: %w", err)
	}
	if st.Boot != boot {
		return nil, clearRecord(c.path)
	}
	if st.Owner.PID != os.Getpid() && alive(st.Owner) {
		return nil, fmt.Errorf("reap children: the plexus process %d that started them still runs; they were left alone", st.Owner.PID)
	}
	var reaped []ReapedChild
	for _, rec := range st.Children {
		if members := groupOf(rec); len(members) > 0 {
			reaped = append(reaped, ReapedChild{PID: rec.PID, PGID: rec.PGID, Members: members})
		}
	}
	s.stopGroups(ctx, reaped)
	return reaped, clearRecord(c.path)
}

// clearRecord removes the children file, a regular file only.
func clearRecord(path string) error {
	if err := CheckReplaceable(path); err != nil {
		return fmt.Errorf("clear %s: %w", childrenFile, err)
	}
	if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("clear %s: %w", childrenFile, err)
	}
	return nil
}

// alive reports whether the process rec recorded still runs: its pid
// exists with the recorded start time.
func alive(rec childRecord) bool {
	info, err := readProc(rec.PID)
	return err == nil && info.start == rec.Start
}

// groupOf returns the running members of rec's process group that belong
// to it, or none when the group is gone or its id now names another
// group. A zombie is no member: it has exited already (the parent-death
// signal leaves the daemon's children as zombies until init reaps them).
func groupOf(rec childRecord) []int {
	if rec.PGID != rec.PID {
		return nil // every child is started leading its own group
	}
	if info, err := readProc(rec.PID); err == nil {
		if info.start != rec.Start || info.pgid != rec.PGID {
			return nil // the pid is another process's now
		}
	}
	all, err := pids()
	if err != nil {
		return nil
	}
	var members []int
	for _, pid := range all {
		info, err := readProc(pid)
		if err == nil && !info.zombie && info.pgid == rec.PGID && info.sid == rec.SID && info.start >= rec.Start {
			members = append(members, pid)
		}
	}
	return members
}

// stopGroups sends each group SIGTERM, waits up to the stop grace for all
// of them to end, and sends SIGKILL to those that have not.
func (s *Services) stopGroups(ctx context.Context, groups []ReapedChild) {
	if len(groups) == 0 {
		return
	}
	for _, g := range groups {
		_ = syscall.Kill(-g.PGID, syscall.SIGTERM) // ESRCH: it ended meanwhile
	}
	deadline := time.NewTimer(s.stopGrace)
	defer deadline.Stop()
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		left := false
		for _, g := range groups {
			if groupRuns(g) {
				left = true
			}
		}
		if !left {
			return
		}
		select {
		case <-tick.C:
			continue
		case <-ctx.Done():
		case <-deadline.C:
		}
		break
	}
	for i, g := range groups {
		if groupRuns(g) {
			groups[i].Killed = true
			_ = syscall.Kill(-g.PGID, syscall.SIGKILL)
		}
	}
}

// groupRuns reports whether a member of g found at the start still runs
// (a zombie has ended). Only the members found are watched: a process
// that joined the group since is one of theirs, and gets the group's
// SIGKILL all the same if any of them is still there.
func groupRuns(g ReapedChild) bool {
	for _, pid := range g.Members {
		if info, err := readProc(pid); err == nil && !info.zombie && info.pgid == g.PGID {
			return true
		}
	}
	return false
}
