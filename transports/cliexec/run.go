package cliexec

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"syscall"
	"time"

	"github.com/plexus-gw/plexus"
)

// stderrKeep is how much of the end of stderr is kept: far more than the
// excerpt, so that a secret is redacted whole before the excerpt is cut.
const stderrKeep = 64 << 10

// call is one process to run.
type call struct {
	bin     string // as the route names it, for messages
	path    string // absolute
	args    []string
	env     []string
	timeout time.Duration
	secret  string // "" when none; redacted from the stderr excerpt
}

// Causes of a stop the transport asked for.
var (
	errTimedOut = errors.New("time limit reached")
	errOversize = errors.New("output over the limit")
)

// run starts the process, waits for it and returns its stdout, or the
// failure as a result error. When run returns, the process has been reaped,
// exec's copying goroutines have ended, and the process group has been sent
// SIGKILL: nothing the call started outlives it.
func (t *Transport) run(ctx context.Context, c call) ([]byte, *plexus.Error) {
	runCtx, stop := context.WithCancelCause(ctx)
	defer stop(nil)
	runCtx, cancel := context.WithTimeoutCause(runCtx, c.timeout, errTimedOut)
	defer cancel()

	// Both buffers are written only by exec's copying goroutines and read
	// only after Wait, which waits for those goroutines.
	stdout := &limitBuffer{max: t.opts.MaxOutput, onOver: func() { stop(errOversize) }}
	stderr := &tailBuffer{max: stderrKeep}

	cmd := t.bins.Command(runCtx, c.path, c.args, c.env)
	cmd.Stdin = nil // /dev/null
	cmd.Stdout = stdout
	cmd.Stderr = stderr
	// When runCtx ends, the group gets SIGTERM (Command's Cancel). After
	// the grace, exec sends SIGKILL to the tool itself and closes the
	// pipes; the rest of the group is killed below.
	cmd.WaitDelay = t.opts.KillGrace

	done, err := t.bins.Start(cmd)
	if err != nil {
		return nil, t.startError(ctx, c, err)
	}
	err = cmd.Wait()
	// Whatever is left in the group (a grandchild that ignored SIGTERM, or a
	// background process of a tool that exited) ends with the call. While
	// members remain, the kernel keeps the group's id from being reused; when
	// none do, the signal finds no group.
	_ = signalGroup(cmd.Process.Pid, syscall.SIGKILL)
	done()

	switch {
	case stdout.over:
		return nil, plexus.Errorf(plexus.CodeTransportError, "%s: output exceeds %d bytes", c.bin, t.opts.MaxOutput)
	case err == nil, errors.Is(err, exec.ErrWaitDelay):
		// ErrWaitDelay: the tool exited 0 and only a background process
		// kept the output open.
		return stdout.buf, nil
	case runCtx.Err() != nil:
		cause := context.Cause(runCtx)
		if errors.Is(cause, errTimedOut) {
			return nil, &plexus.Error{Code: plexus.CodeTransportError, Message: fmt.Sprintf("%s timed out after %v", c.bin, c.timeout), Err: err}
		}
		return nil, &plexus.Error{Code: plexus.CodeTransportError, Message: fmt.Sprintf("%s was stopped: %v", c.bin, ctx.Err()), Err: cause}
	}
	var exit *exec.ExitError
	if !errors.As(err, &exit) {
		return nil, &plexus.Error{Code: plexus.CodeTransportError, Message: fmt.Sprintf("%s: reading its output failed", c.bin), Err: err}
	}
	ex := excerpt(stderr.bytes(), stderr.truncated(), c.secret)
	detail := map[string]any{"exitCode": exit.ExitCode(), "stderr": ex}
	msg := fmt.Sprintf("%s exited with status %d", c.bin, exit.ExitCode())
	if ws, ok := exit.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		msg = fmt.Sprintf("%s was killed by signal %v", c.bin, ws.Signal())
		detail["signal"] = ws.Signal().String()
	}
	if ex != "" {
		msg += ": " + ex
	}
	return nil, &plexus.Error{Code: plexus.CodeTransportError, Message: msg, Detail: detail, Err: err}
}

// startError classifies a failed Start. The message names the binary as
// the route does and the system's reason, never the argv or environment.
func (t *Transport) startError(ctx context.Context, c call, err error) *plexus.Error {
	if ctx.Err() != nil {
		return &plexus.Error{Code: plexus.CodeTransportError, Message: fmt.Sprintf("%s was stopped: %v", c.bin, ctx.Err()), Err: err}
	}
	if errors.Is(err, fs.ErrNotExist) {
		return &plexus.Error{Code: plexus.CodeSourceUnavailable, Message: fmt.Sprintf("%s is not installed", c.bin), Err: err}
	}
	reason := "it could not be started"
	var errno syscall.Errno
	if errors.As(err, &errno) {
		reason = errno.Error()
	}
	return &plexus.Error{Code: plexus.CodeTransportError, Message: fmt.Sprintf("%s cannot be started: %s", c.bin, reason), Err: err}
}

// signalGroup sends sig to the process group led by pid.
func signalGroup(pid int, sig syscall.Signal) error {
	err := syscall.Kill(-pid, sig)
	if errors.Is(err, syscall.ESRCH) {
		return os.ErrProcessDone
	}
	return err
}

// limitBuffer keeps up to max bytes. The first write past the limit calls
// onOver once; everything from then on is discarded but accepted, so the
// child never blocks on a full pipe while it is being stopped.
type limitBuffer struct {
	buf    []byte
	max    int
	over   bool
	onOver func()
}

func (b *limitBuffer) Write(p []byte) (int, error) {
	if b.over {
		return len(p), nil
	}
	if len(b.buf)+len(p) > b.max {
		b.over = true
		b.buf = nil
		b.onOver()
		return len(p), nil
	}
	b.buf = append(b.buf, p...)
	return len(p), nil
}

// tailBuffer keeps the last max bytes written to it.
type tailBuffer struct {
	buf   []byte
	max   int
	total int64
}

func (b *tailBuffer) Write(p []byte) (int, error) {
	b.total += int64(len(p))
	if len(p) >= b.max {
		b.buf = append(b.buf[:0], p[len(p)-b.max:]...)
		return len(p), nil
	}
	if len(b.buf)+len(p) > 2*b.max {
		// Slide rather than grow: keep what, with p, makes max bytes.
		b.buf = append(b.buf[:0], b.buf[len(b.buf)-(b.max-len(p)):]...)
	}
	b.buf = append(b.buf, p...)
	return len(p), nil
}

func (b *tailBuffer) bytes() []byte {
	if len(b.buf) > b.max {
		return b.buf[len(b.buf)-b.max:]
	}
	return b.buf
}

// truncated reports whether bytes misses the beginning of what was written.
func (b *tailBuffer) truncated() bool { return b.total > int64(len(b.bytes())) }
