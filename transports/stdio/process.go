package stdio

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
	"unicode/utf8"

	"github.com/plexus-gw/plexus"
)

// readerGrace is how long the waiter lets the reader drain what the child
// wrote before it exited, once the child has been reaped. The reader sees
// end-of-file at once unless a descendant still holds stdout open.
const readerGrace = 500 * time.Millisecond

// request is one line to the child.
type request struct {
	ID     string         `json:"id"`
	Method string         `json:"method"`
	Params map[string]any `json:"params"`
}

// response is one line from the child. ID is a pointer so that a line
// without one is told from a line with an empty one.
type response struct {
	ID     *string         `json:"id"`
	Result json.RawMessage `json:"result"`
	Error  json.RawMessage `json:"error"`
}

// reply is what the reader (or the waiter) hands a waiting call: the
// child's result or error, or fail when the call failed on Plexus's side.
type reply struct {
	result json.RawMessage
	err    json.RawMessage // the child's error object, when it sent one
	fail   *plexus.Error
}

// process is one running child and the calls in flight on it.
//
// Goroutines: the reader owns stdout and the scanner; the waiter (run by
// the supervisor's watch) owns cmd.Wait and closes exited, then done. A
// call writes stdin while it holds wlock. mu guards pending and dead; it
// is never held while doing I/O.
type process struct {
	log     *slog.Logger
	cmd     *exec.Cmd
	pid     int
	untrack func()    // forgets the platform's record of the child, after Wait
	started time.Time // by the transport's clock, set by the supervisor
	prefix  string    // random per process, so ids never repeat across restarts
	seq     atomic.Uint64
	secret  string // the value the child got, redacted from what it says
	maxLine int
	stderr  *ring

	stdin  *os.File      // write end of the child's stdin
	stdout *os.File      // read end of the child's stdout
	wlock  chan struct{} // one slot: holding it is the right to write a line

	mu      sync.Mutex
	pending map[string]chan reply // nil once the process is gone
	dead    *plexus.Error         // why calls fail from now on; set once
	ignored int                   // lines ignored so far, for log levels

	readerDone chan struct{} // closed when the reader returns
	exited     chan struct{} // closed when cmd.Wait has returned
	done       chan struct{} // closed when every call in flight has failed
}

// startProcess starts path with args and env through bins; the child leads
// a new process group so that stopping it also stops what it started.
func startProcess(log *slog.Logger, bins Binaries, path string, args, env []string, secret string, maxLine int, waitDelay time.Duration) (*process, error) {
	inR, inW, err := os.Pipe()
	if err != nil {
		return nil, fmt.Errorf("stdin pipe: %w", err)
	}
	outR, outW, err := os.Pipe()
	if err != nil {
		inR.Close()
		inW.Close()
		return nil, fmt.Errorf("stdout pipe: %w", err)
	}
	p := &process{
		log:        log,
		secret:     secret,
		maxLine:    maxLine,
		stderr:     &ring{},
		stdin:      inW,
		stdout:     outR,
		wlock:      make(chan struct{}, 1),
		pending:    make(map[string]chan reply),
		readerDone: make(chan struct{}),
		exited:     make(chan struct{}),
		done:       make(chan struct{}),
	}
	var rnd [6]byte
	_, _ = rand.Read(rnd[:]) // never fails (crypto/rand panics instead)
	p.prefix = hex.EncodeToString(rnd[:]) + "-"

	// Never through a shell; args are passed as they are. The process is
	// stopped by stop and kill, never by a context.
	cmd := bins.Command(context.Background(), path, args, env)
	cmd.Stdin = inR   // *os.File: handed to the child, no copying goroutine
	cmd.Stdout = outW // likewise
	cmd.Stderr = p.stderr
	// A descendant holding stderr open must not keep Wait forever.
	cmd.WaitDelay = waitDelay
	p.untrack, err = bins.Start(cmd)
	// The child's ends are the child's now; the parent keeping them would
	// hide the child's end-of-file from the reader.
	inR.Close()
	outW.Close()
	if err != nil {
		inW.Close()
		outR.Close()
		return nil, err
	}
	p.cmd = cmd
	p.pid = cmd.Process.Pid
	return p, nil
}

// call sends one request and waits for its reply, ctx's end or the
// process's death. ctx always carries the call's deadline.
func (p *process) call(ctx context.Context, method string, params map[string]any) reply {
	if params == nil {
		params = map[string]any{}
	}
	id := p.prefix + strconv.FormatUint(p.seq.Add(1), 36)
	line, err := json.Marshal(request{ID: id, Method: method, Params: params})
	if err != nil {
		return reply{fail: plexus.WrapError(plexus.CodeTransportError, err, "the input cannot be encoded as JSON")}
	}
	line = append(line, '\n')

	ch := make(chan reply, 1) // the reader never blocks on a slow caller
	p.mu.Lock()
	if p.pending == nil {
		dead := p.dead
		p.mu.Unlock()
		return reply{fail: dead}
	}
	p.pending[id] = ch
	p.mu.Unlock()

	if perr := p.write(ctx, line); perr != nil {
		p.forget(id)
		return reply{fail: perr}
	}
	select {
	case r := <-ch:
		return r
	case <-ctx.Done():
		p.forget(id) // a late response now has an unknown id and is ignored
		select {
		case r := <-ch: // it raced in: better an answer than a timeout
			return r
		default:
		}
		return reply{fail: ctxFailure(ctx)}
	}
}

