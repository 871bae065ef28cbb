package mcpserver

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"unicode"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/plexus-gw/plexus"
)

// The tools of search mode.
const (
	SearchToolName = "plexus_search"
	CallToolName   = "plexus_call"
)

// Search limits: how many results a search answers by default and at most.
const (
	defaultSearchLimit = 10
	maxSearchLimit     = 50
)

func searchTools() []*mcp.Tool {
	return []*mcp.Tool{
		{Name: SearchToolName, Title: "Search the capabilities",
			Description: "Search the capabilities Plexus shows this agent (tools, resources, prompts) by words of their id, name or description. " +
				"Each result has its id, schemas, the verbs a call needs, and whether it can be called now without asking the owner. Call one with " + CallToolName + ".",
			InputSchema: json.RawMessage(`{"type":"object","properties":{"query":{"type":"string","description":"words, an id or a tool name"},` +
				`"limit":{"type":"integer","minimum":1,"maximum":50,"description":"how many results (default 10)"}},"required":["query"],"additionalProperties":false}`),
			Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true}},
		{Name: CallToolName, Title: "Call a capability by id",
			Description: "Call a capability found with " + SearchToolName + " by its id, with its arguments. A call the owner has not pre-authorized waits for the owner's approval.",
			InputSchema: json.RawMessage(`{"type":"object","properties":{"id":{"type":"string","description":"the capability id"},` +
				`"arguments":{"type":"object","description":"the capability's input"}},"required":["id"],"additionalProperties":false}`),
			Annotations: &mcp.ToolAnnotations{DestructiveHint: &[]bool{true}[0]}},
	}
}

// searchCall answers a tools/call in search mode: a search, or a call by
// id of a capability the view shows (through the same grants and waits as
// any call). Anything else is an unknown tool, and nothing runs.
func (s *Server) searchCall(ctx context.Context, l *link, c *catalog, req *mcp.CallToolRequest, input map[string]any) (mcp.Result, error) {
	switch req.Params.Name {
	case SearchToolName:
		q, _ := input["query"].(string)
		limit := defaultSearchLimit
		if n, ok := input["limit"].(float64); ok && n >= 1 {
			limit = min(int(n), maxSearchLimit)
		}
		return searchResult(s.withAutoApproved(ctx, l, c.searchHits(l, q, limit))), nil
	case CallToolName:
		id, _ := input["id"].(string)
		entry, ok := c.byID(id)
		if !ok {
			return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams,
				Message: "unknown capability: " + clip(id, 120) + " (" + SearchToolName + " finds the capabilities this agent may call)"}
		}
		args, _ := input["arguments"].(map[string]any)
		resp, answer, err := s.run(ctx, l, entry, what{kind: "the capability", name: entry.ID, by: CallToolName}, args, newProgress(ctx, req))
		if err != nil {
			return nil, err
		}
		if answer != nil {
			return answer, nil
		}
		if primitiveOf(entry) != primTool && resp.OK && len(resp.MCPResult) > 0 {
			// A resource's or prompt's result is not a tool's: show it as is.
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: string(resp.MCPResult)}}}, nil
		}
		return s.toolResult(req, entry, resp), nil
	}
	_, err := c.tool(req.Params.Name) // the unknown-tool error
	return nil, err
}

// Hit is one search result.
type Hit struct {
	ID           string          `json:"id"`
	Primitive    string          `json:"primitive"`
	Name         string          `json:"name"`
	Title        string          `json:"title,omitempty"`
	Description  string          `json:"description,omitempty"`
	Verbs        []plexus.Verb   `json:"verbs"`
	InputSchema  json.RawMessage `json:"inputSchema,omitempty"`
	OutputSchema json.RawMessage `json:"outputSchema,omitempty"`
	// CallableNow says a call would run without asking the owner: a
	// standing grant or a token this session holds covers it, or the
	// gateway's policy would grant it on the first call (a read of a
	// first-party capability), and its source is not known to be down.
	CallableNow bool `json:"callableNow"`
	Score       int  `json:"score"`
	down        bool // its source is known to be unavailable
}

