package main

import (
	"bytes"
	"context"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/plexus-gw/plexus/mcphost"
)

// closedAddr is a loopback address nothing listens on.
func closedAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return addr
}

func TestMCPCommandsEditTheFile(t *testing.T) {
	home := t.TempDir()
	addr := closedAddr(t)
	cli := func(args ...string) result {
		t.Helper()
		argv := append([]string{"plexus", "--home", home, "--addr", addr}, args...)
		var out, errOut bytes.Buffer
		code := run(context.Background(), argv, &out, &errOut)
		return result{code, out.String(), errOut.String()}
	}
	path := filepath.Join(home, "mcp.json")
	cwd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	steps := []struct {
		args     []string
		code     int
		out      string // substring of stdout (or stderr when code != 0)
		servers  []string
		fileText string // substring of mcp.json afterwards
	}{
		{[]string{"mcp", "list"}, 0, "No MCP servers", nil, ""},
		{[]string{"mcp", "add", "fs", "--", "npx", "-y", "@modelcontextprotocol/server-filesystem", "/tmp"}, 0, "Plexus is not running", []string{"fs"},
			`"args": [`},
		{[]string{"mcp", "add", "fs", "--", "other"}, exitError, "--replace", []string{"fs"}, "server-filesystem"},
		{[]string{"mcp", "add", "fs", "--replace", "--", "other"}, 0, "Added", []string{"fs"}, `"command": "other"`},
		{[]string{"mcp", "add", "web", "--url", "ftp://x"}, exitUsage, "http or https", []string{"fs"}, ""},
		{[]string{"mcp", "add", "web", "--url", "http://127.0.0.1:1/mcp", "--", "x"}, exitUsage, "not both", []string{"fs"}, ""},
		{[]string{"mcp", "add", "gh", "--env", "TOKEN=${secret:gh}", "--", "gh-mcp"}, exitError, "plexus secrets set gh", []string{"fs"}, ""},
		{[]string{"mcp", "add", "web", "--url", "http://127.0.0.1:1/mcp", "--header", "X-A=1"}, 0, "Added", []string{"fs", "web"}, `"X-A": "1"`},
		{[]string{"mcp", "list"}, 0, "not running", []string{"fs", "web"}, ""},
		{[]string{"mcp", "remove", "nope"}, exitError, "no server", []string{"fs", "web"}, ""},
		{[]string{"mcp", "remove", "fs"}, 0, "Removed", []string{"web"}, ""},
		{[]string{"mcp", "add", "rel", "--", "./bin/srv"}, 0, "Added", []string{"rel", "web"}, `"command": "` + cwd + `/bin/srv"`},
	}
	for _, s := range steps {
		r := cli(s.args...)
		text := r.stdout
		if s.code != 0 {
			text = r.stderr
		}
		if r.code != s.code || !strings.Contains(text, s.out) {
			t.Fatalf("%v: exit %d, stdout %q, stderr %q; want exit %d and %q", s.args, r.code, r.stdout, r.stderr, s.code, s.out)
		}
		doc, err := mcphost.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(s.servers, doc.Names(), cmpEmpty); diff != "" {
			t.Fatalf("%v: servers (-want +got):\n%s", s.args, diff)
		}
		if s.fileText != "" {
			b, _ := os.ReadFile(path)
			if !strings.Contains(string(b), s.fileText) {
				t.Fatalf("%v: mcp.json lacks %q:\n%s", s.args, s.fileText, b)
			}
		}
	}
}

// cmpEmpty makes a nil and an empty slice equal.
var cmpEmpty = cmp.Comparer(func(a, b []string) bool {
	return len(a) == 0 && len(b) == 0 || cmp.Equal([]string(a), []string(b))
})
