package mcpclient_test

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
)

// The hand-written server (the test binary run with MCPCLIENT_TEST_SERVER=raw)
// answers from literal bytes, so that a test can check that they reach
// mcp.raw and mcpResult untouched, including what the SDK does not model.
// It pages every list, appends what it observes to the events file, and
// answers:
//
//	tools/call echo        a result with unknown fields; the text is the arguments
//	tools/call progress    two notifications/progress for the call's token, then a result
//	tools/call slow        nothing: it waits for notifications/cancelled (noted)
//	tools/call fail        isError true
//	tools/call rpcerror    a JSON-RPC error
//	tools/call mutate      changes weird's description, then notifications/tools/list_changed
//	tools/call structured  structuredContent

const (
	rawToolPage     = 10
	rawResourcePage = 10
	rawPromptPage   = 5
)

// weirdTool is the tool with fields the SDK does not know, odd key order,
// whitespace (spaces and tabs: NDJSON forbids newlines) and escapes; %d is
// the description's version.
const weirdTool = `{ "x-vendor" : {"nested": [1, 2.50, "ü"]},	"name":"weird",  "inputSchema":{"type":"object","properties":{"q":{"type":"string","esc":"\u00fc\/"}}} , "description":"Weird tool v%d", "_meta":{"k":1}}`

func rawTools(version int) []string {
	tools := []string{
		fmt.Sprintf(weirdTool, version),
		`{"name":"echo","title":"Echo","inputSchema":{"type":"object"},"annotations":{"readOnlyHint":true}}`,
		`{"name":"progress","inputSchema":{"type":"object"}}`,
		`{"name":"slow","inputSchema":{"type":"object"}}`,
		`{"name":"fail","inputSchema":{"type":"object"}}`,
		`{"name":"rpcerror","inputSchema":{"type":"object"}}`,
		`{"name":"mutate","inputSchema":{"type":"object"},"annotations":{"destructiveHint":true}}`,
		`{"name":"structured","inputSchema":{"type":"object"},"outputSchema":{"type":"object","properties":{"n":{"type":"number"}}}}`,
		`{"name":"get weather","inputSchema":{"type":"object"}}`,
		`{"name":"ü-tool","inputSchema":{"type":"object"}}`,
		`{"name":"oddcontent","inputSchema":{"type":"object"}}`,
		`{"name":"notresult","inputSchema":{"type":"object"}}`,
		`{"name":"badimage","inputSchema":{"type":"object"}}`,
		`{"name":"shadowerr","inputSchema":{"type":"object"}}`,
		`{"name":"speltok","inputSchema":{"type":"object"}}`,
	}
	for i := len(tools); i < 25; i++ {
		tools = append(tools, fmt.Sprintf(`{"name":"t%02d","inputSchema":{"type":"object"}}`, i))
	}
	return tools
}

func rawResources() []string {
	var rs []string
	for i := range 21 {
		rs = append(rs, fmt.Sprintf(`{"uri":"file:///r/%02d","name":"r%02d","mimeType":"text/plain"}`, i, i))
	}
	return append(rs, `{"uri":"file:///dup/a","name":"dup"}`, `{"uri":"file:///dup/b","name":"dup"}`)
}

func rawPrompts() []string {
	ps := []string{`{"name":"greet","description":"Greets.","arguments":[{"name":"who","required":true},{"name":"tone","description":"how"}]}`}
	for i := 1; i < 12; i++ {
		ps = append(ps, fmt.Sprintf(`{"name":"p%02d"}`, i))
	}
	return ps
}

const rawTemplates = `[{"uriTemplate":"file:///notes/{name}.md","name":"note"},{"uriTemplate":"file:///q{?x}","name":"query"}]`

// page returns the items of a list from cursor on, and the next cursor
// ("" at the end) as a JSON member.
func page(items []string, cursor string, size int) (string, string) {
	start, _ := strconv.Atoi(strings.TrimPrefix(cursor, "p"))
	end := min(start+size, len(items))
	next := ""
	if end < len(items) {
		next = fmt.Sprintf(`,"nextCursor":"p%d"`, end)
	}
	return "[" + strings.Join(items[start:end], ",") + "]", next
}

