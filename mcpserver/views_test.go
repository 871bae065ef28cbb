package mcpserver_test

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/plexus-gw/plexus"
	"github.com/plexus-gw/plexus/mcpserver"
	"github.com/plexus-gw/plexus/transports/mcpclient"
)

// addMCP ingests s, served over Streamable HTTP on 127.0.0.1, as the MCP
// server name, as the daemon does for an mcp.json entry.
func (f *fixture) addMCP(name string, s *mcp.Server) {
	f.t.Helper()
	ts := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s }, nil))
	f.t.Cleanup(ts.Close)
	f.addMCPAt(name, ts.URL)
}

// addMCPAt ingests the MCP server at url as name.
func (f *fixture) addMCPAt(name, url string) {
	f.t.Helper()
	c, err := mcpclient.New(name, mcpclient.ServerConfig{URL: url}, mcpclient.Options{Logger: f.log,
		MinBackoff: 20 * time.Millisecond, MaxBackoff: 200 * time.Millisecond})
	if err != nil {
		f.t.Fatal(err)
	}
	f.mcpT.Attach(c)
	ctx, cancel := context.WithCancel(f.ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := c.Run(ctx); err != nil && ctx.Err() == nil {
			f.t.Errorf("mcp client %s: %v", name, err)
		}
	}()
	f.t.Cleanup(func() { cancel(); <-done })
	select {
	case <-c.Ready():
	case <-time.After(30 * time.Second):
		f.t.Fatalf("the MCP server %s was not listed", name)
	}
	if _, err := f.reg.Add(ctx, c); err != nil {
		f.t.Fatal(err)
	}
}

// library is an MCP server with one of each primitive: the tool lookup,
// the resource file:///lib/readme.md ("readme"), the template
// notes://{topic} ("note") and the prompt greet(name). hits counts what
// each served, by tool, URI or prompt name.
type library struct {
	mu   sync.Mutex
	hits map[string]int
}

func (l *library) hit(what string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.hits[what]++
}

func (l *library) count(what string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.hits[what]
}

// total is every hit of the server.
func (l *library) total() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for _, v := range l.hits {
		n += v
	}
	return n
}

func newLibrary(voice string) (*library, *mcp.Server) { return newLibraryWith(voice, nil) }

// newLibraryWith is newLibrary on a server with opts.
func newLibraryWith(voice string, opts *mcp.ServerOptions) (*library, *mcp.Server) {
	l := &library{hits: map[string]int{}}
	s := mcp.NewServer(&mcp.Implementation{Name: "lib-" + voice, Version: "1"}, opts)
	mcp.AddTool(s, &mcp.Tool{Name: "lookup", Description: "looks a word up", Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true}},
		func(context.Context, *mcp.CallToolRequest, struct{}) (*mcp.CallToolResult, struct{}, error) {
			l.hit("lookup")
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: voice + " lookup"}}}, struct{}{}, nil
		})
	s.AddResource(&mcp.Resource{URI: "file:///lib/readme.md", Name: "readme", MIMEType: "text/markdown", Description: "the library's readme"},
		func(_ context.Context, req *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
			l.hit(req.Params.URI)
			return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{URI: req.Params.URI, MIMEType: "text/markdown", Text: "# " + voice + " readme"}}}, nil
		})
	s.AddResourceTemplate(&mcp.ResourceTemplate{URITemplate: "notes://{topic}", Name: "note", Description: "a note about a topic"},
		func(_ context.Context, req *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
			l.hit(req.Params.URI)
			topic := strings.TrimPrefix(req.Params.URI, "notes://")
			return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{URI: req.Params.URI, Text: voice + " note about " + topic}}}, nil
		})
	s.AddPrompt(&mcp.Prompt{Name: "greet", Description: "greets someone", Arguments: []*mcp.PromptArgument{{Name: "name", Required: true}}},
		func(_ context.Context, req *mcp.GetPromptRequest) (*mcp.GetPromptResult, error) {
			l.hit("greet")
			return &mcp.GetPromptResult{Messages: []*mcp.PromptMessage{{Role: "user",
				Content: &mcp.TextContent{Text: voice + " says hello, " + req.Params.Arguments["name"]}}}}, nil
		})
	return l, s
}

