package e2e

// The loaded-RSS figure of DESIGN.md (bar < 150 MB): the built binary
// holding 10,000 entries, 1,000 agents and 100,000 standing grants, each
// made the way the owner makes them. The entries come from a real MCP
// server (this test binary, re-executed with bulkServerEnv set) added with
// `plexus mcp add`; the agents and their grants from the admin API the CLI
// uses (`plexus agents connect <id> --grant cap=verbs`), each agent then
// enrolled with its one-time code.

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/plexus-gw/plexus"
	"github.com/plexus-gw/plexus/scaffold"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// bulkServerEnv makes the test binary (TestMain) a stdio MCP server on the
// official SDK serving as many generated tools as the variable says: names,
// titles, descriptions, annotations and input schemas shaped like a real
// forge's or tracker's tools (bulkTool), a sixth of them destructive.
const bulkServerEnv = "MCP_BULK_SERVER"

// Sizes of the loaded-RSS figure (DESIGN.md's).
const (
	rssEntries         = 10_000
	rssAgents          = 1_000
	rssGrantsPerAgent  = 100 // 100,000 grants in all
	rssWorkers         = 4   // concurrent owner calls while loading
	rssExercisedAgents = 3   // agents that handshake, take a token and call
)

// bulkAction is one kind of tool the bulk server serves, per noun.
type bulkAction struct {
	verb     string
	grant    plexus.Verb // what Plexus requires for it, from its annotations
	params   []string    // of bulkParams
	required []string
	desc     string // a format taking the noun three times
}

var bulkActions = []bulkAction{
	{"get", plexus.VerbRead, []string{"owner", "repo", "number", "ref"}, []string{"owner", "repo", "number"},
		"Get one %[1]s by its number, with its full body, author, labels, assignees and timestamps. Use the list or search tools of %[2]s first when you do not know the number. Returns not_found when the %[1]s does not exist or the token cannot see it."},
	{"list", plexus.VerbRead, []string{"owner", "repo", "state", "labels", "sort", "direction", "since", "perPage", "page"}, []string{"owner", "repo"},
		"List the %[2]s of a repository, newest first. Results are paginated (perPage up to 100); use page to walk them. Filter by state and labels, or by since to see only the %[2]s updated after a time. Returns each %[1]s's number, title, state, author, labels and timestamps, not its body."},
	{"search", plexus.VerbRead, []string{"query", "sort", "direction", "perPage", "page"}, []string{"query"},
		"Search %[2]s across every repository the token can read, with the service's query syntax (is:open, author:NAME, label:NAME, repo:OWNER/NAME). Results are ranked by relevance unless sort is given, and paginated. Returns at most 1,000 matches; narrow the query when total_count says more."},
	{"create", plexus.VerbWrite, []string{"owner", "repo", "title", "body", "labels", "assignees"}, []string{"owner", "repo", "title"},
		"Create a %[1]s in a repository. The body is Markdown. Labels and assignees that do not exist are ignored, not created. Returns the new %[1]s's number and URL. Everyone watching the repository is notified, so do not create test %[2]s in real repositories."},
	{"update", plexus.VerbWrite, []string{"owner", "repo", "number", "title", "body", "state", "labels", "assignees"}, []string{"owner", "repo", "number"},
		"Update a %[1]s: its title, body, state, labels or assignees. Only the fields given change; labels and assignees given replace the existing ones. Closing a %[1]s with state closed notifies its participants. Returns the %[1]s as it is after the change."},
	{"delete", plexus.VerbExecute, []string{"owner", "repo", "number", "dryRun"}, []string{"owner", "repo", "number"},
		"Delete a %[1]s for good, with its comments and history. This cannot be undone and needs admin rights on the repository. With dryRun true nothing is deleted and the answer says what would be. Prefer closing a %[1]s to deleting it."},
}

var bulkNouns = []string{"issue", "pull_request", "branch", "release", "milestone", "label", "comment", "discussion",
	"workflow_run", "deployment", "environment", "webhook", "secret_scan_alert", "project_item", "gist", "team"}

