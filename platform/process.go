package platform

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"time"
)

// Command returns the command that runs the binary at path (absolute, as
// [Services.Resolve] returns it) with args, never through a shell, with the
// child-process hygiene every transport shares:
//
//   - Env is [Services.Env]: the enriched PATH, no PLEXUS_* variables.
//   - Stdin is left nil, which os/exec connects to /dev/null: a tool that
//     waits for input gets end-of-file, not a hang. A transport that speaks
//     to the child over stdin sets Stdin or calls StdinPipe.
//   - The child leads a new process group (Setpgid), so that stopping it
//     also stops what it started.
//   - When ctx is done, the whole group gets SIGTERM; if the child has not
//     exited after the stop grace ([Options.StopGrace]), os/exec kills it
//     and the group gets SIGKILL. WaitDelay is that grace, so Wait also
//     stops waiting for output pipes held open by a descendant.
//
// The caller owns the returned command: it sets Stdout and Stderr, starts
// it, and must Wait for it. A path that is not absolute makes Start fail;
// nothing here searches the daemon's own PATH.
func (s *Services) Command(ctx context.Context, path string, args []string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, path, args...)
	if !filepath.IsAbs(path) {
		cmd.Err = fmt.Errorf("run %q: not an absolute path; resolve the binary first", path)
	}
	cmd.Env = s.Env()
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	grace := s.stopGrace
	cmd.WaitDelay = grace
	cmd.Cancel = func() error {
		// The group's id is the child's pid, still the group's here: os/exec
		// has not reaped the child yet. The SIGKILL after the grace reaches
		// whatever of the group is left (the id cannot be reused while a
		// member lives) and finds nothing, ESRCH, when all of it exited;
		// only a system cycling through every pid within the grace could
		// hand the id to another group meanwhile.
		pgid := cmd.Process.Pid
		err := syscall.Kill(-pgid, syscall.SIGTERM)
		if errors.Is(err, syscall.ESRCH) {
			return os.ErrProcessDone
		}
		time.AfterFunc(grace, func() { _ = syscall.Kill(-pgid, syscall.SIGKILL) })
		return err
	}
	return cmd
}
