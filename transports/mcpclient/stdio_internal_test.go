package mcpclient

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"os/exec"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
)

// decodeMessage must read every message as the SDK's own decoder does.
func TestDecodeMessageAsTheSDK(t *testing.T) {
	for _, in := range decodeCases {
		t.Run(in[:min(len(in), 80)], func(t *testing.T) {
			if !json.Valid([]byte(in)) {
				t.Fatalf("%s: the decoder hands on valid JSON only", in)
			}
			decodesAsTheSDK(t, in)
		})
	}
}

// FuzzDecodeMessageAsTheSDK checks decodeMessage against the SDK's decoder
// on any valid JSON.
func FuzzDecodeMessageAsTheSDK(f *testing.F) {
	for _, in := range decodeCases {
		f.Add(in)
	}
	f.Fuzz(func(t *testing.T, in string) {
		if json.Valid([]byte(in)) {
			decodesAsTheSDK(t, in)
		}
	})
}

func decodesAsTheSDK(t *testing.T, in string) {
	t.Helper()
	want, werr := jsonrpc.DecodeMessage([]byte(in))
	got, gerr := decodeMessage([]byte(in))
	if (werr != nil) != (gerr != nil) {
		t.Fatalf("error %v, the SDK's %v", gerr, werr)
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("decoded %#v, the SDK %#v", got, want)
	}
}

var decodeCases = []string{
	`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"greet","arguments":{"name":"x"}}}`,
	`{"jsonrpc":"2.0","id":"s-1","method":"sampling/createMessage","params":{}}`,
	`{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":"plexus-1","progress":1}}`,
	`{"jsonrpc":"2.0","method":"notifications/initialized"}`,
	`{"jsonrpc":"2.0","id":2,"method":""}`,
	`{"jsonrpc":"2.0","id":3,"result":{"content":[{"type":"text","text":"hi"}],"isError":false}}`,
	`{"jsonrpc":"2.0","id":"7","result":{}}`,
	`{"jsonrpc":"2.0","id":4,"error":{"code":-32602,"message":"bad","data":{"x":[1,2]}}}`,
	`{"jsonrpc":"2.0","id":5,"result":null,"error":null}`,
	`{"jsonrpc":"2.0","id":6.0,"result":1}`,
	`{"id":8,"jsonrpc":"2.0","result":{"a":"\u00e9\n"}}`,
	` {"jsonrpc":"2.0","id":9,"result":{}} `,
	`{"jsonrpc":"2.0","result":{}}`,                              // a response needs an id
	`{"jsonrpc":"1.0","id":1,"result":{}}`,                       // wrong version
	`{"id":1,"result":{}}`,                                       // no version
	`{"jsonrpc":2,"id":1,"result":{}}`,                           // version not a string
	`{"jsonrpc":"2.0","id":true,"result":{}}`,                    // an id of the wrong type
	`{"jsonrpc":"2.0","id":1,"method":3}`,                        // method not a string
	`{"jsonrpc":"2.0","id":1,"error":"no"}`,                      // error not an object
	`{"JSONRPC":"2.0","ID":1,"Result":{}}`,                       // keys match exactly
	`[{"jsonrpc":"2.0","id":1,"result":{}}]`,                     // not one message
	`{"jsonrpc":"2.0","id":"a\"b\\u00e9","result":{"k":"}\"]"}}`, // escapes in an id, a result
	`{"jsonrpc":"2.0","id":10,"result":[1,{"a":[]}],"x":{"y":[{}]},"z":"w"}`,
	`{"jsonrpc":"2.0","id":11,"method":null}`,
	`{"jsonrpc":"2.0","id":-12e0,"result":{} }`,
	`{ "jsonrpc" : "2.0" , "id" : 13 , "result" : { } }`,
	`{"jsonrpc":"2.0","id":{},"result":{}}`,
	`{"jsonrpc":"2.0","id":[1],"result":{}}`,
	`{"jsonrpc":"2.0","\u0069d":14,"result":{}}`,
	`{"jsonrpc":"2.0","id":15,"result":{},"id":16}`,
	`{"jsonrpc":"2.0","id":17,"error":null,"result":"x"}`,
	`"2.0"`, `null`, `[]`, `{}`,
	// Past the SDK's 1000 levels: refused (and so the session ends).
	`{"jsonrpc":"2.0","id":"plexus-call-1","result":{"content":[],"structuredContent":{"a":` + deep + `}}}`,
	`{"jsonrpc":"2.0","id":18,"result":"` + deep + `"}`, // brackets in a string are not nesting
	`{"jsonrpc":"2\u002e0","id":19,"result":{}}`,        // an escaped version tag is 2.0
	`{"jsonrpc":"2\u002e1","id":20,"result":{}}`,
	`{"jsonrpc":"2.0","id":21,"error":{"Code":-32042,"MESSAGE":"x"}}`, // error keys match exactly
	`{"jsonrpc":"2.0","id":22,"error":{"code":-32042,"message":"x","code":-1}}`,
	`{"jsonrpc":"2.0","id":23,"error":{"code":"x","message":"x"}}`,
}

