package ipc_test

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
	"testing"
	"time"

	"github.com/plexus-gw/plexus/transports/ipc"
)

// The test binary doubles as a tool provider (TestMain fork-exec): run with
// IPC_TEST_MODE set, it is the process the hub launches. It reports what it
// saw as JSON lines appended to $IPC_TEST_OUT, so tests assert what the
// provider (the protocol's "agent") observed.
//
// Modes:
//
//	good      hello, register the test tools, heartbeat, serve calls
//	handoff   write the socket and token to $IPC_TEST_OUT and wait: the test
//	          itself speaks the protocol with them (exact frames, bad ones)
//	badtoken  hello with a wrong token
//	late      wait $IPC_TEST_DELAY_MS, then hello with the right token
//	v2        hello offering protocol version 2 only
//
// In good mode, IPC_TEST_MUTE_FIRST=1 stops heartbeats after the first
// one on the first launch (launches are counted in $IPC_TEST_STATE), and
// IPC_TEST_EXIT_AFTER_REGISTER=<status> exits right after registering.
const (
	envMode  = "IPC_TEST_MODE"
	envOut   = "IPC_TEST_OUT"
	envState = "IPC_TEST_STATE"
)

func TestMain(m *testing.M) {
	if mode := os.Getenv(envMode); mode != "" {
		if err := runTestProvider(mode); err != nil {
			fmt.Fprintln(os.Stderr, "testprovider:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// observation is one line of $IPC_TEST_OUT.
type observation struct {
	Event    string          `json:"event"`
	Code     string          `json:"code,omitempty"`
	Reason   string          `json:"reason,omitempty"`
	CallID   string          `json:"call_id,omitempty"`
	Session  string          `json:"session_id,omitempty"`
	Launch   int             `json:"launch,omitempty"`
	Socket   string          `json:"socket,omitempty"`
	Token    string          `json:"token,omitempty"` // handoff mode only
	Provider string          `json:"provider,omitempty"`
	Envelope json.RawMessage `json:"envelope,omitempty"`
}

type tprov struct {
	id, token string
	conn      net.Conn
	out       *os.File
	launch    int

	wmu sync.Mutex
	seq int
	omu sync.Mutex

	mu      sync.Mutex
	running map[string]context.CancelFunc
}

func (p *tprov) observe(o observation) {
	p.omu.Lock()
	defer p.omu.Unlock()
	b, _ := json.Marshal(o)
	p.out.Write(append(b, '\n'))
}

func runTestProvider(mode string) error {
	sock, token, id := os.Getenv(ipc.EnvSocket), os.Getenv(ipc.EnvSessionToken), os.Getenv(ipc.EnvProviderID)
	out, err := os.OpenFile(os.Getenv(envOut), os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o600)
	if err != nil {
		return err
	}
	defer out.Close()
	launch := 1
	if dir := os.Getenv(envState); dir != "" {
		entries, _ := os.ReadDir(dir)
		launch = len(entries) + 1
		_ = os.WriteFile(filepath.Join(dir, fmt.Sprint(launch)), nil, 0o600)
	}
	p := &tprov{id: id, token: token, out: out, launch: launch, running: map[string]context.CancelFunc{}}
	p.observe(observation{Event: "launched", Launch: launch, Token: token})
	if mode == "handoff" {
		p.observe(observation{Event: "handoff", Socket: sock, Token: token, Provider: id, Launch: launch})
		select {} // until stopped
	}
	p.conn, err = net.Dial("unix", sock)
	if err != nil {
		return err
	}
	defer p.conn.Close()
	h := ipc.Hello{SessionToken: token, AgentID: id, AgentVersion: "0.0.1-test",
		Protocol: ipc.HelloProtocol{SupportedVersions: []int{1}, Capabilities: []string{"tools", "streaming", "cancellation"}}}
	switch mode {
	case "badtoken":
		h.SessionToken = "not-the-token"
	case "late":
		var ms int
		fmt.Sscan(os.Getenv("IPC_TEST_DELAY_MS"), &ms)
		time.Sleep(time.Duration(ms) * time.Millisecond)
	case "v2":
		h.Protocol.SupportedVersions = []int{2}
	}
	p.send(ipc.Envelope{Type: ipc.TypeAgentHello}, h)
	env, err := p.read()
	if err != nil {
		p.observe(observation{Event: "closed"})
		return nil
	}
	if env.Error != nil {
		p.observe(observation{Event: "refused", Code: env.Error.Code})
		// The server closes the connection after a refusal.
		if _, err := p.read(); err != nil {
			p.observe(observation{Event: "closed"})
		}
		return nil
	}
	w, err := ipc.DecodePayload[ipc.Welcome](env)
	if err != nil {
		return err
	}
	p.observe(observation{Event: "welcome", Session: w.SessionID, Launch: launch})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	mute := os.Getenv("IPC_TEST_MUTE_FIRST") == "1" && launch == 1
	go p.heartbeats(ctx, w.SessionID, time.Duration(w.HeartbeatIntervalMS)*time.Millisecond, mute)
	p.send(ipc.Envelope{Type: ipc.TypeAgentToolsRegister}, ipc.ToolsRegister{Tools: testTools(id)})
	var wg sync.WaitGroup
	defer wg.Wait()
	for {
		env, err := p.read()
		if errors.Is(err, io.EOF) {
			p.observe(observation{Event: "closed"})
			return nil
		}
		if err != nil {
			return err
		}
		switch env.Type {
		case ipc.TypeCoreToolsRegistered:
			p.observe(observation{Event: "registered", Envelope: env.Payload})
			if s := os.Getenv("IPC_TEST_EXIT_AFTER_REGISTER"); s != "" {
				var code int
				fmt.Sscan(s, &code)
				os.Exit(code)
			}
		case ipc.TypeCoreToolCall:
			call, _ := ipc.DecodePayload[ipc.ToolCall](env)
			raw, _ := json.Marshal(env)
			p.observe(observation{Event: "call", CallID: call.CallID, Envelope: raw})
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
			c, _ := ipc.DecodePayload[ipc.ToolCancel](env)
			p.observe(observation{Event: "cancel", CallID: c.CallID, Reason: c.Reason})
			p.mu.Lock()
			if stop := p.running[c.CallID]; stop != nil {
				stop()
			}
			p.mu.Unlock()
		case ipc.TypeCoreGoodbye:
			g, _ := ipc.DecodePayload[ipc.Goodbye](env)
			p.observe(observation{Event: "goodbye", Reason: g.Reason})
			return nil
		}
	}
}

func testTools(id string) []ipc.Tool {
	obj := json.RawMessage(`{"type":"object"}`)
	t := func(name string) ipc.Tool { return ipc.Tool{ToolID: id + "/" + name, Name: name, InputSchema: obj} }
	tools := []ipc.Tool{t("echo"), t("count"), t("hold"), t("crash"), t("fail"), t("dup"), t("note.append")}
	tools[6].SideEffects = true
	return tools
}

// serve answers one call of the test tools:
//
//	echo   {"echo": input}
//	count  streams input.n lines every input.interval_ms, honours cancel
//	hold   waits until the file input.release exists, or cancel
//	crash  exits with status 3 at once
//	fail   fails with tool.boom
//	dup    answers twice
func (p *tprov) serve(ctx context.Context, env ipc.Envelope, call ipc.ToolCall) {
	defer func() {
		p.mu.Lock()
		delete(p.running, call.CallID)
		p.mu.Unlock()
	}()
	var in map[string]any
	_ = json.Unmarshal(call.Input, &in)
	res := ipc.ToolResult{CallID: call.CallID, Status: ipc.StatusSucceeded}
	canceled := func() {
		res.Status, res.Error, res.Output = ipc.StatusCanceled, &ipc.Error{Code: ipc.CodeToolCanceled, Message: "canceled"}, nil
	}
	var out any
	switch call.ToolID[len(p.id)+1:] {
	case "echo":
		out = map[string]any{"echo": in}
	case "count":
		n, _ := in["n"].(float64)
		ms, _ := in["interval_ms"].(float64)
		for i := 1; i <= int(n); i++ {
			if i > 1 {
				select {
				case <-ctx.Done():
				case <-time.After(time.Duration(ms) * time.Millisecond):
				}
			}
			if ctx.Err() != nil {
				break
			}
			p.reply(ipc.TypeAgentToolStream, env, ipc.ToolStream{CallID: call.CallID, Seq: int64(i), Channel: ipc.ChannelStdout,
				Data: ipc.StreamData{Text: fmt.Sprintf("line %d", i)}, Done: i == int(n)})
		}
		out = map[string]any{"count": n}
	case "hold":
		release, _ := in["release"].(string)
		for ctx.Err() == nil {
			if _, err := os.Stat(release); err == nil {
				break
			}
			select {
			case <-ctx.Done():
			case <-time.After(5 * time.Millisecond):
			}
		}
		out = map[string]any{"held": true}
	case "crash":
		os.Exit(3)
	case "fail":
		res.Status, res.Error = ipc.StatusFailed, &ipc.Error{Code: "tool.boom", Message: "boom", Retryable: true}
	case "dup":
		out = map[string]any{"n": 1}
		res.Output, _ = json.Marshal(out)
		p.reply(ipc.TypeAgentToolResult, env, res)
	case "note.append":
		out = map[string]any{"ok": true}
	}
	if res.Status == ipc.StatusSucceeded {
		res.Output, _ = json.Marshal(out)
	}
	if ctx.Err() != nil {
		canceled()
	}
	p.reply(ipc.TypeAgentToolResult, env, res)
}

func (p *tprov) heartbeats(ctx context.Context, session string, every time.Duration, mute bool) {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		p.send(ipc.Envelope{Type: ipc.TypeAgentHeartbeat}, ipc.Heartbeat{SessionID: session, Status: ipc.HealthOK})
		if mute {
			p.observe(observation{Event: "muted"})
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

func (p *tprov) reply(typ string, req ipc.Envelope, payload any) {
	p.send(ipc.Envelope{Type: typ, RequestID: req.RequestID, CorrelationID: req.CorrelationID}, payload)
}

func (p *tprov) send(env ipc.Envelope, payload any) {
	b, _ := json.Marshal(payload)
	p.wmu.Lock()
	defer p.wmu.Unlock()
	p.seq++
	env.V, env.ID, env.TS, env.Payload = 1, fmt.Sprintf("tp-%d", p.seq), time.Now().UTC(), b
	frame, err := ipc.EncodeEnvelope(env)
	if err == nil {
		_ = ipc.WriteFrame(p.conn, frame, 0)
	}
}

func (p *tprov) read() (ipc.Envelope, error) {
	b, err := ipc.ReadFrame(p.conn, 0)
	if err != nil {
		return ipc.Envelope{}, err
	}
	return ipc.DecodeEnvelope(b)
}
