package inbox

import (
	"bytes"
	"context"
	"log/slog"
	"os/exec"
	"strings"
	"syscall"
	"time"
)

// notifyTimeout bounds one run of the owner's notify command.
const notifyTimeout = 10 * time.Second

// Children is what the [Notifier] needs of the platform to run the owner's
// command as every child runs (platform.Services implements it). Safe for
// concurrent use.
type Children interface {
	Resolve(name string) (string, error)
	Command(ctx context.Context, path string, args, env []string) *exec.Cmd
	Start(cmd *exec.Cmd) (done func(), err error)
	Env() []string
}

// Notifier runs the owner's notify command (auth-config.json "notify") with
// each decision's notification line. It never blocks the daemon: lines
// queue, and when the queue is full a line is dropped and logged. The
// command gets the line as its last argument, never a shell, and the base
// environment every child gets (platform.Services.Env); it is given no
// secret. It is started the platform's one way, like every child.
type Notifier struct {
	argv []string
	plat Children
	log  *slog.Logger
	q    chan string
}

// NewNotifier returns the notifier of the command argv (none when empty);
// [Notifier.Run] runs it.
func NewNotifier(argv []string, plat Children, log *slog.Logger) *Notifier {
	return &Notifier{argv: argv, plat: plat, log: log, q: make(chan string, 64)}
}

// Send queues line; it never waits. It is the reconciler's Config.Notify.
func (n *Notifier) Send(line string) {
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
func (n *Notifier) Run(ctx context.Context) error {
	for {
		select {
		case <-ctx.Done():
			return nil
		case line := <-n.q:
			n.run(ctx, line)
		}
	}
}

func (n *Notifier) run(ctx context.Context, line string) {
	ctx, cancel := context.WithTimeout(ctx, notifyTimeout)
	defer cancel()
	path := n.argv[0]
	if !strings.ContainsRune(path, '/') {
		var err error
		if path, err = n.plat.Resolve(path); err != nil {
			n.log.Warn("notify: the command cannot be found", "command", n.argv[0], "err", err)
			return
		}
	}
	// When ctx ends, the command's group gets SIGTERM, then SIGKILL.
	cmd := n.plat.Command(ctx, path, append(n.argv[1:len(n.argv):len(n.argv)], line), n.plat.Env())
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	done, err := n.plat.Start(cmd)
	if err == nil {
		err = cmd.Wait()
		// What the command left running in its group ends with it. The
		// group's id is not reused while a member lives; with none left,
		// the signal finds nothing.
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		done()
	}
	if err != nil {
		n.log.Warn("notify: the command failed", "command", n.argv[0], "err", err, "output", clipOutput(out.String()))
	}
}

func clipOutput(s string) string {
	s = strings.TrimSpace(s)
	if len(s) > 200 {
		return s[:200] + "…"
	}
	return s
}
