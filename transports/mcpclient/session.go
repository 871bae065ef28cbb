package mcpclient

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"net/url"
	"os/exec"
	"runtime"
	"runtime/debug"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/plexus-gw/plexus"
)

// session is one MCP session and what hangs off it. Its fields are set by
// connect before it is published and never change after; the parts that
// do (p, routes, changed, stderr) lock themselves.
type session struct {
	cs      *mcp.ClientSession
	pv      string                  // the negotiated protocol version
	caps    *mcp.ServerCapabilities // never nil
	cmd     *exec.Cmd               // the stdio server; nil over HTTP
	c       *capture                // raw results and progress of the calls
	changed *changes                // list_changed not yet handled
	stderr  *tail                   // the stdio server's last stderr bytes
	lost    chan struct{}           // closed when the session has ended
	waitErr error                   // why, from the SDK; set before lost closes
	untrack func()                  // forgets the platform's record; nil over HTTP

	// Over Streamable HTTP: the session's client and the server's URL,
	// with which Plexus sends a tools/call itself (passhttp.go), and the
	// calls it sent; nil, "" over stdio.
	hc   *http.Client
	url  string
	sent atomic.Uint64
	bg   background // the pass-through's goroutines that outlive a call (passhttp.go), ended at close
}

func (s *session) pid() int {
	if s.cmd == nil || s.cmd.Process == nil {
		return 0
	}
	return s.cmd.Process.Pid
}

// upstreamProtocol is the version Plexus asks its servers for: the newest
// with a session, on which a server may ask its client while a call runs.
// Plexus relays those requests to the host that made the call (relay.go).
// On 2026-07-28 a server must ask through input requests instead, and one
// written the older way (its tool calls CreateMessage, Elicit, ListRoots)
// would fail there, though it works for a host that talks to it directly;
// one written the new way works on both, the SDK turning its input requests
// into requests for a client on a session. A server that knows only older
// versions answers with one of them; one that refuses it (refusedVersion)
// is asked for sessionless next (connect).
const upstreamProtocol = "2025-11-25"

// connect starts the transport and initializes a session at
// upstreamProtocol; a server that refuses that version (refusedVersion) is
// connected again at sessionless, the way the SDK's client does it
// (server/discover first). A server that refuses both gets the second
// attempt's error, which says the same.
//
// A url server is asked dressed ([dressHello]) first; one that refuses the
// dress without saying it speaks only sessionless ([errDressRefused]) is
// asked again plain, and from then on plain (plainHello).
func (c *Client) connect(ctx context.Context) (*session, error) {
	dressed := c.cfg.URL != "" && !c.plainHello
	s, err := c.dial(ctx, upstreamProtocol, dressed)
	if errors.Is(err, errDressRefused) {
		c.log.Info("mcp: server refused the initialize dressed for "+sessionless+"; asking again without its _meta and headers", "server", c.name)
		if s, err = c.dial(ctx, upstreamProtocol, false); err == nil {
			c.plainHello = true
		}
	}
	if errors.Is(err, errVersionRefused) {
		c.log.Info("mcp: server refused protocol "+upstreamProtocol+"; connecting at "+sessionless, "server", c.name)
		s, err = c.dial(ctx, sessionless, false)
	}
	return s, err
}

// dial starts the transport and initializes a session asking for version
// pv, the handshake dressed or not ([dressHello]). The SDK's client is
// made per session, so that its notification handlers feed this session
// alone.
func (c *Client) dial(ctx context.Context, pv string, dressed bool) (*session, error) {
	c.lastStderr = ""
	s := &session{c: newCapture(c.log), changed: &changes{ch: make(chan struct{}, 1)}, stderr: &tail{}, lost: make(chan struct{})}
	t, refused, err := c.transport(s)
	if err != nil {
		return nil, err
	}
	cctx, cancel := context.WithTimeout(ctx, connectTimeout)
	defer cancel()
	client := c.newSDKClient(s)
	if dressed {
		client.AddSendingMiddleware(dressHello)
	}
	cs, err := client.Connect(cctx, t, &mcp.ClientSessionOptions{ProtocolVersion: pv})
	if err != nil {
		return nil, c.dialError(s, err, pv, dressed, refused)
	}
	if s.cmd != nil {
		// The SDK started the process; from now on a crash of the daemon
		// leaves a record of it for the next start to reap.
		if s.untrack, err = c.opts.Processes.Track(s.cmd); err != nil {
			cerr := cs.Close() // ends the process it started
			s.sweep()
			return nil, fmt.Errorf("start %s: %w", c.cfg.Command, errors.Join(err, cerr))
		}
	}
	s.cs = cs
	ir := cs.InitializeResult()
	s.pv, s.caps = ir.ProtocolVersion, ir.Capabilities
	if s.caps == nil {
		s.caps = &mcp.ServerCapabilities{}
	}
	c.askAllLogs(cctx, s)
	go func() {
		// Ends when the session does: the server went away, or close.
		s.waitErr = cs.Wait()
		close(s.lost)
	}()
	return s, nil
}

