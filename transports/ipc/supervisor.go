package ipc

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/plexus-gw/plexus"
)

// Why Plexus stopped a provider's process. All but the last two count as
// failures for the on-failure policy; those two end supervision.
const (
	stopHeartbeats   = "heartbeats missed"
	stopSessionLost  = "connection closed by Plexus"
	stopPeerClosed   = "connection closed"
	stopNoConnect    = "did not connect"
	stopRemoved      = "removed"
	stopShutdown     = "shutdown"
	goodbyeRemoved   = "provider_removed"
	goodbyeUnhealthy = "unhealthy"
)

// process is one launch of a provider.
type process struct {
	cmd     *exec.Cmd
	pid     int
	started time.Time // real time, for uptime and backoff reset
	stderr  *lineLog
	stopReq chan string   // one slot: why the hub wants it stopped
	exited  chan struct{} // closed once cmd.Wait returned
	waitErr error         // set before exited is closed
}

func (pr *process) requestStop(reason string) {
	select {
	case pr.stopReq <- reason:
	default: // a request is already pending
	}
}

// signal signals the process group unless the leader has been reaped (its
// pid, and so the group id, could then be reused).
func (pr *process) signal(sig syscall.Signal) {
	select {
	case <-pr.exited:
		return
	default:
	}
	_ = syscall.Kill(-pr.pid, sig)
}

// supervise launches p, waits for its process to end, and relaunches it
// as its restart policy says, with backoff, until ctx ends (the provider
// is removed, or the hub stops).
func (h *Hub) supervise(ctx context.Context, p *provider) {
	failures := 0
	for attempt := 0; ; attempt++ {
		if attempt > 0 {
			p.mu.Lock()
			p.restarts++
			p.mu.Unlock()
		}
		proc, err := h.launch(p)
		var failed bool
		var why string
		var uptime time.Duration
		if err != nil {
			failed, why = true, "cannot start: "+err.Error()
			h.note("provider.start_failed", p, "", map[string]any{"error": err.Error(), "attempt": attempt})
			h.log.Warn("ipc: provider cannot start", "provider", p.id, "err", err)
		} else {
			h.note("provider.started", p, "", map[string]any{"pid": proc.pid, "attempt": attempt})
			var stoppedFor string
			stoppedFor, failed, why = h.watch(ctx, p, proc)
			uptime = time.Since(proc.started)
			payload := map[string]any{"pid": proc.pid, "exit": why, "uptime_ms": uptime.Milliseconds()}
			if stoppedFor != "" {
				payload["stopped_for"] = stoppedFor
			}
			if tail := proc.stderr.tail(); tail != "" {
				h.log.Debug("ipc: provider's last stderr line", "provider", p.id, "line", tail)
			}
			h.note("provider.exited", p, "", payload)
		}
		h.tokens.Revoke(p.id)
		p.mu.Lock()
		p.lastExit = why
		p.proc = nil
		sess := p.sess
		p.mu.Unlock()
		if sess != nil && sess.proc == proc {
			// A descendant may still hold the process's connection: it
			// ends with the process.
			sess.s.Goodbye(goodbyeUnhealthy)
		}
		if ctx.Err() != nil {
			p.setState(plexus.ProviderStopped, "stopped")
			return
		}
		restart := false
		switch p.cfg.Restart {
		case plexus.RestartAlways:
			restart = true
		case plexus.RestartOnFailure:
			restart = failed
		}
		if !restart {
			p.setState(plexus.ProviderExited, why)
			return
		}
		if uptime >= h.opts.ResetAfter {
			failures = 0
		}
		delay := h.opts.MinBackoff << min(failures, 20)
		delay = min(delay, h.opts.MaxBackoff)
		failures++
		h.note("provider.restarting", p, "", map[string]any{"attempt": attempt + 1, "delay_ms": delay.Milliseconds(), "after": why})
		p.setState(plexus.ProviderRestarting, fmt.Sprintf("%s; restarting in %s", why, delay.Round(time.Millisecond)))
		t := time.NewTimer(delay)
		select {
		case <-ctx.Done():
			t.Stop()
			p.setState(plexus.ProviderStopped, "stopped")
			return
		case <-t.C:
		}
	}
}

// launch starts one process of p with a fresh token in its environment.
func (h *Hub) launch(p *provider) (*process, error) {
	path := p.cfg.Command
	if !filepath.IsAbs(path) {
		var err error
		if path, err = h.bins.Resolve(path); err != nil {
			return nil, err
		}
	}
	token := h.tokens.Issue(p.id)
	env := h.bins.Env()
	for _, k := range slices.Sorted(maps.Keys(p.cfg.Env)) {
		env = append(env, k+"="+p.cfg.Env[k])
	}
	env = append(env,
		EnvSocket+"="+h.opts.SocketPath,
		EnvProviderID+"="+p.id,
		EnvSessionToken+"="+token,
	)
	// Never through a shell; args are passed as they are. The hub stops
	// the process itself (stopProcess), never through a context.
	cmd := h.bins.Command(context.Background(), path, p.cfg.Args, env)
	logw := newLineLog(h.log, p.id, token)
	cmd.Stdout = logw
	cmd.Stderr = logw
	// A descendant holding stdout or stderr open must not keep Wait.
	cmd.WaitDelay = h.opts.StopGrace
	proc := &process{cmd: cmd, stderr: logw, stopReq: make(chan string, 1), exited: make(chan struct{})}
	// proc is current before it starts: a quick child may say hello
	// before Start has returned here.
	p.mu.Lock()
	p.proc, p.launched = proc, false
	untrack, err := h.bins.Start(cmd)
	if err != nil {
		p.proc = nil
	} else {
		proc.pid, proc.started = cmd.Process.Pid, time.Now()
	}
	p.mu.Unlock()
	if err != nil {
		h.tokens.Revoke(p.id)
		return nil, err // exec's errors name the path, never the environment
	}
	p.setState(plexus.ProviderStarting, "starting")
	h.wg.Add(1)
	go func() {
		defer h.wg.Done()
		proc.waitErr = cmd.Wait()
		untrack()
		close(proc.exited)
	}()
	return proc, nil
}

