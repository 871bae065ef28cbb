//lint:file-ignore SA1019 sampling, elicitation, roots and logging, deprecated from 2026-07-28 but served through its deprecation window, are what Plexus relays

package mcpserver

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/plexus-gw/plexus"
)

// hostRelay carries what an ingested MCP server asks while a host's call
// (tools/call, resources/read, prompts/get) runs (sampling, elicitation, roots, log messages) to the host session
// that made the call, and to no other: it is made per call and sends on
// that call's own stream. It asks only what the host declared at its
// handshake, and only on a session (2025-11-25): a sessionless host
// (2026-07-28) cannot be sent a request, and is not.
//
// It carries no more than Plexus declared to the server (form elicitation,
// sampling without tools), whatever the host offers: the host sees every
// request as its server Plexus's, so a url-mode elicitation ("open this
// URL") or tool use in sampling would be asked in Plexus's name. And each
// elicitation's message says which server asks ([elicitFrom]).
//
// Nothing that comes back is more than the host's answer to the server:
// an elicitation answer is never an approval, which only the owner gives,
// through Plexus's own channels.
type hostRelay struct {
	call context.Context // the tools/call's: what is sent goes on its stream
	ss   *mcp.ServerSession
	// caps are what the host declared it answers: per request when it is
	// sessionless, at its handshake otherwise.
	caps        *mcp.ClientCapabilities
	sessionless bool
	// inputs, for a sessionless host, is the held call its questions go
	// through (inputs.go); nil: it cannot be asked.
	inputs *exchange
	host   string
	server string // the ingested server the call runs on
}

// A hostRelay is also what mcpclient calls an Offerer (Offers): its calls
// tell the server what the host answers.
var _ plexus.Relay = (*hostRelay)(nil)

// newHostRelay is the relay of a call of an entry of source (mcp:<server>)
// made by host, whose request p answers.
func newHostRelay(ctx context.Context, p *progress, host, source string) *hostRelay {
	return &hostRelay{call: ctx, ss: p.ss, caps: p.caps, sessionless: p.sessionless, inputs: exchangeOf(ctx),
		host: orElse(host, "the MCP host"), server: strings.TrimPrefix(source, "mcp:")}
}

// declared is what the host of a request on ss declared it answers, and
// whether it is sessionless: a 2026-07-28 host declares per request
// (perRequest), an earlier one at its handshake.
func declared(ss *mcp.ServerSession, perRequest *mcp.ClientCapabilities) (*mcp.ClientCapabilities, bool) {
	var ip *mcp.InitializeParams
	if ss != nil {
		ip = ss.InitializeParams()
	}
	caps, sessionless := perRequest, true
	if ip != nil && ip.ProtocolVersion < newProtocol {
		caps, sessionless = ip.Capabilities, false
	}
	if caps == nil {
		caps = &mcp.ClientCapabilities{}
	}
	return caps, sessionless
}

// Offers reports whether the host can be asked method: what the call
// tells the server its caller answers.
func (h *hostRelay) Offers(method string) bool {
	return (!h.sessionless || h.inputs != nil) && h.declared(method)
}

// missingCapability is a server's refusal of a call for a client
// capability the host did not declare (MissingRequiredClientCapability),
// passed on to the host as the front door's own: the call needs what the
// host does not offer. nil for any other answer.
func missingCapability(resp plexus.InvokeResponse) error {
	if resp.OK || resp.Error == nil || resp.Error.Code != plexus.CodeTransportError || resp.Error.Detail == nil {
		return nil
	}
	var d struct {
		Code     int64                      `json:"code"`
		Required map[string]json.RawMessage `json:"requiredCapabilities"`
	}
	b, err := json.Marshal(resp.Error.Detail)
	if err != nil || json.Unmarshal(b, &d) != nil || d.Code != mcp.CodeMissingRequiredClientCapabilities || len(d.Required) == 0 {
		return nil
	}
	data, err := json.Marshal(map[string]any{"requiredCapabilities": d.Required})
	if err != nil {
		return nil
	}
	names := slices.Sorted(maps.Keys(d.Required))
	return &jsonrpc.Error{Code: mcp.CodeMissingRequiredClientCapabilities, Data: data,
		Message: "this call needs client capabilities the host did not declare: " + strings.Join(names, ", ")}
}

// elicitFrom prefixes an elicitation's message so that the host's user
// sees which server asks, and that it is not Plexus asking for approval.
func elicitFrom(server, msg string) string {
	return fmt.Sprintf("[from MCP server %q via Plexus — answering here approves nothing in Plexus] %s", server, msg)
}