// dialError is dial's error for the SDK's Connect error err: the SDK
// closed what it had opened (a started process included), and what the
// process left in its group goes too. A refusal of upstreamProtocol is
// errDressRefused or errVersionRefused, for connect to ask again.
func (c *Client) dialError(s *session, err error, pv string, dressed bool, refused *refusal) error {
	s.sweep()
	c.lastStderr = s.stderr.lastLine()
	what := c.cfg.Command
	if what == "" {
		what = redactURL(c.cfg.URL)
	}
	switch {
	case c.needsSignIn(err):
		return fmt.Errorf("connect to %s: %w", what, errSignIn)
	case pv != upstreamProtocol:
	case dressed && !speaksOnlyNewer(err) && (answered(err) || refused != nil && refused.bad.Load()):
		return fmt.Errorf("connect to %s: %w", what, errDressRefused)
	case refusedVersion(err, refused):
		return fmt.Errorf("connect to %s: %w", what, errVersionRefused)
	}
	return fmt.Errorf("connect to %s: %s", what, c.red.err(err))
}

// transport is the session's transport: Streamable HTTP for a url server
// (with what notes a version refusal), the command's stdio otherwise.
func (c *Client) transport(s *session) (mcp.Transport, *refusal, error) {
	if c.cfg.URL == "" {
		cmd, err := c.command(s.stderr)
		if err != nil {
			return nil, nil, err
		}
		s.cmd = cmd
		return &stdioTransport{cmd: cmd, grace: c.grace, c: s.c}, nil, nil
	}
	refused := &refusal{base: &rawRoundTripper{base: c.httpBase, headers: c.cfg.Headers, home: originOf(c.cfg.URL), c: s.c}}
	s.hc, s.url = &http.Client{Transport: refused, CheckRedirect: stayHome(c.cfg.URL)}, c.cfg.URL
	st := &mcp.StreamableClientTransport{Endpoint: c.cfg.URL, HTTPClient: s.hc}
	if c.opts.SignIn != nil {
		st.OAuthHandler = c.opts.SignIn.Handler
	}
	return st, refused, nil
}

// newSDKClient is the SDK's client for session s.
func (c *Client) newSDKClient(s *session) *mcp.Client {
	client := mcp.NewClient(&mcp.Implementation{Name: "plexus", Version: plexus.Version}, s.relayOptions(&mcp.ClientOptions{
		Logger: c.log,
		// Progress is relayed by the capture (capture.go), what the server
		// asks while a call runs by relayOptions (relay.go).
		ToolListChangedHandler:     func(context.Context, *mcp.ToolListChangedRequest) { s.changed.mark(listTools) },
		ResourceListChangedHandler: func(context.Context, *mcp.ResourceListChangedRequest) { s.changed.mark(listResources) },
		PromptListChangedHandler:   func(context.Context, *mcp.PromptListChangedRequest) { s.changed.mark(listPrompts) },
		ResourceUpdatedHandler: func(_ context.Context, r *mcp.ResourceUpdatedNotificationRequest) {
			if r.Params != nil {
				c.watch.updated(r.Params.URI)
			}
		},
		KeepAlive: keepAlive,
	}))
	client.AddReceivingMiddleware(s.relayRequests)
	// answerInputs sits where the SDK puts its own, next to the wire, with
	// only recoverDecoding, around each round, between them.
	client.AddSendingMiddleware(declareCaller, s.answerInputs, c.recoverDecoding)
	if err := addSkillMethods(client); err != nil {
		c.log.Error("mcp: skills/list cannot be sent; no skill will be listed", "err", err)
	}
	return client
}

