package http

import (
	"bytes"
	"encoding/json"
	"math"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/plexus-gw/plexus"
)

// TestEncodeInvokeMatchesEncodeJSON: the /invoke answer is the same bytes
// whether its fields are appended by hand or the whole InvokeResponse goes
// through encoding/json (HTML characters unescaped, non-ASCII as is).
func TestEncodeInvokeMatchesEncodeJSON(t *testing.T) {
	type portalFile struct {
		Path    string `json:"path"`
		Content string `json:"content"`
		Size    int    `json:"size"`
	}
	html := "<script>alert('x & y')</script>"
	tests := map[string]plexus.InvokeResponse{
		"echo":             {ID: "test.echo.read", OK: true, Output: map[string]any{"msg": "hello, plexus", "n": 42.0}, AuditID: "act_01J"},
		"html output":      {ID: "x<y>&z", OK: true, Output: map[string]any{"<k>": html, "&": []any{">", nil, true}}, AuditID: "act_<&>"},
		"non-ASCII output": {ID: "fs.läsa", OK: true, Output: map[string]any{"name": "Zoë 日本 😀", "sep": "a\u2028b\u2029", "bad": "\xff\xfe", "ctl": "\x00\t\x7f"}, AuditID: "a"},
		"numbers":          {ID: "n", OK: true, Output: []any{0.0, -0.5, 1e21, 1e-7, 123456789.0, math.Copysign(0, -1)}, AuditID: "a"},
		"string output":    {ID: "s", OK: true, Output: "just <text> & more", AuditID: "a"},
		"bool output":      {ID: "b", OK: true, Output: false, AuditID: "a"},
		"nil map output":   {ID: "m", OK: true, Output: map[string]any(nil), AuditID: "a"},
		"empty output":     {ID: "e", OK: true, Output: map[string]any{}, AuditID: "a"},
		"struct output":    {ID: "fs.read", OK: true, Output: portalFile{Path: "/a<b>", Content: "x & y", Size: 3}, AuditID: "a"},
		"int output":       {ID: "i", OK: true, Output: map[string]any{"n": 42}, AuditID: "a"},
		"number output":    {ID: "i", OK: true, Output: json.Number("1.50"), AuditID: "a"},
		"no output":        {ID: "none", OK: true, AuditID: "a"},
		"mcp result":       {ID: "mcp.s.t", OK: true, MCPResult: json.RawMessage("{ \"content\" : [ {\"type\":\"text\", \"text\":\"<b>&amp; é \\u003c\"} ],\n \"isError\": false }"), AuditID: "a"},
		"mcp with output":  {ID: "mcp.s.t", OK: true, Output: map[string]any{"structured": 1.0}, MCPResult: json.RawMessage(`{"content":[]}`), AuditID: "a"},
		"mcp failure":      {ID: "mcp.s.t", OK: false, MCPResult: json.RawMessage(`{"isError":true}`), Error: &plexus.ErrorBody{Code: plexus.CodeMCPToolError, Message: "tool <failed> & said so"}, AuditID: "a"},
		"denial":           {ID: "x", OK: false, Error: &plexus.ErrorBody{Code: plexus.CodeRateLimited, Message: "too many calls from agent_<1>", CapabilityID: "x", Detail: map[string]any{"retryAfterSeconds": 1.5, "note": "é & <"}}, AuditID: ""},
		"schema denial":    {ID: "x", OK: false, Error: &plexus.ErrorBody{Code: plexus.CodeSchemaValidationFailed, Message: `field "a" must be string`, Detail: map[string]any{"problems": []string{"a", "b"}}}, AuditID: "act_1"},
		"grant required":   {ID: "x", OK: false, Error: &plexus.ErrorBody{Code: plexus.CodeGrantRequired, Message: "m", PendingID: "p", GrantStatusURL: "/grants/status?id=p&x=1", SessionHeader: plexus.SessionHeader}, AuditID: "act_2"},
		"empty":            {},
	}
	for name, resp := range tests {
		var want, got bytes.Buffer
		if err := encodeJSON(&want, resp); err != nil {
			t.Fatalf("%s: encodeJSON: %v", name, err)
		}
		got.WriteString("stale bytes from the pool") // encodeInvoke is handed a reset buffer; this checks it appends
		got.Reset()
		if err := encodeInvoke(&got, &resp); err != nil {
			t.Fatalf("%s: encodeInvoke: %v", name, err)
		}
		if !bytes.Equal(got.Bytes(), want.Bytes()) {
			t.Errorf("%s:\n got %s\nwant %s", name, got.Bytes(), want.Bytes())
		}
	}
}

