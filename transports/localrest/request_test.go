package localrest_test

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/plexus-gw/plexus"
	"github.com/plexus-gw/plexus/transports/localrest"
)

func TestPathTemplate(t *testing.T) {
	var s seen
	fx := newFixture(t, func(w http.ResponseWriter, r *http.Request) {
		s.record(r)
		w.WriteHeader(204)
	})
	for _, tc := range []struct {
		name      string
		template  string
		input     map[string]any
		wantPath  string
		wantQuery string
	}{
		{"Plain", "/vault/{path}", map[string]any{"path": "note.md"}, "/vault/note.md", ""},
		{"DotDotSlash", "/vault/{path}", map[string]any{"path": "../x"}, "/vault/..%2Fx", ""},
		{"Space", "/vault/{path}", map[string]any{"path": "a b"}, "/vault/a%20b", ""},
		{"SlashStaysOneSegment", "/vault/{path}", map[string]any{"path": "a/b"}, "/vault/a%2Fb", ""},
		{"Unicode", "/vault/{path}", map[string]any{"path": "été ☃"}, "/vault/%C3%A9t%C3%A9%20%E2%98%83", ""},
		{"QueryChars", "/vault/{path}", map[string]any{"path": "a?b#c&d%"}, "/vault/a%3Fb%23c&d%25", ""},
		{"Number", "/items/{id}", map[string]any{"id": 42.0}, "/items/42", ""},
		{"Bool", "/flags/{on}", map[string]any{"on": true}, "/flags/true", ""},
		{"Dotted", "/notes/{note.id}/{n}", map[string]any{"note": map[string]any{"id": "x y"}, "n": 1.5},
			"/notes/x%20y/1.5", "note=%7B%22id%22%3A%22x+y%22%7D"},
		{"TwoInOneSegment", "/files/{name}.{ext}", map[string]any{"name": "a.b", "ext": "md"}, "/files/a.b.md", ""},
		{"TemplateQuery", "/search/?q={query}&contextLength=100", map[string]any{"query": "a&b c"}, "/search/", "q=a%26b+c&contextLength=100"},
		{"TemplateQueryAndRest", "/search?q={query}", map[string]any{"query": "x", "limit": 5.0}, "/search", "q=x&limit=5"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res := fx.call(`{"method":"GET","pathTemplate":"`+tc.template+`"}`, tc.input)
			wantOK(t, res)
			got := s.last(t)
			if got.Path != tc.wantPath || got.Query != tc.wantQuery {
				t.Fatalf("server saw path %q query %q, want %q %q", got.Path, got.Query, tc.wantPath, tc.wantQuery)
			}
		})
	}
}

func TestBadInput(t *testing.T) {
	var s seen
	fx := newFixture(t, func(w http.ResponseWriter, r *http.Request) { s.record(r) })
	for _, tc := range []struct {
		name     string
		template string
		input    map[string]any
		want     string
	}{
		{"Missing", "/vault/{path}", map[string]any{}, `input field "path" is required`},
		{"Null", "/vault/{path}", map[string]any{"path": nil}, `input field "path" is required`},
		{"MissingDotted", "/notes/{note.id}", map[string]any{"note": map[string]any{}}, `input field "note.id" is required`},
		{"DottedThroughString", "/notes/{note.id}", map[string]any{"note": "x"}, `input field "note.id" is required`},
		{"Object", "/vault/{path}", map[string]any{"path": map[string]any{"a": 1}}, `must be a string, number or boolean`},
		{"Array", "/vault/{path}", map[string]any{"path": []any{"a"}}, `must be a string, number or boolean`},
		{"DotDot", "/vault/{path}", map[string]any{"path": ".."}, `cannot be ".."`},
		{"Dot", "/vault/{path}", map[string]any{"path": "."}, `cannot be "."`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			wantCode(t, fx.call(`{"pathTemplate":"`+tc.template+`"}`, tc.input), plexus.CodeTransportError, tc.want)
		})
	}
	if n := s.count(); n != 0 {
		t.Fatalf("the server saw %d requests for bad input, want none", n)
	}
}