// stayHome is the CheckRedirect of a url server's client: a redirect may
// not leave the configured origin (scheme, host, port). The SDK sets the
// source's OAuth token on each request, and net/http keeps it on a
// redirect to the same host name at another port or scheme and to a
// subdomain; the configured headers are secrets too. Streamable HTTP has
// no reason to send a POST elsewhere, so leaving is refused outright
// (https to http included: it changes the origin).
func stayHome(serverURL string) func(*http.Request, []*http.Request) error {
	home := originOf(serverURL)
	return func(req *http.Request, via []*http.Request) error {
		if originOf(req.URL.String()) != home {
			return fmt.Errorf("redirect to another origin (%s) refused: the server's token and headers stay with %s",
				req.URL.Scheme+"://"+req.URL.Host, redactURL(serverURL))
		}
		if len(via) >= 10 {
			return errors.New("stopped after 10 redirects")
		}
		return nil
	}
}

// originOf is raw's origin, scheme://host:port with the default port
// spelled out; "" when raw does not parse (then nothing matches it).
func originOf(raw string) string {
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" {
		return ""
	}
	port := u.Port()
	if port == "" {
		port = map[string]string{"http": "80", "https": "443"}[strings.ToLower(u.Scheme)]
	}
	return strings.ToLower(u.Scheme) + "://" + strings.ToLower(u.Hostname()) + ":" + port
}

// close ends s: the connection closes stdin and waits for the server, then
// SIGTERM, then SIGKILL, each after the grace; what the server left in its
// process group is killed. It returns why the session ended, fit for a
// health detail.
func (c *Client) close(s *session) string {
	err := s.cs.Close()
	s.bg.stop()
	s.bg.wait()
	<-s.lost
	s.sweep()
	if s.cmd == nil {
		if s.waitErr != nil {
			return "the HTTP session ended: " + clip(c.red.err(s.waitErr), 300)
		}
		return "the HTTP session ended"
	}
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return "the server process exited (" + ee.ProcessState.String() + ")"
	}
	return "the server process exited"
}

// sweep kills what is left of the stdio server's process group. The
// group's id is the server's pid; with the server gone the id cannot be
// reused while a member lives, and with none left the kill finds nothing.
func (s *session) sweep() {
	if s.cmd != nil && s.cmd.Process != nil {
		_ = syscall.Kill(-s.cmd.Process.Pid, syscall.SIGKILL)
	}
	if s.untrack != nil {
		s.untrack()
	}
}

// command is the stdio server's command: never through a shell, built by
// the platform (its own process group), with Options.Env and the config's
// env on top. Its connection stops it (stdin closed, SIGTERM, SIGKILL), never a
// context.
func (c *Client) command(stderr *tail) (*exec.Cmd, error) {
	path := c.cfg.Command
	if !strings.ContainsRune(path, '/') {
		var err error
		if path, err = c.opts.Processes.Resolve(path); err != nil {
			return nil, fmt.Errorf("cannot find the command %s: %s", c.cfg.Command, c.red.err(err))
		}
	}
	cmd := c.opts.Processes.Command(context.Background(), path, c.cfg.Args, serverEnv(c.opts.Env, c.cfg.Env))
	cmd.Stderr = stderr
	return cmd, nil
}

// serverEnv is base with the server's declared env on top: a declared
// variable replaces the base's.
func serverEnv(base []string, declared map[string]string) []string {
	env := slices.DeleteFunc(slices.Clone(base), func(kv string) bool {
		k, _, _ := strings.Cut(kv, "=")
		_, over := declared[k]
		return over
	})
	for _, k := range slices.Sorted(maps.Keys(declared)) {
		env = append(env, k+"="+declared[k])
	}
	return env
}

// redactURL drops a URL's query and fragment, where tokens sometimes ride.
func redactURL(u string) string {
	if i := strings.IndexAny(u, "?#"); i >= 0 {
		return u[:i]
	}
	return u
}

// primitives is a set of lists to fetch.
type primitives uint8

const (
	listTools primitives = 1 << iota
	listResources
	listPrompts

	allPrimitives = listTools | listResources | listPrompts
)

// maxPages bounds one list: a server whose cursors never end is broken.
const maxPages = 10000

