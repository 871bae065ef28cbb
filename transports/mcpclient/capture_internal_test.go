package mcpclient

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/plexus-gw/plexus"
)

// TestSSETee feeds an event stream in pieces of every size from a byte
// at a time to the whole: the reader gets the stream byte for byte, and
// each response's result arrives whole, in the order of the stream.
func TestSSETee(t *testing.T) {
	stream := ": comment\r\n" +
		"event: message\nid: 1\ndata: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/progress\",\"params\":{\"progressToken\":\"tk\",\"progress\":1}}\n\n" +
		"data: {\"jsonrpc\":\"2.0\",\"id\":7,\n" +
		"data:  \"result\":{\"a\": [1, 2.50]}}\r\n\r\n" +
		"data: {\"jsonrpc\":\"2.0\",\"id\":\"s\",\"error\":{\"code\":1,\"message\":\"x\"}}\n\n" +
		"data: {\"jsonrpc\":\"2.0\",\"id\":8,\"result\":{\"long\":\"" + strings.Repeat("y", 300) + "\"}}\n\n" +
		"data: {\"unfinished\":"
	for chunk := 1; chunk <= len(stream); chunk++ {
		c := newCapture(nil)
		s7, ss := &slot{}, &slot{}
		c.sent(s7, mustID(t, 7.0))
		c.sent(ss, mustID(t, "s"))
		ss.set(json.RawMessage(`"before"`))
		var progress []float64
		defer c.route("tk", func(p plexus.InvokeProgress) { progress = append(progress, *p.Progress) })()
		tee := &sseTee{ReadCloser: io.NopCloser(strings.NewReader(stream)), c: c}
		var got []byte
		buf := make([]byte, chunk)
		for {
			n, err := tee.Read(buf)
			got = append(got, buf[:n]...)
			if err != nil {
				break
			}
		}
		if string(got) != stream {
			t.Fatalf("chunk %d: the reader got\n%q\nwant\n%q", chunk, got, stream)
		}
		if got := string(s7.result()); got != "{\"a\": [1, 2.50]}" {
			t.Errorf("chunk %d: result %q", chunk, got)
		}
		if ss.result() != nil {
			t.Errorf("chunk %d: an error response left result %s", chunk, ss.result())
		}
		if len(progress) != 1 {
			t.Errorf("chunk %d: progress %v", chunk, progress)
		}
	}
}

func TestJSONTee(t *testing.T) {
	c := newCapture(nil)
	s := &slot{}
	c.sent(s, mustID(t, 3.0))
	body := `[{"jsonrpc":"2.0","id":3,"result":{"k":  "v"}},{"jsonrpc":"2.0","id":4,"result":{}}]`
	if _, err := io.ReadAll(&jsonTee{ReadCloser: io.NopCloser(strings.NewReader(body)), c: c}); err != nil {
		t.Fatal(err)
	}
	if got := string(s.result()); got != `{"k":  "v"}` {
		t.Errorf("result %q", got)
	}
	c.done(s)
	if len(c.calls) != 0 {
		t.Errorf("calls left: %v", c.calls)
	}
}

// A response whose result the SDK's decoder would panic on reaches the
// SDK as an error response to its id, from either tee; any other body
// passes as it came.
func TestTeesRefuseUnreadable(t *testing.T) {
	const bad = `{"jsonrpc":"2.0","id":5,"result":{"messages":[],"inputRequests":{"a":null}}}`
	for _, tc := range []struct {
		name, body string
		refused    bool
	}{
		{"null input request", bad, true},
		{"escaped key", `{"jsonrpc":"2.0","id":5,"result":{"inputRequest\u0073":{"a":null}}}`, true},
		{"input request", `{"jsonrpc":"2.0","id":5,"result":{"inputRequests":{"a":{"method":"roots/list","params":{}}},"requestState":"s"}}`, false},
		{"plain", `{"jsonrpc":"2.0","id":5,"result":{"content":[]}}`, false},
		{"null elsewhere", `{"jsonrpc":"2.0","id":5,"result":{"x":{"inputRequests":{"a":null}}}}`, false},
		{"a request", `{"jsonrpc":"2.0","id":5,"method":"m","params":{"inputRequests":{"a":null}}}`, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			reads := map[string]func() ([]byte, error){
				"json": func() ([]byte, error) {
					return io.ReadAll(&jsonTee{ReadCloser: io.NopCloser(strings.NewReader(tc.body)), c: newCapture(nil)})
				},
				"sse": func() ([]byte, error) {
					return io.ReadAll(&sseTee{ReadCloser: io.NopCloser(strings.NewReader("event: message\ndata: " + tc.body + "\n\n")), c: newCapture(nil)})
				},
			}
			for kind, read := range reads {
				got, err := read()
				if err != nil {
					t.Fatalf("%s: %v", kind, err)
				}
				refused := !strings.Contains(string(got), tc.body)
				if refused != tc.refused || refused && !strings.Contains(string(got), `{"jsonrpc":"2.0","id":5,"error":{"code":-32603,"message":"the server's result has an input request that is null`) {
					t.Errorf("%s: the reader got %s; refused %v, want %v", kind, got, refused, tc.refused)
				}
			}
		})
	}
}

func mustID(t *testing.T, v any) jsonrpc.ID {
	t.Helper()
	id, err := jsonrpc.MakeID(v)
	if err != nil {
		t.Fatal(err)
	}
	return id
}

// TestHeadersOnlyHome: the configured headers go with requests for the
// server's own origin and with no other, whoever sends them.
func TestHeadersOnlyHome(t *testing.T) {
	var got []string
	base := roundTripFunc(func(r *http.Request) (*http.Response, error) {
		got = append(got, r.Header.Get("X-Api-Key"))
		return &http.Response{StatusCode: http.StatusNoContent, Body: http.NoBody, Request: r}, nil
	})
	rt := &rawRoundTripper{base: base, headers: map[string]string{"X-Api-Key": "k"}, home: originOf("https://mcp.example.com/mcp"), c: newCapture(nil)}
	for _, tc := range []struct {
		url, want string
	}{
		{"https://mcp.example.com/mcp", "k"},
		{"https://MCP.example.com:443/other", "k"},
		{"http://mcp.example.com/mcp", ""},
		{"https://mcp.example.com:8443/mcp", ""},
		{"https://evil.mcp.example.com/mcp", ""},
		{"https://example.com/mcp", ""},
	} {
		req, err := http.NewRequest(http.MethodGet, tc.url, nil)
		if err != nil {
			t.Fatal(err)
		}
		resp, err := rt.RoundTrip(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if g := got[len(got)-1]; g != tc.want {
			t.Errorf("%s: X-Api-Key %q, want %q", tc.url, g, tc.want)
		}
	}
}

// roundTripFunc is the network under a RoundTripper being tested.
type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }
