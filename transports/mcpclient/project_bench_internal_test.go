package mcpclient

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"runtime"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// realisticTools are n tools shaped like a forge's (the e2e bulk server's,
// e2e/bench_rss_test.go), each as the SDK's server marshals it: name,
// title annotation, a paragraph of description, hints and an input schema
// of four to nine described properties.
func realisticTools(tb testing.TB, n int) []json.RawMessage {
	tb.Helper()
	verbs := []string{"get", "list", "search", "create", "update", "delete"}
	nouns := []string{"issue", "pull_request", "branch", "release", "milestone", "label", "comment", "discussion",
		"workflow_run", "deployment", "environment", "webhook", "secret_scan_alert", "project_item", "gist", "team"}
	props := []string{
		`"owner":{"type":"string","description":"The account that owns the repository: a user or an organization. Not case-sensitive."}`,
		`"repo":{"type":"string","description":"The repository's name, without the owner and without .git. Not case-sensitive."}`,
		`"number":{"type":"integer","minimum":1,"description":"The number that identifies it within the repository."}`,
		`"state":{"type":"string","enum":["open","closed","all"],"default":"open","description":"Which state to return or set."}`,
		`"labels":{"type":"array","items":{"type":"string","maxLength":50},"maxItems":100,"description":"Label names. Not case-sensitive."}`,
		`"since":{"type":"string","format":"date-time","description":"Only results updated at or after this time, as an ISO 8601 timestamp (YYYY-MM-DDTHH:MM:SSZ)."}`,
		`"perPage":{"type":"integer","minimum":1,"maximum":100,"default":30,"description":"Results per page (max 100)."}`,
		`"page":{"type":"integer","minimum":1,"default":1,"description":"The page number of the results to fetch."}`,
		`"body":{"type":"string","maxLength":65536,"description":"The body, in Markdown <with> & \"escapes\"."}`,
	}
	out := make([]json.RawMessage, n)
	for i := range n {
		verb, noun := verbs[(i/len(nouns))%len(verbs)], nouns[i%len(nouns)]
		k := 4 + i%6
		schema := `{"type":"object","properties":{` + strings.Join(props[:k], ",") + `},"required":["owner","repo"],"additionalProperties":false}`
		yes, no := true, false
		ann := &mcp.ToolAnnotations{Title: fmt.Sprintf("%s %s (%05d)", verb, noun, i), ReadOnlyHint: verb == "get" || verb == "list"}
		if verb == "delete" {
			ann.DestructiveHint = &yes
		} else if !ann.ReadOnlyHint {
			ann.DestructiveHint, ann.OpenWorldHint = &no, &no
		}
		t := &mcp.Tool{Name: fmt.Sprintf("%s_%s_%05d", verb, noun, i), Annotations: ann, InputSchema: json.RawMessage(schema),
			Description: fmt.Sprintf("%s one %s by its number, with its full body, author, labels and timestamps. Use the list or search tools first when you do not know the number. Returns not_found when the %s does not exist or the token cannot see it.", verb, noun, noun)}
		if i%5 == 0 {
			t.OutputSchema = json.RawMessage(`{"type":"object","properties":{"url":{"type":"string"}}}`)
		}
		raw, err := json.Marshal(t)
		if err != nil {
			tb.Fatal(err)
		}
		out[i] = raw
	}
	return out
}

// BenchmarkProject projects a listing of 10k realistic tools, as apply
// does after each listing, and reports the heap the projection keeps
// (live-MB: after a GC, the projection and its listing held).
func BenchmarkProject(b *testing.B) {
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	var kept projection
	for b.Loop() {
		b.StopTimer()
		l := listing{protocolVersion: "2025-11-25", tools: realisticTools(b, 10_000)}
		runtime.GC()
		var m0 runtime.MemStats
		runtime.ReadMemStats(&m0)
		b.StartTimer()
		kept = project("bulk", "mcp:bulk", l, log)
		b.StopTimer()
		l = listing{} // only the projection's references keep the tools alive
		runtime.GC()
		var m1 runtime.MemStats
		runtime.ReadMemStats(&m1)
		b.ReportMetric(float64(m1.HeapAlloc-m0.HeapAlloc)/1e6, "kept-MB")
		b.StartTimer()
	}
	runtime.KeepAlive(kept)
}