func TestInputToRequest(t *testing.T) {
	var s seen
	fx := newFixture(t, func(w http.ResponseWriter, r *http.Request) {
		s.record(r)
		w.WriteHeader(204)
	})
	input := map[string]any{
		"id": "7", "q": "a b&c", "limit": 5.0, "big": json.Number("12345678901234567890"),
		"flag": false, "tags": []any{"x", "y"}, "none": nil, "obj": map[string]any{"k": "v"},
	}
	t.Run("GETQuery", func(t *testing.T) {
		wantOK(t, fx.call(`{"method":"get","pathTemplate":"/notes/{id}"}`, input))
		got := s.last(t)
		want := "big=12345678901234567890&flag=false&limit=5&obj=%7B%22k%22%3A%22v%22%7D&q=a+b%26c&tags=%5B%22x%22%2C%22y%22%5D"
		if got.Method != "GET" || got.Path != "/notes/7" || got.Query != want || got.Body != "" {
			t.Fatalf("server saw %+v, want GET /notes/7?%s without a body", got, want)
		}
	})
	for _, method := range []string{"DELETE", "HEAD"} {
		t.Run(method+"Query", func(t *testing.T) {
			wantOK(t, fx.call(`{"method":"`+method+`","pathTemplate":"/notes/{id}"}`, map[string]any{"id": "7", "q": "x"}))
			if got := s.last(t); got.Method != method || got.Query != "q=x" || got.Body != "" {
				t.Fatalf("server saw %+v, want %s with q=x", got, method)
			}
		})
	}
	for _, method := range []string{"POST", "PUT", "PATCH"} {
		t.Run(method+"Body", func(t *testing.T) {
			wantOK(t, fx.call(`{"method":"`+method+`","pathTemplate":"/notes/{id}"}`, input))
			got := s.last(t)
			if got.Method != method || got.Path != "/notes/7" || got.Query != "" || got.ContentType != "application/json" {
				t.Fatalf("server saw %+v, want %s /notes/7 with a JSON body", got, method)
			}
			var body map[string]any
			if err := json.Unmarshal([]byte(got.Body), &body); err != nil {
				t.Fatalf("body %q: %v", got.Body, err)
			}
			want := map[string]any{"q": "a b&c", "limit": 5.0, "big": 12345678901234567890.0, "flag": false,
				"tags": []any{"x", "y"}, "none": nil, "obj": map[string]any{"k": "v"}}
			if diff := cmp.Diff(want, body); diff != "" {
				t.Fatalf("body (-want +got):\n%s", diff)
			}
			if !strings.Contains(got.Body, "12345678901234567890") {
				t.Fatalf("body %s lost the exact number", got.Body)
			}
		})
	}
	t.Run("POSTEmptyBody", func(t *testing.T) {
		wantOK(t, fx.call(`{"method":"POST","pathTemplate":"/notes/{id}"}`, map[string]any{"id": "7"}))
		if got := s.last(t); got.Body != "{}" {
			t.Fatalf("body %q, want {}", got.Body)
		}
	})
	t.Run("InputUnchanged", func(t *testing.T) {
		in := map[string]any{"id": "7", "q": "x"}
		wantOK(t, fx.call(`{"method":"POST","pathTemplate":"/notes/{id}"}`, in))
		if diff := cmp.Diff(map[string]any{"id": "7", "q": "x"}, in); diff != "" {
			t.Fatalf("input changed (-want +got):\n%s", diff)
		}
	})
	t.Run("LegacyPath", func(t *testing.T) {
		wantOK(t, fx.call(`{"path":"/legacy/{id}"}`, map[string]any{"id": "7"}))
		if got := s.last(t); got.Method != "GET" || got.Path != "/legacy/7" {
			t.Fatalf("server saw %+v, want GET /legacy/7", got)
		}
	})
	t.Run("BasePathPrefix", func(t *testing.T) {
		tr := newTransport(t, locator{base: fx.srv.URL + "/api/"}, secretStore{}, localrest.Options{})
		wantOK(t, tr.Dispatch(context.Background(), entry(t, `{"pathTemplate":"/x"}`), nil, plexus.DispatchContext{}))
		if got := s.last(t); got.Path != "/api/x" {
			t.Fatalf("server saw %q, want /api/x", got.Path)
		}
	})
}

