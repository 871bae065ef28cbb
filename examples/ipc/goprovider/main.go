// Command goprovider is an example tool provider for Plexus's ipc
// transport, in Go: Plexus launches it, it connects back over the unix
// socket, says agent.hello with its session token, registers three tools
// and serves their calls, with heartbeats, streaming and cancellation.
//
//	echo         read   returns {"echo": <input>}
//	count        read   streams "line 1" … "line n" on stdout, one every
//	                    interval_ms (default 100), then returns {"count": n}
//	note.append  write  appends {"text"} as a line to $NOTES_DIR/notes.md
//	                    (side_effects: true), returns {"path", "bytes"}
//
// Declare it to Plexus (build it first, and give notes a folder):
//
//	go build -o ~/bin/goprovider ./examples/ipc/goprovider
//	plexus providers add demo-go -- ~/bin/goprovider
//	# and set NOTES_DIR in its "env" in PLEXUS_HOME/providers.json
//
// It reads PLEXUS_SOCKET, PLEXUS_SESSION_TOKEN and PLEXUS_PROVIDER_ID from
// its environment and never prints the token. It exits when Plexus says
// core.goodbye or closes the connection. The frame and envelope codec are
// package ipc's (any language can do the same: see ../pyprovider).
package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/plexus-gw/plexus/transports/ipc"
)

const version = "1.0.0"

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "goprovider:", err)
		os.Exit(1)
	}
}

// provider is one connection to Plexus. wmu serializes frame writes: calls
// run in their own goroutines and all write to the same socket.
type provider struct {
	id   string
	conn net.Conn
	max  int

	wmu sync.Mutex
	seq int

	mu      sync.Mutex
	running map[string]context.CancelFunc // by call_id
	start   time.Time
}

func run() error {
	sock, token, id := os.Getenv("PLEXUS_SOCKET"), os.Getenv("PLEXUS_SESSION_TOKEN"), os.Getenv("PLEXUS_PROVIDER_ID")
	if sock == "" || token == "" || id == "" {
		return errors.New("PLEXUS_SOCKET, PLEXUS_SESSION_TOKEN and PLEXUS_PROVIDER_ID must be set (Plexus sets them when it launches a provider)")
	}
	conn, err := net.Dial("unix", sock)
	if err != nil {
		return err
	}
	defer conn.Close()
	p := &provider{id: id, conn: conn, max: ipc.DefaultMaxFrameBytes, running: map[string]context.CancelFunc{}, start: time.Now()}

	// Handshake (§4.1): the token is sent once, here, and never logged.
	if err := p.send(ipc.TypeAgentHello, "", ipc.Hello{
		SessionToken: token, AgentID: id, AgentVersion: version,
		Protocol: ipc.HelloProtocol{SupportedVersions: []int{1}, Capabilities: []string{"tools", "streaming", "cancellation"}},
		SDK:      &ipc.SDK{Name: "plexus-example-go", Version: version},
	}); err != nil {
		return err
	}
	env, err := p.read()
	if err != nil {
		return err
	}
	if env.Error != nil {
		return fmt.Errorf("refused: %s", env.Error.Code)
	}
	welcome, err := ipc.DecodePayload[ipc.Welcome](env)
	if err != nil {
		return err
	}
	p.max = welcome.MaxFrameBytes

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go p.heartbeats(ctx, welcome.SessionID, time.Duration(welcome.HeartbeatIntervalMS)*time.Millisecond)

	if err := p.send(ipc.TypeAgentToolsRegister, "", ipc.ToolsRegister{Tools: p.tools()}); err != nil {
		return err
	}
	var wg sync.WaitGroup
	defer wg.Wait()
	defer p.cancelAll()
	for {
		env, err := p.read()
		if errors.Is(err, io.EOF) {
			return nil // Plexus closed the connection
		}
		if err != nil {
			return err
		}
		switch env.Type {
		case ipc.TypeCoreToolCall:
			call, err := ipc.DecodePayload[ipc.ToolCall](env)
			if err != nil {
				continue
			}
			cctx, ccancel := context.WithCancel(ctx)
			p.mu.Lock()
			p.running[call.CallID] = ccancel
			p.mu.Unlock()
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer ccancel()
				p.serve(cctx, env, call)
			}()
		case ipc.TypeCoreToolCancel:
			c, err := ipc.DecodePayload[ipc.ToolCancel](env)
			if err != nil {
				continue
			}
			p.mu.Lock()
			stop, ok := p.running[c.CallID]
			p.mu.Unlock()
			if ok {
				stop()
			}
			_ = p.send(ipc.TypeAgentToolCancelAck, "", ipc.ToolCancelAck{CallID: c.CallID, Accepted: ok})
		case ipc.TypeCoreGoodbye:
			return nil
		case ipc.TypeCoreToolsRegistered:
			r, _ := ipc.DecodePayload[ipc.ToolsRegistered](env)
			for _, rej := range r.Rejected {
				fmt.Fprintf(os.Stderr, "goprovider: tool %s rejected: %s\n", rej.ToolID, rej.Error.Message)
			}
		}
	}
}

