package mcpclient

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"strconv"
	"sync"
	"syscall"
	"time"
	"unicode/utf8"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// The stdio connection to a command's server.
//
// The SDK's CommandTransport reads the server's stdout on a goroutine of
// its own and hands each message over a channel to the goroutine of the
// session's jsonrpc2 reader, which then hands a response to its caller: two
// goroutine switches (and, on a busy machine, two thread wakeups) before a
// call's result reaches it. It also parses each message three times (the
// stream decoder, an attempt as a batch, then the message). stdioConn reads
// and parses each message once, on the reader's own goroutine, so a result
// takes one switch, the one from the reader to its caller. It also does
// the capture's work (capture.go) where the message comes off the wire.
//
// What the SDK's connection does is kept: messages are newline-delimited
// JSON values (a value may span lines; anything but a newline after it is
// an error), a frame is bounded by [maxCapture] (one past it is skipped,
// and fails its call alone: oversized.go), a batch (an array) is
// accepted and its messages handed on one by one, and Close ends the server
// as the spec's stdio shutdown says (stdin closed, then SIGTERM, then
// SIGKILL, each after the grace). One difference: the answers to a batch of
// requests from the server go back one by one, not as one array; JSON-RPC
// matches them by id either way, and batches are gone from the protocol
// since 2025-06-18.

// stdioTransport starts the command and connects to it over its stdio.
type stdioTransport struct {
	cmd   *exec.Cmd
	grace time.Duration // before each escalation on Close
	c     *capture
	limit int // bytes of one message; 0: maxCapture
}

func (t *stdioTransport) Connect(context.Context) (mcp.Connection, error) {
	stdout, err := t.cmd.StdoutPipe()
	if err != nil {
		return nil, fmt.Errorf("stdout of the server: %w", err)
	}
	stdin, err := t.cmd.StdinPipe()
	if err != nil {
		return nil, fmt.Errorf("stdin of the server: %w", err)
	}
	if err := t.cmd.Start(); err != nil {
		return nil, fmt.Errorf("start the server: %w", err)
	}
	lim := &frameLimit{r: stdout, limit: cmp.Or(t.limit, maxCapture)}
	conn := &stdioConn{cmd: t.cmd, stdin: stdin, stdout: stdout, lim: lim, dec: json.NewDecoder(lim), grace: t.grace, c: t.c}
	conn.calls.waiting = map[string]chan answer{}
	conn.turn = make(chan struct{}, 1)
	t.c.stdio.Store(conn)
	return conn, nil
}

// stdioConn is a [mcp.Connection] over a command's stdin and stdout. Read
// is called from one goroutine (the SDK's reader), Write concurrently,
// Close from anywhere, any number of times.
type stdioConn struct {
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	stdout io.ReadCloser
	grace  time.Duration
	c      *capture

	// The reader's; Read only.
	lim   *frameLimit
	dec   *json.Decoder
	queue []jsonrpc.Message // the rest of a batch
	skip  bool              // the rest of a line over the limit is to be thrown away (oversized.go)

	// turn lets one message be written at a time: a writer holds it (a
	// send) while it writes, and waits for it under its context, so that a
	// call whose caller left, or a notification when the connection
	// closes, does not wait on behind a write to a server that stopped
	// reading. (A write under way is not cut short: the server would read
	// half a message.)
	turn chan struct{}
	buf  []byte // guarded by turn

	calls pending    // the calls Plexus sends itself (passthrough.go)
	bg    background // the goroutines that end at Close (passthrough.go's cancellations)

	closeOnce sync.Once
	closeErr  error
}

// errFrameTooLarge is the error of a message over [maxCapture].
var errFrameTooLarge = errors.New("a JSON-RPC message from the server exceeded the maximum message size")

func (c *stdioConn) SessionID() string { return "" }

func (c *stdioConn) Read(ctx context.Context) (jsonrpc.Message, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	for {
		if len(c.queue) == 0 {
			msgs, err := c.next()
			if err != nil {
				c.calls.end()
				return nil, err
			}
			c.queue = msgs
		}
		msg := c.queue[0]
		c.queue[0] = nil
		c.queue = c.queue[1:]
		if r, ok := msg.(*jsonrpc.Response); ok {
			if c.calls.answer(r) {
				continue // an answer to Plexus's own call, not the SDK's
			}
			if err := sdkReadable(r.Result); r.Error == nil && err != nil {
				msg = &jsonrpc.Response{ID: r.ID, Error: err} // the SDK would panic decoding it (rounds.go)
			}
		}
		c.c.inbound(msg)
		return msg, nil
	}
}