// The ids the library "lib" projects to.
const (
	libTool     = "mcp.lib.lookup"
	libResource = "mcp.lib.resource.readme"
	libTemplate = "mcp.lib.template.note"
	libPrompt   = "mcp.lib.prompt.greet"
)

func toolNames(t *testing.T, cs *mcp.ClientSession) []string {
	t.Helper()
	res, err := cs.ListTools(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, tool := range res.Tools {
		out = append(out, tool.Name)
	}
	return out
}

// TestResourcesAndPrompts: an ingested server's resources, templates and
// prompts are shown as resources, templates and prompts (never tools),
// named by the rule with the capability id in _meta, and each read or get
// runs through the gateway under the agent's grants and is journaled.
func TestResourcesAndPrompts(t *testing.T) {
	f := newFixture(t, mcpserver.Options{})
	lib, s := newLibrary("lib")
	f.addMCP("lib", s)
	cs := f.connect(f.agent("claude", standing(libResource, plexus.VerbRead), standing(libTemplate, plexus.VerbRead),
		standing(libPrompt, plexus.VerbRead)), "claude-code", nil)
	ctx := context.Background()

	tools := toolNames(t, cs)
	if !slices.Contains(tools, "mcp__lib__lookup") {
		t.Errorf("tools = %v, want mcp__lib__lookup", tools)
	}
	for _, name := range tools {
		if strings.Contains(name, "resource") || strings.Contains(name, "template") || strings.Contains(name, "prompt") {
			t.Errorf("tools/list shows %s: resources and prompts are not tools", name)
		}
	}
	rl, err := cs.ListResources(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(rl.Resources) != 1 || rl.Resources[0].URI != "file:///lib/readme.md" || rl.Resources[0].Name != mcpserver.ToolName(libResource) ||
		rl.Resources[0].MIMEType != "text/markdown" || rl.Resources[0].Meta[mcpserver.MetaCapability] != libResource {
		t.Errorf("resources = %s, want the readme under its URI, named by the rule, its mime type kept", jsonOf(t, rl.Resources))
	}
	tl, err := cs.ListResourceTemplates(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(tl.ResourceTemplates) != 1 || tl.ResourceTemplates[0].URITemplate != "notes://{topic}" ||
		tl.ResourceTemplates[0].Meta[mcpserver.MetaCapability] != libTemplate {
		t.Errorf("templates = %s, want notes://{topic}", jsonOf(t, tl.ResourceTemplates))
	}
	pl, err := cs.ListPrompts(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(pl.Prompts) != 1 || pl.Prompts[0].Name != mcpserver.ToolName(libPrompt) || len(pl.Prompts[0].Arguments) != 1 {
		t.Errorf("prompts = %s, want greet named by the rule with its argument", jsonOf(t, pl.Prompts))
	}

	rr, err := cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: "file:///lib/readme.md"})
	if err != nil || len(rr.Contents) != 1 || rr.Contents[0].Text != "# lib readme" {
		t.Fatalf("read the readme = %s, %v", jsonOf(t, rr), err)
	}
	rr, err = cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: "notes://golang"})
	if err != nil || len(rr.Contents) != 1 || rr.Contents[0].Text != "lib note about golang" {
		t.Fatalf("read notes://golang = %s, %v", jsonOf(t, rr), err)
	}
	gp, err := cs.GetPrompt(ctx, &mcp.GetPromptParams{Name: mcpserver.ToolName(libPrompt), Arguments: map[string]string{"name": "Ada"}})
	if err != nil || len(gp.Messages) != 1 || gp.Messages[0].Content.(*mcp.TextContent).Text != "lib says hello, Ada" {
		t.Fatalf("get greet = %s, %v", jsonOf(t, gp), err)
	}
	if lib.count("notes://golang") != 1 || lib.count("greet") != 1 {
		t.Errorf("upstream hits = %v", lib.hits)
	}
	var invoked []string
	for _, r := range f.rows("invoke.ok") {
		invoked = append(invoked, r.Target)
	}
	slices.Sort(invoked)
	if want := []string{libPrompt, libResource, libTemplate}; !slices.Equal(invoked, want) {
		t.Errorf("invoke.ok targets = %v, want %v: every read and get is a journaled call", invoked, want)
	}
}