func (p *provider) tools() []ipc.Tool {
	obj := func(s string) json.RawMessage { return json.RawMessage(s) }
	return []ipc.Tool{
		{ToolID: p.id + "/echo", Name: "echo", Description: "Returns its input.",
			InputSchema: obj(`{"type":"object"}`)},
		{ToolID: p.id + "/count", Name: "count", Description: "Counts to n, streaming one line per step.",
			InputSchema:  obj(`{"type":"object","properties":{"n":{"type":"integer","minimum":1,"maximum":1000},"interval_ms":{"type":"integer","minimum":0,"maximum":5000}},"required":["n"]}`),
			OutputSchema: obj(`{"type":"object","properties":{"count":{"type":"integer"}}}`),
			Capabilities: []string{"streaming", "cancellation"}},
		{ToolID: p.id + "/note.append", Name: "note.append", Description: "Appends a line to notes.md in the notes folder.",
			InputSchema: obj(`{"type":"object","properties":{"text":{"type":"string","maxLength":10000}},"required":["text"],"additionalProperties":false}`),
			SideEffects: true},
	}
}

// serve runs one call and sends its one agent.tool.result (§4.3.3),
// echoing the call's request_id and correlation_id (§3.1).
func (p *provider) serve(ctx context.Context, env ipc.Envelope, call ipc.ToolCall) {
	defer func() {
		p.mu.Lock()
		delete(p.running, call.CallID)
		p.mu.Unlock()
	}()
	started := time.Now().UTC()
	var input map[string]any
	_ = json.Unmarshal(call.Input, &input)
	var out any
	var err error
	switch call.ToolID {
	case p.id + "/echo":
		out = map[string]any{"echo": input}
	case p.id + "/count":
		out, err = p.count(ctx, env, call.CallID, input)
	case p.id + "/note.append":
		out, err = appendNote(input)
	default:
		err = &toolError{"tool.unknown", "no such tool"}
	}
	res := ipc.ToolResult{CallID: call.CallID, Status: ipc.StatusSucceeded,
		StartedAt: started.Format(time.RFC3339), FinishedAt: time.Now().UTC().Format(time.RFC3339)}
	var te *toolError
	switch {
	case ctx.Err() != nil:
		res.Status, res.Error = ipc.StatusCanceled, &ipc.Error{Code: ipc.CodeToolCanceled, Message: "canceled"}
	case errors.As(err, &te):
		res.Status, res.Error = ipc.StatusFailed, &ipc.Error{Code: te.code, Message: te.msg}
	case err != nil:
		res.Status, res.Error = ipc.StatusFailed, &ipc.Error{Code: "tool.failed", Message: err.Error()}
	default:
		res.Output, _ = json.Marshal(out)
	}
	_ = p.reply(ipc.TypeAgentToolResult, env, res)
}

