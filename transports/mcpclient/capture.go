package mcpclient

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"mime"
	"net/http"
	"sync"
	"sync/atomic"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/plexus-gw/plexus"
)

// How the raw bytes of a result are captured.
//
// The SDK decodes every result into its typed structs (mcp.Tool,
// mcp.CallToolResult, …), which drop the fields the SDK does not model, and
// it hands out no raw form of a standard request's result: CallCustomMethod
// refuses standard method names, and sending middleware sees the result
// already decoded. The bytes are still whole one layer down, where the SDK's
// jsonrpc2 connection meets the wire, and that is where they are taken:
//
//   - stdio: the Connection is Plexus's own ([stdioConn]). Its Write sees
//     each outgoing call with the caller's context, and its Read sees each
//     response as a *jsonrpc.Response whose Result is the "result" member
//     exactly as the server wrote it.
//   - Streamable HTTP: the connection cannot be wrapped. The SDK tells its
//     own streamable connection the negotiated protocol version (which then
//     rides in a header on every request) and has it open the standalone
//     SSE stream through an unexported interface, which a wrapper would
//     hide. So the capture sits in the http.Client's RoundTripper
//     ([rawRoundTripper]): it reads the JSON-RPC id of each POSTed call and
//     tees each response body (application/json or text/event-stream)
//     through a small parser that picks the results out of the messages.
//     A tools/call Plexus sends itself (passhttp.go) takes its answer off
//     the response; the tee still relays its progress and log messages and
//     tags what the server asks, as on the SDK's calls.
//
// Either way a response is matched to its call by JSON-RPC id, and the id
// to its caller by a [slot] riding in the call's context: jsonrpc2 writes a
// call synchronously with the caller's context, and the streamable
// connection POSTs with that same context, so the layer that first sees the
// id also sees the slot. The slot is filled before the bytes reach the
// SDK's decoder, so it is complete when the SDK call returns.
//
// When no bytes went over the wire (a result the SDK served from its
// SEP-2549 cache, which only happens with servers that set a TTL), or a
// response exceeded [maxCapture], the slot stays empty and the caller falls
// back to re-marshalling the SDK's typed result; see [session.rawResult].

// maxCapture bounds the bytes of one captured message (as the SDK's own
// default frame limit does).
const maxCapture = mcp.DefaultMaxLineLength

// slot receives the raw result of the call(s) sent with a context carrying
// it. If the SDK sends a call more than once (a multi-round-trip retry),
// the last response wins.
type slot struct {
	mu  sync.Mutex
	raw json.RawMessage
	ids []jsonrpc.ID // the ids registered for it; guarded by pending.mu
}

func (s *slot) set(raw json.RawMessage) {
	s.mu.Lock()
	s.raw = raw
	s.mu.Unlock()
}

func (s *slot) result() json.RawMessage {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.raw
}

type slotKey struct{}

func withSlot(ctx context.Context, s *slot) context.Context {
	return context.WithValue(ctx, slotKey{}, s)
}

func slotFrom(ctx context.Context) *slot {
	s, _ := ctx.Value(slotKey{}).(*slot)
	return s
}

// capture is the capture of one connection: the slots of its calls that
// await a response, by JSON-RPC id, and the progress routes of its calls,
// by progress token. It is safe for concurrent use.
type capture struct {
	mu       sync.Mutex
	calls    map[jsonrpc.ID]*slot
	progress map[string]func(plexus.InvokeProgress)
	r        relays // the relays of the calls in flight (relay.go)
	// The stdio connection that feeds the capture, once connected; nil
	// for Streamable HTTP. Dispatch sends tools/call on it itself
	// (passthrough.go).
	stdio atomic.Pointer[stdioConn]
}

func newCapture(log *slog.Logger) *capture {
	return &capture{calls: make(map[jsonrpc.ID]*slot), progress: make(map[string]func(plexus.InvokeProgress)), r: relays{log: log}}
}

// sent registers id for s.
func (c *capture) sent(s *slot, id jsonrpc.ID) {
	if s == nil || !id.IsValid() {
		return
	}
	c.mu.Lock()
	c.calls[id] = s
	s.ids = append(s.ids, id)
	c.mu.Unlock()
}

// received hands the response to id its result (nil for an error
// response).
func (c *capture) received(id jsonrpc.ID, result json.RawMessage) {
	c.mu.Lock()
	s := c.calls[id]
	delete(c.calls, id)
	c.mu.Unlock()
	if s != nil {
		s.set(result)
	}
}