// TestResourceReadAsksForGrant: a read without a grant asks for one like
// a tool call does (the policy approves reads on managed capabilities),
// and the read is journaled as a call.
func TestResourceReadAsksForGrant(t *testing.T) {
	f := newFixture(t, mcpserver.Options{})
	lib, s := newLibrary("lib")
	f.addMCP("lib", s)
	cs := f.connect(f.agent("claude"), "claude-code", nil)
	if _, err := cs.ReadResource(context.Background(), &mcp.ReadResourceParams{URI: "notes://x"}); err != nil {
		t.Fatalf("read: %v", err)
	}
	if req := f.rows("grant.approved"); len(req) != 1 || req[0].Target != libTemplate || req[0].AgentID != "claude" {
		t.Errorf("grant.approved = %s, want one grant of the template to claude", jsonOf(t, req))
	}
	if ok := f.rows("invoke.ok"); len(ok) != 1 || ok[0].Target != libTemplate || lib.count("notes://x") != 1 {
		t.Errorf("invoke.ok = %s, upstream hits %v; want one read of the template", jsonOf(t, ok), lib.hits)
	}
}

// viewFile is an empty views file for a fixture's Options.Views.
func viewFile(t *testing.T) *mcpserver.ViewFile {
	t.Helper()
	vf, err := mcpserver.LoadViewFile(filepath.Join(t.TempDir(), mcpserver.ViewFileName))
	if err != nil {
		t.Fatal(err)
	}
	return vf
}

// setView is the owner's edit of agent's view: the file written, read
// again, and the hosts told.
func (f *fixture) setView(vf *mcpserver.ViewFile, agent string, v mcpserver.View) {
	f.t.Helper()
	if err := mcpserver.SetView(vf.Path(), agent, v); err != nil {
		f.t.Fatal(err)
	}
	if _, err := vf.Reload(); err != nil {
		f.t.Fatal(err)
	}
	f.front.ViewsChanged()
}

// TestViewOnly: --only shows exactly the capabilities its ids and patterns
// name, to that agent alone.
func TestViewOnly(t *testing.T) {
	vf := viewFile(t)
	f := newFixture(t, mcpserver.Options{Views: vf})
	f.setView(vf, "claude", mcpserver.View{Only: []string{"portal.docs.read", "mcp.up.c*"}})
	got := toolNames(t, f.connect(f.agent("claude"), "claude-code", nil))
	slices.Sort(got)
	if want := []string{"mcp__up__count", "portal__docs__read"}; !slices.Equal(got, want) {
		t.Errorf("claude's tools = %v, want %v", got, want)
	}
	if other := toolNames(t, f.connect(f.agent("other"), "cursor", nil)); len(other) <= 2 {
		t.Errorf("another agent's tools = %v, want the whole catalog", other)
	}
}

// TestViewOriginalNames: --names original shows one MCP server's tools,
// resources and prompts under their upstream names, and a host calls and
// reads them by those names.
func TestViewOriginalNames(t *testing.T) {
	vf := viewFile(t)
	f := newFixture(t, mcpserver.Options{Views: vf})
	_, s := newLibrary("lib")
	f.addMCP("lib", s)
	f.setView(vf, "claude", mcpserver.View{Only: []string{"mcp.lib.*"}, Names: mcpserver.NamesOriginal})
	cs := f.connect(f.agent("claude", standing(libTool, plexus.VerbRead), standing(libPrompt, plexus.VerbRead)), "claude-code", nil)
	ctx := context.Background()
	if got := toolNames(t, cs); !slices.Equal(got, []string{"lookup"}) {
		t.Errorf("tools = %v, want [lookup]", got)
	}
	if res := call(t, cs, "lookup", nil); res.IsError || text(res) != "lib lookup" {
		t.Errorf("lookup = %q", text(res))
	}
	rl, err := cs.ListResources(ctx, nil)
	if err != nil || len(rl.Resources) != 1 || rl.Resources[0].Name != "readme" {
		t.Errorf("resources = %s, %v, want readme under its own name", jsonOf(t, rl), err)
	}
	pl, err := cs.ListPrompts(ctx, nil)
	if err != nil || len(pl.Prompts) != 1 || pl.Prompts[0].Name != "greet" {
		t.Fatalf("prompts = %s, %v, want greet", jsonOf(t, pl), err)
	}
	if gp, err := cs.GetPrompt(ctx, &mcp.GetPromptParams{Name: "greet", Arguments: map[string]string{"name": "Bo"}}); err != nil ||
		gp.Messages[0].Content.(*mcp.TextContent).Text != "lib says hello, Bo" {
		t.Errorf("get greet: %v", err)
	}
}