// bulkParams are the input properties the tools draw from.
var bulkParams = map[string]string{
	"owner":     `{"type":"string","description":"The account that owns the repository: a user or an organization. Not case-sensitive."}`,
	"repo":      `{"type":"string","description":"The repository's name, without the owner and without .git. Not case-sensitive."}`,
	"number":    `{"type":"integer","minimum":1,"description":"The number that identifies it within the repository."}`,
	"ref":       `{"type":"string","description":"A branch name, tag or commit SHA; the default branch when left out."}`,
	"state":     `{"type":"string","enum":["open","closed","all"],"default":"open","description":"Which state to return or set."}`,
	"labels":    `{"type":"array","items":{"type":"string","maxLength":50},"maxItems":100,"description":"Label names. Not case-sensitive."}`,
	"sort":      `{"type":"string","enum":["created","updated","comments"],"default":"created","description":"What to sort results by."}`,
	"direction": `{"type":"string","enum":["asc","desc"],"default":"desc","description":"The direction of the sort."}`,
	"since":     `{"type":"string","format":"date-time","description":"Only results updated at or after this time, as an ISO 8601 timestamp (YYYY-MM-DDTHH:MM:SSZ)."}`,
	"perPage":   `{"type":"integer","minimum":1,"maximum":100,"default":30,"description":"Results per page (max 100)."}`,
	"page":      `{"type":"integer","minimum":1,"default":1,"description":"The page number of the results to fetch."}`,
	"query":     `{"type":"string","minLength":1,"maxLength":256,"description":"The search query, with qualifiers (is:open, author:NAME, label:NAME, repo:OWNER/NAME)."}`,
	"title":     `{"type":"string","minLength":1,"maxLength":256,"description":"The title."}`,
	"body":      `{"type":"string","maxLength":65536,"description":"The body, in Markdown."}`,
	"assignees": `{"type":"array","items":{"type":"string"},"maxItems":10,"description":"Logins of the users to assign. Replaces the current assignees."}`,
	"dryRun":    `{"type":"boolean","default":false,"description":"Say what would be deleted without deleting it."}`,
}

// bulkTool is the bulk server's tool i and the verb Plexus requires for it.
func bulkTool(i int) (*mcp.Tool, plexus.Verb) {
	noun := bulkNouns[i%len(bulkNouns)]
	a := bulkActions[(i/len(bulkNouns))%len(bulkActions)]
	plural := noun + "s"
	if strings.HasSuffix(noun, "ch") {
		plural = noun + "es"
	}
	name := fmt.Sprintf("%s_%s_%05d", a.verb, noun, i)
	var schema bytes.Buffer
	schema.WriteString(`{"type":"object","properties":{`)
	for k, p := range a.params {
		if k > 0 {
			schema.WriteByte(',')
		}
		fmt.Fprintf(&schema, "%q:%s", p, bulkParams[p])
	}
	req, _ := json.Marshal(a.required) // strings only: cannot fail
	fmt.Fprintf(&schema, `},"required":%s,"additionalProperties":false}`, req)
	ann := &mcp.ToolAnnotations{Title: fmt.Sprintf("%s %s (%05d)", strings.ToUpper(a.verb[:1])+a.verb[1:], strings.ReplaceAll(noun, "_", " "), i)}
	switch a.grant {
	case plexus.VerbRead:
		ann.ReadOnlyHint = true
	case plexus.VerbWrite:
		ann.DestructiveHint, ann.OpenWorldHint = new(false), new(false)
	default:
		ann.DestructiveHint = new(true)
	}
	return &mcp.Tool{Name: name, Description: fmt.Sprintf(a.desc, strings.ReplaceAll(noun, "_", " "), strings.ReplaceAll(plural, "_", " ")),
		Annotations: ann, InputSchema: json.RawMessage(schema.Bytes())}, a.grant
}

// bulkInput is a valid input of tool i: its required properties.
func bulkInput(i int) map[string]any {
	in := map[string]any{}
	for _, p := range bulkActions[(i/len(bulkNouns))%len(bulkActions)].required {
		switch p {
		case "number":
			in[p] = 7
		default:
			in[p] = "plexus-" + p
		}
	}
	return in
}

// runBulkServer serves n generated tools over stdio until stdin closes or
// a signal ends it. Each tool answers with its name and arguments.
func runBulkServer(n int) {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	s := mcp.NewServer(&mcp.Implementation{Name: "bulk", Version: "1.0.0"}, nil)
	for i := range n {
		t, _ := bulkTool(i)
		s.AddTool(t, func(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{
				Text: fmt.Sprintf(`{"tool":%q,"arguments":%s,"items":[]}`, req.Params.Name, req.Params.Arguments)}}}, nil
		})
	}
	if err := s.Run(ctx, &mcp.StdioTransport{}); err != nil && ctx.Err() == nil {
		fmt.Fprintln(os.Stderr, "bulk server:", err)
	}
}

// bulkServerN is the tool count TestMain's bulk server mode was asked for,
// or 0 when the variable is unset.
func bulkServerN() int {
	n, err := strconv.Atoi(os.Getenv(bulkServerEnv))
	if err != nil {
		return 0
	}
	return n
}

