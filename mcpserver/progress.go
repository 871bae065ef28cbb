package mcpserver

import (
	"context"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/plexus-gw/plexus"
)

// progress sends a call's progress notifications to the host, when it
// asked for them with a progressToken: first while the call waits for the
// owner, then the call's own progress relayed. MCP wants progress to grow:
// the call's own values are shifted past the waiting ones.
type progress struct {
	ctx   context.Context // the call's: notifications go out on its stream
	ss    *mcp.ServerSession
	token any
	// caps are what the host declared it answers (see [declared]).
	caps        *mcp.ClientCapabilities
	sessionless bool

	// mu guards the rest: the wait and the relay never overlap, but the
	// relay runs on the gateway's goroutines.
	mu     sync.Mutex
	base   float64 // the last value sent while waiting
	last   float64
	broken bool // a send failed: the host is gone, stop sending
}

// progressChannel is the channel of an InvokeProgress that is a progress
// report rather than a chunk of output.
const progressChannel = "progress"

func newProgress(ctx context.Context, req *mcp.CallToolRequest) *progress {
	p := &progress{ctx: ctx, ss: req.Session}
	if req.Params != nil {
		p.token = req.Params.GetProgressToken()
	}
	p.caps, p.sessionless = declared(req.Session, req.ClientCapabilities())
	return p
}

// waiting tells the host the call still waits for the owner.
func (p *progress) waiting(msg string) {
	p.mu.Lock()
	p.last++
	p.base = p.last
	v := p.last
	p.mu.Unlock()
	p.send(v, nil, msg)
}

// relay is the gateway's sink: one piece of the running call.
func (p *progress) relay(ev plexus.InvokeProgressEvent) {
	p.mu.Lock()
	v := p.last + 1
	var total *float64
	if ev.Progress != nil {
		v = p.base + *ev.Progress
		if ev.Total != nil {
			t := p.base + *ev.Total
			total = &t
		}
	}
	if v <= p.last {
		v = p.last + 1 // a transport's value that did not grow
	}
	p.last = v
	p.mu.Unlock()
	msg := ev.Message
	if msg == "" && ev.Channel != progressChannel {
		msg = chunkText(ev.Data)
	}
	p.send(v, total, msg)
}

func (p *progress) send(v float64, total *float64, msg string) {
	if p.token == nil || p.ss == nil {
		return
	}
	p.mu.Lock()
	broken := p.broken
	p.mu.Unlock()
	if broken {
		return
	}
	params := &mcp.ProgressNotificationParams{ProgressToken: p.token, Progress: v, Message: msg}
	if total != nil {
		params.Total = *total
	}
	// A notification that cannot be sent (the host went away) ends
	// nothing by itself: the call's context says whether to go on.
	if err := p.ss.NotifyProgress(p.ctx, params); err != nil {
		p.mu.Lock()
		p.broken = true
		p.mu.Unlock()
	}
}

// chunkText is the text of a stream chunk ({"text": …}), clipped, or "".
func chunkText(data any) string {
	m, ok := data.(map[string]any)
	if !ok {
		return ""
	}
	s, _ := m["text"].(string)
	return clip(s, 400)
}