// next reads the next JSON value off stdout and decodes its message(s).
// A message over the limit is skipped (oversized.go).
func (c *stdioConn) next() ([]jsonrpc.Message, error) {
	var raw json.RawMessage
	var err error
	for {
		if c.skip {
			c.skip = false
			if _, err := c.skipLine(nil); err != nil {
				return nil, err
			}
		}
		if err = c.dec.Decode(&raw); !errors.Is(err, errFrameTooLarge) {
			break
		}
		msg, oerr := c.oversized()
		if oerr != nil {
			return nil, oerr
		}
		if msg != nil {
			return []jsonrpc.Message{msg}, nil
		}
	}
	if err == nil {
		var tr [1]byte
		if n, rerr := c.dec.Buffered().Read(tr[:]); n > 0 {
			if tr[0] != '\n' && tr[0] != '\r' {
				err = errors.New("invalid trailing data after a JSON-RPC message from the server")
			}
		} else if rerr != nil && rerr != io.EOF {
			err = rerr
		}
	}
	if err != nil {
		return nil, err
	}
	c.lim.count = 0
	return decodeMessages(raw)
}

// decodeMessages decodes one message, or the messages of a batch.
func decodeMessages(raw json.RawMessage) ([]jsonrpc.Message, error) {
	if b := bytes.TrimLeft(raw, " \t\r\n"); len(b) == 0 || b[0] != '[' {
		msg, err := decodeMessage(raw)
		if err != nil {
			return nil, err
		}
		return []jsonrpc.Message{msg}, nil
	}
	var batch []json.RawMessage
	if err := json.Unmarshal(raw, &batch); err != nil {
		return nil, fmt.Errorf("a JSON-RPC batch from the server: %w", err)
	}
	if len(batch) == 0 {
		return nil, errors.New("an empty JSON-RPC batch from the server")
	}
	msgs := make([]jsonrpc.Message, 0, len(batch))
	for _, m := range batch {
		msg, err := decodeMessage(m)
		if err != nil {
			return nil, err
		}
		msgs = append(msgs, msg)
	}
	return msgs, nil
}

// decodeMessage is jsonrpc.DecodeMessage for a message the decoder has
// read (so valid JSON): the SDK's decoder allocates a 32 KiB buffer for
// every message it decodes, and a general decoder a map or reflection; the
// envelope's few members are read here in place, params and result left
// raw. Keys match exactly, as they do in the SDK; a "method" key makes a
// request (whatever its value), its absence a response, which needs an id.
// What is rare goes to the SDK's decoder itself: a message nested past its
// limit (which it refuses) and an error response (its error object read
// as the SDK reads it).
func decodeMessage(data []byte) (jsonrpc.Message, error) {
	if checkMaxDepth(data) != nil {
		return jsonrpc.DecodeMessage(data)
	}
	var w struct {
		version, id, method, params, result, errv []byte
		hasMethod                                 bool
	}
	err := members(data, func(key, val []byte) {
		switch string(key) {
		case "jsonrpc":
			w.version = val
		case "id":
			w.id = val
		case "method":
			w.method, w.hasMethod = val, true
		case "params":
			w.params = val
		case "result":
			w.result = val
		case "error":
			w.errv = val
		}
	})
	if err != nil {
		return nil, fmt.Errorf("unmarshaling jsonrpc message: %w", err)
	}
	if !bytes.Equal(w.version, []byte(`"2.0"`)) {
		var v string
		if err := unmarshalPresent(w.version, &v); err != nil {
			return nil, fmt.Errorf("unmarshaling jsonrpc message: %w", err)
		}
		if v != "2.0" { // "2\u002e0" is 2.0 too
			return nil, fmt.Errorf("invalid message version tag %q; expected %q", v, "2.0")
		}
	}
	id, err := decodeID(w.id)
	if err != nil {
		return nil, err
	}
	if w.hasMethod {
		var method string
		if err := unmarshalPresent(w.method, &method); err != nil {
			return nil, fmt.Errorf("unmarshaling jsonrpc message: %w", err)
		}
		return &jsonrpc.Request{ID: id, Method: method, Params: w.params}, nil
	}
	if !id.IsValid() {
		return nil, errors.New("JSON RPC invalid request: a response without an id")
	}
	if len(w.errv) > 0 && !bytes.Equal(w.errv, []byte("null")) {
		return jsonrpc.DecodeMessage(data)
	}
	return &jsonrpc.Response{ID: id, Result: w.result}, nil
}