// dial starts sh -c script as a server over a stdioConn.
func dial(t *testing.T, script string, limit int) *stdioConn {
	t.Helper()
	tr := &stdioTransport{cmd: exec.Command("/bin/sh", "-c", script), grace: 100 * time.Millisecond, c: newCapture(slog.New(slog.DiscardHandler)), limit: limit}
	conn, err := tr.Connect(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := conn.Close(); err != nil {
			t.Logf("close: %v", err)
		}
	})
	return conn.(*stdioConn)
}

// readAll reads messages until an error, and returns their ids and the error.
func readAll(t *testing.T, c *stdioConn) ([]string, error) {
	t.Helper()
	var ids []string
	for {
		msg, err := c.Read(t.Context())
		if err != nil {
			return ids, err
		}
		switch m := msg.(type) {
		case *jsonrpc.Response:
			ids = append(ids, "r"+idString(m.ID))
		case *jsonrpc.Request:
			ids = append(ids, m.Method)
		}
	}
}

func idString(id jsonrpc.ID) string {
	s, _ := id.Raw().(string)
	if n, ok := id.Raw().(int64); ok {
		s = string(rune('0' + n))
	}
	return s
}

// The framing of the SDK's stdio connection is kept: whitespace between
// messages, a message over several lines, a batch handed on message by
// message, and an error for what follows a message on its line and at
// the end of the output.
func TestStdioConnFrames(t *testing.T) {
	for _, tc := range []struct {
		name, out string
		limit     int
		ids       []string
		err       string
	}{
		{name: "lines", out: `{"jsonrpc":"2.0","id":1,"result":{}}\n\n{"jsonrpc":"2.0","method":"m"}\r\n`, ids: []string{"r1", "m"}},
		{name: "over lines", out: `{"jsonrpc":"2.0",\n "id":2,\n "result":{}}\n`, ids: []string{"r2"}},
		{name: "batch", out: `[{"jsonrpc":"2.0","id":1,"result":{}},{"jsonrpc":"2.0","method":"a"},{"jsonrpc":"2.0","id":3,"result":{}}]\n{"jsonrpc":"2.0","method":"b"}\n`, ids: []string{"r1", "a", "r3", "b"}},
		{name: "empty batch", out: `[]\n`, err: "empty JSON-RPC batch"},
		{name: "trailing data", out: `{"jsonrpc":"2.0","id":1,"result":{}} {"jsonrpc":"2.0","id":2,"result":{}}\n`, err: "trailing data"},
		{name: "not a message", out: `{"jsonrpc":"2.0","id":1}x\n`, err: "trailing data"},
		{name: "bad version", out: `{"jsonrpc":"1.0","id":1,"result":{}}\n`, err: "version"},
		// The answer over the limit fails its call: TestStdioConnOversized.
		{name: "too large", out: `{"jsonrpc":"2.0","id":1,"result":{"t":"` + strings.Repeat("x", 200) + `"}}\n`, limit: 100, ids: []string{"r1"}},
		{name: "limit per message", out: strings.Repeat(`{"jsonrpc":"2.0","id":1,"result":{"t":"xxxxxxxxxxxxxxxxxxxx"}}\n`, 10), limit: 100,
			ids: []string{"r1", "r1", "r1", "r1", "r1", "r1", "r1", "r1", "r1", "r1"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := dial(t, `printf '`+tc.out+`'`, tc.limit) // printf reads \n and \r
			ids, err := readAll(t, c)
			if !reflect.DeepEqual(ids, tc.ids) {
				t.Errorf("read %q, want %q", ids, tc.ids)
			}
			switch {
			case tc.err == "":
				if err == nil || !strings.Contains(err.Error(), "EOF") {
					t.Errorf("err = %v, want EOF", err)
				}
			case err == nil || !strings.Contains(err.Error(), tc.err):
				t.Errorf("err = %v, want %q", err, tc.err)
			}
		})
	}
}

