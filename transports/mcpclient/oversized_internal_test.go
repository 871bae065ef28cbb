package mcpclient

import (
	"cmp"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
)

// A message over the limit is skipped to the end of its line and the
// stream goes on: a response whose id is readable (before its result, as
// the Go SDK writes it, or last, as the TypeScript SDK does) fails its
// call alone; anything else fails nothing; a message over several lines
// still ends the connection.
func TestStdioConnOversized(t *testing.T) {
	big := strings.Repeat("x", 300) // the limit is 100
	next := `{"jsonrpc":"2.0","method":"next"}\n`
	for _, tc := range []struct {
		name, out string
		script    string   // the server instead of printf out
		ids       []string // "!" marks a response failed as too large
		err       string   // "": EOF
	}{
		{name: "id first", out: `{"jsonrpc":"2.0","id":1,"result":{"t":"` + big + `"}}\n` + next, ids: []string{"r1!", "next"}},
		{name: "id last", out: `{"result":{"t":"` + big + `"},"jsonrpc":"2.0","id":7}\r\n` + next, ids: []string{"r7!", "next"}},
		{name: "string id last", out: `{"result":{"t":"` + big + `\\\\"},"jsonrpc":"2.0","id":"a\\"b"}\n` + next, ids: []string{`ra"b!`, "next"}},
		{name: "error", out: `{"jsonrpc":"2.0","id":2,"error":{"code":1,"message":"` + big + `"}}\n` + next, ids: []string{"r2!", "next"}},
		{name: "after a small one", out: `{"jsonrpc":"2.0","method":"a"}\n  {"jsonrpc":"2.0","id":3,"result":{"t":"` + big + `"}}\n` + next, ids: []string{"a", "r3!", "next"}},
		{name: "two in a row", out: `{"jsonrpc":"2.0","id":1,"result":"` + big + `"}\n{"jsonrpc":"2.0","id":2,"result":"` + big + `"}\n` + next, ids: []string{"r1!", "r2!", "next"}},
		{name: "a long line", script: `printf '{"jsonrpc":"2.0","id":4,"result":"'; head -c 1000000 /dev/zero | tr '\0' y; printf '"}\n` + next + `'`, ids: []string{"r4!", "next"}},
		{name: "notification", out: `{"jsonrpc":"2.0","method":"notifications/message","params":{"data":"` + big + `"}}\n` + next, ids: []string{"next"}},
		{name: "id unreadable", out: `{"result":{"t":"` + big + `"},"id":1,"jsonrpc":"2.0"}\n` + next, ids: []string{"next"}},
		{name: "id cut short", out: `{"jsonrpc":"2.0","result":{},"id":"` + big + `"}\n` + next, ids: []string{"next"}},
		{name: "id in a string", out: `{"result":{"t":"` + big + `,\\"id\\":5}"}}\n` + next, ids: []string{"next"}},
		{name: "nested id", out: `{"result":{"t":"` + big + `","id":5}}\n` + next, ids: []string{"next"}},
		{name: "over lines", out: `{"jsonrpc":"2.0",\n"id":1,\n"result":"` + big + `"}\n` + next, err: "maximum message size"},
		// The id read from its start fails the call at once, before the
		// rest of its line is looked for.
		// A line is read to skip it up to maxDiscard (64 MiB), and no further.
		{name: "endless, id unknown", script: `printf '{"result":"'; yes x | tr -d '\n'`, err: "maximum message size"},
		// Spaces between messages do not count against the next: one
		// within the limit, after more spaces than the limit, is read.
		{name: "spaces before one within the limit", out: strings.Repeat(" \n\r\t", 40) + `{"jsonrpc":"2.0","id":3,"result":{"t":"` + strings.Repeat("x", 40) + `"}}\n` + next, ids: []string{"r3", "next"}},
		{name: "no end", out: `{"jsonrpc":"2.0","id":1,"result":"` + big, ids: []string{"r1!"}, err: "EOF"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			script := cmp.Or(tc.script, `printf '`+tc.out+`'`)
			c := dial(t, script, 100)
			ids, err := readIDs(t, c)
			if !reflect.DeepEqual(ids, tc.ids) {
				t.Errorf("read %q, want %q", ids, tc.ids)
			}
			if want := cmp.Or(tc.err, "EOF"); err == nil || !strings.Contains(err.Error(), want) {
				t.Errorf("err = %v, want %q", err, want)
			}
		})
	}
}

// A call Plexus sent itself fails when its answer is over the limit; the
// next answer reaches its own call.
func TestStdioConnOversizedOwnCall(t *testing.T) {
	c := dial(t, `read a; read b; printf '{"jsonrpc":"2.0","id":"plexus-call-1","result":"`+strings.Repeat("x", 300)+`"}\n{"jsonrpc":"2.0","id":"plexus-call-2","result":{}}\n'`, 100)
	answers := make(chan answer, 2)
	for range 2 {
		_, key, ch, err := c.calls.add()
		if err != nil {
			t.Fatal(err)
		}
		if err := c.writeCall(t.Context(), key, "tools/call", map[string]any{}); err != nil {
			t.Fatal(err)
		}
		go func() { answers <- <-ch }()
	}
	if msg, err := c.Read(t.Context()); err == nil {
		t.Fatalf("read %#v, want the end of the output: both answers are Plexus's", msg)
	}
	first, second := <-answers, <-answers
	if first.err == nil {
		first, second = second, first
	}
	if !errors.Is(first.err, errFrameTooLarge) || second.err != nil || string(second.result) != "{}" {
		t.Errorf("answers %+v and %+v, want one too large and one {}", first, second)
	}
}

