package mcpclient

import (
	"encoding/json"
	"io"
	"log/slog"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/plexus-gw/plexus"
)

func TestEscapeName(t *testing.T) {
	tests := []struct{ in, want string }{
		{"echo", "echo"},
		{"get-sum_v2.1", "get-sum_v2.1"},
		{"get weather", "get~20weather"},
		{"a/b:c", "a~2Fb~3Ac"},
		{"~", "~7E"},    // the escape character escapes itself: one-to-one
		{"ü", "~C3~BC"}, // every byte of the UTF-8
		{"Dynamic Text Resource", "Dynamic~20Text~20Resource"},
	}
	for _, tt := range tests {
		if got := escapeName(tt.in); got != tt.want {
			t.Errorf("escapeName(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
	if escapeName("a~20b") == escapeName("a b") {
		t.Error("two names escape to one id")
	}
}

func TestToolVerbs(t *testing.T) {
	yes, no := true, false
	tests := []struct {
		name string
		h    *hints
		want plexus.Verb
	}{
		{"Unannotated", nil, plexus.VerbWrite},
		{"NoHints", &hints{}, plexus.VerbWrite},
		{"ReadOnly", &hints{ReadOnlyHint: &yes}, plexus.VerbRead},
		{"ReadOnlyWinsOverDestructive", &hints{ReadOnlyHint: &yes, DestructiveHint: &yes}, plexus.VerbRead},
		{"Destructive", &hints{DestructiveHint: &yes}, plexus.VerbExecute},
		{"OpenWorld", &hints{ReadOnlyHint: &no, OpenWorldHint: &yes}, plexus.VerbExecute},
		{"AllFalse", &hints{ReadOnlyHint: &no, DestructiveHint: &no, OpenWorldHint: &no}, plexus.VerbWrite},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := toolVerbs(tt.h); len(got) != 1 || got[0] != tt.want {
				t.Errorf("got %v, want [%s]", got, tt.want)
			}
		})
	}
}

func TestCanonicalHash(t *testing.T) {
	base := `{"name":"t","description":"d","inputSchema":{"type":"object","x":[1,2.50,"ü"]}}`
	same := []string{
		`{ "inputSchema" : {"x":[1, 2.50, "\u00fc"], "type":"object"}, "description":"d", "name":"t" }`,
		`{"name":"t","description":"d","inputSchema":{"type":"object","x":[1,2.50,"ü"]},"_meta":{"v":2}}`,
	}
	different := []string{
		`{"name":"t","description":"e","inputSchema":{"type":"object","x":[1,2.50,"ü"]}}`,
		`{"name":"t","description":"d","inputSchema":{"type":"object","x":[1,2.5,"ü"]}}`, // numbers as written
		`{"name":"t","description":"d","inputSchema":{"type":"object","x":[1,2.50,"ü"],"_meta":1}}`,
	}
	want, err := canonicalHash(json.RawMessage(base))
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range same {
		if got, _ := canonicalHash(json.RawMessage(s)); got != want {
			t.Errorf("hash of %s differs from %s's", s, base)
		}
	}
	for _, s := range different {
		if got, _ := canonicalHash(json.RawMessage(s)); got == want {
			t.Errorf("hash of %s equals %s's", s, base)
		}
	}
	for _, bad := range []string{`[]`, `null`, `"x"`, `{`} {
		if _, err := canonicalHash(json.RawMessage(bad)); err == nil {
			t.Errorf("canonicalHash(%s) succeeded", bad)
		}
	}
}

func TestTemplate(t *testing.T) {
	t.Run("OK", func(t *testing.T) {
		tm, err := parseTemplate("demo://r/{kind}/{id}.{kind}")
		if err != nil {
			t.Fatal(err)
		}
		got, err := tm.expand(map[string]any{"kind": "txt", "id": "a b/ü~"})
		if err != nil || got != "demo://r/txt/a%20b%2F%C3%BC~.txt" {
			t.Errorf("expand = %q, %v", got, err)
		}
		if want := `{"additionalProperties":false,"properties":{"id":{"type":"string"},"kind":{"type":"string"}},"required":["kind","id"],"type":"object"}`; string(tm.schema()) != want {
			t.Errorf("schema %s", tm.schema())
		}
		if _, err := tm.expand(map[string]any{"kind": "txt"}); err == nil {
			t.Error("a missing variable expanded")
		}
	})
	for _, bad := range []string{"file:///{+path}", "q{?x}", "a{x*}", "a{x:3}", "a{x,y}", "a{", "a}b{x}", "plain", "a{}"} {
		if _, err := parseTemplate(bad); err == nil {
			t.Errorf("parseTemplate(%q) succeeded", bad)
		}
	}
}

func TestProjectCollisions(t *testing.T) {
	l := listing{
		protocolVersion: "2025-11-25",
		tools:           []json.RawMessage{json.RawMessage(`{"name":"resource.a","inputSchema":{}}`), json.RawMessage(`{"inputSchema":{}}`)},
		resources: []json.RawMessage{
			json.RawMessage(`{"uri":"x://1","name":"a"}`), // the tool took its id
			json.RawMessage(`{"uri":"x://2","name":"b"}`),
			json.RawMessage(`{"uri":"x://3","name":"b"}`),
			json.RawMessage(`{"uri":"x://4"}`),
		},
		prompts: []json.RawMessage{json.RawMessage(`{"name":"a"}`), json.RawMessage(`{"name":"b"}`)},
	}
	l.tools = append(l.tools, json.RawMessage(`{"name":"prompt.a","inputSchema":{}}`))
	p := project("s", "mcp:s", l, slog.New(slog.NewTextHandler(io.Discard, nil)))
	var got []string
	for i, e := range p.entries {
		got = append(got, e.ID+" "+p.defs[i].Name)
	}
	want := []string{
		"mcp.s.resource.a resource.a",
		"mcp.s.prompt.a prompt.a", // the prompt a that comes later is left out
		"mcp.s.resource.a~" + uriHash("x://1") + " x://1",
		"mcp.s.resource.b x://2",
		"mcp.s.resource.b~" + uriHash("x://3") + " x://3",
		"mcp.s.resource.x~3A~2F~2F4 x://4",
		"mcp.s.prompt.b b",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("entries (-want +got):\n%s", diff)
	}
}

func uriHash(uri string) string {
	p := projector{taken: map[string]bool{"mcp.s.resource.b": true}, server: "s"}
	id := p.uniqueID("resource", "b", uri)
	return id[strings.LastIndexByte(id, '~')+1:]
}
