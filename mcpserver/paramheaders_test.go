package mcpserver_test

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"testing"

	"github.com/plexus-gw/plexus"
	"github.com/plexus-gw/plexus/mcpserver"
)

// sessionlessPost sends one 2026-07-28 request to /mcp with the agent's
// bearer and the standard headers (Mcp-Method, Mcp-Name), plus extra, and
// answers the status and the body.
func (f *fixture) sessionlessPost(pat, method, name string, params map[string]any, extra map[string]string) (int, []byte) {
	f.t.Helper()
	if _, ok := params["_meta"]; !ok {
		params["_meta"] = sessionlessMeta(map[string]any{})
	}
	body, err := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 7, "method": method, "params": params})
	if err != nil {
		f.t.Fatal(err)
	}
	req, err := http.NewRequest(http.MethodPost, f.url, bytes.NewReader(body))
	if err != nil {
		f.t.Fatal(err)
	}
	for k, v := range map[string]string{"Content-Type": "application/json", "Accept": "application/json, text/event-stream",
		"Mcp-Protocol-Version": "2026-07-28", "Mcp-Method": method, "Mcp-Name": name, "Authorization": "Bearer " + pat} {
		req.Header.Set(k, v)
	}
	for k, v := range extra {
		req.Header.Set(k, v)
	}
	resp, err := (&http.Client{Transport: f.hosts}).Do(req)
	if err != nil {
		f.t.Fatal(err)
	}
	defer func() {
		if err := resp.Body.Close(); err != nil {
			f.t.Log(err)
		}
	}()
	out, err := io.ReadAll(resp.Body)
	if err != nil {
		f.t.Fatal(err)
	}
	return resp.StatusCode, out
}

// sessionlessMeta is the per-request _meta of a 2026-07-28 host that
// declares caps.
func sessionlessMeta(caps map[string]any) map[string]any {
	return map[string]any{
		"io.modelcontextprotocol/protocolVersion":    "2026-07-28",
		"io.modelcontextprotocol/clientInfo":         map[string]any{"name": "raw-host", "version": "1"},
		"io.modelcontextprotocol/clientCapabilities": caps,
	}
}

// TestParamHeadersChecked: a sessionless tools/call of a tool whose schema
// mirrors an argument into a header (SEP-2243, x-mcp-header) runs only
// when the Mcp-Param header and the argument agree; otherwise it is
// answered 400 with HeaderMismatch (-32020) and the server never sees it.
func TestParamHeadersChecked(t *testing.T) {
	f := newFixture(t, mcpserver.Options{})
	a := newAsker(t, nil, nil)
	f.ingest("asker", a.url)
	pat := f.agent("cursor", standing("mcp.asker.region", plexus.VerbRead))
	const tool = "mcp__asker__region"
	for _, tc := range []struct {
		name   string
		args   map[string]any
		header map[string]string
		runs   bool
	}{
		{"match", map[string]any{"region": "eu-west"}, map[string]string{"Mcp-Param-Region": "eu-west"}, true},
		{"base64 match", map[string]any{"region": "zürich"}, map[string]string{"Mcp-Param-Region": "=?base64?esO8cmljaA==?="}, true},
		{"absent both", map[string]any{"level": 3}, nil, true},
		{"header missing", map[string]any{"region": "eu-west"}, nil, false},
		{"mismatch", map[string]any{"region": "eu-west"}, map[string]string{"Mcp-Param-Region": "us-east"}, false},
		{"bad base64", map[string]any{"region": "Hello"}, map[string]string{"Mcp-Param-Region": "=?base64?SGVsbG8?="}, false},
		{"header for an absent argument", map[string]any{"level": 3}, map[string]string{"Mcp-Param-Region": "eu-west"}, false},
		// The tool is found by the standard headers; ones that misname the
		// body's method or tool are refused too.
		{"name header names another tool", map[string]any{"region": "eu-west"}, map[string]string{"Mcp-Name": "mcp__asker__ask", "Mcp-Param-Region": "eu-west"}, false},
		{"method header names another method", map[string]any{"region": "eu-west"}, map[string]string{"Mcp-Method": "tools/list", "Mcp-Param-Region": "eu-west"}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := a.regions.Load()
			status, body := f.sessionlessPost(pat, "tools/call", tool, map[string]any{"name": tool, "arguments": tc.args}, tc.header)
			ran := a.regions.Load() - before
			if tc.runs {
				if status != http.StatusOK || ran != 1 || !bytes.Contains(body, []byte("region=")) {
					t.Errorf("status %d, %d calls upstream, body %s; want the call made", status, ran, body)
				}
				return
			}
			var resp struct {
				ID    int `json:"id"`
				Error struct {
					Code int `json:"code"`
				} `json:"error"`
			}
			if err := json.Unmarshal(body, &resp); err != nil || status != http.StatusBadRequest || resp.Error.Code != -32020 || resp.ID != 7 {
				t.Errorf("status %d, body %s; want 400 with error -32020 for id 7", status, body)
			}
			if ran != 0 {
				t.Errorf("the server was called %d times for a call refused", ran)
			}
		})
	}
}
