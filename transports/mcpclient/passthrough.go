package mcpclient

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

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
// SDK adds per-request metadata and answers multi-round-trip results) keep
// the SDK's call. Over Streamable HTTP the call is Plexus's own POST
// (passhttp.go).

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
	// A call sent again with the answers to a result's input requests
	// (rounds.go).
	InputResponses mcp.InputResponseMap `json:"inputResponses,omitempty"`
	RequestState   string               `json:"requestState,omitempty"`
}

// tokenMeta is the _meta of a call without a relay (no map to build and
// sort on the way out).
type tokenMeta struct {
	ProgressToken string `json:"progressToken"`
}

// toolParams are the params of a tools/call of name with input, its
// progress reported under token, as the SDK's call sends them with
// Plexus's sending middleware.
func toolParams(ctx context.Context, name string, input map[string]any, token string) toolCallParams {
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
	return params
}

// passthrough is the stdio connection of s when a tools/call on it is
// sent by Plexus itself, or nil.
func passthrough(s *session) *stdioConn {
	if s.cmd == nil || s.pv >= sessionless {
		return nil
	}
	return s.c.stdio.Load()
}

// callTool sends one tools/call with params on conn and waits for the
// server's result, raw.
func (conn *stdioConn) callTool(ctx context.Context, params toolCallParams) (json.RawMessage, error) {
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
		// Best effort, off the caller's way out, as the SDK does; on a
		// goroutine the connection owns, which its Close ends.
		reason := ctx.Err().Error()
		conn.bg.run(func(life context.Context) { conn.cancelled(life, id, reason) })
		return nil, ctx.Err()
	}
}

// cancelTimeout bounds telling the server a call was cancelled.
const cancelTimeout = 5 * time.Second

// cancelled tells the server that the call id was cancelled for reason,
// unless the connection's life ends first or cancelTimeout passes while
// the notification waits for its turn to be written.
func (c *stdioConn) cancelled(life context.Context, id jsonrpc.ID, reason string) {
	params, err := json.Marshal(&mcp.CancelledParams{Reason: reason, RequestID: id.Raw()})
	if err == nil {
		wctx, stop := context.WithTimeout(life, cancelTimeout)
		defer stop()
		err = c.Write(wctx, &jsonrpc.Request{Method: "notifications/cancelled", Params: params})
	}
	if err != nil && c.c.r.log != nil {
		c.c.r.log.Debug("mcp: notifications/cancelled could not be sent", "err", err)
	}
}

// plainResult is what toolResult reads of a plain result, in place.
type plainResult struct {
	isError    bool
	content    []byte // the content array, raw
	structured []byte // structuredContent, raw
}

// readPlain reads raw as a plain tools/call result, which the SDK's
// decoder would take and read as it is read here: an object with no
// member but content, isError and structuredContent, none repeated, keys
// spelt exactly (the SDK's decoder ignores case nowhere); isError true or
// false; content an array of text blocks, each with just a type "text"
// and a string text; structuredContent any value with no number past a
// float64 (the SDK's decoder refuses those); and nesting within the SDK's
// 1000 levels. Anything else (other blocks, _meta, annotations) is not
// plain: ok is false and the SDK decodes it.
func readPlain(raw []byte) (p plainResult, ok bool) {
	if checkMaxDepth(raw) != nil {
		return p, false
	}
	ok = true
	var seen [3]bool
	once := func(i int) bool {
		first := !seen[i]
		seen[i] = true
		return first
	}
	err := members(raw, func(key, val []byte) {
		switch string(key) {
		case "isError":
			ok = ok && once(0) && (string(val) == "true" || string(val) == "false")
			p.isError = string(val) == "true"
		case "content":
			ok = ok && once(1) && textBlocks(val)
			p.content = val
		case "structuredContent":
			ok = ok && once(2) && plainNumbers(val)
			p.structured = val
		default:
			ok = false
		}
	})
	return p, ok && err == nil
}

// textBlocks says whether content is an array of plain text blocks.
func textBlocks(content []byte) bool {
	ok := true
	err := elements(content, func(block []byte) {
		var typed, text bool
		err := members(block, func(key, val []byte) {
			switch string(key) {
			case "type":
				ok = ok && !typed && string(val) == `"text"`
				typed = true
			case "text":
				ok = ok && !text && val[0] == '"'
				text = true
			default:
				ok = false
			}
		})
		ok = ok && err == nil && typed && text
	})
	return ok && err == nil
}

// firstText is the text of the first text block with more than spaces.
func (p plainResult) firstText() string {
	text := ""
	err := elements(p.content, func(block []byte) {
		if text != "" {
			return
		}
		if err := members(block, func(key, val []byte) {
			switch {
			case string(key) != "text":
			case bytes.IndexByte(val, '\\') < 0 && utf8.Valid(val):
				text = string(val[1 : len(val)-1])
			case json.Unmarshal(val, &text) != nil: // unescaped, bad UTF-8 replaced as the SDK's decoder does
				text = ""
			}
		}); err != nil || strings.TrimSpace(text) == "" {
			text = ""
		}
	})
	if err != nil {
		return ""
	}
	return text
}

// elements calls f with the raw value of each element of the array data,
// which must be valid JSON.
func elements(data []byte, f func(val []byte)) error {
	i := skipSpace(data, 0)
	if i >= len(data) || data[i] != '[' {
		return errors.New("not an array")
	}
	i = skipSpace(data, i+1)
	for i < len(data) && data[i] != ']' {
		end := skipValue(data, i)
		if end > len(data) || end <= i {
			return errors.New("a malformed array")
		}
		f(data[i:end])
		i = skipSpace(data, end)
		if i < len(data) && data[i] == ',' {
			i = skipSpace(data, i+1)
		}
	}
	return nil
}

// plainNumbers says whether every number in the valid JSON value v fits a
// float64 without doubt: no exponent, at most 300 digits.
func plainNumbers(v []byte) bool {
	run := 0
	for i := 0; i < len(v); i++ {
		switch b := v[i]; {
		case b == '"':
			for i++; i < len(v) && v[i] != '"'; i++ {
				if v[i] == '\\' {
					i++
				}
			}
			run = 0
		case '0' <= b && b <= '9' || b == '.':
			if run++; run > 300 {
				return false
			}
		case (b == 'e' || b == 'E') && run > 0:
			return false
		default:
			run = 0
		}
	}
	return true
}