// undeclared says why p asks for more than Plexus declares to a server,
// or nil.
func undeclared(p any) error {
	switch p := p.(type) {
	case *mcp.ElicitParams:
		if p != nil && p.Mode != "" && p.Mode != "form" {
			return refuse("Plexus relays form elicitation only, not mode %q", p.Mode)
		}
	case *mcp.CreateMessageWithToolsParams:
		if p != nil && (len(p.Tools) > 0 || p.ToolChoice != nil) {
			return refuse("Plexus relays sampling without tools only")
		}
	}
	return nil
}

// Request asks the host, for as long as both the call and the server's
// request last: on the call's stream, or a sessionless host through its
// held call's next round.
func (h *hostRelay) Request(ctx context.Context, method string, params json.RawMessage) (json.RawMessage, error) {
	if err := h.can(method); err != nil {
		return nil, err
	}
	in, err := h.question(method, params)
	if err != nil {
		return nil, err
	}
	if h.inputs != nil {
		return h.inputs.ask(ctx, in)
	}
	rctx, cancel := context.WithCancel(h.call)
	defer cancel()
	defer context.AfterFunc(ctx, cancel)()
	var res any
	switch p := in.(type) {
	case *mcp.CreateMessageWithToolsParams:
		res, err = h.ss.CreateMessageWithTools(rctx, p)
	case *mcp.ElicitParams:
		res, err = h.ss.Elicit(rctx, p)
	case *mcp.ListRootsParams:
		res, err = h.ss.ListRoots(rctx, p)
	}
	if err != nil {
		return nil, err
	}
	return json.Marshal(res)
}

// question is the server's request as the host is asked it: no more than
// Plexus declares to the server, and an elicitation saying who asks.
func (h *hostRelay) question(method string, params json.RawMessage) (mcp.InputRequest, error) {
	switch method {
	case plexus.RelaySampling:
		var p mcp.CreateMessageWithToolsParams
		if err := unmarshalParams(params, &p); err != nil {
			return nil, err
		}
		return &p, undeclared(&p)
	case plexus.RelayElicitation:
		var p mcp.ElicitParams
		if err := unmarshalParams(params, &p); err != nil {
			return nil, err
		}
		if err := undeclared(&p); err != nil {
			return nil, err
		}
		p.Message = elicitFrom(h.server, p.Message)
		return &p, nil
	case plexus.RelayRoots:
		var p mcp.ListRootsParams
		return &p, unmarshalParams(params, &p)
	}
	return nil, refuse("Plexus does not relay %s", method)
}

// Notify sends a log message to the host, at the level it asked for.
func (h *hostRelay) Notify(_ context.Context, method string, params json.RawMessage) error {
	if method != plexus.RelayLog || h.ss == nil {
		return nil
	}
	var p mcp.LoggingMessageParams
	if err := unmarshalParams(params, &p); err != nil {
		return err
	}
	return h.ss.Log(h.call, &p)
}

// can says why the host cannot be asked method, or nil.
func (h *hostRelay) can(method string) error {
	if h.sessionless && h.inputs == nil {
		return refuse("%s cannot be asked %s: a sessionless (%s) host takes no requests from the server", h.host, method, newProtocol)
	}
	if !h.declared(method) {
		return refuse("%s does not offer %s", h.host, method)
	}
	return nil
}

// declared reports whether the host declared the capability method needs.
// Offers asks it of every call (mcpclient, as it declares the caller's
// capabilities), so it allocates nothing.
func (h *hostRelay) declared(method string) bool {
	switch method {
	case plexus.RelaySampling:
		return h.caps.Sampling != nil
	case plexus.RelayElicitation:
		return h.caps.Elicitation != nil
	case plexus.RelayRoots:
		return h.caps.RootsV2 != nil
	}
	return false
}

// withLogging is caps with logging: the front door (and the bridge)
// relays the ingested servers' log messages.
func withLogging(caps *mcp.ServerCapabilities) *mcp.ServerCapabilities {
	caps.Logging = &mcp.LoggingCapabilities{}
	return caps
}

func refuse(format string, args ...any) error {
	return &jsonrpc.Error{Code: jsonrpc.CodeInvalidRequest, Message: fmt.Sprintf(format, args...)}
}

func unmarshalParams(raw json.RawMessage, v any) error {
	if len(raw) == 0 {
		return nil
	}
	if err := json.Unmarshal(raw, v); err != nil {
		return &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: "the server's params are not valid: " + err.Error()}
	}
	return nil
}
