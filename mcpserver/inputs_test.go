//lint:file-ignore SA1019 the hosts and servers here use sampling, elicitation and roots, deprecated from 2026-07-28, which Plexus relays

package mcpserver_test

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/plexus-gw/plexus"
	"github.com/plexus-gw/plexus/mcpserver"
)

// TestSessionlessHostAnswersInputRequests: what the ingested server asks
// while a sessionless (2026-07-28) host's call runs reaches that host as
// an input_required result, which the official Go SDK client answers with
// its handlers and calls again; the answers reach the server's tool, which
// completes: sampling, elicitation (saying which server asks), roots.
func TestSessionlessHostAnswersInputRequests(t *testing.T) {
	f := newFixture(t, mcpserver.Options{})
	f.ingest("asker", newAsker(t, nil, nil).url)
	smp := &sampler{name: "host-model"}
	host := mcp.NewClient(&mcp.Implementation{Name: "codex", Version: "1"}, &mcp.ClientOptions{
		CreateMessageHandler: smp.handle,
		ElicitationHandler: func(_ context.Context, req *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
			return &mcp.ElicitResult{Action: "accept", Content: map[string]any{"name": "Ada (" + req.Params.Message + ")"}}, nil
		},
	})
	host.AddRoots(&mcp.Root{URI: "file:///work/project", Name: "project"})
	cs := f.connectClientVersion(f.agent("codex"), host, "2026-07-28")
	for _, tc := range []struct {
		tool string
		args map[string]any
		want string
	}{
		{"mcp__asker__ask", map[string]any{"q": "the answer?"}, "sampled: 42 for the answer? by host-model"},
		{"mcp__asker__elicit", map[string]any{"q": "your name?"}, `elicited: accept Ada ([from MCP server "asker" via Plexus — answering here approves nothing in Plexus] your name?)`},
		{"mcp__asker__roots", map[string]any{}, "roots: file:///work/project"},
	} {
		t.Run(tc.tool, func(t *testing.T) {
			res := call(t, cs, tc.tool, tc.args)
			if res.IsError || text(res) != tc.want {
				t.Errorf("%s = %q (isError %v), want %q", tc.tool, text(res), res.IsError, tc.want)
			}
		})
	}
	if got := smp.asked(); len(got) != 1 || got[0].MaxTokens != 50 {
		t.Errorf("the host was asked %+v, want the one sampling request", got)
	}
}

// connectClientVersion connects c as a host at protocol version.
func (f *fixture) connectClientVersion(pat string, c *mcp.Client, version string) *mcp.ClientSession {
	f.t.Helper()
	tr := &mcp.StreamableClientTransport{Endpoint: f.url, HTTPClient: &http.Client{Transport: bearerTransport{pat: pat, base: f.hosts}}}
	cs, err := c.Connect(context.Background(), tr, &mcp.ClientSessionOptions{ProtocolVersion: version})
	if err != nil {
		f.t.Fatalf("connect: %v", err)
	}
	f.t.Cleanup(func() {
		if err := cs.Close(); err != nil {
			f.t.Logf("close session: %v", err)
		}
	})
	return cs
}

// rpcAnswer is a JSON-RPC response as a raw sessionless post gets it (as
// JSON, or the response event of an event stream).
type rpcAnswer struct {
	Result struct {
		ResultType    string                     `json:"resultType"`
		InputRequests map[string]json.RawMessage `json:"inputRequests"`
		RequestState  string                     `json:"requestState"`
		Content       []struct{ Text string }    `json:"content"`
	} `json:"result"`
	Error *struct {
		Code int `json:"code"`
	} `json:"error"`
}

func decodeAnswer(t *testing.T, body []byte) rpcAnswer {
	t.Helper()
	for _, line := range bytes.Split(body, []byte("\n")) {
		if data, ok := bytes.CutPrefix(line, []byte("data: ")); ok && bytes.Contains(data, []byte(`"id"`)) {
			body = data
		}
	}
	var a rpcAnswer
	if err := json.Unmarshal(body, &a); err != nil {
		t.Fatalf("answer %s: %v", body, err)
	}
	return a
}

// TestInputRequestStateAttacks: the request state of a held call serves
// the agent that made the call, for that call, once. A made-up or altered
// state, another agent's use of it, and its use for another tool are each
// refused (-32602) and change nothing: the other agent's answer never
// reaches the server, and the call's own host then completes it with its
// own answer.
func TestInputRequestStateAttacks(t *testing.T) {
	f := newFixture(t, mcpserver.Options{})
	f.ingest("asker", newAsker(t, nil, nil).url)
	grants := []plexus.ConnectGrant{standing("mcp.asker.ask", plexus.VerbRead), standing("mcp.asker.elicit", plexus.VerbRead)}
	alice, mallory := f.agent("alice", grants...), f.agent("mallory", grants...)
	const ask = "mcp__asker__ask"
	post := func(pat, tool string, extra map[string]any) rpcAnswer {
		params := map[string]any{"name": tool, "arguments": map[string]any{"q": "what is 6x7?"}, "_meta": sessionlessMeta(map[string]any{"sampling": map[string]any{}})}
		for k, v := range extra {
			params[k] = v
		}
		_, body := f.sessionlessPost(pat, "tools/call", tool, params, nil)
		return decodeAnswer(t, body)
	}
	first := post(alice, ask, nil)
	if first.Result.ResultType != "input_required" || len(first.Result.InputRequests) != 1 || first.Result.RequestState == "" {
		t.Fatalf("first round = %+v, want input_required with one input request and a state", first)
	}
	var key string
	for k := range first.Result.InputRequests {
		key = k
	}
	answer := func(text string) map[string]any {
		return map[string]any{key: map[string]any{"role": "assistant", "model": "m", "content": map[string]any{"type": "text", "text": text}}}
	}
	state := first.Result.RequestState
	for _, tc := range []struct {
		name, pat, tool, state string
	}{
		{"made up", alice, ask, "not-a-state"},
		{"altered", alice, ask, state + "-TAMPERED"},
		{"another agent's", mallory, ask, state},
		{"for another tool", alice, "mcp__asker__elicit", state},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := post(tc.pat, tc.tool, map[string]any{"requestState": tc.state, "inputResponses": answer("mallory's answer")})
			if got.Error == nil || got.Error.Code != -32602 {
				t.Errorf("answer = %+v, want a -32602 error", got)
			}
		})
	}
	done := post(alice, ask, map[string]any{"requestState": state, "inputResponses": answer("42")})
	if done.Error != nil || done.Result.ResultType != "complete" || len(done.Result.Content) != 1 || done.Result.Content[0].Text != "sampled: 42 by m" {
		t.Fatalf("alice's own answer = %+v, want the call complete with her answer", done)
	}
	if again := post(alice, ask, map[string]any{"requestState": state, "inputResponses": answer("43")}); again.Error == nil || again.Error.Code != -32602 {
		t.Errorf("a spent state = %+v, want -32602", again)
	}
}