// bigServer is an MCP server of n read-only tools, tool_000 … with
// distinct descriptions.
func bigServer(n int) *mcp.Server {
	s := mcp.NewServer(&mcp.Implementation{Name: "big", Version: "1"}, nil)
	for i := range n {
		name := fmt.Sprintf("tool_%03d", i)
		mcp.AddTool(s, &mcp.Tool{Name: name, Description: fmt.Sprintf("answers the number %d in words", i),
			Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true}},
			func(context.Context, *mcp.CallToolRequest, struct{}) (*mcp.CallToolResult, struct{}, error) {
				return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "ran " + name}}}, struct{}{}, nil
			})
	}
	return s
}

// TestSearchMode500: on a catalog of 500 tools the default (auto) view
// shows the two search tools; a search by exact name finds that tool
// first, with its schema, verbs and whether it is callable now (its
// standing grant; the others as reads the gateway grants at once); the call
// tool runs it by id under the agent's standing grant; and --mode tools
// lists the whole catalog.
func TestSearchMode500(t *testing.T) {
	vf := viewFile(t)
	f := newFixture(t, mcpserver.Options{Views: vf})
	f.addMCP("big", bigServer(500))
	cs := f.connect(f.agent("claude", standing("mcp.big.tool_417", plexus.VerbRead)), "claude-code", nil)
	if got := toolNames(t, cs); !slices.Equal(got, []string{mcpserver.SearchToolName, mcpserver.CallToolName}) {
		t.Fatalf("tools = %v, want the search tools", got)
	}
	res := call(t, cs, mcpserver.SearchToolName, map[string]any{"query": "tool_417", "limit": 5})
	var out struct{ Results []mcpserver.Hit }
	if err := jsonInto(res.StructuredContent, &out); err != nil || res.IsError {
		t.Fatalf("search = %q, %v", text(res), err)
	}
	if len(out.Results) == 0 || len(out.Results) > 5 {
		t.Fatalf("search results = %d, want 1 to 5", len(out.Results))
	}
	top := out.Results[0]
	if top.ID != "mcp.big.tool_417" || !top.CallableNow || !slices.Equal(top.Verbs, []plexus.Verb{plexus.VerbRead}) || len(top.InputSchema) == 0 {
		t.Errorf("top hit = %+v, want mcp.big.tool_417, callable now (standing read), with its schema", top)
	}
	if len(out.Results) > 1 && !out.Results[1].CallableNow {
		t.Errorf("second hit %s, a read the gateway grants on the first call, is not callable now", out.Results[1].ID)
	}
	res = call(t, cs, mcpserver.CallToolName, map[string]any{"id": "mcp.big.tool_417", "arguments": map[string]any{}})
	if res.IsError || text(res) != "ran tool_417" {
		t.Fatalf("call by id = %q", text(res))
	}
	if ids := f.pendingIDs(); len(ids) != 0 {
		t.Errorf("pending = %v: the standing grant should have covered the call", ids)
	}
	f.setView(vf, "claude", mcpserver.View{Mode: mcpserver.ModeTools})
	if got := toolNames(t, cs); len(got) < 500 {
		t.Errorf("--mode tools lists %d tools, want the whole catalog", len(got))
	}
}