// decodeID is the id of a message: none, a string, or a number (made an
// integer, as the SDK does).
func decodeID(raw []byte) (jsonrpc.ID, error) {
	var v any
	switch {
	case len(raw) == 0 || bytes.Equal(raw, []byte("null")):
	case raw[0] == '"' && bytes.IndexByte(raw, '\\') < 0 && utf8.Valid(raw):
		v = string(raw[1 : len(raw)-1])
	case raw[0] == '"':
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			return jsonrpc.ID{}, fmt.Errorf("unmarshaling jsonrpc message: %w", err)
		}
		v = s
	case raw[0] == '-' || raw[0] >= '0' && raw[0] <= '9':
		f, err := strconv.ParseFloat(string(raw), 64)
		if err != nil {
			return jsonrpc.ID{}, fmt.Errorf("unmarshaling jsonrpc message: %w", err)
		}
		v = f
	default:
		v = raw[0] // a boolean, object or array: MakeID refuses it
	}
	return jsonrpc.MakeID(v)
}

// unmarshalPresent unmarshals raw into v unless raw is absent.
func unmarshalPresent(raw json.RawMessage, v any) error {
	if len(raw) == 0 {
		return nil
	}
	return json.Unmarshal(raw, v)
}

// members calls f with the key (unquoted) and the raw value of each
// member of the object data, which must be valid JSON.
func members(data []byte, f func(key, val []byte)) error {
	i := skipSpace(data, 0)
	if i >= len(data) || data[i] != '{' {
		return errors.New("a JSON-RPC message must be an object")
	}
	i = skipSpace(data, i+1)
	for i < len(data) && data[i] != '}' {
		end := skipValue(data, i) // the key, a string
		if data[i] != '"' || end > len(data) || end-i < 2 {
			return errors.New("a malformed JSON-RPC message")
		}
		key := data[i+1 : end-1]
		if bytes.IndexByte(key, '\\') >= 0 {
			var k string
			if err := json.Unmarshal(data[i:end], &k); err != nil {
				return err
			}
			key = []byte(k)
		}
		i = skipSpace(data, skipSpace(data, end)+1) // past the colon
		if end = skipValue(data, i); end > len(data) || end <= i {
			return errors.New("a malformed JSON-RPC message")
		}
		f(key, data[i:end])
		i = skipSpace(data, end)
		if i < len(data) && data[i] == ',' {
			i = skipSpace(data, i+1)
		}
	}
	return nil
}

// sdkMaxDepth is the nesting the SDK's decoder allows (its internal/json).
const sdkMaxDepth = 1000

// checkMaxDepth is the SDK's check of the nesting of data (internal/json's
// checkMaxDepth), which it makes before decoding any message or result.
func checkMaxDepth(data []byte) error {
	depth, inString, escaped := 0, false, false
	for _, b := range data {
		if inString {
			switch {
			case escaped:
				escaped = false
			case b == '\\':
				escaped = true
			case b == '"':
				inString = false
			}
			continue
		}
		switch b {
		case '"':
			inString = true
		case '{', '[':
			if depth++; depth > sdkMaxDepth {
				return fmt.Errorf("json: exceeded maximum nesting depth of %d", sdkMaxDepth)
			}
		case '}', ']':
			if depth > 0 {
				depth--
			}
		}
	}
	return nil
}

func skipSpace(data []byte, i int) int {
	for i < len(data) && (data[i] == ' ' || data[i] == '\t' || data[i] == '\n' || data[i] == '\r') {
		i++
	}
	return i
}

// skipValue returns the end of the valid JSON value that starts at i.
func skipValue(data []byte, i int) int {
	depth := 0
	for ; i < len(data); i++ {
		switch c := data[i]; c {
		case '"':
			for i++; i < len(data) && data[i] != '"'; i++ {
				if data[i] == '\\' {
					i++
				}
			}
			if depth == 0 {
				return i + 1
			}
		case '{', '[':
			depth++
		case '}', ']':
			if depth--; depth == 0 {
				return i + 1
			}
			if depth < 0 {
				return i // the end of the enclosing object
			}
		case ',', ' ', '\t', '\n', '\r':
			if depth == 0 {
				return i
			}
		}
	}
	return i
}

