package mcpserver

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"mime"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// The daemon's answer to a pumped call (bridgepump.go) is read here, not
// by the SDK's client connection: that connection decodes each message it
// sends once more for its _meta, reads each answer on a goroutine of its
// own and hands it over a channel, while the bridge only needs each
// event's data, as bytes, on the call's own goroutine.

// bridgeMaxEvent bounds an event of the daemon's: the 16 MiB the daemon
// takes of a server's message, and room for what the daemon wraps it in
// (its own JSON-RPC id, the event's other lines), so that a server's
// message the daemon accepted reaches the host.
const bridgeMaxEvent = mcp.DefaultMaxEventSize + 64<<10

// errEventTooLarge is an event of the daemon's beyond bridgeMaxEvent.
var errEventTooLarge = errors.New("the answer is larger than the 16 MiB mcp serve takes")

// answerError is an answer to a pumped call the bridge cannot take (too
// large, malformed): that call's failure, and the connection it came on
// is dropped, but the daemon session and the host's other calls go on.
// An upstream server is untrusted, and its answer must not end them.
type answerError struct{ err error }

func (e *answerError) Error() string { return e.err.Error() }
func (e *answerError) Unwrap() error { return e.err }

// sseData hands take the data of each event of an SSE body (data lines
// joined by newlines, as SSE says; other fields and comments are not the
// bridge's concern), until take says it is done or fails, or the body
// ends. An event whose lines outgrow max bytes is refused.
func sseData(body io.Reader, max int, take func(data []byte) (done bool, err error)) error {
	r := bufio.NewReader(body)
	var data []byte
	var has bool // a data line was read since the last event
	size := 0
	for {
		line, err := readLine(r, max-size)
		if err != nil {
			if errors.Is(err, io.EOF) && len(line) == 0 {
				return nil // an event cut short by the end is not one (SSE)
			}
			if !errors.Is(err, io.EOF) {
				return err
			}
		}
		size += len(line)
		line = bytes.TrimRight(line, "\r\n")
		switch {
		case len(line) == 0:
			if has {
				if done, err := take(data); done || err != nil {
					return err
				}
			}
			data, has, size = data[:0], false, 0
		case bytes.HasPrefix(line, []byte("data:")):
			if has {
				data = append(data, '\n')
			}
			v := line[len("data:"):]
			data, has = append(data, bytes.TrimPrefix(v, []byte(" "))...), true
		}
		if errors.Is(err, io.EOF) {
			return nil
		}
	}
}

// readLine reads one line of r, with its end, refusing one longer than
// max bytes. A line that fits r's buffer is r's own bytes, valid until r
// is read again (every line of an answer but a long data line: no copy
// per line).
func readLine(r *bufio.Reader, max int) ([]byte, error) {
	var line []byte
	for {
		chunk, err := r.ReadSlice('\n')
		if len(line)+len(chunk) > max {
			return nil, errEventTooLarge
		}
		if line == nil && !errors.Is(err, bufio.ErrBufferFull) {
			return chunk, err
		}
		line = append(line, chunk...)
		if !errors.Is(err, bufio.ErrBufferFull) {
			return line, err
		}
	}
}

// mediaType is the media type of a Content-Type, "" when it has none.
func mediaType(contentType string) string {
	mt, _, err := mime.ParseMediaType(contentType)
	if err != nil {
		return ""
	}
	return mt
}
