package mcpclient

import (
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// toolResult (the stdio pass-through) must answer what [Client.result]
// answers on the SDK's decoding of the same bytes, and refuse, with the
// error the SDK's call gave, what the SDK refuses to decode: mcpserver
// hands a passed result to a 2025-11-25 host as it is. plain says whether
// the result is read in place (the common results must be).
func TestToolResultAsTheSDK(t *testing.T) {
	for _, tc := range toolResultCases {
		t.Run(tc.name, func(t *testing.T) {
			if _, plain := readPlain(json.RawMessage(tc.raw)); plain != tc.plain {
				t.Errorf("read in place: %v, want %v", plain, tc.plain)
			}
			asTheSDK(t, json.RawMessage(tc.raw))
		})
	}
}

// FuzzToolResultAsTheSDK checks toolResult against the SDK's decoding on
// any valid JSON.
func FuzzToolResultAsTheSDK(f *testing.F) {
	for _, tc := range toolResultCases {
		f.Add(tc.raw)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		if json.Valid([]byte(raw)) { // the stdio reader hands on valid JSON only
			asTheSDK(t, json.RawMessage(raw))
		}
	})
}

var deep = strings.Repeat("[", 1001) + strings.Repeat("]", 1001)

var toolResultCases = []struct {
	name, raw string
	plain     bool
}{
	{"text", `{"content":[{"type":"text","text":"hi"}]}`, true},
	{"text and isError false", ` {"content":[{"type":"text","text":"hi"},{"text":"b","type":"text"}],"isError":false} `, true},
	{"tool error", `{"content":[{"type":"text","text":"  "},{"type":"text","text":"boom"}],"isError":true}`, true},
	{"tool error escaped", `{"isError":true,"content":[{"type":"text","text":"\u00fc \"q\"\n"}]}`, true},
	{"tool error bad UTF-8", "{\"content\":[{\"type\":\"text\",\"text\":\"\xff\xfe ok\"}],\"isError\":true}", true},
	{"tool error no text", `{"content":[],"isError":true}`, true},
	{"structured", `{"content":[{"type":"text","text":"{}"}],"structuredContent":{"n":[1,-2.5,true,false,null,"1e400"]}}`, true},
	{"structured null", `{"content":[],"structuredContent":null}`, true},
	{"empty", `{}`, true},
	{"isError spelt otherwise", `{"content":[{"type":"text","text":"boom"}],"IsError":true}`, false},
	{"isError shadowed", `{"content":[{"type":"text","text":"boom"}],"isError":true,"ISERROR":false}`, false},
	{"isError repeated", `{"content":[],"isError":true,"isError":false}`, false},
	{"isError repeated true last", `{"content":[{"type":"text","text":"x"}],"isError":false,"isError":true}`, false},
	{"isError null", `{"content":[],"isError":null}`, false},
	{"isError not a boolean", `{"content":[],"isError":"yes"}`, false},
	{"structuredContent spelt otherwise", `{"content":[],"structuredContent":{"a":1},"STRUCTUREDCONTENT":{"b":2}}`, false},
	{"structuredContent repeated", `{"content":[],"structuredContent":{"a":1},"structuredContent":{"b":2}}`, false},
	{"structuredContent past a float64", `{"content":[],"structuredContent":{"a":[1e400]}}`, false},
	{"structuredContent with an exponent", `{"content":[],"structuredContent":2.5E+3}`, false},
	{"image", `{"content":[{"type":"image","mimeType":"image/png","data":"aGk="}]}`, false},
	{"image data not base64", `{"content":[{"type":"image","mimeType":"image/png","data":"<script>not base64!"}]}`, false},
	{"audio data not base64", `{"content":[{"type":"audio","mimeType":"audio/wav","data":"%%%"}]}`, false},
	{"nested content of no known type", `{"content":[{"type":"tool_result","toolUseId":"x","content":[{"type":"x-hologram","text":"b"}]}]}`, false},
	{"type spelt otherwise", `{"content":[{"type":"x-hologram","Type":"text","text":"b"}]}`, false},
	{"type repeated", `{"content":[{"type":"x-hologram","text":"b","type":"text"}]}`, false},
	{"unknown type", `{"content":[{"type":"x-hologram","text":"b"}]}`, false},
	{"text with other members", `{"content":[{"type":"text","text":"a","x-extra":1}],"x-result-extra":{}}`, false},
	{"text with data not bytes", `{"content":[{"type":"text","text":"a","data":1}]}`, false},
	{"text not a string", `{"content":[{"type":"text","text":1}]}`, false},
	{"text absent", `{"content":[{"type":"text"}]}`, false},
	{"block null", `{"content":[null]}`, false},
	{"content null", `{"content":null}`, false},
	{"content not an array", `{"content":{"type":"text","text":"a"}}`, false},
	{"_meta", `{"content":[],"_meta":{"k":1}}`, false},
	{"_meta not an object", `{"content":[],"_meta":"x"}`, false},
	{"resource not an object", `{"content":[{"type":"resource","resource":"file:///etc/passwd"}]}`, false},
	{"escaped key", `{"content":[],"\u0069sError":true}`, true}, // the SDK unescapes keys too
	{"nested past 1000", `{"content":[],"structuredContent":{"a":` + deep + `}}`, false},
	{"not an object", `["not", "a", "result"]`, false},
}