// toolError is a failure with the stable code the result's error carries.
type toolError struct{ code, msg string }

func (e *toolError) Error() string { return e.msg }

// count streams n lines, stopping early when the call is canceled.
func (p *provider) count(ctx context.Context, env ipc.Envelope, callID string, input map[string]any) (any, error) {
	n, _ := input["n"].(float64)
	if n < 1 || n > 1000 {
		return nil, &toolError{ipc.CodeToolInvalidInput, "n must be 1 to 1000"}
	}
	interval := 100 * time.Millisecond
	if ms, ok := input["interval_ms"].(float64); ok && ms >= 0 && ms <= 5000 {
		interval = time.Duration(ms) * time.Millisecond
	}
	for i := 1; i <= int(n); i++ {
		if i > 1 && interval > 0 {
			select {
			case <-ctx.Done():
				return nil, ctx.Err()
			case <-time.After(interval):
			}
		}
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		_ = p.reply(ipc.TypeAgentToolStream, env, ipc.ToolStream{CallID: callID, Seq: int64(i), Channel: ipc.ChannelStdout,
			Data: ipc.StreamData{Text: fmt.Sprintf("line %d", i)}, Done: i == int(n)})
	}
	return map[string]any{"count": int(n)}, nil
}

// appendNote is the side-effecting tool: one line into $NOTES_DIR/notes.md.
func appendNote(input map[string]any) (any, error) {
	text, _ := input["text"].(string)
	dir := os.Getenv("NOTES_DIR")
	if dir == "" {
		return nil, &toolError{"tool.not_configured", "NOTES_DIR is not set in the provider's env"}
	}
	f, err := os.OpenFile(filepath.Join(dir, "notes.md"), os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o600)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	n, err := f.WriteString(text + "\n")
	if err != nil {
		return nil, err
	}
	return map[string]any{"path": "notes.md", "bytes": n}, nil
}

func (p *provider) heartbeats(ctx context.Context, session string, every time.Duration) {
	if every <= 0 {
		every = 5 * time.Second
	}
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		p.mu.Lock()
		inflight := len(p.running)
		p.mu.Unlock()
		_ = p.send(ipc.TypeAgentHeartbeat, "", ipc.Heartbeat{SessionID: session, UptimeMS: time.Since(p.start).Milliseconds(),
			InflightCalls: inflight, Status: ipc.HealthOK})
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

func (p *provider) cancelAll() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, stop := range p.running {
		stop()
	}
}

// reply sends a message that is part of handling req: it echoes req's
// request_id, correlation_id and causation_id (§3.1).
func (p *provider) reply(typ string, req ipc.Envelope, payload any) error {
	return p.write(ipc.Envelope{Type: typ, RequestID: req.RequestID, CorrelationID: req.CorrelationID, CausationID: req.CausationID}, payload)
}

func (p *provider) send(typ, inReplyTo string, payload any) error {
	return p.write(ipc.Envelope{Type: typ, InReplyTo: inReplyTo}, payload)
}

func (p *provider) write(env ipc.Envelope, payload any) error {
	b, err := json.Marshal(payload)
	if err != nil {
		return err
	}
	p.wmu.Lock()
	defer p.wmu.Unlock()
	p.seq++
	env.V, env.ID, env.TS, env.Payload = ipc.Version, fmt.Sprintf("%s-%d", p.id, p.seq), time.Now().UTC(), b
	frame, err := ipc.EncodeEnvelope(env)
	if err != nil {
		return err
	}
	return ipc.WriteFrame(p.conn, frame, p.max)
}

func (p *provider) read() (ipc.Envelope, error) {
	b, err := ipc.ReadFrame(p.conn, p.max)
	if err != nil {
		return ipc.Envelope{}, err
	}
	return ipc.DecodeEnvelope(b)
}