// A request of the server's over the limit is answered with an error, so
// that the server does not wait.
func TestStdioConnOversizedRequest(t *testing.T) {
	got := filepath.Join(t.TempDir(), "answer")
	c := dial(t, `printf '{"jsonrpc":"2.0","id":"s1","method":"sampling/createMessage","params":{"t":"`+strings.Repeat("x", 300)+`"}}\n'; read line; printf '%s' "$line" > `+got+`; printf '{"jsonrpc":"2.0","method":"next"}\n'`, 100)
	msg, err := c.Read(t.Context())
	if req, ok := msg.(*jsonrpc.Request); err != nil || !ok || req.Method != "next" {
		t.Fatalf("read %#v, %v; want the message after the answer", msg, err)
	}
	b, err := os.ReadFile(got)
	if err != nil {
		t.Fatal(err)
	}
	if want := `{"jsonrpc":"2.0","id":"s1","error":{"code":-32600,"message":"a JSON-RPC message from the server exceeded the maximum message size"}}`; string(b) != want {
		t.Errorf("the server was answered %s, want %s", b, want)
	}
}

// tailID reads an id written last, and nothing else.
func TestTailID(t *testing.T) {
	for _, tc := range []struct {
		tail string
		want any // nil: none
	}{
		{`xx"},"jsonrpc":"2.0","id":12}`, int64(12)},
		{`xx"},"jsonrpc":"2.0", "id" : "a" } ` + "\r", "a"},
		{`xx"},"id":"a\"b"}`, `a"b`},
		{`xx\\"},"id":"a\\"}`, `a\`},
		{`xx"},"id":-3}`, int64(-3)},
		{`{"id":5}`, int64(5)},
		{`xx\",\"id\":5}"}`, nil}, // inside a string
		{`xx\",\"id\":\"5"}`, nil},
		{`xx"},"id":5}}`, nil}, // a nested object's
		{`xx"},"xid":5}`, nil},
		{`xx"},"id":true}`, nil},
		{`xx"},"id":null}`, nil},
		{`xx"},"id":5`, nil},
		{`"id":5}`, nil},
		{``, nil},
	} {
		id, ok := tailID([]byte(tc.tail))
		if ok != (tc.want != nil) || ok && id.Raw() != tc.want {
			t.Errorf("tailID(%s) = %v, %v; want %v", tc.tail, id.Raw(), ok, tc.want)
		}
	}
}

// What is read of a message cut anywhere is what it says, or nothing;
// never another id, never a panic.
func TestReadHeadCutAnywhere(t *testing.T) {
	for _, tc := range []struct {
		msg      string
		id       any
		response bool
	}{
		{`{"jsonrpc":"2.0","id":"a\"b","result":{"k":"}\",\"id\":9","l":[1,{"id":8}]}}`, `a"b`, true},
		{` { "id" : 12 , "error" : {"code":1,"message":"\\"}}`, int64(12), true},
		{`{"result":{"id":3},"jsonrpc":"2.0","id":4}`, int64(4), true},
		{`{"jsonrpc":"2.0","id":5,"method":"m","params":{"id":6}}`, int64(5), false},
	} {
		for n := range len(tc.msg) + 1 {
			env := readHead([]byte(tc.msg[:n]))
			if env.hasID && env.id.Raw() != tc.id {
				t.Errorf("readHead(%s) read id %v, want %v or none", tc.msg[:n], env.id.Raw(), tc.id)
			}
			if env.response && !tc.response || env.request && tc.response {
				t.Errorf("readHead(%s) = %+v: a response is %v", tc.msg[:n], env, tc.response)
			}
			if id, ok := tailID([]byte(tc.msg[n:])); ok && id.Raw() != tc.id {
				t.Errorf("tailID(%s) read id %v, want %v or none", tc.msg[n:], id.Raw(), tc.id)
			}
		}
	}
}

// readIDs reads messages until an error and returns them as
// TestStdioConnOversized names them ("r<id>", "!" when failed as too large,
// or the method), and the error.
func readIDs(t *testing.T, c *stdioConn) ([]string, error) {
	t.Helper()
	var ids []string
	for {
		msg, err := c.Read(t.Context())
		if err != nil {
			return ids, err
		}
		switch m := msg.(type) {
		case *jsonrpc.Response:
			id := "r" + fmt.Sprint(m.ID.Raw())
			if errors.Is(m.Error, errFrameTooLarge) {
				id += "!"
			}
			ids = append(ids, id)
		case *jsonrpc.Request:
			ids = append(ids, m.Method)
		}
	}
}