// searchHits scores every capability the view shows against q (see
// [score]) and answers the best limit, best first, ties by id.
func (c *catalog) searchHits(l *link, q string, limit int) []Hit {
	var all []Hit
	add := func(e plexus.Entry, name string) {
		sc := score(q, e, name)
		if sc == 0 {
			return
		}
		h := Hit{ID: e.ID, Primitive: primitiveOf(e), Name: name, Title: e.Label, Description: e.Describe,
			Verbs: requiredVerbs(e), CallableNow: callableNow(l, e), Score: sc,
			down: e.Health != nil && e.Health.Status == plexus.HealthUnavailable}
		if e.IO != nil {
			h.InputSchema, h.OutputSchema = e.IO.Input, e.IO.Output
		}
		all = append(all, h)
	}
	for _, p := range c.tools {
		add(p.entry, p.tool.Name)
	}
	for _, list := range [][]shown{c.resources, c.templates, c.prompts} {
		for _, it := range list {
			add(it.entry, it.name)
		}
	}
	slices.SortStableFunc(all, func(a, b Hit) int {
		if a.Score != b.Score {
			return b.Score - a.Score
		}
		return strings.Compare(a.ID, b.ID)
	})
	return all[:min(limit, len(all))]
}

// score is how well q matches e (shown as name): 100 when q is exactly its
// id, its shown name or its upstream name; then, for each word of q, 3 when
// it is a word of those names, 2 when it starts one (3 letters or more) or
// is a word of the title, 1 when it is a word of the description. Words are
// the letter-and-digit runs, lower-cased.
func score(q string, e plexus.Entry, name string) int {
	q = strings.TrimSpace(q)
	if q == "" {
		return 0
	}
	names := []string{e.ID, name}
	if e.MCP != nil && e.MCP.OriginName != "" {
		names = append(names, e.MCP.OriginName)
	}
	total := 0
	for _, n := range names {
		if strings.EqualFold(q, n) {
			total += 100
			break
		}
	}
	nameWords := words(strings.Join(names, " "))
	titleWords, descWords := words(e.Label), words(e.Describe)
	for _, w := range words(q) {
		switch {
		case slices.Contains(nameWords, w):
			total += 3
		case len(w) >= 3 && slices.ContainsFunc(nameWords, func(n string) bool { return strings.HasPrefix(n, w) }),
			slices.Contains(titleWords, w):
			total += 2
		case slices.Contains(descWords, w):
			total++
		}
	}
	return total
}

func words(s string) []string {
	return strings.FieldsFunc(strings.ToLower(s), func(r rune) bool { return !unicode.IsLetter(r) && !unicode.IsDigit(r) })
}

// callableNow reports whether a call of e would run without asking the
// owner (see [Hit.CallableNow]).
func callableNow(l *link, e plexus.Entry) bool {
	if e.Health != nil && e.Health.Status == plexus.HealthUnavailable {
		return false
	}
	if executes(e) {
		return false // execute asks at every call
	}
	if e.Standing != nil && *e.Standing {
		return true
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	_, held := l.tokens[e.ID]
	return held
}

// withAutoApproved marks callable the hits the gateway would grant on the
// first call without the owner. Executing ones and ones whose source is
// down stay as they are; if the gateway cannot say, nothing is marked.
func (s *Server) withAutoApproved(ctx context.Context, l *link, hits []Hit) []Hit {
	var ask []string
	for _, h := range hits {
		if !h.CallableNow && !h.down && !slices.Contains(h.Verbs, plexus.VerbExecute) {
			ask = append(ask, h.ID)
		}
	}
	if len(ask) == 0 {
		return hits
	}
	allowed, err := s.b.Grants.WouldAllow(ctx, l.creds(), ask)
	if err != nil {
		s.log.Debug("mcp: search: the gateway could not say what it would allow", "err", err)
		return hits
	}
	for i := range hits {
		hits[i].CallableNow = hits[i].CallableNow || allowed[hits[i].ID]
	}
	return hits
}

// searchResult is the search's tool result: the hits as JSON text and as
// structured content.
func searchResult(hits []Hit) *mcp.CallToolResult {
	if hits == nil {
		hits = []Hit{}
	}
	out := map[string]any{"results": hits}
	text, err := json.Marshal(out)
	if err != nil {
		return errorResult(&plexus.ErrorBody{Code: plexus.CodeInternalError, Message: "the results could not be encoded"}, SearchToolName)
	}
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: string(text)}}, StructuredContent: json.RawMessage(text)}
}