func TestBadRoute(t *testing.T) {
	var s seen
	fx := newFixture(t, func(w http.ResponseWriter, r *http.Request) { s.record(r) })
	for _, tc := range []struct {
		name  string
		route json.RawMessage
		want  string
	}{
		{"Empty", nil, "has no route"},
		{"NotJSON", json.RawMessage(`{`), "invalid route"},
		{"NoDecl", json.RawMessage(`{"serviceHint":{"app":"svc"}}`), "no route object"},
		{"DeclNotObject", json.RawMessage(`{"route":"GET /x","serviceHint":{"app":"svc"}}`), "not a valid route object"},
		{"NoServiceHint", json.RawMessage(`{"route":{"pathTemplate":"/x"}}`), "needs a serviceHint"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := plexus.Entry{ID: "svc.thing.read", Route: tc.route}
			wantCode(t, fx.tr.Dispatch(context.Background(), e, nil, plexus.DispatchContext{}), plexus.CodeTransportError, tc.want)
		})
	}
	for _, tc := range []struct{ name, decl, want string }{
		{"NoTemplate", `{"method":"GET"}`, "route.pathTemplate is missing"},
		{"Relative", `{"pathTemplate":"x/{id}"}`, `must start with "/"`},
		{"AbsoluteURL", `{"pathTemplate":"http://evil.example/x"}`, `must start with "/"`},
		{"Unclosed", `{"pathTemplate":"/x/{id"}`, `without its "}"`},
		{"Unopened", `{"pathTemplate":"/x/id}"}`, `without its "{"`},
		{"BadName", `{"pathTemplate":"/x/{a b}"}`, "character that is not allowed"},
		{"EmptyName", `{"pathTemplate":"/x/{}"}`, "placeholder {}"},
		{"Fragment", `{"pathTemplate":"/x#frag"}`, "not allowed in a URL"},
		{"NonASCII", `{"pathTemplate":"/été"}`, "not allowed in a URL"},
		{"TRACE", `{"method":"TRACE","pathTemplate":"/x"}`, `route.method "TRACE"`},
		{"CONNECT", `{"method":"CONNECT","pathTemplate":"/x"}`, `route.method "CONNECT"`},
		{"HTTPS", `{"pathTemplate":"/x","scheme":"https"}`, "https is not supported"},
		{"FTP", `{"pathTemplate":"/x","scheme":"ftp"}`, `route.scheme "ftp"`},
		{"ZeroTimeout", `{"pathTemplate":"/x","timeoutMs":0}`, "route.timeoutMs"},
		{"FractionalTimeout", `{"pathTemplate":"/x","timeoutMs":1.5}`, "not a valid route object"},
		{"SecretNoName", `{"pathTemplate":"/x","secret":{"attach":"bearer"}}`, "route.secret.name is missing"},
		{"SecretUndeclared", `{"pathTemplate":"/x","secret":{"name":"other"}}`, `route.secret "other" is not declared`},
		{"SecretEnv", `{"pathTemplate":"/x","secret":{"name":"svc-key","attach":"env","as":"KEY"}}`, `attach "env" cannot be used`},
		{"SecretHeaderNoAs", `{"pathTemplate":"/x","secret":{"name":"svc-key","attach":"header"}}`, "must name the header"},
		{"SecretHeaderBadAs", `{"pathTemplate":"/x","secret":{"name":"svc-key","attach":"header","as":"X Key"}}`, "must name the header"},
		{"SecretQueryNoAs", `{"pathTemplate":"/x","secret":{"name":"svc-key","attach":"query"}}`, "must name the query parameter"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			wantCode(t, fx.call(tc.decl, nil), plexus.CodeTransportError, tc.want)
		})
	}
	if n := s.count(); n != 0 {
		t.Fatalf("the server saw %d requests for bad routes, want none", n)
	}
}
