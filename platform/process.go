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
// [Services.Resolve] returns it) with args and exactly env, never through a
// shell, with the child-process hygiene every transport shares. It is the
// one way Plexus builds a child process: the cli, stdio, ipc and MCP
// transports and the notify command all go through it.
//
//   - Env is env, which the caller builds as [Services.Env] plus what the
//     child's declaration names. A nil env is an empty environment, never
//     the daemon's (os/exec would read nil as "inherit").
//   - Stdin is left nil, which os/exec connects to /dev/null: a tool that
//     waits for input gets end-of-file, not a hang. A transport that speaks
//     to the child over stdin sets Stdin or calls StdinPipe.
//   - The child leads a new process group (Setpgid), so that stopping it
//     also stops what it started.
//   - On Linux the child gets SIGKILL when the daemon dies (Pdeathsig, see
//     [childAttr]); what it started is found by [Services.ReapChildren] at
//     the next start, once [Services.Start] or [Services.Track] recorded it.
//   - When ctx is done, the whole group gets SIGTERM; if the child has not
//     exited after the stop grace ([Options.StopGrace]), os/exec kills it
//     and the group gets SIGKILL. WaitDelay is that grace, so Wait also
//     stops waiting for output pipes held open by a descendant. A caller
//     that stops its child itself passes context.Background().
//
// The caller owns the returned command: it sets Stdout and Stderr, starts
// it with [Services.Start], and must Wait for it. A path that is not
// absolute makes Start fail; nothing here searches the daemon's own PATH.
func (s *Services) Command(ctx context.Context, path string, args, env []string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, path, args...)
	if !filepath.IsAbs(path) {
		cmd.Err = fmt.Errorf("run %q: not an absolute path; resolve the binary first", path)
	}
	if env == nil {
		env = []string{}
	}
	cmd.Env = env
	cmd.SysProcAttr = childAttr()
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

// Start starts cmd, made by [Services.Command], and records it as a child
// of this run (see [Services.Track]). When Start returns nil, the caller
// must call done once it has waited for cmd and stopped what was left of
// its group. A child that cannot be recorded could outlive a crash
// unnoticed, so it is killed with its group and reaped, and Start returns
// why.
func (s *Services) Start(cmd *exec.Cmd) (done func(), err error) {
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	done, err = s.Track(cmd)
	if err != nil {
		// The child is unreaped, so its pid is still its group's id.
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		if werr := cmd.Wait(); werr != nil {
			err = fmt.Errorf("%w (the child was stopped: %v)", err, werr)
		}
		return nil, err
	}
	return done, nil
}