// procMB reads VmRSS and VmHWM of pid from /proc, in MB.
func procMB(b *testing.B, pid int) (rss, hwm float64) {
	b.Helper()
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		b.Fatal(err)
	}
	kb := func(field string) float64 {
		for line := range strings.SplitSeq(string(status), "\n") {
			if rest, ok := strings.CutPrefix(line, field+":"); ok {
				v, err := strconv.ParseFloat(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 64)
				if err == nil {
					return v
				}
			}
		}
		b.Fatalf("no %s in /proc/%d/status", field, pid)
		return 0
	}
	return kb("VmRSS") / 1024, kb("VmHWM") / 1024
}

// rssOwner is the owner's side of the loaded-RSS figure: the daemon's base
// URL, the connection-key and one keep-alive client.
type rssOwner struct {
	base, key string
	c         *http.Client
}

// call sends one JSON request and decodes a 2xx answer into out.
func (o rssOwner) call(method, path string, hdr map[string]string, in, out any) error {
	var body []byte
	if in != nil {
		var err error
		if body, err = json.Marshal(in); err != nil {
			return err
		}
	}
	st, raw, err := benchDo(o.c, method, o.base+path, hdr, body)
	if err != nil {
		return fmt.Errorf("%s %s: %w", method, path, err)
	}
	if st/100 != 2 {
		return fmt.Errorf("%s %s: status %d: %.300s", method, path, st, raw)
	}
	if out == nil {
		return nil
	}
	if err := json.Unmarshal(raw, out); err != nil {
		return fmt.Errorf("%s %s: decode: %w", method, path, err)
	}
	return nil
}

// BenchmarkLoadedRSS: the built binary, `plexus serve` on a fresh home,
// loaded as an owner loads it: an MCP server of 10,000 tools added with
// `plexus mcp add` (its definitions pinned at first sight, as every added
// server's are), then 1,000 agents connected through the admin API with
// 100 standing grants each (100,000 grants, each tool granted to about 12
// agents) and each enrolled with its code. A few agents then handshake (the
// whole manifest), take a token and call tools through the server, the
// daemon idles for a second, and VmRSS and VmHWM are read. The counts are
// checked through `plexus status`'s endpoint afterwards (it lists every
// grant: done before the reading, its garbage would be in the figure), and
// a short count fails the benchmark rather than print a figure for less.
// Beside the figure it reports the daemon's own GC cycles, CPU time and
// heap goal from its /metrics: what a GC setting in the daemon's
// environment (GOGC, GOMEMLIMIT) trades against the RSS. Bar: < 150 MB.
func BenchmarkLoadedRSS(b *testing.B) {
	oneShot(b, func(b *testing.B, m map[string]float64) {
		if runtime.GOOS != "linux" {
			b.Skip("VmRSS is read from /proc")
		}
		begin := time.Now()
		bin := plexusBin(b)
		home := filepath.Join(b.TempDir(), "home")
		cmd, base, _ := startBinary(b, bin, home)
		defer stopBinary(b, cmd)
		key, err := scaffold.ReadConnectionKey(home)
		if err != nil {
			b.Fatal(err)
		}
		o := rssOwner{base: base, key: key, c: benchHTTPClient(rssWorkers)}

		t0 := time.Now()
		rssAddBulkServer(b, bin, home, o)
		ingest := time.Since(t0)

		t0 = time.Now()
		grantable := rssGrantable()
		pats, granted := rssConnectAgents(b, o, grantable)
		connect := time.Since(t0)

		// Loaded, before any agent fetched the manifest: the split between
		// what loading leaves and what serving agents adds.
		loaded, _ := procMB(b, cmd.Process.Pid)
		rssExercise(b, o, grantable, pats)
		time.Sleep(time.Second)
		rss, hwm := procMB(b, cmd.Process.Pid)

		st := rssStatus(b, o)
		var bulk int
		for _, s := range st.Sources {
			if s.ID == "mcp:bulk" {
				bulk = s.Entries
			}
		}
		if bulk != rssEntries || st.Entries < rssEntries || st.Agents != rssAgents || st.Grants != rssAgents*rssGrantsPerAgent || granted != st.Grants {
			b.Fatalf("loaded: %d entries (%d of mcp:bulk), %d agents, %d grants (%d given at connect); want %d, %d, %d",
				st.Entries, bulk, st.Agents, st.Grants, granted, rssEntries, rssAgents, rssAgents*rssGrantsPerAgent)
		}
		afterStatus, _ := procMB(b, cmd.Process.Pid)
		rt := rssRuntime(b, o)

		m["rss-MB"], m["peak-rss-MB"], m["rss-before-handshakes-MB"], m["rss-after-status-MB"] = rss, hwm, loaded, afterStatus
		m["ingest-s"], m["connect-s"], m["total-s"] = ingest.Seconds(), connect.Seconds(), time.Since(begin).Seconds()
		m["gc-cycles"], m["daemon-cpu-s"], m["heap-goal-MB"] = rt.gcCycles, rt.cpu, rt.heapGoalMB
		setFigure(benchOrder[16], benchFigure{value: rss, unit: "MB", bar: "< 150 MB", ok: rss < 150,
			note: fmt.Sprintf("peak %.1f MB, %.0f MB before 3 handshakes; %d entries, %d agents, %d grants loaded", hwm, loaded, st.Entries, st.Agents, st.Grants)})
		b.Logf("loaded RSS of plexus serve: %.1f MB (peak %.1f MB; %.1f MB before the handshakes, %.1f MB after GET /admin/api/status) with %d entries, %d agents, %d grants (bar < 150 MB); "+
			"ingest %.1f s, connect+enroll %.1f s, total %.1f s; the daemon ran %.0f GC cycles in %.1f s of CPU, heap goal %.0f MB (GOGC %.0f)",
			rss, hwm, loaded, afterStatus, st.Entries, st.Agents, st.Grants, ingest.Seconds(), connect.Seconds(), time.Since(begin).Seconds(),
			rt.gcCycles, rt.cpu, rt.heapGoalMB, rt.gogc)
	})
}