// awaiting says whether a call awaits its result from the capture.
func (c *capture) awaiting() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.calls) > 0
}

// receivedRaw is received for a result in a buffer that is reused: only
// the result of a call awaited is copied.
func (c *capture) receivedRaw(id jsonrpc.ID, result []byte, ok bool) {
	c.mu.Lock()
	s := c.calls[id]
	delete(c.calls, id)
	c.mu.Unlock()
	if s != nil {
		var raw json.RawMessage
		if ok {
			raw = bytes.Clone(result)
		}
		s.set(raw)
	}
}

// done forgets what s still waits for: a cancelled call gets no response.
func (c *capture) done(s *slot) {
	c.mu.Lock()
	for _, id := range s.ids {
		if c.calls[id] == s {
			delete(c.calls, id)
		}
	}
	s.ids = nil
	c.mu.Unlock()
}

// route sends the progress notifications for token to report until the
// returned func is called.
func (c *capture) route(token string, report func(plexus.InvokeProgress)) func() {
	c.mu.Lock()
	c.progress[token] = report
	c.mu.Unlock()
	return func() {
		c.mu.Lock()
		delete(c.progress, token)
		c.mu.Unlock()
	}
}

// progressed relays a notifications/progress to the call that set its
// token. It runs where the message is read off the wire, in the order the
// server sent them, and so before the call's response reaches the SDK.
// (The SDK's ProgressNotificationHandler is not used: the SDK handles
// notifications on another goroutine than responses, so a call's result
// could overtake its last progress.) A token no call waits for, a late
// notification, is dropped.
func (c *capture) progressed(params json.RawMessage) {
	var p struct {
		ProgressToken any      `json:"progressToken"`
		Progress      float64  `json:"progress"`
		Total         *float64 `json:"total"`
		Message       string   `json:"message"`
	}
	if json.Unmarshal(params, &p) != nil {
		return
	}
	token, ok := p.ProgressToken.(string)
	if !ok {
		return
	}
	c.mu.Lock()
	report := c.progress[token]
	c.mu.Unlock()
	if report != nil {
		report(plexus.InvokeProgress{Channel: "progress", Progress: &p.Progress, Total: p.Total, Message: p.Message})
	}
}

const methodProgress = "notifications/progress"

// inbound does the capture's work for a message the stdio connection read
// off the wire, before the SDK sees it (stdio.go): a response's result goes
// to its slot, a progress notification to its call, and a request a relay
// carries is tagged for it.
func (c *capture) inbound(msg jsonrpc.Message) {
	switch m := msg.(type) {
	case *jsonrpc.Response:
		var result json.RawMessage
		if m.Error == nil {
			result = m.Result
		}
		c.received(m.ID, result)
	case *jsonrpc.Request:
		if m.Method == methodProgress && !m.IsCall() {
			c.progressed(m.Params)
		}
		if relayed(m.Method) {
			m.Params = c.r.pass(c.r.sole(), m.Method, m.Params)
		}
	}
}

// rawRoundTripper is the Streamable HTTP side of the capture. It also adds
// the configured headers (secrets: never logged) to every request for the
// configured origin (home), and to no other: a redirect stayHome let
// through stays home, but the headers must not rely on it.
type rawRoundTripper struct {
	base    http.RoundTripper
	headers map[string]string
	home    string // originOf the server's URL
	c       *capture
}

func (t *rawRoundTripper) RoundTrip(req *http.Request) (*http.Response, error) {
	if len(t.headers) > 0 && t.home != "" && originOf(req.URL.String()) == t.home {
		req = req.Clone(req.Context()) // a RoundTripper must not change its argument
		for k, v := range t.headers {
			req.Header.Set(k, v)
		}
	}
	if s := slotFrom(req.Context()); s != nil && req.Method == http.MethodPost && req.GetBody != nil {
		if id, ok := postedCallID(req); ok {
			t.c.sent(s, id)
		}
	}
	resp, err := t.base.RoundTrip(req)
	if err != nil || resp.Body == nil {
		return resp, err
	}
	mt, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type"))
	switch mt {
	case "application/json":
		resp.Body = &jsonTee{ReadCloser: resp.Body, c: t.c}
	case "text/event-stream":
		resp.Body = &sseTee{ReadCloser: resp.Body, c: t.c, relay: plexus.RelayFrom(req.Context())}
	}
	return resp, nil
}