// ctxFailure is the error of a call whose ctx ended; the caller rewrites a
// deadline into a timeout message that names the limit.
func ctxFailure(ctx context.Context) *plexus.Error {
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		return plexus.WrapError(plexus.CodeTransportError, ctx.Err(), "timed out")
	}
	return plexus.WrapError(plexus.CodeTransportError, ctx.Err(), "call cancelled")
}

// forget drops a call that no longer waits.
func (p *process) forget(id string) {
	p.mu.Lock()
	delete(p.pending, id)
	p.mu.Unlock()
}

// write writes one line to the child's stdin. A child that does not read
// fills the pipe; the write then blocks until ctx's deadline (cancellation
// without a deadline is noticed once the write returns).
func (p *process) write(ctx context.Context, line []byte) *plexus.Error {
	select {
	case p.wlock <- struct{}{}:
	case <-ctx.Done():
		return ctxFailure(ctx)
	case <-p.exited:
		return p.deadErr()
	}
	defer func() { <-p.wlock }()
	dl, _ := ctx.Deadline()
	_ = p.stdin.SetWriteDeadline(dl) // a pipe from os.Pipe supports deadlines
	n, err := p.stdin.Write(line)
	if err == nil {
		return nil
	}
	if n > 0 {
		// A torn line would be read glued to the next request: the
		// stream is beyond repair, so the process is replaced.
		p.kill(plexus.Errorf(plexus.CodeTransportError, "a request could not be written whole; the process was stopped"))
	}
	switch {
	case errors.Is(err, os.ErrDeadlineExceeded):
		return ctxFailure(ctx)
	case errors.Is(err, syscall.EPIPE), errors.Is(err, os.ErrClosed):
		return p.deadErr()
	}
	return plexus.WrapError(plexus.CodeTransportError, err, "write the request to the process")
}

// deadErr is the error of a call on a process that is gone or going.
func (p *process) deadErr() *plexus.Error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.dead != nil {
		return p.dead
	}
	return plexus.Errorf(plexus.CodeTransportError, "the process exited")
}

// read reads responses until stdout ends, hands each to its call, and
// stops the process when a line exceeds the limit.
func (p *process) read() {
	defer close(p.readerDone)
	sc := bufio.NewScanner(p.stdout)
	// The buffer must hold the line and its newline.
	sc.Buffer(make([]byte, 0, min(64<<10, p.maxLine+1)), p.maxLine+1)
	for sc.Scan() {
		p.deliver(sc.Bytes())
	}
	if errors.Is(sc.Err(), bufio.ErrTooLong) {
		p.log.Warn("stdio: the process wrote a line over the limit; stopping it", "pid", p.pid, "maxLine", p.maxLine)
		p.kill(plexus.Errorf(plexus.CodeTransportError, "the process wrote a response line over the %s limit and was stopped", size(p.maxLine)))
	}
}

// deliver hands one line to the call whose id it carries. Lines are never
// logged: they hold what the tool returns, which may be private.
func (p *process) deliver(line []byte) {
	line = bytes.TrimSpace(line)
	if len(line) == 0 {
		return
	}
	var r response
	if err := json.Unmarshal(line, &r); err != nil || r.ID == nil {
		p.ignore("stdio: ignored a line from the process that is not a response", len(line))
		return
	}
	p.mu.Lock()
	ch := p.pending[*r.ID]
	delete(p.pending, *r.ID)
	p.mu.Unlock()
	if ch == nil {
		p.ignore("stdio: ignored a response with an unknown id (a call that timed out?)", len(line))
		return
	}
	if len(r.Error) > 0 && string(r.Error) != "null" {
		ch <- reply{err: r.Error}
		return
	}
	ch <- reply{result: r.Result}
}

// ignore logs an ignored line: the first few at warning level, the rest at
// debug, so that a chatty tool cannot flood the log.
func (p *process) ignore(msg string, n int) {
	p.mu.Lock()
	p.ignored++
	count := p.ignored
	p.mu.Unlock()
	level := slog.LevelWarn
	if count > 3 {
		level = slog.LevelDebug
	}
	p.log.Log(context.Background(), level, msg, "pid", p.pid, "bytes", n, "ignored", count)
}

// setDead records why calls fail from now on; the first cause wins.
func (p *process) setDead(cause *plexus.Error) {
	p.mu.Lock()
	if p.dead == nil {
		p.dead = cause
	}
	p.mu.Unlock()
}