// watch waits for proc to end: by itself, on the hub's request (missed
// heartbeats, a lost connection, no hello in time) or because ctx ended.
// It returns why Plexus stopped it ("" if it ended by itself), whether
// that counts as a failure, and how it ended.
func (h *Hub) watch(ctx context.Context, p *provider, proc *process) (stoppedFor string, failed bool, why string) {
	connect := time.NewTimer(h.opts.TokenTTL + h.srv.opts.HelloTimeout)
	defer connect.Stop()
	for stoppedFor == "" {
		select {
		case <-proc.exited:
			return "", exitFailed(proc.waitErr), exitString(proc.waitErr)
		case reason := <-proc.stopReq:
			if reason == stopPeerClosed {
				// A provider that closed its connection is expected to
				// exit by itself, and its exit status tells how.
				t := time.NewTimer(h.opts.StopGrace)
				select {
				case <-proc.exited:
					t.Stop()
					return "", exitFailed(proc.waitErr), exitString(proc.waitErr)
				case <-t.C:
				}
			}
			stoppedFor = reason
			h.stopProcess(p, proc, goodbyeUnhealthy)
		case <-connect.C:
			p.mu.Lock()
			connected := p.launched
			p.mu.Unlock()
			if !connected {
				stoppedFor = stopNoConnect
				h.stopProcess(p, proc, goodbyeUnhealthy)
			}
		case <-ctx.Done():
			// The supervisor's ctx ends with Run's (shutdown) or by
			// Remove (Run's still going).
			stoppedFor = stopShutdown
			reason := GoodbyeShutdown
			h.mu.Lock()
			if h.runCtx.Err() == nil {
				stoppedFor, reason = stopRemoved, goodbyeRemoved
			}
			h.mu.Unlock()
			h.stopProcess(p, proc, reason)
		}
	}
	return stoppedFor, true, "stopped: " + stoppedFor + " (" + exitString(proc.waitErr) + ")"
}

// stopProcess ends proc the polite way: core.goodbye and the connection
// closed (a provider exits when its connection ends), then SIGTERM to its
// process group, then SIGKILL, each step given StopGrace; once the leader
// is reaped, whatever is left of its group is killed. It returns when the
// process has been reaped.
func (h *Hub) stopProcess(p *provider, proc *process, goodbye string) {
	p.mu.Lock()
	sess := p.sess
	p.mu.Unlock()
	if sess != nil {
		sess.s.Goodbye(goodbye)
	}
	for _, sig := range []syscall.Signal{syscall.SIGTERM, syscall.SIGKILL} {
		t := time.NewTimer(h.opts.StopGrace)
		select {
		case <-proc.exited:
			t.Stop()
		case <-t.C:
			proc.signal(sig)
			continue
		}
		break
	}
	<-proc.exited
	// The leader is reaped; its group id cannot be reused while a member
	// lives, so this reaches only what it left behind (or nothing).
	_ = syscall.Kill(-proc.pid, syscall.SIGKILL)
}

// exitFailed: anything but a clean exit status 0 is a failure.
func exitFailed(err error) bool { return err != nil }

func exitString(err error) string {
	if err == nil {
		return "exit status 0"
	}
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return ee.String() // "exit status 2", "signal: killed"
	}
	return err.Error()
}

// lineLog is a provider's stdout and stderr: each line goes to the debug
// log with the provider's id, at most maxLogLine bytes of it, the session
// token redacted, and no more than maxLogBytes in all per process (then
// one notice). The last line is kept for the exit's log record.
type lineLog struct {
	log      *slog.Logger
	provider string
	token    string

	mu      sync.Mutex
	partial []byte
	logged  int
	capped  bool
	last    string
}

const (
	maxLogLine  = 1 << 10
	maxLogBytes = 1 << 20
)

func newLineLog(log *slog.Logger, provider, token string) *lineLog {
	return &lineLog{log: log, provider: provider, token: token}
}

func (l *lineLog) Write(b []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := len(b)
	for len(b) > 0 {
		i := bytes.IndexByte(b, '\n')
		if i < 0 {
			if len(l.partial) < maxLogLine+len(l.token) {
				l.partial = append(l.partial, b[:min(len(b), maxLogLine+len(l.token)-len(l.partial))]...)
			}
			break
		}
		line := append(l.partial, b[:i]...)
		l.partial = nil
		l.line(line)
		b = b[i+1:]
	}
	return n, nil
}

// line logs one line; l.mu is held.
func (l *lineLog) line(b []byte) {
	s := string(b)
	if l.token != "" {
		s = strings.ReplaceAll(s, l.token, "[redacted]")
	}
	if len(s) > maxLogLine {
		s = s[:maxLogLine] + "…"
	}
	s = strings.ToValidUTF8(strings.TrimRight(s, "\r"), "\uFFFD")
	l.last = s
	if l.capped {
		return
	}
	l.logged += len(s)
	if l.logged > maxLogBytes {
		l.capped = true
		l.log.Debug("ipc provider output: over the log budget; further lines are not logged", "provider", l.provider)
		return
	}
	l.log.Debug("ipc provider output", "provider", l.provider, "line", s)
}

// tail is the last complete line the process wrote (token redacted).
func (l *lineLog) tail() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.last
}