// projectionDigest is the sha256 of everything a projection yields (each
// definition and each entry as JSON, MCP passthrough and route included),
// for comparing one projection with another.
func projectionDigest(t *testing.T, p projection) string {
	t.Helper()
	h := sha256.New()
	for i := range p.entries {
		b, err := json.Marshal(struct {
			Def   Definition
			Entry any
			IO    any
			MCP   any
			Route string
		}{p.defs[i], p.entries[i], p.entries[i].IO, p.entries[i].MCP, string(p.entries[i].Route)})
		if err != nil {
			t.Fatal(err)
		}
		h.Write(b)
		h.Write([]byte{'\n'})
	}
	return hex.EncodeToString(h.Sum(nil))
}

// projectGolden is projectionDigest of the listing TestProjectGolden
// projects, as the projector before the heap work (2026-11, session 9)
// made it: the entries (hence the manifests built from them), the
// definitions and their hashes (hence the pins) must stay byte for byte.
const projectGolden = "7734dcc9bf25aca90eee5cf4cde941a98cb620fb01b372cbda10b2e9aefcc2a3"

// TestProjectGolden projects realistic tools and odd ones (formatted,
// escaped, with _meta, an input schema repeated in its output schema,
// null or absent schemas) along with a resource, a template and a prompt,
// and compares everything the projection yields with projectGolden.
func TestProjectGolden(t *testing.T) {
	odd := []string{
		"{\n  \"name\": \"pretty\",\n  \"inputSchema\": {\n    \"type\": \"object\",\n    \"properties\": {\"a\": {\"type\": \"number\", \"default\": 2.50}}\n  }\n}",
		`{"name":"escaped\u00fc","description":"<b>\u2028 \"q\" \\ \t","inputSchema":{"type":"object","properties":{"\u00fc":{"const":"\ud83d\ude00"}}},"_meta":{"v":1}}`,
		`{"name":"same","description":"{\"type\":\"object\"}","outputSchema":{"type":"object"},"inputSchema":{"type":"object"}}`,
		`{"name":"nulls","inputSchema":null,"outputSchema":null}`,
		`{"name":"absent"}`,
		`{"name":"dup","inputSchema":{"type":"string"},"inputSchema":{"type":"object","b":1,"a":[true,false,null,-1e+10]}}`,
		`{"inputSchema":{"type":"object"}}`,
		`[1,2]`,
	}
	l := listing{protocolVersion: "2025-11-25", tools: realisticTools(t, 200)}
	for _, s := range odd {
		l.tools = append(l.tools, json.RawMessage(s))
	}
	l.resources = []json.RawMessage{json.RawMessage(`{"uri":"file:///a b","name":"a","_meta":{"x":1}}`)}
	l.templates = []json.RawMessage{json.RawMessage(`{"uriTemplate":"demo://r/{id}","name":"r","description":"R."}`)}
	l.prompts = []json.RawMessage{json.RawMessage(`{"name":"p","arguments":[{"name":"x","required":true},{"name":"y","description":"Y."}]}`)}
	p := project("bulk", "mcp:bulk", l, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if got := projectionDigest(t, p); got != projectGolden {
		t.Errorf("the projection changed: digest %s, want %s", got, projectGolden)
	}
	for i, e := range p.entries { // the schema is the server's, byte for byte
		var tool struct{ InputSchema json.RawMessage }
		if json.Unmarshal(p.defs[i].Raw, &tool) == nil && string(nonNull(tool.InputSchema)) != string(e.IO.Input) && p.defs[i].Primitive == PrimitiveTool {
			t.Errorf("%s: io.input %s, want %s", e.ID, e.IO.Input, tool.InputSchema)
		}
	}
}

// BenchmarkScan measures what a scan of a client holding 10k realistic
// tools allocates (the registry keeps each scan's entries).
func BenchmarkScan(b *testing.B) {
	p := project("bulk", "mcp:bulk", listing{protocolVersion: "2025-11-25", tools: realisticTools(b, 10_000)}, slog.New(slog.NewTextHandler(io.Discard, nil)))
	c := &Client{view: view{proj: p, visible: p.entries, set: true}}
	b.ReportAllocs()
	for b.Loop() {
		if es, err := c.Scan(b.Context()); err != nil || len(es) != 10_000 {
			b.Fatal(len(es), err)
		}
	}
}