// asTheSDK checks toolResult of raw against [Client.result] of the SDK's
// decoding of raw.
func asTheSDK(t *testing.T, raw json.RawMessage) {
	t.Helper()
	c := &Client{}
	var typed mcp.CallToolResult
	serr := json.Unmarshal(raw, &typed) // its UnmarshalJSON, as the SDK's client decodes it
	got, gerr := c.toolResult(raw)
	if (serr != nil) != (gerr != nil) {
		t.Fatalf("pass-through refused: %v; the SDK refused: %v", gerr, serr)
	}
	if serr != nil {
		if want := fmt.Sprintf("calling %q: %v", "tools/call", serr); gerr.Error() != want {
			t.Errorf("error %q, the SDK's call %q", gerr, want)
		}
		return
	}
	want := c.result(route{Primitive: PrimitiveTool}, raw, &typed)
	if got.OK != want.OK || !reflect.DeepEqual(got.Error, want.Error) || string(got.MCPResult) != string(want.MCPResult) {
		t.Errorf("pass-through OK=%v err=%v result=%s; the SDK path OK=%v err=%v result=%s", got.OK, got.Error, got.MCPResult, want.OK, want.Error, want.MCPResult)
	}
	if !reflect.DeepEqual(got.Data, want.Data) {
		t.Errorf("data %v, the SDK path %v", got.Data, want.Data)
	}
}

// The SDK path reads structuredContent with its exact key, the last if
// repeated, as the SDK decoder and a host do.
func TestResultStructuredContentExactKey(t *testing.T) {
	c := &Client{}
	for _, tc := range []struct{ raw, want string }{
		{`{"content":[],"structuredContent":{"a":1},"STRUCTUREDCONTENT":{"b":2}}`, `{"a":1}`},
		{`{"content":[],"STRUCTUREDCONTENT":{"b":2},"structuredContent":{"a":1}}`, `{"a":1}`},
		{`{"content":[],"structuredContent":{"a":1},"structuredContent":{"b":2}}`, `{"b":2}`},
	} {
		var typed mcp.CallToolResult
		if err := json.Unmarshal([]byte(tc.raw), &typed); err != nil {
			t.Fatal(err)
		}
		r := c.result(route{Primitive: PrimitiveTool}, json.RawMessage(tc.raw), &typed)
		if got, _ := r.Data.(json.RawMessage); string(got) != tc.want {
			t.Errorf("%s: data %s, want %s", tc.raw, got, tc.want)
		}
	}
}
