package mcpclient

import (
	"encoding/json"
	"io"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/plexus-gw/plexus"
)

// TestSSETee feeds an event stream a byte at a time and in one piece: each
// response's result arrives whole, in the order of the stream.
func TestSSETee(t *testing.T) {
	stream := ": comment\r\n" +
		"event: message\nid: 1\ndata: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/progress\",\"params\":{\"progressToken\":\"tk\",\"progress\":1}}\n\n" +
		"data: {\"jsonrpc\":\"2.0\",\"id\":7,\n" +
		"data:  \"result\":{\"a\": [1, 2.50]}}\r\n\r\n" +
		"data: {\"jsonrpc\":\"2.0\",\"id\":\"s\",\"error\":{\"code\":1,\"message\":\"x\"}}\n\n"
	for _, chunk := range []int{1, 7, len(stream)} {
		c := newCapture(nil)
		s7, ss := &slot{}, &slot{}
		c.sent(s7, mustID(t, 7.0))
		c.sent(ss, mustID(t, "s"))
		ss.set(json.RawMessage(`"before"`))
		var progress []float64
		defer c.route("tk", func(p plexus.InvokeProgress) { progress = append(progress, *p.Progress) })()
		tee := &sseTee{ReadCloser: io.NopCloser(strings.NewReader(stream)), c: c}
		buf := make([]byte, chunk)
		for {
			if _, err := tee.Read(buf); err != nil {
				break
			}
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

func mustID(t *testing.T, v any) jsonrpc.ID {
	t.Helper()
	id, err := jsonrpc.MakeID(v)
	if err != nil {
		t.Fatal(err)
	}
	return id
}