// TestListChanged: a connected host is told tools/list_changed when a
// source is added, and lists the new tool; and again when the owner changes
// its view.
func TestListChanged(t *testing.T) {
	vf := viewFile(t)
	f := newFixture(t, mcpserver.Options{Views: vf})
	changed := make(chan struct{}, 16)
	cs := f.connect(f.agent("claude"), "claude-code", &mcp.ClientOptions{
		ToolListChangedHandler: func(context.Context, *mcp.ToolListChangedRequest) { changed <- struct{}{} }})
	if got := toolNames(t, cs); slices.Contains(got, "mcp__late__lookup") {
		t.Fatalf("tools = %v before the source was added", got)
	}
	_, s := newLibrary("late")
	f.addMCP("late", s)
	awaitSignal(t, changed, "tools/list_changed after a source was added")
	if got := toolNames(t, cs); !slices.Contains(got, "mcp__late__lookup") {
		t.Errorf("tools after list_changed = %v, want mcp__late__lookup", got)
	}
	drain(changed)
	f.setView(vf, "claude", mcpserver.View{Only: []string{"mcp.late.*"}})
	awaitSignal(t, changed, "tools/list_changed after a view change")
	if got := toolNames(t, cs); !slices.Equal(got, []string{"mcp__late__lookup"}) {
		t.Errorf("tools after the view change = %v", got)
	}
}

func awaitSignal(t *testing.T, ch <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(30 * time.Second):
		t.Fatalf("no %s", what)
	}
}

func drain(ch chan struct{}) {
	for {
		select {
		case <-ch:
		default:
			return
		}
	}
}

// jsonInto decodes a result's structured content into v.
func jsonInto(sc any, v any) error {
	b, err := json.Marshal(sc)
	if err != nil {
		return err
	}
	return json.Unmarshal(b, v)
}

// TestSearchCallableNow: callableNow is the gateway's own answer: a read of
// an MCP server's tool is granted on the first call, so it is callable now
// with no grant; a write pends and an execute asks at every call, so
// neither is — until the owner grants the write.
func TestSearchCallableNow(t *testing.T) {
	vf := viewFile(t)
	f := newFixture(t, mcpserver.Options{Views: vf})
	srv := mcp.NewServer(&mcp.Implementation{Name: "mixed", Version: "1"}, nil)
	for _, tool := range []*mcp.Tool{
		{Name: "look", Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true}},
		{Name: "change", Annotations: &mcp.ToolAnnotations{DestructiveHint: &[]bool{false}[0]}},
		{Name: "wipe", Annotations: &mcp.ToolAnnotations{DestructiveHint: &[]bool{true}[0]}},
	} {
		mcp.AddTool(srv, tool, func(context.Context, *mcp.CallToolRequest, struct{}) (*mcp.CallToolResult, struct{}, error) {
			return &mcp.CallToolResult{}, struct{}{}, nil
		})
	}
	f.addMCP("mixed", srv)
	callable := func(cs *mcp.ClientSession) map[string]bool {
		t.Helper()
		res := call(t, cs, mcpserver.SearchToolName, map[string]any{"query": "mixed", "limit": 10})
		var out struct{ Results []mcpserver.Hit }
		if err := jsonInto(res.StructuredContent, &out); err != nil || res.IsError {
			t.Fatalf("search = %q, %v", text(res), err)
		}
		got := map[string]bool{}
		for _, h := range out.Results {
			got[h.ID] = h.CallableNow
		}
		return got
	}
	f.setView(vf, "claude", mcpserver.View{Mode: mcpserver.ModeSearch})
	cs := f.connect(f.agent("claude"), "claude-code", nil)
	want := map[string]bool{"mcp.mixed.look": true, "mcp.mixed.change": false, "mcp.mixed.wipe": false}
	if got := callable(cs); !maps.Equal(got, want) {
		t.Errorf("callableNow with no grant = %v, want %v", got, want)
	}
	f.setView(vf, "codex", mcpserver.View{Mode: mcpserver.ModeSearch})
	cs = f.connect(f.agent("codex", standing("mcp.mixed.change", plexus.VerbWrite)), "codex", nil)
	want["mcp.mixed.change"] = true
	if got := callable(cs); !maps.Equal(got, want) {
		t.Errorf("callableNow with a standing write = %v, want %v", got, want)
	}
}