// TestEncodeInvokeRefusesWhatEncodeJSONRefuses: an answer encoding/json
// cannot encode is an error here too (writeEncoded turns it into a 500).
func TestEncodeInvokeRefusesWhatEncodeJSONRefuses(t *testing.T) {
	tests := map[string]plexus.InvokeResponse{
		"bad mcp result": {ID: "m", OK: true, MCPResult: json.RawMessage(`{"content":`)},
		"NaN output":     {ID: "n", OK: true, Output: map[string]any{"x": math.NaN()}},
		"func output":    {ID: "f", OK: true, Output: func() {}},
	}
	for name, resp := range tests {
		var buf bytes.Buffer
		if encodeJSON(&buf, resp) == nil {
			t.Fatalf("%s: encodeJSON accepted it; the case is wrong", name)
		}
		buf.Reset()
		if err := encodeInvoke(&buf, &resp); err == nil {
			t.Errorf("%s: encodeInvoke wrote %s, want an error", name, buf.Bytes())
		}
	}
}

// oldInvokeRequest is how handleInvoke read a body before decodeInvoke and
// invokeRequest: readBody's reading, json.Unmarshal into an InvokeRequest,
// and the id echoed when it at least is readable.
func oldInvokeRequest(data []byte) (plexus.InvokeRequest, error) {
	var req plexus.InvokeRequest
	raw, err := oneValue(data)
	if err == nil && raw == nil {
		err = errEmptyBody
	}
	if err == nil {
		if err = json.Unmarshal(raw, &req); err != nil {
			var idOnly struct {
				ID string `json:"id"`
			}
			if json.Unmarshal(raw, &idOnly) == nil {
				req.ID = idOnly.ID
			}
		}
	}
	return req, err
}

// TestInvokeRequestMatchesOldReading: /invoke bodies decode to the same
// request, or fail with the same message and echoed id, as they did when
// the body was validated, then decoded by json.Unmarshal into an
// InvokeRequest.
func TestInvokeRequestMatchesOldReading(t *testing.T) {
	bodies := []string{
		`{"id":"test.echo.read","input":{"msg":"hello, plexus","n":42}}`,
		" \n\t{\"id\":\"x\",\"input\":{\"a\":{\"b\":[1,\"<&>\",null,true]},\"c\":1e21,\"d\":-0.5},\"idempotencyKey\":\"k1\"}\r\n",
		`{"id":"x","input":null}`,
		`{"id":"x"}`,
		`{"ID":"upper","Input":{"a":1},"IDEMPOTENCYKEY":"k"}`,
		`{"id":"x","input":{},"extra":{"ignored":true}}`,
		`{"id":"x","input":{"s":"\u00e9\u2028\ud800"}}`,
		`{"id":"x","input":"a string"}`,
		`{"id":"x","input":[1,2]}`,
		`{"id":"x","input":42}`,
		`{"id":"x","input":true}`,
		`{"input":"wrong","id":7}`,
		`{"id":7,"input":"wrong"}`,
		`{"id":["x"]}`,
		`{"id":"x","idempotencyKey":5}`,
		`{"input":{}}`,
		`[1,2]`,
		`"just a string"`,
		`42`,
		`null`,
		` null `,
		``,
		"  \n",
		`{"id":"x","input":{"a":}}`,
		`{"id":"x",}`,
		`{"id":"x","input":{"a":1}`,
		`{"id":"x"} {"id":"y"}`,
		`{"id":"x"}garbage`,
		`{"id":"x"}]`,
		"\xff\xfe",
		`{"id":"x\ud800","input":{"k\u0000":"v"}}`,
		`{"id":"x","input":{"a":1,"b":{"c":1}},"input":{"b":{"d":2},"e":3}}`,
		`{"id":"x","input":{"a":1},"INPUT":null,"Input":{"b":2}}`,
		`{"id":"x","input":{"a":1},"input":null}`,
		`{"id":"x","input":{"a":1},"input":7}`,
		`{"id":"x","input":7,"input":{"a":1}}`,
		`{"id":"x","input":{"a":1},"id":"y"}`,
		`{"id":"x","input":{"a":1},"\u0069nput":{"b":2}}`,
		`{"id":"x","input":{"a":"\n"},"iNpUt":{"b":2}}`,
		`{"id":"x","input":{"a":"input"}}`,
		`{"id":"x","input":{"input":{"input":1}}}`,
		`{"id":"x","\u0069nput":{"a":1}}`,
		`{"id":"x","input":{"a":1},"INPUT ":{"b":2}}`,
	}
	for _, body := range bodies {
		want, wantErr := oldInvokeRequest([]byte(body))
		got, err := invokeRequest([]byte(body))
		if (err == nil) != (wantErr == nil) {
			t.Errorf("%q: error %v, want %v", body, err, wantErr)
			continue
		}
		if err != nil {
			if g, w := bodyMessage(err), bodyMessage(wantErr); g != w {
				t.Errorf("%q: message %q, want %q", body, g, w)
			}
			if got.ID != want.ID {
				t.Errorf("%q: echoed id %q, want %q", body, got.ID, want.ID)
			}
			continue
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("%q: request differs (-want +got):\n%s", body, diff)
		}
	}
}