// rssRuntimeFigures are the loaded daemon's garbage collector and CPU
// figures, from its own /metrics: what a GC setting (GOGC, GOMEMLIMIT in
// the daemon's environment) trades against the RSS figure.
type rssRuntimeFigures struct {
	gcCycles, cpu, heapGoalMB, gogc float64
}

// rssRuntime scrapes the daemon's /metrics with the connection-key.
func rssRuntime(b *testing.B, o rssOwner) rssRuntimeFigures {
	b.Helper()
	fams := scrapeMetrics(b, o.c, o.base, o.key)
	one := func(name string) float64 {
		f := fams[name]
		if f == nil || len(f.GetMetric()) != 1 {
			b.Fatalf("/metrics has no single series %s", name)
		}
		switch m := f.GetMetric()[0]; {
		case m.Summary != nil:
			return float64(m.GetSummary().GetSampleCount())
		case m.Counter != nil:
			return m.GetCounter().GetValue()
		default:
			return m.GetGauge().GetValue()
		}
	}
	return rssRuntimeFigures{gcCycles: one("go_gc_duration_seconds"), cpu: one("process_cpu_seconds_total"),
		heapGoalMB: one("go_memstats_next_gc_bytes") / 1e6, gogc: one("go_gc_gogc_percent")}
}