func (c *stdioConn) Write(ctx context.Context, msg jsonrpc.Message) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	// Registered before the write, so that no response can overtake it.
	if req, ok := msg.(*jsonrpc.Request); ok && req.IsCall() {
		c.c.sent(slotFrom(ctx), req.ID)
	}
	data, err := jsonrpc.EncodeMessage(msg)
	if err != nil {
		return fmt.Errorf("encode a JSON-RPC message: %w", err)
	}
	if err := c.take(ctx); err != nil {
		return err
	}
	defer c.give()
	c.buf = append(append(c.buf[:0], data...), '\n') // one write: the server sees whole lines
	_, err = c.stdin.Write(c.buf)
	if cap(c.buf) > 64<<10 {
		c.buf = nil // a large message's buffer is not kept
	}
	return err
}

// writeCall writes the call id of method with params, the message
// EncodeMessage makes of it, in one write. id must need no escaping (it is
// one of Plexus's own).
func (c *stdioConn) writeCall(ctx context.Context, id, method string, params any) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := c.take(ctx); err != nil {
		return err
	}
	defer c.give()
	buf, err := encodeCall(c.buf[:0], id, method, params)
	if err != nil {
		return err
	}
	c.buf = append(buf, '\n')
	_, err = c.stdin.Write(c.buf)
	if cap(c.buf) > 64<<10 {
		c.buf = nil // a large message's buffer is not kept
	}
	return err
}

// encodeCall appends to buf the JSON-RPC call of method with params under
// the string id, encoded as the SDK encodes it.
func encodeCall(buf []byte, id, method string, params any) ([]byte, error) {
	b := bytes.NewBuffer(buf)
	for _, part := range [...]string{`{"jsonrpc":"2.0","id":"`, id, `","method":"`, method, `","params":`} {
		b.WriteString(part)
	}
	enc := json.NewEncoder(b)
	enc.SetEscapeHTML(false) // as the SDK encodes
	if err := enc.Encode(params); err != nil {
		return nil, fmt.Errorf("encode the %s params: %w", method, err)
	}
	b.Truncate(b.Len() - 1) // the encoder's newline
	b.WriteString("}")
	return b.Bytes(), nil
}

// take waits for the turn to write, or for ctx to end.
func (c *stdioConn) take(ctx context.Context) error {
	select {
	case c.turn <- struct{}{}:
		return nil
	default:
	}
	select {
	case c.turn <- struct{}{}:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// give hands the turn to write on.
func (c *stdioConn) give() { <-c.turn }

// Close ends the server the way the spec's stdio shutdown says: its stdin
// closed, then SIGTERM, then SIGKILL, each after the grace. Waiting for the
// command closes its stdout, which ends a Read. The connection's own
// goroutines end with it: their context ends first (one waiting for its
// turn to write leaves), closing stdin ends a write under way, and Close
// returns once they all have.
func (c *stdioConn) Close() error {
	c.closeOnce.Do(func() {
		c.calls.end()
		c.bg.stop()
		c.closeErr = c.shutdown()
		c.bg.wait()
	})
	return c.closeErr
}

func (c *stdioConn) shutdown() error {
	if err := c.stdin.Close(); err != nil {
		return fmt.Errorf("close the server's stdin: %w", err)
	}
	exited := make(chan error, 1)
	go func() { exited <- c.cmd.Wait() }()
	wait := func() (error, bool) {
		t := time.NewTimer(c.grace)
		defer t.Stop()
		select {
		case err := <-exited:
			return err, true
		case <-t.C:
			return nil, false
		}
	}
	if err, ok := wait(); ok {
		return err
	}
	// A server that cannot be sent SIGTERM is killed at once.
	if err := c.cmd.Process.Signal(syscall.SIGTERM); err == nil {
		if err, ok := wait(); ok {
			return err
		}
	}
	if err := c.cmd.Process.Kill(); err != nil {
		return fmt.Errorf("kill the server: %w", err)
	}
	if err, ok := wait(); ok {
		return err
	}
	if err := c.stdout.Close(); err != nil { // the reader must end all the same
		return fmt.Errorf("the server does not exit; closing its stdout: %w", err)
	}
	return errors.New("the server does not exit")
}

// frameLimit bounds the bytes the decoder may read for one message (the
// SDK's connection bounds them the same way).
type frameLimit struct {
	r            io.Reader
	limit, count int
}

func (l *frameLimit) Read(p []byte) (int, error) {
	if l.count >= l.limit {
		return 0, errFrameTooLarge
	}
	if len(p) > l.limit-l.count {
		p = p[:l.limit-l.count]
	}
	n, err := l.r.Read(p)
	l.count += n
	return n, err
}
