package inbox

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"time"
)

// notifyTimeout bounds one run of the owner's notify command, and one POST
// of the webhook.
const notifyTimeout = 10 * time.Second

// notifyQueue is how many notifications wait, for the command and for the
// webhook each, before new ones are dropped (and logged).
const notifyQueue = 64

// Notification is what the owner is told when a decision is put up: the
// gateway's one-line summary (ending with the id), the decision's id and
// the path of its file. It holds no secret: the summary is the gateway's
// own narration.
type Notification struct {
	Line string
	ID   string
	File string
}

// Children is what the [Notifier] needs of the platform to run the owner's
// command as every child runs (platform.Services implements it). Safe for
// concurrent use.
type Children interface {
	Resolve(name string) (string, error)
	Command(ctx context.Context, path string, args, env []string) *exec.Cmd
	Start(cmd *exec.Cmd) (done func(), err error)
	Env() []string
}

// Webhook is the owner's notify webhook (auth-config.json
// "notifyWebhook"): each notification is POSTed to URL as JSON in ntfy's
// publish format (topic, title, message, tags), with the decision's id and
// file added as pendingId and file, so an ntfy server takes it as is and
// any other receiver reads the same fields.
type Webhook struct {
	URL   string
	Topic string
	// Client sends the POSTs; nil means one with notifyTimeout.
	Client *http.Client
	// Retries is how many times a POST that failed (no answer, 429 or 5xx)
	// is tried again, Backoff the first wait (doubled each time); zero
	// values mean 3 and one second.
	Retries int
	Backoff time.Duration
}

// Notifier tells the owner of each decision put up: it runs the owner's
// notify command (auth-config.json "notify") with the notification line,
// and POSTs it to the owner's webhook. It never blocks the daemon: each has
// a bounded queue, and when one is full a notification is dropped and
// logged. The command gets the line as its last argument, never a shell,
// and the base environment every child gets (platform.Services.Env); it is
// given no secret. It is started the platform's one way, like every child.
type Notifier struct {
	argv  []string
	plat  Children
	log   *slog.Logger
	hook  *Webhook
	q     chan string
	hookQ chan Notification
}

// NewNotifier returns the notifier of the command argv (none when empty)
// and of hook (none when nil); [Notifier.Run] runs them.
func NewNotifier(argv []string, plat Children, log *slog.Logger, hook *Webhook) *Notifier {
	if hook != nil {
		h := *hook
		if h.Client == nil {
			h.Client = &http.Client{Timeout: notifyTimeout}
		}
		if h.Retries <= 0 {
			h.Retries = 3
		}
		if h.Backoff <= 0 {
			h.Backoff = time.Second
		}
		hook = &h
	}
	return &Notifier{argv: argv, plat: plat, log: log, hook: hook,
		q: make(chan string, notifyQueue), hookQ: make(chan Notification, notifyQueue)}
}

// Send queues n; it never waits. It is the reconciler's Config.Notify.
func (n *Notifier) Send(note Notification) {
	if len(n.argv) > 0 {
		select {
		case n.q <- note.Line:
		default:
			n.log.Warn("notify: queue full; a notification was dropped")
		}
	}
	if n.hook != nil {
		select {
		case n.hookQ <- note:
		default:
			n.log.Warn("notify webhook: queue full; a notification was dropped", "pending", note.ID)
		}
	}
}

// Run runs queued notifications, the command's and the webhook's each one
// at a time, until ctx ends; a command still running then is killed with
// its process group, and a POST is abandoned.
func (n *Notifier) Run(ctx context.Context) error {
	var wg sync.WaitGroup
	wg.Go(func() {
		for {
			select {
			case <-ctx.Done():
				return
			case note := <-n.hookQ:
				n.post(ctx, note)
			}
		}
	})
	defer wg.Wait()
	for {
		select {
		case <-ctx.Done():
			return nil
		case line := <-n.q:
			n.run(ctx, line)
		}
	}
}

// webhookBody is the JSON POSTed: ntfy's publish fields, then ours.
type webhookBody struct {
	Topic     string   `json:"topic,omitempty"`
	Title     string   `json:"title"`
	Message   string   `json:"message"`
	Tags      []string `json:"tags"`
	PendingID string   `json:"pendingId"`
	File      string   `json:"file"`
}

// post sends note to the webhook, trying again after a failure that may
// pass. Its log lines never name the URL, which may carry the owner's
// topic or token.
func (n *Notifier) post(ctx context.Context, note Notification) {
	body, err := json.Marshal(webhookBody{Topic: n.hook.Topic, Title: "Plexus: a decision waits for you", Message: note.Line,
		Tags: []string{"plexus"}, PendingID: note.ID, File: note.File})
	if err != nil {
		n.log.Warn("notify webhook: encode", "err", err)
		return
	}
	wait := n.hook.Backoff
	for attempt := 0; ; attempt++ {
		retry, err := n.postOnce(ctx, body)
		if err == nil {
			return
		}
		if !retry || attempt >= n.hook.Retries {
			n.log.Warn("notify webhook: the notification was not delivered", "pending", note.ID, "attempts", attempt+1, "err", err)
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(wait):
		}
		wait *= 2
	}
}

// postOnce POSTs body once: an error, and whether trying again may help.
func (n *Notifier) postOnce(ctx context.Context, body []byte) (bool, error) {
	ctx, cancel := context.WithTimeout(ctx, notifyTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, n.hook.URL, bytes.NewReader(body))
	if err != nil {
		return false, fmt.Errorf("new request: %w", err)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := n.hook.Client.Do(req)
	if err != nil {
		return true, fmt.Errorf("post: the receiver did not answer")
	}
	resp.Body.Close()
	switch {
	case resp.StatusCode/100 == 2:
		return false, nil
	case resp.StatusCode == http.StatusTooManyRequests || resp.StatusCode >= 500:
		return true, fmt.Errorf("post: status %d", resp.StatusCode)
	}
	return false, fmt.Errorf("post: status %d", resp.StatusCode)
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