// scrapeMetrics reads the /metrics of the daemon at base with the
// connection-key.
func scrapeMetrics(b *testing.B, c *http.Client, base, key string) map[string]*dto.MetricFamily {
	b.Helper()
	st, raw, err := benchDo(c, "GET", base+"/metrics", map[string]string{"Authorization": "Bearer " + key}, nil)
	if err != nil || st != http.StatusOK {
		b.Fatalf("GET /metrics: status %d, %v: %.300s", st, err, raw)
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(bytes.NewReader(raw))
	if err != nil {
		b.Fatalf("parse /metrics: %v", err)
	}
	return fams
}

// rssAddBulkServer adds the bulk MCP server with `plexus mcp add` to the
// running daemon and waits until the daemon serves all its tools.
func rssAddBulkServer(b *testing.B, bin, home string, o rssOwner) {
	b.Helper()
	self, err := os.Executable()
	if err != nil {
		b.Fatal(err)
	}
	out, err := exec.Command(bin, "--home", home, "mcp", "add", "bulk", "--wait", "60s",
		"--env", bulkServerEnv+"="+strconv.Itoa(rssEntries), "--", self).CombinedOutput()
	if err != nil {
		b.Fatalf("plexus mcp add bulk: %v\n%s", err, out)
	}
	deadline := time.Now().Add(60 * time.Second)
	for {
		st := rssStatus(b, o)
		for _, s := range st.Sources {
			if s.ID == "mcp:bulk" && s.Entries == rssEntries {
				return
			}
		}
		if time.Now().After(deadline) {
			b.Fatalf("the bulk server's %d tools are not all served after 60 s: %+v\nplexus mcp add said:\n%s", rssEntries, st.Sources, out)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func rssStatus(b *testing.B, o rssOwner) plexus.StatusResponse {
	b.Helper()
	var st plexus.StatusResponse
	if err := o.call(http.MethodGet, "/admin/api/status", bearer(o.key), nil, &st); err != nil {
		b.Fatal(err)
	}
	return st
}

// rssConnectAgents connects and enrolls rssAgents agents, each with
// rssGrantsPerAgent standing grants of the bulk tools it may stand on (not
// the destructive ones: execute is never standing), rssWorkers at a time.
// It returns the first agents' PATs and how many grants the connects gave.
func rssConnectAgents(b *testing.B, o rssOwner, grantable []int) (pats []string, granted int) {
	b.Helper()
	pats = make([]string, rssAgents)
	counts := make([]int, rssAgents)
	errs := make(chan error, rssWorkers)
	var wg sync.WaitGroup
	for w := range rssWorkers {
		wg.Go(func() {
			for a := w; a < rssAgents; a += rssWorkers {
				req := plexus.ConnectRequest{AgentID: fmt.Sprintf("agent-%04d", a), Label: fmt.Sprintf("Bench agent %d", a)}
				for _, i := range rssGrantedTools(grantable, a, rssGrantsPerAgent) {
					t, v := bulkTool(i)
					req.Grants = append(req.Grants, plexus.ConnectGrant{CapabilityID: "mcp.bulk." + t.Name, Verbs: []plexus.Verb{v}})
				}
				var conn plexus.ConnectResponse
				var enr plexus.EnrollResponse
				if err := o.call(http.MethodPost, "/admin/api/agents/connect", bearer(o.key), req, &conn); err != nil {
					errs <- err
					return
				}
				if err := o.call(http.MethodPost, "/agents/enroll", nil, plexus.EnrollRequest{Code: conn.Code}, &enr); err != nil {
					errs <- err
					return
				}
				pats[a], counts[a] = enr.PAT, len(conn.Grants)
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		b.Fatal(err)
	}
	for _, n := range counts {
		granted += n
	}
	return pats[:rssExercisedAgents], granted
}

// rssExercise warms the daemon as agents use it: each of pats handshakes
// (the whole manifest, checked to hold every bulk tool), takes a token for
// two of its granted tools (standing: no one is asked) and calls each.
func rssExercise(b *testing.B, o rssOwner, grantable []int, pats []string) {
	b.Helper()
	for a, pat := range pats {
		var hs plexus.HandshakeResponse
		if err := o.call(http.MethodPost, "/link/handshake", bearer(pat), plexus.HandshakeRequest{Client: &plexus.ClientInfo{Name: "bench"}}, &hs); err != nil {
			b.Fatal(err)
		}
		bulk := 0
		for _, e := range hs.Manifest.Entries {
			if strings.HasPrefix(e.ID, "mcp.bulk.") {
				bulk++
			}
		}
		if bulk != rssEntries {
			b.Fatalf("agent %d's manifest holds %d bulk tools, want %d", a, bulk, rssEntries)
		}
		ids := rssGrantedTools(grantable, a, 2)
		grants := map[string]plexus.GrantDecision{}
		for _, id := range ids {
			_, v := bulkTool(id)
			grants[rssToolID(id)] = plexus.GrantDecision{Decision: plexus.DecisionAllow, Verbs: []plexus.Verb{v}}
		}
		var tok plexus.ScopedToken
		if err := o.call(http.MethodPut, "/grants", session(hs.SessionID), plexus.GrantRequest{Grants: grants}, &tok); err != nil || tok.Token == "" {
			b.Fatalf("agent %d's token for %v: %v", a, ids, err)
		}
		for _, id := range ids {
			var resp plexus.InvokeResponse
			if err := o.call(http.MethodPost, "/invoke", bearer(tok.Token), plexus.InvokeRequest{ID: rssToolID(id), Input: bulkInput(id)}, &resp); err != nil || !resp.OK {
				b.Fatalf("invoke %s: %v %+v", rssToolID(id), err, resp.Error)
			}
		}
	}
}

// rssGrantedTools are the indexes of agent a's first n granted tools, as
// rssConnectAgents picks them.
func rssGrantedTools(grantable []int, a, n int) []int {
	out := make([]int, n)
	for j := range n {
		out[j] = grantable[(a*rssGrantsPerAgent+j)%len(grantable)]
	}
	return out
}

// rssGrantable are the indexes of the bulk tools a standing grant may
// cover: all but the destructive ones (execute is never standing).
func rssGrantable() []int {
	var out []int
	for i := range rssEntries {
		if _, v := bulkTool(i); v != plexus.VerbExecute {
			out = append(out, i)
		}
	}
	return out
}

func rssToolID(i int) string {
	t, _ := bulkTool(i)
	return "mcp.bulk." + t.Name
}