// FuzzInvokeRequest: any body reads as it did before, request or message.
func FuzzInvokeRequest(f *testing.F) {
	for _, s := range []string{`{"id":"x","input":{"a":[1,"b"]}}`, `{"id":"x","input":{"a":1},"Input":{"b":2}}`, `{"id":7}`, `{"id":"x","input":5}`, `null`, `{"id":"x"} {}`, ""} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		want, wantErr := oldInvokeRequest(body)
		got, err := invokeRequest(body)
		switch {
		case (err == nil) != (wantErr == nil):
			t.Fatalf("%q: error %v, want %v", body, err, wantErr)
		case err != nil && (bodyMessage(err) != bodyMessage(wantErr) || got.ID != want.ID):
			t.Fatalf("%q: %q (id %q), want %q (id %q)", body, bodyMessage(err), got.ID, bodyMessage(wantErr), want.ID)
		case err == nil && !cmp.Equal(want, got):
			t.Fatalf("%q: request differs: %s", body, cmp.Diff(want, got))
		}
	})
}

// TestBadInputFailsBeforeItIsBuilt: a body whose input is a large array (or
// another non-object) is refused at the input's first byte, as the old
// reading did, not after decoding the whole value into an any tree and then
// again for the error message (review 9, M1: a 1 MiB body of this shape cost
// about a million allocations before any credential check). Allocations
// are counted, not timed.
func TestBadInputFailsBeforeItIsBuilt(t *testing.T) {
	elems := strings.Repeat("[0,{\"a\":1}],", 20000)
	for _, tc := range []struct{ name, body string }{
		{"array", `{"id":"x","input":[` + elems + `0]}`},
		{"array first", `{"input":[` + elems + `0],"id":"x"}`},
		{"string", `{"id":"x","input":"` + strings.Repeat("s", 200000) + `"}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			body := []byte(tc.body)
			want, wantErr := oldInvokeRequest(body)
			allocs := testing.AllocsPerRun(5, func() {
				got, err := invokeRequest(body)
				if err == nil || wantErr == nil || err.Error() != wantErr.Error() || got.ID != want.ID {
					t.Fatalf("got %+v, %v; want %+v, %v", got, err, want, wantErr)
				}
			})
			if allocs > 200 {
				t.Errorf("%.0f allocations to refuse a %d-byte body: the input was built before its type was checked", allocs, len(body))
			}
		})
	}
}