// list fetches the lists in which that the server has, each paged to
// exhaustion.
func (c *Client) list(ctx context.Context, s *session, which primitives) (listing, error) {
	l := listing{protocolVersion: s.pv}
	var err error
	if which&listTools != 0 && s.caps.Tools != nil {
		if l.tools, err = s.listTools(ctx); err != nil {
			return l, fmt.Errorf("tools/list: %w", err)
		}
	}
	if which&listResources != 0 && s.caps.Resources != nil {
		if l.resources, err = s.listResources(ctx); err != nil {
			return l, fmt.Errorf("resources/list: %w", err)
		}
		if l.templates, err = s.listTemplates(ctx); err != nil {
			return l, fmt.Errorf("resources/templates/list: %w", err)
		}
	}
	// A skill's files are resources: a changed resource list re-lists
	// the skills.
	if which&listResources != 0 && s.servesSkills() {
		if l.skills, err = s.listSkills(ctx); err != nil {
			return l, fmt.Errorf("skills/list: %w", err)
		}
		l.skillsListed = true
	}
	if which&listPrompts != 0 && s.caps.Prompts != nil {
		if l.prompts, err = s.listPrompts(ctx); err != nil {
			return l, fmt.Errorf("prompts/list: %w", err)
		}
	}
	return l, nil
}

// merge returns cur with the lists in which replaced by those of l.
func merge(cur, l listing, which primitives) listing {
	cur.protocolVersion = l.protocolVersion
	if which&listTools != 0 {
		cur.tools = l.tools
	}
	if which&listResources != 0 {
		cur.resources, cur.templates = l.resources, l.templates
		cur.skills, cur.skillsListed = l.skills, l.skillsListed
	}
	if which&listPrompts != 0 {
		cur.prompts = l.prompts
	}
	return cur
}

// pageFunc fetches one page through the SDK, with ctx carrying the slot
// that captures its raw result.
type pageFunc func(ctx context.Context, cursor string) (typed any, next string, err error)

// pages fetches every page of a list and returns the objects of its field
// ("tools", "resources", …) byte for byte.
func (s *session) pages(ctx context.Context, field string, page pageFunc) ([]json.RawMessage, error) {
	var out []json.RawMessage
	seen := map[string]bool{}
	cursor := ""
	for range maxPages {
		sl := &slot{}
		typed, next, err := page(withSlot(ctx, sl), cursor)
		s.c.done(sl)
		if err != nil {
			return nil, err
		}
		var body map[string]json.RawMessage
		if err := json.Unmarshal(s.rawResult(sl, typed), &body); err != nil {
			return nil, fmt.Errorf("the result is not an object: %w", err)
		}
		var items []json.RawMessage
		if v := body[field]; len(v) > 0 && string(v) != "null" {
			if err := json.Unmarshal(v, &items); err != nil {
				return nil, fmt.Errorf("%s is not an array: %w", field, err)
			}
		}
		out = append(out, items...)
		if next == "" {
			return out, nil
		}
		if seen[next] {
			return nil, fmt.Errorf("the server repeated the cursor %q", next)
		}
		seen[next] = true
		cursor = next
	}
	return nil, fmt.Errorf("more than %d pages", maxPages)
}

// rawResult is the captured result, or, when none was captured (see
// capture.go), the SDK's typed result re-marshalled.
func (s *session) rawResult(sl *slot, typed any) json.RawMessage {
	if raw := sl.result(); raw != nil {
		return raw
	}
	b, err := json.Marshal(typed)
	if err != nil {
		return json.RawMessage("null")
	}
	return b
}

func (s *session) listTools(ctx context.Context) ([]json.RawMessage, error) {
	valid := map[string]bool{}
	items, err := s.pages(ctx, "tools", func(ctx context.Context, cursor string) (any, string, error) {
		r, err := s.cs.ListTools(ctx, &mcp.ListToolsParams{Cursor: cursor})
		if err != nil {
			return nil, "", err
		}
		for _, t := range r.Tools {
			valid[t.Name] = true
		}
		return r, r.NextCursor, nil
	})
	if err != nil {
		return nil, err
	}
	// The SDK drops tools it considers invalid (their calls would fail in
	// it); so does the projection.
	return slices.DeleteFunc(items, func(raw json.RawMessage) bool {
		var t struct {
			Name string `json:"name"`
		}
		return json.Unmarshal(raw, &t) != nil || !valid[t.Name]
	}), nil
}

