package cliexec_test

// The fake tool: the test binary re-executes itself as a command-line tool
// when toolEnv is set (the fork-exec pattern of the go-sdk's
// mcp/cmd_test.go), so the tests run real processes without depending on
// what the machine has installed. Its first argument picks what it does.

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

const toolEnv = "CLIEXEC_TEST_TOOL"

func TestMain(m *testing.M) {
	if os.Getenv(toolEnv) == "1" {
		os.Exit(fakeTool(os.Args[1:]))
	}
	os.Exit(m.Run())
}

// fakeTool runs one mode and returns the exit status:
//
//	argv ARGS…            print {"argv": ARGS} as JSON
//	print TEXT            print TEXT exactly
//	badutf8               print text with invalid UTF-8
//	env VAR               print whether VAR is set, its length and SHA-256 (never the value)
//	leak VAR              print VAR's value inside JSON, as a careless tool would
//	fail CODE VAR N       write N bytes of noise then VAR's value and a credential to stderr, exit CODE
//	big N                 print N bytes
//	flood                 print until stopped
//	sleep [ignore]        sleep for an hour (ignoring SIGTERM with "ignore")
//	spawn PIDFILE [ignore] [exit]
//	                      start `sleep ignore` as a child sharing stdout, write its pid,
//	                      then sleep (or, with "exit", print JSON and exit 0)
//	environ               print the environment
func fakeTool(args []string) int {
	if len(args) == 0 {
		fmt.Fprintln(os.Stderr, "fake tool: no mode")
		return 2
	}
	arg := func(i int) string {
		if i < len(args) {
			return args[i]
		}
		return ""
	}
	switch args[0] {
	case "argv":
		b, _ := json.Marshal(map[string]any{"argv": args[1:]})
		os.Stdout.Write(b)
	case "print":
		os.Stdout.WriteString(arg(1))
	case "badutf8":
		os.Stdout.Write([]byte("ok \xff\xfe done"))
	case "env":
		v, set := os.LookupEnv(arg(1))
		sum := sha256.Sum256([]byte(v))
		b, _ := json.Marshal(map[string]any{"set": set, "len": len(v), "sha256": hex.EncodeToString(sum[:])})
		os.Stdout.Write(b)
	case "leak":
		v := os.Getenv(arg(1))
		b, _ := json.Marshal(map[string]any{"token": v, "note": "using " + v, v: "as a key"})
		os.Stdout.Write(b)
	case "fail":
		code, _ := strconv.Atoi(arg(1))
		n, _ := strconv.Atoi(arg(3))
		// Multi-byte runes, so that the excerpt's cut lands inside one.
		noise := strings.Repeat("é", n/2+1)[:n]
		fmt.Fprintf(os.Stderr, "%s\nerror: token %s rejected (key plx_live_AbC-12_x, pat plx_agent_zz)\n", noise, os.Getenv(arg(2)))
		return code
	case "big":
		n, _ := strconv.Atoi(arg(1))
		os.Stdout.WriteString(strings.Repeat("y", n))
	case "flood":
		chunk := []byte(strings.Repeat("x", 32<<10))
		for {
			if _, err := os.Stdout.Write(chunk); err != nil {
				return 1
			}
		}
	case "sleep":
		if arg(1) == "ignore" {
			signal.Ignore(syscall.SIGTERM)
		}
		time.Sleep(time.Hour)
	case "spawn":
		if arg(2) == "ignore" {
			signal.Ignore(syscall.SIGTERM)
		}
		self, err := os.Executable()
		if err != nil {
			return 1
		}
		gc := exec.Command(self, "sleep", "ignore")
		gc.Stdout, gc.Stderr = os.Stdout, os.Stderr // holds the tool's pipes open
		if err := gc.Start(); err != nil {
			return 1
		}
		tmp := arg(1) + ".tmp"
		if os.WriteFile(tmp, []byte(strconv.Itoa(gc.Process.Pid)), 0o600) != nil || os.Rename(tmp, arg(1)) != nil {
			return 1
		}
		if arg(3) == "exit" {
			os.Stdout.WriteString(`{"spawned":true}`)
			return 0
		}
		time.Sleep(time.Hour)
	case "environ":
		b, _ := json.Marshal(map[string]any{"vars": os.Environ()})
		os.Stdout.Write(b)
	default:
		fmt.Fprintf(os.Stderr, "fake tool: unknown mode %q\n", args[0])
		return 2
	}
	return 0
}