func rawServer(in io.Reader, out io.Writer, events string) {
	if tok := os.Getenv("MCPCLIENT_CRASH_WITH"); tok != "" {
		fmt.Fprintf(os.Stderr, "starting\nfatal: the token %s was refused\n", tok)
		os.Exit(3)
	}
	note := func(format string, args ...any) {
		if events == "" {
			return
		}
		f, err := os.OpenFile(events, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o600)
		if err != nil {
			return
		}
		fmt.Fprintf(f, format+"\n", args...)
		f.Close()
	}
	w := bufio.NewWriter(out)
	write := func(line string) {
		w.WriteString(line + "\n")
		w.Flush()
	}
	version := 1
	sc := bufio.NewScanner(in)
	sc.Buffer(make([]byte, 64<<10), 16<<20)
	for sc.Scan() {
		var msg struct {
			ID     json.RawMessage `json:"id"`
			Method string          `json:"method"`
			Params struct {
				Name      string          `json:"name"`
				URI       string          `json:"uri"`
				Cursor    string          `json:"cursor"`
				Arguments json.RawMessage `json:"arguments"`
				Meta      struct {
					ProgressToken json.RawMessage `json:"progressToken"`
				} `json:"_meta"`
				RequestID json.RawMessage `json:"requestId"`
				Reason    string          `json:"reason"`
			} `json:"params"`
		}
		if err := json.Unmarshal(sc.Bytes(), &msg); err != nil {
			continue
		}
		id, p := string(msg.ID), msg.Params
		reply := func(result string) { write(`{"jsonrpc":"2.0","id":` + id + `,"result":` + result + `}`) }
		replyErr := func(code int, message string) {
			write(fmt.Sprintf(`{"jsonrpc":"2.0","id":%s,"error":{"code":%d,"message":%q}}`, id, code, message))
		}
		switch msg.Method {
		case "initialize":
			reply(`{"protocolVersion":"2025-06-18","capabilities":{"tools":{"listChanged":true},"resources":{"listChanged":true},"prompts":{"listChanged":true}},"serverInfo":{"name":"raw","version":"1"}}`)
		case "notifications/initialized":
		case "ping":
			reply(`{}`)
		case "notifications/cancelled":
			note("cancelled %s %s", p.RequestID, p.Reason)
		case "tools/list":
			note("tools/list %q", p.Cursor)
			items, next := page(rawTools(version), p.Cursor, rawToolPage)
			reply(`{"tools":` + items + next + `}`)
		case "resources/list":
			note("resources/list %q", p.Cursor)
			items, next := page(rawResources(), p.Cursor, rawResourcePage)
			reply(`{"resources":` + items + next + `}`)
		case "resources/templates/list":
			reply(`{"resourceTemplates":` + rawTemplates + `}`)
		case "resources/read":
			uri, _ := json.Marshal(p.URI)
			reply(`{"contents":[{"uri":` + string(uri) + `,"text":"content of ` + strings.Trim(string(uri), `"`) + `", "x-extra":true}]}`)
		case "prompts/list":
			note("prompts/list %q", p.Cursor)
			items, next := page(rawPrompts(), p.Cursor, rawPromptPage)
			reply(`{"prompts":` + items + next + `}`)
		case "prompts/get":
			var args map[string]string
			_ = json.Unmarshal(p.Arguments, &args)
			text, _ := json.Marshal(fmt.Sprintf("hello %s (%s)", args["who"], args["tone"]))
			reply(`{"description":"greeting","messages":[{"role":"user","content":{"type":"text","text":` + string(text) + `}}]}`)
		case "tools/call":
			switch p.Name {
			case "echo":
				text, _ := json.Marshal(string(p.Arguments))
				reply(`{"content":[{"type":"text","text":` + string(text) + `,"x-extra":1}],  "x-result-extra":{"a":[1, 2.50]}}`)
			case "progress":
				tok := string(p.Meta.ProgressToken)
				note("progress token %s", tok)
				write(`{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":` + tok + `,"progress":1,"total":2,"message":"half"}}`)
				write(`{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":` + tok + `,"progress":2}}`)
				reply(`{"content":[{"type":"text","text":"done"}]}`)
			case "slow":
				note("slow %s", id) // no answer: the caller gives up
			case "fail":
				reply(`{"content":[{"type":"text","text":"no such thing"}],"isError":true}`)
			case "rpcerror":
				replyErr(-32000, "backend exploded")
			case "mutate":
				version++
				reply(`{"content":[]}`)
				write(`{"jsonrpc":"2.0","method":"notifications/tools/list_changed"}`)
			case "structured":
				reply(`{"content":[{"type":"text","text":"{\"n\":1}"}],"structuredContent":{"n":1}}`)
			case "oddcontent":
				reply(`{"content":[{"type":"text","text":"a"},{"type":"x-hologram","text":"b"}]}`)
			case "notresult":
				reply(`["not", "a", "result"]`)
			case "badimage":
				reply(`{"content":[{"type":"image","mimeType":"image/png","data":"<script>not base64!"}]}`)
			case "shadowerr":
				reply(`{"content":[{"type":"text","text":"the transfer failed"}],"isError":true,"ISERROR":false}`)
			case "speltok":
				reply(`{"content":[{"type":"text","text":"fine"}],"IsError":true}`)
			default:
				reply(`{"content":[{"type":"text","text":"ok"}]}`)
			}
		default:
			if id != "" {
				replyErr(-32601, "Method not found")
			}
		}
	}
}