// kill stops the process at once (SIGKILL to its group) and makes cause
// the error of every call in flight.
func (p *process) kill(cause *plexus.Error) {
	p.setDead(cause)
	p.signal(syscall.SIGKILL)
}

// signal signals the child's process group unless the child has been
// reaped. The group id is the child's pid; it cannot be reused while the
// unreaped child, or any member of its group, lives.
func (p *process) signal(sig syscall.Signal) {
	select {
	case <-p.exited:
		return
	default:
	}
	_ = syscall.Kill(-p.pid, sig)
}

// wait reaps the child, lets the reader drain its last lines, and returns
// why it ended. The caller then calls finish.
func (p *process) wait() string {
	err := p.cmd.Wait()
	p.untrack()
	close(p.exited)
	select {
	case <-p.readerDone:
	case <-time.After(readerGrace):
		// A descendant holds stdout open, so the group still has a member
		// and its id is still the group's: stop it, then the reader.
		_ = syscall.Kill(-p.pid, syscall.SIGKILL)
		p.stdout.Close()
		<-p.readerDone
	}
	p.stdout.Close()
	// Closing an *os.File is safe while another goroutine writes to it:
	// the write returns os.ErrClosed.
	p.stdin.Close()
	why := "exited"
	if err != nil {
		why = err.Error() // "exit status 2", "signal: killed"
	}
	return why
}

// finish fails every call still waiting with the recorded cause, or with
// "the process exited: why", and closes done.
func (p *process) finish(why string) {
	p.mu.Lock()
	if p.dead == nil {
		p.dead = plexus.Errorf(plexus.CodeTransportError, "the process exited: %s", why)
		if tail := p.stderrTail(); tail != "" {
			p.dead.Err = errors.New("stderr: " + tail) // for logs, never the wire
		}
	}
	pending := p.pending
	p.pending = nil
	dead := p.dead
	p.mu.Unlock()
	for _, ch := range pending {
		ch <- reply{fail: dead}
	}
	close(p.done)
}

// stderrTail is the last line the child wrote to stderr, short and with
// the secret redacted.
func (p *process) stderrTail() string {
	s := strings.TrimRight(string(p.stderr.bytes()), "\n\r\t ")
	if i := strings.LastIndexByte(s, '\n'); i >= 0 {
		s = s[i+1:]
	}
	if len(s) > 200 {
		s = s[len(s)-200:]
	}
	s = strings.ToValidUTF8(s, "\uFFFD")
	if p.secret != "" {
		s = strings.ReplaceAll(s, p.secret, redacted)
	}
	return s
}

// stop ends the process the polite way: stdin closed (a tool that reads
// until end-of-file exits), then SIGTERM to its group, then SIGKILL, each
// step given grace; once the leader has exited, whatever is left of its
// group is killed. It returns once every call in flight has failed.
func (p *process) stop(grace time.Duration, cause *plexus.Error) {
	p.setDead(cause)
	p.stdin.Close() // a write in progress returns os.ErrClosed
	for _, sig := range []syscall.Signal{syscall.SIGTERM, syscall.SIGKILL} {
		t := time.NewTimer(grace)
		select {
		case <-p.exited:
			t.Stop()
		case <-t.C:
			p.signal(sig)
			continue
		}
		break
	}
	<-p.exited
	// The leader is gone and reaped, but what it started may live on in
	// its group. While any member lives, the group id cannot be given to
	// another group; once none does, this finds nothing (ESRCH). Only a
	// new process that got the same pid and made itself a group leader in
	// the microseconds between could be hit, the same narrow risk the
	// platform package's group kill takes.
	_ = syscall.Kill(-p.pid, syscall.SIGKILL)
	<-p.done
}

// ring keeps the last bytes a child wrote to stderr, for error excerpts.
// os/exec's copying goroutine writes it; the waiter reads it.
type ring struct {
	mu  sync.Mutex
	buf []byte
}

const ringSize = 4 << 10

func (r *ring) Write(b []byte) (int, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := len(b)
	if len(b) >= ringSize {
		b = b[len(b)-ringSize:]
		r.buf = r.buf[:0]
	}
	if over := len(r.buf) + len(b) - ringSize; over > 0 {
		r.buf = append(r.buf[:0], r.buf[over:]...)
	}
	r.buf = append(r.buf, b...)
	return n, nil
}

func (r *ring) bytes() []byte {
	r.mu.Lock()
	defer r.mu.Unlock()
	b := bytes.Clone(r.buf)
	// Drop a rune cut by the window's start.
	for len(b) > 0 && !utf8.RuneStart(b[0]) {
		b = b[1:]
	}
	return b
}

// size formats a byte count for a message.
func size(n int) string {
	switch {
	case n >= 1<<20 && n%(1<<20) == 0:
		return fmt.Sprintf("%d MiB", n>>20)
	case n >= 1<<10 && n%(1<<10) == 0:
		return fmt.Sprintf("%d KiB", n>>10)
	}
	return fmt.Sprintf("%d-byte", n)
}