// postedCallID reads the JSON-RPC id of the call a POST carries (a fresh
// copy of the body, through GetBody), as the SDK reads it: a message with
// a method and an id.
func postedCallID(req *http.Request) (jsonrpc.ID, bool) {
	body, err := req.GetBody()
	if err != nil {
		return jsonrpc.ID{}, false
	}
	defer body.Close()
	data, err := io.ReadAll(io.LimitReader(body, maxCapture))
	if err != nil || !json.Valid(data) {
		return jsonrpc.ID{}, false
	}
	var rawID []byte
	var isRequest bool
	if err := members(data, func(key, val []byte) {
		switch string(key) {
		case "id":
			rawID = val
		case "method":
			isRequest = true
		}
	}); err != nil || !isRequest {
		return jsonrpc.ID{}, false
	}
	id, err := decodeID(rawID)
	return id, err == nil && id.IsValid()
}

// deliver hands c the results of the responses and the progress
// notifications in one JSON-RPC payload (a message or a batch), read as
// the SDK reads them (decodeMessages). Anything else in it is ignored:
// the SDK decodes it on its own. data is the caller's to reuse: a result
// is copied.
func deliver(c *capture, data []byte) {
	if !c.awaiting() && !bytes.Contains(data, []byte("progress")) {
		return // nothing here for the capture: the calls Plexus sends itself read their own answers
	}
	if !json.Valid(data) {
		return // the SDK refuses it
	}
	msgs, err := decodeMessages(data)
	if err != nil {
		return
	}
	for _, msg := range msgs {
		switch m := msg.(type) {
		case *jsonrpc.Response:
			c.receivedRaw(m.ID, m.Result, m.Error == nil)
		case *jsonrpc.Request:
			if m.Method == methodProgress && !m.IsCall() {
				c.progressed(m.Params)
			}
		}
	}
}

// jsonTee holds an application/json body back until it ends (the SDK
// reads it whole before it decodes it), delivers it, and passes it on, or
// in place of a result the SDK must not be handed an error response
// ([refusedAnswer]). A body over maxCapture is passed on as it comes,
// delivered nowhere.
type jsonTee struct {
	io.ReadCloser
	c   *capture
	buf bytes.Buffer
	out io.Reader // what the reader gets; nil until the body is held
}

func (t *jsonTee) Read(b []byte) (int, error) {
	if t.out == nil {
		t.out = t.hold()
	}
	return t.out.Read(b)
}

// hold reads the body, up to maxCapture, and returns what the reader gets.
func (t *jsonTee) hold() io.Reader {
	_, err := io.Copy(&t.buf, io.LimitReader(t.ReadCloser, maxCapture+1))
	switch {
	case err != nil:
		return io.MultiReader(&t.buf, failedReader{err}) // the SDK fails it, as it came
	case t.buf.Len() > maxCapture:
		return io.MultiReader(&t.buf, t.ReadCloser)
	}
	deliver(t.c, t.buf.Bytes())
	if refused := refusedAnswer(t.buf.Bytes()); refused != nil {
		return bytes.NewReader(refused)
	}
	return &t.buf
}

// failedReader fails every read with err.
type failedReader struct{ err error }

func (f failedReader) Read([]byte) (int, error) { return 0, f.err }

// refusedAnswer is, for a JSON-RPC payload that is a response whose
// result the SDK must not be handed (sdkReadable: it would panic decoding
// it, on the caller's goroutine), an error response to its id to hand it
// instead; nil for any other payload (most are passed over unread, as
// sdkReadable passes them).
func refusedAnswer(data []byte) []byte {
	if !bytes.Contains(data, []byte("inputRequests")) && !bytes.Contains(data, []byte(`\u`)) {
		return nil
	}
	if !json.Valid(data) {
		return nil // the SDK refuses it
	}
	msg, err := decodeMessage(data)
	r, ok := msg.(*jsonrpc.Response)
	if err != nil || !ok || r.Error != nil {
		return nil
	}
	rerr := sdkReadable(r.Result)
	if rerr == nil {
		return nil
	}
	out, err := jsonrpc.EncodeMessage(&jsonrpc.Response{ID: r.ID, Error: &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: rerr.Error()}})
	if err != nil {
		return nil
	}
	return out
}

