package stdio_test

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// The test binary is also the tool: TestMain runs fakeTool instead of the
// tests when toolEnv is set, so every test talks to a real process.
const toolEnv = "PLEXUS_STDIO_TEST_TOOL"

func TestMain(m *testing.M) {
	switch os.Getenv(toolEnv) {
	case "":
		os.Exit(m.Run())
	case "sleeper":
		time.Sleep(time.Hour)
		os.Exit(0)
	default:
		fakeTool(os.Args[1:])
		os.Exit(0)
	}
}

// fakeTool serves NDJSON on stdin/stdout until end-of-file, each request
// in its own goroutine, so slow requests are answered after fast ones.
// With --stubborn it ignores SIGTERM and end-of-file.
//
// Methods: echo (the method and params back), pid, sleep {ms}, fail
// {message, code, raw}, crash (exit 3 after a line on stderr), env {name},
// junk (a non-JSON line and an unknown id before the answer), big {n} (a
// result string of n bytes), spawn (starts a child in the group, returns
// its pid). Anything else is answered with an error.
func fakeTool(args []string) {
	stubborn := len(args) > 0 && args[0] == "--stubborn"
	if stubborn {
		signal.Ignore(syscall.SIGTERM)
	}
	var mu sync.Mutex
	out := bufio.NewWriter(os.Stdout)
	send := func(lines ...string) {
		mu.Lock()
		defer mu.Unlock()
		for _, l := range lines {
			out.WriteString(l)
			out.WriteByte('\n')
		}
		out.Flush()
	}
	answer := func(id string, result any) {
		b, _ := json.Marshal(map[string]any{"id": id, "result": result})
		send(string(b))
	}
	sc := bufio.NewScanner(os.Stdin)
	sc.Buffer(nil, 8<<20)
	for sc.Scan() {
		var req struct {
			ID     string         `json:"id"`
			Method string         `json:"method"`
			Params map[string]any `json:"params"`
		}
		if err := json.Unmarshal(sc.Bytes(), &req); err != nil {
			fmt.Fprintln(os.Stderr, "bad request:", err)
			continue
		}
		go func() {
			p := req.Params
			switch req.Method {
			case "pid":
				answer(req.ID, os.Getpid())
			case "sleep":
				time.Sleep(time.Duration(p["ms"].(float64)) * time.Millisecond)
				answer(req.ID, map[string]any{"slept": p["ms"]})
			case "fail":
				if raw, ok := p["raw"].(string); ok {
					send(fmt.Sprintf(`{"id":%q,"error":%s}`, req.ID, raw))
					return
				}
				b, _ := json.Marshal(map[string]any{"id": req.ID, "error": map[string]any{"message": p["message"], "code": p["code"]}})
				send(string(b))
			case "crash":
				fmt.Fprintln(os.Stderr, "fake tool: crashing as asked")
				os.Exit(3)
			case "env":
				answer(req.ID, map[string]any{"value": os.Getenv(p["name"].(string))})
			case "junk":
				send("this is not json "+req.ID, `{"id":"nobody-waits-for-this","result":"stray"}`, `[1,2,3]`, "")
				answer(req.ID, "after junk")
			case "big":
				answer(req.ID, strings.Repeat("x", int(p["n"].(float64))))
			case "spawn":
				cmd := exec.Command(os.Args[0])
				cmd.Env = append(os.Environ(), toolEnv+"=sleeper")
				if err := cmd.Start(); err != nil {
					answer(req.ID, err.Error())
					return
				}
				answer(req.ID, cmd.Process.Pid)
			default:
				if req.Method == "echo" || strings.HasSuffix(req.Method, ".echo") {
					answer(req.ID, map[string]any{"method": req.Method, "params": p})
					return
				}
				b, _ := json.Marshal(map[string]any{"id": req.ID, "error": map[string]any{"message": "unknown method " + req.Method}})
				send(string(b))
			}
		}()
	}
	if stubborn {
		time.Sleep(time.Hour)
	}
}
