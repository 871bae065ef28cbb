package mcpclient

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
)

// A message over the limit on a stdio connection.
//
// Every message of a stdio server shares one stream, so a message the
// reader gives up on would end them all; over Streamable HTTP the same
// message fails only its own call. The stream can go on, because a
// message is one line: the reader throws the rest of the line away and
// reads on after it. What the message was is read from what the reader
// kept of its start (where the SDK's servers write the id of a response,
// before its result) and, failing that, from the end of its line (where
// the TypeScript SDK's servers write it, after the result):
//
//   - a response whose id is readable fails the call it answers, Plexus's
//     own or the SDK's, with [errFrameTooLarge], and nothing else;
//   - a request of the server's whose id is readable is answered with an
//     error, so that the server does not wait for an answer;
//   - anything else (a notification, an id that cannot be read) fails
//     nothing and is logged.
//
// The id read from its start is acted on at once, before the rest of the
// line is read: a server that never ends the line fails the call all the
// same. A line ends at LF or at CR, as a message does for the SDK's reader
// and for next (its trailing-data check takes either). The rest of a line is read
// and thrown away up to [maxDiscard] bytes; a longer one ends the
// connection, as a message over the limit did before it could be skipped.
// Spaces between messages (blank lines) are no part of the next one: the
// limit counts from a message's first byte, so that no message within it
// is ever thrown away.
//
// A message that spans lines (JSON-RPC over stdio has none, but the reader
// takes them, as the SDK's does) has no end the reader can find: it ends
// the connection, as before.

// Bounds of what is kept of a message over the limit, and of what is read
// of it.
const (
	headBytes  = 4 << 10        // of its start, to read its envelope
	tailBytes  = 256            // of its line's end, to read an id written last
	maxDiscard = 4 * maxCapture // of its line after what the decoder held (64 MiB), to find its end
)

// oversized handles a message over the limit, which the decoder began and
// gave up on: it returns the answer to hand to the SDK (one of the SDK's
// calls fails), nil when there is none, or the error that ends the
// connection. The rest of the line is thrown away before it returns, or
// on the next read when the message's id was read from its start
// (c.skip).
func (c *stdioConn) oversized() (jsonrpc.Message, error) {
	buffered := bufio.NewReader(c.dec.Buffered())
	if skipSpaces(buffered) {
		c.restart(buffered) // what the decoder held, from the message's first byte
		return nil, nil
	}
	head, tail, multiline, err := readHeld(buffered)
	if err != nil || multiline {
		return nil, errors.Join(errFrameTooLarge, err)
	}
	env := readHead(head)
	if env.hasID {
		c.skip = true
		return c.refuseOversized(env), nil
	}
	if tail, err = c.skipLine(tail); err != nil {
		return nil, err
	}
	env.id, env.hasID = tailID(tail)
	return c.refuseOversized(env), nil
}

// refuseOversized fails what the message over the limit env describes
// was: the call it answers, or the server's request; it returns the
// answer to hand to the SDK, if any.
func (c *stdioConn) refuseOversized(env envelope) jsonrpc.Message {
	switch {
	case env.hasID && env.response && !env.request:
		r := &jsonrpc.Response{ID: env.id, Error: errFrameTooLarge}
		c.logOversized("failing the call it answers")
		if c.calls.answer(r) {
			return nil // one of Plexus's own calls
		}
		return r
	case env.hasID && env.request:
		c.logOversized("answering the server's request with an error")
		c.bg.run(func(life context.Context) { c.refuse(life, env.id) })
	default:
		c.logOversized("failing nothing: it is no response whose id can be read")
	}
	return nil
}

// skipSpaces reads the spaces r starts with and reports whether there
// were any.
func skipSpaces(r *bufio.Reader) bool {
	skipped := false
	for {
		b, err := r.ReadByte()
		if err != nil {
			return skipped // what the decoder held is all spaces
		}
		if b != ' ' && b != '\t' && b != '\r' && b != '\n' {
			// Cannot fail: the byte was just read.
			if err := r.UnreadByte(); err != nil {
				panic(err)
			}
			return skipped
		}
		skipped = true
	}
}

// restart has the decoder start again, with the limit counted afresh, on
// r and then what the server writes next.
func (c *stdioConn) restart(r io.Reader) {
	c.lim = &frameLimit{r: io.MultiReader(r, c.lim.r), limit: c.lim.limit}
	c.dec = json.NewDecoder(c.lim)
}

// readHeld reads what the decoder held of a message it gave up on, from
// its first byte: its first headBytes, its last tailBytes, and whether
// the message spans lines.
func readHeld(held io.Reader) (head, tail []byte, multiline bool, err error) {
	buf := make([]byte, 32<<10)
	for {
		n, err := held.Read(buf)
		chunk := buf[:n]
		if bytes.ContainsAny(chunk, "\r\n") {
			return nil, nil, true, nil
		}
		if room := headBytes - len(head); room > 0 {
			head = append(head, chunk[:min(room, len(chunk))]...)
		}
		tail = keepTail(tail, chunk)
		if err == io.EOF {
			return head, tail, false, nil
		}
		if err != nil {
			return nil, nil, false, err
		}
	}
}

