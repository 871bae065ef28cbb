package mcpserver

import (
	"errors"
	"io"
	"mime"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/plexus-gw/plexus/internal/sse"
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

// sseData hands take the data of each event of an SSE body (other fields
// and comments are not the bridge's concern), until take says it is done
// or fails, or the body ends. An event beyond max bytes is refused.
func sseData(body io.Reader, max int, take func(data []byte) (done bool, err error)) error {
	r := sse.NewReader(body, sse.Options{MaxEvent: max})
	for {
		ev, err := r.Next()
		if err != nil {
			return bridgeSSEError(err)
		}
		if done, err := take(ev.Data); done || err != nil {
			return err
		}
	}
}

// bridgeSSEError is what sseData makes of its reader's error: none at the
// end, as the SSE reader refuses it.
func bridgeSSEError(err error) error {
	var large *sse.TooLargeError
	switch {
	case errors.Is(err, io.EOF):
		return nil // an event cut short by the end is not one (SSE)
	case errors.As(err, &large):
		return errEventTooLarge
	}
	return err
}

// mediaType is the media type of a Content-Type, "" when it has none.
func mediaType(contentType string) string {
	mt, _, err := mime.ParseMediaType(contentType)
	if err != nil {
		return ""
	}
	return mt
}