// sseTee passes a text/event-stream body through, an event at a time: it
// delivers the data of each event as it ends, before the event reaches the
// reader, and tags a server request or log message in it for the relay of
// the call whose POST the stream answers (relay.go). An event larger than
// maxCapture is passed through as it comes, untouched. Its buffers live as
// long as the stream and are reused from one event to the next.
type sseTee struct {
	io.ReadCloser
	c       *capture
	relay   plexus.Relay // the relay of the call the stream answers; nil on the GET stream
	out     []byte       // bytes ready for the reader, from off
	off     int
	event   []byte // the lines of the event read so far, held back
	line    []byte // the line read so far, when it began in an earlier read
	data    []byte // the data of the event read so far
	hasData bool
	over    bool // the event exceeded maxCapture: it streams through
	err     error
}

// keptBuffer bounds the capacity a buffer of the tee keeps between events:
// a long-lived stream does not hold on to the memory of its largest event.
const keptBuffer = 64 << 10

func (t *sseTee) Read(b []byte) (int, error) {
	if len(b) == 0 {
		return 0, nil
	}
	for t.off == len(t.out) && t.err == nil {
		t.out, t.off = reuse(t.out), 0
		// Read into the reader's own b: feed copies what it keeps before
		// b is written below.
		n, err := t.ReadCloser.Read(b)
		t.feed(b[:n])
		if err != nil {
			// An event the stream did not finish goes to the reader as
			// it is, to fail there.
			t.out = append(append(t.out, t.event...), t.line...)
			t.event, t.line = nil, nil
			t.err = err
		}
	}
	n := copy(b, t.out[t.off:])
	t.off += n
	if t.off == len(t.out) {
		return n, t.err
	}
	return n, nil
}

// reuse is b emptied, its memory kept unless it grew past keptBuffer.
func reuse(b []byte) []byte {
	if cap(b) > keptBuffer {
		return nil
	}
	return b[:0]
}

func (t *sseTee) feed(b []byte) {
	for len(b) > 0 {
		i := bytes.IndexByte(b, '\n')
		if i < 0 {
			t.line = append(t.line, b...)
			t.spill()
			return
		}
		line := b[:i+1] // b is the reader's: t.line never holds it
		if len(t.line) > 0 {
			line = append(t.line, line...)
			t.line = reuse(line[:0]) // field copies what it keeps of line
		}
		t.field(line)
		b = b[i+1:]
	}
}

// spill lets an event that grew past maxCapture stream through.
func (t *sseTee) spill() {
	if !t.over && len(t.event)+len(t.line) > maxCapture {
		t.over = true
		t.data = t.data[:0]
	}
	if t.over {
		t.out = append(append(t.out, t.event...), t.line...)
		t.event, t.line = reuse(t.event), reuse(t.line)
	}
}

// field handles one line of the stream, its "\n" included (see the HTML
// standard's event-stream interpretation); only data fields and the blank
// line that ends an event matter here.
func (t *sseTee) field(raw []byte) {
	line := bytes.TrimSuffix(bytes.TrimSuffix(raw, []byte("\n")), []byte("\r"))
	if len(line) == 0 {
		t.end(raw)
		return
	}
	t.event = append(t.event, raw...)
	if name, value, _ := bytes.Cut(line, []byte(":")); string(name) == "data" && !t.over {
		value = bytes.TrimPrefix(value, []byte(" "))
		if t.hasData {
			t.data = append(t.data, '\n')
		}
		t.data = append(t.data, value...)
		t.hasData = true
	}
	t.spill()
}

// end finishes an event at its blank line.
func (t *sseTee) end(blank []byte) {
	event := t.event
	if t.hasData && !t.over {
		deliver(t.c, t.data)
		data := t.data
		if refused := refusedAnswer(data); refused != nil {
			data = refused // the SDK must not decode it (rounds.go)
		}
		if tagged := t.c.r.tagMessage(t.relay, data); !bytes.Equal(tagged, t.data) {
			event = rewriteData(event, tagged)
		}
	}
	t.out = append(append(t.out, event...), blank...)
	t.event, t.data, t.hasData, t.over = reuse(t.event), reuse(t.data), false, false
}

// rewriteData is event with its data lines replaced by one holding data.
func rewriteData(event, data []byte) []byte {
	var out []byte
	for _, l := range bytes.SplitAfter(event, []byte("\n")) {
		name, _, _ := bytes.Cut(l, []byte(":"))
		if len(l) > 0 && string(name) != "data" {
			out = append(out, l...)
		}
	}
	out = append(out, "data: "...)
	out = append(out, data...)
	return append(out, '\n')
}
