package mcpclient

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/plexus-gw/plexus"
)

// A tools/call on a stdio session is sent by Plexus itself, not through the
// SDK's ClientSession.CallTool, and its result passes through as the
// server wrote it.
//
// The SDK decodes every result into its structs (CallToolResult, each
// content block), with a JSON decoder that allocates 32 KiB per value, on
// top of encoding the request through its middleware: about two thirds of
// the bytes a call allocated, for a result Plexus hands on as bytes. The
// call here is the same JSON-RPC request the SDK sends (its progress token,
// the caller's capabilities in _meta for a relay that offers some, the log
// level for a relay), written on the session's own connection with an id
// the SDK never uses (a string: the SDK numbers its calls), and its answer
// is taken off the wire by the connection's reader and handed straight to
// the caller, which is the one goroutine switch any call takes. What the
// server asks or tells while the call runs (progress, logs, sampling,
// elicitation, roots) reaches the SDK as before: only the response is
// Plexus's. A cancelled call tells the server notifications/cancelled, as
// the SDK does. Sessions at 2026-07-28 and later (sessionless, where the
// SDK adds per-request metadata and answers multi-round-trip results) and
// Streamable HTTP keep the SDK's call.

// answer is the response to one of Plexus's own calls.
type answer struct {
	result json.RawMessage
	err    error // a *jsonrpc.Error from the server, or the connection's end
}

// pending are the calls Plexus sent itself on a connection, by id.
type pending struct {
	mu      sync.Mutex
	next    uint64
	waiting map[string]chan answer // nil once the connection ended
}

// idPrefix starts the id of each of Plexus's own calls.
const idPrefix = "plexus-call-"

// add registers a new call and returns its id (and the id's string) and
// where its answer comes.
func (p *pending) add() (jsonrpc.ID, string, chan answer, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.waiting == nil {
		return jsonrpc.ID{}, "", nil, mcp.ErrConnectionClosed
	}
	p.next++
	key := idPrefix + strconv.FormatUint(p.next, 10)
	ch := make(chan answer, 1)
	p.waiting[key] = ch
	id, err := jsonrpc.MakeID(key)
	return id, key, ch, err
}

// drop forgets a call that no longer waits: a late answer is dropped.
func (p *pending) drop(id jsonrpc.ID) {
	key, _ := id.Raw().(string)
	p.mu.Lock()
	delete(p.waiting, key)
	p.mu.Unlock()
}

// answer hands r to the call it answers and reports whether it was one of
// Plexus's own (a late answer to one included).
func (p *pending) answer(r *jsonrpc.Response) bool {
	key, ok := r.ID.Raw().(string)
	if !ok || !strings.HasPrefix(key, idPrefix) {
		return false
	}
	p.mu.Lock()
	ch := p.waiting[key]
	delete(p.waiting, key)
	p.mu.Unlock()
	if ch != nil {
		a := answer{result: r.Result}
		if r.Error != nil {
			a = answer{err: r.Error}
		}
		ch <- a
	}
	return true
}

// end fails every call still waiting: the connection is gone.
func (p *pending) end() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, ch := range p.waiting {
		ch <- answer{err: fmt.Errorf("%w: the server's stdio ended during the call", mcp.ErrConnectionClosed)}
	}
	p.waiting = nil
}

// toolCallParams are the params of tools/call, as the SDK sends them.
type toolCallParams struct {
	Meta      any            `json:"_meta"` // a tokenMeta, or an mcp.Meta for a call with a relay
	Name      string         `json:"name"`
	Arguments map[string]any `json:"arguments"`
}

// tokenMeta is the _meta of a call without a relay (no map to build and
// sort on the way out).
type tokenMeta struct {
	ProgressToken string `json:"progressToken"`
}

// passthrough is the stdio connection of s when a tools/call on it is
// sent by Plexus itself, or nil.
func passthrough(s *session) *stdioConn {
	if s.cmd == nil || s.pv >= sessionless {
		return nil
	}
	return s.c.stdio.Load()
}

// callTool sends tools/call of name with input on conn, its progress
// reported under token, and waits for the server's result, raw.
func callTool(ctx context.Context, conn *stdioConn, name string, input map[string]any, token string) (json.RawMessage, error) {
	if input == nil {
		input = map[string]any{} // arguments are never null on the wire
	}
	params := toolCallParams{Meta: tokenMeta{token}, Name: name, Arguments: input}
	if r := plexus.RelayFrom(ctx); r != nil {
		meta := mcp.Meta{"progressToken": token}
		if o, ok := r.(Offerer); ok {
			meta[mcp.MetaKeyClientCapabilities] = callerCapabilities(o) // as declareCaller does
		}
		logEverything(ctx, &meta)
		params.Meta = meta
	}
	id, key, ch, err := conn.calls.add()
	if err != nil {
		return nil, err
	}
	if err := conn.writeCall(ctx, key, "tools/call", params); err != nil {
		conn.calls.drop(id)
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, fmt.Errorf("%w: calling %q: %v", mcp.ErrConnectionClosed, "tools/call", err)
	}
	select {
	case a := <-ch:
		return a.result, a.err
	case <-ctx.Done():
		conn.calls.drop(id)
		go conn.cancelled(ctx, id) // best effort, off the caller's way out, as the SDK does
		return nil, ctx.Err()
	}
}

// cancelTimeout bounds telling the server a call was cancelled.
const cancelTimeout = 5 * time.Second

// cancelled tells the server that the call id was cancelled (ctx ended).
func (c *stdioConn) cancelled(ctx context.Context, id jsonrpc.ID) {
	params, err := json.Marshal(&mcp.CancelledParams{Reason: ctx.Err().Error(), RequestID: id.Raw()})
	if err == nil {
		wctx, stop := context.WithTimeout(context.WithoutCancel(ctx), cancelTimeout)
		defer stop()
		err = c.Write(wctx, &jsonrpc.Request{Method: "notifications/cancelled", Params: params})
	}
	if err != nil && c.c.r.log != nil {
		c.c.r.log.Debug("mcp: notifications/cancelled could not be sent", "err", err)
	}
}
