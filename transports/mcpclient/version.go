package mcpclient

import (
	"bytes"
	"context"
	"encoding/json"
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

// errDressRefused is dial's error when the server refused an initialize
// dressed the 2026-07-28 way ([dressHello]) without saying that it speaks
// only 2026-07-28: the dress may be what it refused (the SDK's stateful
// server refuses any request whose _meta names a protocol version; an
// older server may refuse a version header it does not know), so connect
// asks once more without it.
var errDressRefused = errors.New("the server refused the dressed initialize")

// helloKey carries, in the context of a handshake message, its method, for
// the HTTP request that posts it to name in Mcp-Method ([refusal]).
type helloKey struct{}

// dressHello is the sending middleware of a dressed handshake: the
// initialize and the notifications/initialized that follows it go out the
// way SEP-2575 and SEP-2243 have a client send every message, so that a
// server that speaks 2026-07-28 (and the conformance suite) sees a client
// that does, while Plexus still asks for a session version: the
// initialize's _meta names the version asked, the capabilities declared
// and the client (the SDK sets MCP-Protocol-Version from that _meta), and
// both carry Mcp-Method. A notification gets no _meta: the triple is for
// requests, and the SDK's stateful server refuses any message that has
// one. Every other message passes through untouched.
func dressHello(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		switch method {
		case "initialize":
			if p, ok := req.GetParams().(*mcp.InitializeParams); ok {
				meta := p.GetMeta()
				if meta == nil {
					meta = map[string]any{}
				}
				meta[mcp.MetaKeyProtocolVersion] = p.ProtocolVersion
				meta[mcp.MetaKeyClientCapabilities] = p.Capabilities
				meta[mcp.MetaKeyClientInfo] = p.ClientInfo
				p.SetMeta(meta)
			}
		case "notifications/initialized":
		default:
			return next(ctx, method, req)
		}
		return next(context.WithValue(ctx, helloKey{}, method), method, req)
	}
}

// speaksOnlyNewer reports whether err is a refusal of the version asked
// that lists the versions the server speaks, none older than sessionless
// (SEP-2575's UnsupportedProtocolVersion data): asking again for a
// session version, dressed or not, is pointless.
func speaksOnlyNewer(err error) bool {
	var werr *jsonrpc.Error
	if !errors.As(err, &werr) || werr.Code != mcp.CodeUnsupportedProtocolVersion || len(werr.Data) == 0 {
		return false
	}
	var data mcp.UnsupportedProtocolVersionData
	if json.Unmarshal(werr.Data, &data) != nil || len(data.Supported) == 0 {
		return false
	}
	for _, v := range data.Supported {
		if v < sessionless {
			return false
		}
	}
	return true
}

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

// refusal is a url server's RoundTripper: it notes an HTTP 400 (bad), and
// one whose body names the protocol version ("Unsupported protocol
// version", "Missing MCP-Protocol-Version header": seen), which the SDK
// reports only as "Bad Request" when the body is not JSON-RPC. The body is
// handed on unchanged. A handshake message's request ([helloKey]) gets its
// Mcp-Method header here, where the SDK leaves it out below 2026-07-28;
// other requests pay one context lookup.
type refusal struct {
	base http.RoundTripper
	seen atomic.Bool
	bad  atomic.Bool
}

func (r *refusal) RoundTrip(req *http.Request) (*http.Response, error) {
	if method, ok := req.Context().Value(helloKey{}).(string); ok {
		req = req.Clone(req.Context()) // a RoundTripper must not change its argument
		req.Header.Set("Mcp-Method", method)
	}
	resp, err := r.base.RoundTrip(req)
	if err != nil || resp.StatusCode != http.StatusBadRequest || resp.Body == nil {
		return resp, err
	}
	r.bad.Store(true)
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