func (s *session) listResources(ctx context.Context) ([]json.RawMessage, error) {
	return s.pages(ctx, "resources", func(ctx context.Context, cursor string) (any, string, error) {
		r, err := s.cs.ListResources(ctx, &mcp.ListResourcesParams{Cursor: cursor})
		if err != nil {
			return nil, "", err
		}
		return r, r.NextCursor, nil
	})
}

// listTemplates treats a server that does not know the method as having
// no templates.
func (s *session) listTemplates(ctx context.Context) ([]json.RawMessage, error) {
	items, err := s.pages(ctx, "resourceTemplates", func(ctx context.Context, cursor string) (any, string, error) {
		r, err := s.cs.ListResourceTemplates(ctx, &mcp.ListResourceTemplatesParams{Cursor: cursor})
		if err != nil {
			return nil, "", err
		}
		return r, r.NextCursor, nil
	})
	return noneIfUnknown(items, err)
}

// noneIfUnknown is items and err of a listing, except that a server that
// answers Method not found has none to list.
func noneIfUnknown(items []json.RawMessage, err error) ([]json.RawMessage, error) {
	var werr *jsonrpc.Error
	if errors.As(err, &werr) && werr.Code == jsonrpc.CodeMethodNotFound {
		return nil, nil
	}
	return items, err
}

func (s *session) listPrompts(ctx context.Context) ([]json.RawMessage, error) {
	return s.pages(ctx, "prompts", func(ctx context.Context, cursor string) (any, string, error) {
		r, err := s.cs.ListPrompts(ctx, &mcp.ListPromptsParams{Cursor: cursor})
		if err != nil {
			return nil, "", err
		}
		return r, r.NextCursor, nil
	})
}

// changes collects list_changed notifications for Run's goroutine: the
// SDK's handler marks and signals without blocking, Run takes.
type changes struct {
	mu    sync.Mutex
	which primitives
	ch    chan struct{} // capacity 1: a pending signal
}

func (c *changes) mark(p primitives) {
	c.mu.Lock()
	c.which |= p
	c.mu.Unlock()
	select {
	case c.ch <- struct{}{}:
	default: // a signal is already pending
	}
}

func (c *changes) take() primitives {
	c.mu.Lock()
	defer c.mu.Unlock()
	w := c.which
	c.which = 0
	return w
}

// tail keeps the last bytes a stdio server wrote to stderr, for the log
// line of its exit.
type tail struct {
	mu  sync.Mutex
	buf []byte
}

const tailSize = 4 << 10

func (t *tail) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.buf = append(t.buf, p...)
	if len(t.buf) > tailSize {
		t.buf = append(t.buf[:0:0], t.buf[len(t.buf)-tailSize:]...)
	}
	return len(p), nil
}

// lastLine is the last non-empty line, at most 200 bytes, valid UTF-8.
func (t *tail) lastLine() string {
	t.mu.Lock()
	s := strings.TrimRight(string(t.buf), "\r\n \t")
	t.mu.Unlock()
	if i := strings.LastIndexByte(s, '\n'); i >= 0 {
		s = s[i+1:]
	}
	if len(s) > 200 {
		s = s[len(s)-200:]
	}
	return strings.ToValidUTF8(s, "\uFFFD")
}

// errSDKPanicked is the error of a call whose answer the SDK panicked on.
var errSDKPanicked = errors.New("the MCP Go SDK could not read the server's answer (it panicked; see the daemon's log)")

// recoverDecoding is a sending middleware, next to the wire: the SDK
// decodes a call's result inside next, on the caller's goroutine (an
// /mcp or /invoke request's), so a panic in its decoding of what a server
// sent would end the daemon. It fails that call alone, and logs where
// (never the result: a server's bytes stay out of the log). Results known
// to panic it are refused before it sees them (sdkReadable); this is the
// guard for the ones not known yet.
func (c *Client) recoverDecoding(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (res mcp.Result, err error) {
		defer func() {
			p := recover()
			if p == nil {
				return
			}
			what := fmt.Sprintf("%T", p) // a value of the SDK's own could hold the server's bytes
			if rerr, ok := p.(runtime.Error); ok {
				what = rerr.Error()
			}
			c.log.Error("mcp: the MCP Go SDK panicked reading a server's answer; the call fails", "server", c.name, "method", method, "panic", what, "stack", string(debug.Stack()))
			res, err = nil, fmt.Errorf("calling %q: %w", method, errSDKPanicked)
		}()
		return next(ctx, method, req)
	}
}