// skipLine reads the rest of the current line from the server (up to
// maxDiscard bytes) and throws it away, but for the last tailBytes of
// tail and it, and has the decoder start again after it, with what was
// read past the line's end. A line ends at LF or CR.
func (c *stdioConn) skipLine(tail []byte) ([]byte, error) {
	src := c.lim.r
	buf := make([]byte, 32<<10)
	for read := 0; read <= maxDiscard; {
		n, err := src.Read(buf)
		if i := bytes.IndexAny(buf[:n], "\r\n"); i >= 0 {
			tail = keepTail(tail, buf[:i])
			c.restart(bytes.NewReader(bytes.Clone(buf[i+1 : n])))
			return tail, nil
		}
		tail = keepTail(tail, buf[:n])
		read += n
		if err != nil {
			return nil, fmt.Errorf("the rest of a message over the maximum size: %w", err)
		}
	}
	return nil, fmt.Errorf("a line over %d bytes: %w", maxDiscard, errFrameTooLarge)
}

// keepTail is the last tailBytes of tail followed by b.
func keepTail(tail, b []byte) []byte {
	if len(b) >= tailBytes {
		return append(tail[:0], b[len(b)-tailBytes:]...)
	}
	tail = append(tail, b...)
	return tail[max(0, len(tail)-tailBytes):]
}

// envelope is what could be read of a message cut short.
type envelope struct {
	id       jsonrpc.ID
	hasID    bool
	response bool // a "result" or "error" member began
	request  bool // a "method" member began
}

// readHead reads the members of the message whose start is head, in
// order, until one is cut short.
func readHead(head []byte) envelope {
	var env envelope
	i := skipSpace(head, 0)
	if i >= len(head) || head[i] != '{' {
		return env
	}
	for i = skipSpace(head, i+1); i < len(head) && head[i] == '"'; {
		end := skipValue(head, i)
		if end > len(head) {
			return env
		}
		var key string
		if json.Unmarshal(head[i:end], &key) != nil {
			return env
		}
		if i = skipSpace(head, end); i >= len(head) || head[i] != ':' {
			return env
		}
		i = skipSpace(head, i+1)
		switch key {
		case "method":
			env.request = true
		case "result", "error":
			env.response = true
		}
		end = skipValue(head, i)
		next := skipSpace(head, end)
		if end > len(head) || next >= len(head) || head[next] != ',' && head[next] != '}' {
			return env // the value is cut short
		}
		if key == "id" {
			id, err := decodeID(head[i:end])
			env.id, env.hasID = id, err == nil && id.IsValid()
		}
		if head[next] == '}' {
			return env
		}
		i = skipSpace(head, next+1)
	}
	return env
}

// tailID is the id of a message whose line ends with tail, when its last
// member is the id: `"id":<string or number>}`.
func tailID(tail []byte) (jsonrpc.ID, bool) {
	t := bytes.TrimRight(tail, " \t\r")
	if len(t) == 0 || t[len(t)-1] != '}' {
		return jsonrpc.ID{}, false
	}
	t = bytes.TrimRight(t[:len(t)-1], " \t\r")
	start := valueStart(t)
	if start < 0 {
		return jsonrpc.ID{}, false
	}
	before := bytes.TrimRight(t[:start], " \t\r")
	if !bytes.HasSuffix(before, []byte(":")) {
		return jsonrpc.ID{}, false
	}
	before = bytes.TrimRight(before[:len(before)-1], " \t\r")
	// The quote before "id" is the key's own: the byte before it is a
	// comma or a brace (a quote inside a string is escaped).
	key := bytes.TrimSuffix(before, []byte(`"id"`))
	if len(key) == len(before) {
		return jsonrpc.ID{}, false
	}
	if k := bytes.TrimRight(key, " \t\r"); len(k) == 0 || k[len(k)-1] != ',' && k[len(k)-1] != '{' {
		return jsonrpc.ID{}, false
	}
	id, err := decodeID(t[start:])
	return id, err == nil && id.IsValid()
}

// valueStart is where the string or number that t ends with starts, or -1.
func valueStart(t []byte) int {
	n := len(t)
	if n == 0 {
		return -1
	}
	if t[n-1] != '"' {
		i := n
		for i > 0 && bytes.IndexByte([]byte("0123456789+-.eE"), t[i-1]) >= 0 {
			i--
		}
		if i == n {
			return -1
		}
		return i
	}
	// The opening quote is the nearest one before that no odd run of
	// backslashes escapes.
	for i := n - 2; i >= 0; i-- {
		if t[i] != '"' {
			continue
		}
		slashes := 0
		for j := i - 1; j >= 0 && t[j] == '\\'; j-- {
			slashes++
		}
		if slashes%2 == 0 {
			return i
		}
	}
	return -1
}

// refuse answers the server's request id, which was over the maximum size,
// with an error, unless the connection's life ends first.
func (c *stdioConn) refuse(life context.Context, id jsonrpc.ID) {
	wctx, stop := context.WithTimeout(life, cancelTimeout)
	defer stop()
	err := c.Write(wctx, &jsonrpc.Response{ID: id, Error: &jsonrpc.Error{Code: jsonrpc.CodeInvalidRequest, Message: errFrameTooLarge.Error()}})
	if err != nil && c.c.r.log != nil {
		c.c.r.log.Debug("mcp: the error for a request over the maximum size could not be sent", "err", err)
	}
}

// logOversized says what was done with a message over the maximum size
// (not its id: the server chose it, and could put in it what Plexus keeps
// out of its logs).
func (c *stdioConn) logOversized(what string) {
	if c.c.r.log != nil {
		c.c.r.log.Warn("mcp: a message from the server over the maximum size was skipped, "+what, "limit", c.lim.limit)
	}
}
