package mcpserver

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/plexus-gw/plexus/gateway"
	"github.com/plexus-gw/plexus/scaffold"
)

// View is the owner's setting of what one agent's MCP host is shown: which
// capabilities (Only), under which names, and whether as tools or through
// the search tools. The zero value shows every capability under safe names,
// as tools up to [DefaultSearchAbove] of them and through search above.
// A view only ever hides: what a capability may do is the grants' alone.
type View struct {
	// Only lists capability ids and patterns ('*' matches any run of
	// characters: "mcp.github.*"); empty shows every capability.
	Only []string `json:"only,omitempty"`
	// Names is NamesSafe (the default) or NamesOriginal.
	Names string `json:"names,omitempty"`
	// Mode is ModeAuto (the default), ModeTools or ModeSearch.
	Mode string `json:"mode,omitempty"`
	// SearchAbove is the tool count above which ModeAuto shows the search
	// tools; 0 is [DefaultSearchAbove].
	SearchAbove int `json:"searchAbove,omitempty"`
}

// The values of [View.Names] and [View.Mode].
const (
	NamesSafe     = "safe"
	NamesOriginal = "original"
	ModeAuto      = "auto"
	ModeTools     = "tools"
	ModeSearch    = "search"
)

// DefaultSearchAbove is the tool count above which ModeAuto searches.
const DefaultSearchAbove = 50

// ErrView is wrapped by every error of [View.Validate].
var ErrView = errors.New("invalid view")

// Validate checks v as the owner wrote it. Original names need the view to
// hold one MCP server's items only — every Only pattern under
// "mcp.<server>." of the same server — so that no two shown items can share
// an upstream name and no server's item can stand in for another's.
func (v View) Validate() error {
	switch v.Names {
	case "", NamesSafe, NamesOriginal:
	default:
		return fmt.Errorf("%w: --names %q: want safe or original", ErrView, v.Names)
	}
	switch v.Mode {
	case "", ModeAuto, ModeTools, ModeSearch:
	default:
		return fmt.Errorf("%w: --mode %q: want tools, search or auto", ErrView, v.Mode)
	}
	if v.SearchAbove < 0 {
		return fmt.Errorf("%w: the search threshold %d is negative", ErrView, v.SearchAbove)
	}
	for _, p := range v.Only {
		if strings.TrimSpace(p) == "" {
			return fmt.Errorf("%w: an empty --only pattern", ErrView)
		}
	}
	if v.Names == NamesOriginal {
		if _, err := v.originalServer(); err != nil {
			return err
		}
	}
	return nil
}

// originalServer is the one MCP server an original-names view shows.
func (v View) originalServer() (string, error) {
	servers := map[string]bool{}
	var first string
	for _, p := range v.Only {
		rest, ok := strings.CutPrefix(p, "mcp.")
		server, _, dot := strings.Cut(rest, ".")
		if !ok || !dot || server == "" || strings.Contains(server, "*") {
			return "", fmt.Errorf("%w: --names original shows one MCP server's items under their upstream names, "+
				"so every --only must be under mcp.<server>. (as mcp.github.* or mcp.github.get_issue); %q is not", ErrView, p)
		}
		if !servers[server] {
			servers[server] = true
			if first == "" {
				first = server
			}
		}
	}
	switch len(servers) {
	case 0:
		return "", fmt.Errorf("%w: --names original needs --only naming one MCP server's items (as --only 'mcp.github.*')", ErrView)
	case 1:
		return first, nil
	}
	return "", fmt.Errorf("%w: --names original shows one MCP server's items, but --only names %d servers (%s): their upstream names could collide",
		ErrView, len(servers), strings.Join(sortedKeys(servers), ", "))
}

// shows reports whether the view shows capability id.
func (v View) shows(id string) bool {
	if len(v.Only) == 0 {
		return true
	}
	for _, p := range v.Only {
		if globMatch(p, id) {
			return true
		}
	}
	return false
}

// globMatch matches s against p, where '*' matches any run of characters
// (dots included) and every other character itself.
func globMatch(p, s string) bool {
	parts := strings.Split(p, "*")
	if len(parts) == 1 {
		return p == s
	}
	if !strings.HasPrefix(s, parts[0]) {
		return false
	}
	s = s[len(parts[0]):]
	last := parts[len(parts)-1]
	for _, part := range parts[1 : len(parts)-1] {
		i := strings.Index(s, part)
		if i < 0 {
			return false
		}
		s = s[i+len(part):]
	}
	return len(s) >= len(last) && strings.HasSuffix(s, last)
}

// searching reports whether a view of n tools shows the search tools.
func (v View) searching(n int) bool {
	switch v.Mode {
	case ModeSearch:
		return true
	case ModeTools:
		return false
	}
	limit := v.SearchAbove
	if limit == 0 {
		limit = DefaultSearchAbove
	}
	return n > limit
}

// Views answers the owner's view of each agent. View may be called
// concurrently; an agent without one gets the zero View.
type Views interface {
	View(agentID string) View
}