// Close ends a server that ignores its closed stdin (SIGTERM after the
// grace) and so ends a Read waiting on it; a write goes out as one line.
func TestStdioConnClose(t *testing.T) {
	c := dial(t, `read line; printf '%s\n' "$line"; exec sleep 60`, 0)
	if err := c.Write(t.Context(), &jsonrpc.Request{Method: "notifications/initialized"}); err != nil {
		t.Fatal(err)
	}
	msg, err := c.Read(t.Context())
	if req, ok := msg.(*jsonrpc.Request); err != nil || !ok || req.Method != "notifications/initialized" {
		t.Fatalf("read back %#v, %v", msg, err)
	}
	read := make(chan error, 1)
	go func() {
		_, err := c.Read(context.Background())
		read <- err
	}()
	var ee *exec.ExitError
	if err := c.Close(); !errors.As(err, &ee) {
		t.Fatalf("close = %v, want the server's exit (SIGTERM)", err)
	}
	select {
	case err := <-read:
		if err == nil {
			t.Fatal("a read after close returned a message")
		}
	case <-time.After(10 * time.Second):
		t.Fatal("close did not end the read")
	}
	if err := c.Close(); !errors.As(err, &ee) {
		t.Errorf("a second close = %v, want the same answer", err)
	}
}

// A message cut short (which the decoder never hands on) is an error or a
// message, never a panic.
func TestDecodeMessageTruncated(t *testing.T) {
	for _, in := range []string{
		`{"jsonrpc":"2.0","id":"a\"b","result":{"k":"}\"]","l":[1,{"m":null}]}}`,
		`{"jsonrpc":"2.0","id":1,"method":"m","params":{"a":"\\"}}`,
	} {
		for n := range len(in) {
			if _, err := decodeMessage([]byte(in[:n])); err == nil && n < 10 {
				t.Errorf("%q decoded", in[:n])
			}
		}
	}
}

type bufCloser struct{ bytes.Buffer }

func (*bufCloser) Close() error { return nil }

// A call Plexus writes itself is the message the SDK would write for it,
// on one line, with '<', '>' and '&' as they are.
func TestWriteCallAsTheSDK(t *testing.T) {
	var out bufCloser
	c := &stdioConn{stdin: &out, turn: make(chan struct{}, 1)}
	params := toolCallParams{Meta: tokenMeta{"plexus-9"}, Name: "gr\"eet", Arguments: map[string]any{"html": "<b>&</b>", "n": 1.5, "z": []any{nil, true}}}
	if err := c.writeCall(t.Context(), "plexus-call-7", "tools/call", params); err != nil {
		t.Fatal(err)
	}
	id, err := jsonrpc.MakeID("plexus-call-7")
	if err != nil {
		t.Fatal(err)
	}
	raw, err := json.Marshal(params)
	if err != nil {
		t.Fatal(err)
	}
	want, err := jsonrpc.EncodeMessage(&jsonrpc.Request{ID: id, Method: "tools/call", Params: raw})
	if err != nil {
		t.Fatal(err)
	}
	line := out.String()
	if strings.Count(line, "\n") != 1 || !strings.HasSuffix(line, "\n") || !strings.Contains(line, "<b>&</b>") {
		t.Fatalf("wrote %q: want one line, HTML unescaped", line)
	}
	var got, exp any
	if err := json.Unmarshal([]byte(line), &got); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(want, &exp); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, exp) {
		t.Errorf("wrote %s\nthe SDK %s", line, want)
	}
}
