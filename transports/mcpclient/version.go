package mcpclient

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync/atomic"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// errVersionRefused is dial's error when the server refused the version
// Plexus asked for; connect then asks for sessionless.
var errVersionRefused = errors.New("the server refused the protocol version")

// refusedVersion reports whether err, the SDK's Connect error, says that
// the server does not speak the version asked for: a server that speaks
// only 2026-07-28 has no initialize (Method not found), answers it with
// the SDK's unsupported-version error, or refuses the handshake over HTTP
// with a 400 naming the protocol version (refused saw it; nil for stdio).
func refusedVersion(err error, refused *refusal) bool {
	var werr *jsonrpc.Error
	if errors.As(err, &werr) && (werr.Code == jsonrpc.CodeMethodNotFound || werr.Code == mcp.CodeUnsupportedProtocolVersion) {
		return true
	}
	return refused != nil && refused.seen.Load()
}

// maxRefusal bounds the bytes of a 400 answer read to find what it refused.
const maxRefusal = 4096

// refusal is a url server's RoundTripper: it notes an HTTP 400 whose body
// names the protocol version ("Unsupported protocol version", "Missing
// MCP-Protocol-Version header"), which the SDK reports only as "Bad
// Request". The body is handed on unchanged.
type refusal struct {
	base http.RoundTripper
	seen atomic.Bool
}

func (r *refusal) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := r.base.RoundTrip(req)
	if err != nil || resp.StatusCode != http.StatusBadRequest || resp.Body == nil {
		return resp, err
	}
	head, err := io.ReadAll(io.LimitReader(resp.Body, maxRefusal))
	if err != nil {
		cerr := resp.Body.Close()
		return nil, fmt.Errorf("read the server's 400 answer: %w", errors.Join(err, cerr))
	}
	resp.Body = struct {
		io.Reader
		io.Closer
	}{io.MultiReader(bytes.NewReader(head), resp.Body), resp.Body}
	if namesVersion(head) {
		r.seen.Store(true)
	}
	return resp, nil
}

// namesVersion reports whether an answer's text is about the protocol
// version.
func namesVersion(body []byte) bool {
	b := strings.ToLower(string(body))
	return strings.Contains(b, "protocol version") || strings.Contains(b, "protocol-version") || strings.Contains(b, "protocolversion")
}
