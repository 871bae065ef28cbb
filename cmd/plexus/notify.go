package main

import (
	"bytes"
	"context"
	"log/slog"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"time"
)

// notifyTimeout bounds one run of the owner's notify command.
const notifyTimeout = 10 * time.Second

// notifier runs the owner's notify command (auth-config.json "notify") with
// each decision's notification line. It never blocks the daemon: lines
// queue, and when the queue is full a line is dropped and logged. The
// command gets the line as its last argument, never a shell, and an
// environment without PLEXUS_* variables; it is given no secret.
type notifier struct {
	argv []string
	log  *slog.Logger
	q    chan string
}

func newNotifier(argv []string, log *slog.Logger) *notifier {
	return &notifier{argv: argv, log: log, q: make(chan string, 64)}
}

// send queues line; it never waits.
func (n *notifier) send(line string) {
	if len(n.argv) == 0 {
		return
	}
	select {
	case n.q <- line:
	default:
		n.log.Warn("notify: queue full; a notification was dropped")
	}
}

// Run runs queued notifications one at a time until ctx ends; a command
// still running then is killed with its process group.
func (n *notifier) Run(ctx context.Context) error {
	for {
		select {
		case <-ctx.Done():
			return nil
		case line := <-n.q:
			n.run(ctx, line)
		}
	}
}

func (n *notifier) run(ctx context.Context, line string) {
	ctx, cancel := context.WithTimeout(ctx, notifyTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, n.argv[0], append(n.argv[1:len(n.argv):len(n.argv)], line)...)
	cmd.Env = notifyEnv(os.Environ())
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = time.Second
	if err := cmd.Run(); err != nil {
		n.log.Warn("notify: the command failed", "command", n.argv[0], "err", err, "output", clipOutput(out.String()))
	}
}

// notifyEnv is env without PLEXUS_* variables.
func notifyEnv(env []string) []string {
	out := env[:0:0]
	for _, kv := range env {
		if !strings.HasPrefix(kv, "PLEXUS_") {
			out = append(out, kv)
		}
	}
	return out
}

func clipOutput(s string) string {
	s = strings.TrimSpace(s)
	if len(s) > 200 {
		return s[:200] + "…"
	}
	return s
}