// Agents names the agent of a Plexus session; *gateway.Gateway implements
// it. Safe for concurrent use.
type Agents interface {
	SessionAgent(ctx context.Context, c gateway.Credentials) (string, error)
}

var _ Agents = (*gateway.Gateway)(nil)

// view is the owner's view of the link's agent, learnt once per link.
func (s *Server) view(ctx context.Context, l *link) (View, error) {
	if s.opts.Views == nil || s.b.Agents == nil {
		return View{}, nil
	}
	l.mu.Lock()
	agent, known := l.agent, l.agentKnown
	l.mu.Unlock()
	if !known {
		a, err := s.b.Agents.SessionAgent(ctx, l.creds())
		if err != nil {
			return View{}, s.gatewayError(l, err)
		}
		l.mu.Lock()
		l.agent, l.agentKnown = a, true
		l.mu.Unlock()
		agent = a
	}
	return s.opts.Views.View(agent), nil
}

// ViewFileName is the owner's file of per-agent views, in PLEXUS_HOME.
const ViewFileName = "mcp-views.json"

// ViewFile is the owner's file of views ({"agents": {"<id>": View}}), read
// and edited through [scaffold.OwnerFile] so that an edit changes only the
// agent it names. It implements [Views] from what it last read: the daemon
// calls Reload when the file changes, then [Server.ViewsChanged].
type ViewFile struct {
	path string

	mu    sync.RWMutex // guards views
	views map[string]View
}

// LoadViewFile reads the file at path (a missing one holds no views).
func LoadViewFile(path string) (*ViewFile, error) {
	f := &ViewFile{path: path}
	_, err := f.Reload()
	return f, err
}

// Reload reads the file again and answers the agents whose view it
// changed, sorted; on an error the views read before stay.
func (f *ViewFile) Reload() (changed []string, err error) {
	of, err := readViews(f.path)
	if err != nil {
		return nil, err
	}
	views := map[string]View{}
	for _, agent := range of.Names() {
		v, err := decodeView(of, agent)
		if err != nil {
			return nil, err
		}
		views[agent] = v
	}
	f.mu.Lock()
	changed = changedViews(f.views, views)
	f.views = views
	f.mu.Unlock()
	return changed, nil
}

// changedViews lists, sorted, the agents whose view differs between old
// and cur (an agent absent from one has the zero view there).
func changedViews(old, cur map[string]View) []string {
	var out []string
	for agent, v := range cur {
		if !v.equal(old[agent]) {
			out = append(out, agent)
		}
	}
	for agent, v := range old {
		if _, ok := cur[agent]; !ok && !v.isZero() {
			out = append(out, agent)
		}
	}
	slices.Sort(out)
	return out
}

// Path is the file's path.
func (f *ViewFile) Path() string { return f.path }

// View is agent's view as last read.
func (f *ViewFile) View(agent string) View {
	f.mu.RLock()
	defer f.mu.RUnlock()
	return f.views[agent]
}

// SetView writes agent's view into the file at path after checking it; the
// zero View removes the agent's entry. Every other entry and key stays as
// written.
func SetView(path, agent string, v View) error {
	if agent == "" {
		return fmt.Errorf("%w: no agent named", ErrView)
	}
	if err := v.Validate(); err != nil {
		return err
	}
	of, err := readViews(path)
	if err != nil {
		return err
	}
	if v.isZero() {
		of.Remove(agent)
	} else {
		raw, err := json.Marshal(v)
		if err != nil {
			return fmt.Errorf("encode the view of %s: %w", agent, err)
		}
		of.Put(agent, raw)
	}
	if err := of.Save(); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}

// ReadView is agent's view in the file at path.
func ReadView(path, agent string) (View, error) {
	of, err := readViews(path)
	if err != nil {
		return View{}, err
	}
	if _, ok := of.Entry(agent); !ok {
		return View{}, nil
	}
	return decodeView(of, agent)
}

func (v View) isZero() bool {
	return len(v.Only) == 0 && v.Names == "" && v.Mode == "" && v.SearchAbove == 0
}

func readViews(path string) (*scaffold.OwnerFile, error) {
	of, err := scaffold.ReadOwnerFile(path, "agents", 0)
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	return of, nil
}

func decodeView(of *scaffold.OwnerFile, agent string) (View, error) {
	raw, _ := of.Entry(agent)
	var v View
	if err := strictUnmarshal(raw, &v); err != nil {
		return View{}, fmt.Errorf("%s: the view of agent %q: %w", of.Path(), agent, err)
	}
	if err := v.Validate(); err != nil {
		return View{}, fmt.Errorf("%s: the view of agent %q: %w", of.Path(), agent, err)
	}
	return v, nil
}

// strictUnmarshal decodes raw into v, refusing unknown fields: a misspelt
// setting must not be silently dropped.
func strictUnmarshal(raw json.RawMessage, v *View) error {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	return dec.Decode(v)
}

func sortedKeys(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}
