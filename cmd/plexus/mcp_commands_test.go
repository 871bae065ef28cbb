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
		{[]string{"mcp", "add", "gh", "--url", "https://api.githubcopilot.com/mcp/", "--oauth-client-id", "c", "--oauth-client-secret", "hunter2-literal"},
			exitUsage, "oauth.clientSecret must name a secret, not hold a value: store it with plexus secrets set", []string{"rel", "web"}, ""},
		{[]string{"mcp", "add", "gh", "--url", "https://api.githubcopilot.com/mcp/", "--oauth-grant", "client_credentials"},
			exitUsage, "needs clientId and one of clientSecret or privateKey", []string{"rel", "web"}, ""},
		{[]string{"mcp", "add", "gh", "--url", "https://api.githubcopilot.com/mcp/", "--oauth-client-secret", "${secret:gh-oauth}"},
			exitError, "plexus secrets set gh-oauth", []string{"rel", "web"}, ""},
		{[]string{"mcp", "add", "fs2", "--oauth-client-id", "c", "--", "srv"}, exitUsage, `only a "url" server`, []string{"rel", "web"}, ""},
		{[]string{"mcp", "add", "gh", "--url", "https://api.githubcopilot.com/mcp/", "--oauth-client-id", "Ov23li", "--oauth-scopes", "repo read:org",
			"--oauth-callback-port", "8976", "--oauth-client-metadata-url", "https://me.example/plexus.json",
			"--oauth-auth-server-metadata-url", "https://github.com/.well-known/oauth-authorization-server"},
			0, "Added", []string{"gh", "rel", "web"}, `"scopes": "repo read:org"`},
		{[]string{"mcp", "remove", "gh"}, 0, "Its sign-in tokens are deleted", []string{"rel", "web"}, ""},
	}
	// gh's stored sign-in, which removing gh deletes (with no daemon, unrevoked).
	tokens := filepath.Join(home, "secrets", "oauth.gh")
	if err := os.MkdirAll(filepath.Dir(tokens), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(tokens, []byte(`{"access":"x"}`+"\n"), 0o600); err != nil {
		t.Fatal(err)
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
		if b, _ := os.ReadFile(path); strings.Contains(string(b), "hunter2") {
			t.Fatalf("%v: mcp.json holds a refused literal secret", s.args)
		}
	}
	if _, err := os.Stat(tokens); !os.IsNotExist(err) {
		t.Errorf("mcp remove left gh's stored sign-in: %v", err)
	}
}

// TestMCPAddOAuthRoundTrip: every --oauth-* flag lands in mcp.json's
// "oauth" object and reads back the same.
func TestMCPAddOAuthRoundTrip(t *testing.T) {
	home := t.TempDir()
	argv := []string{"plexus", "--home", home, "--addr", closedAddr(t), "mcp", "add", "gh", "--url", "https://api.githubcopilot.com/mcp/",
		"--oauth-client-id", "Ov23li", "--oauth-private-key", "${secret:gh-key}", "--oauth-scopes", "repo  read:org",
		"--oauth-grant", "client_credentials", "--oauth-callback-port", "8976", "--oauth-client-metadata-url", "https://me.example/plexus.json",
		"--oauth-auth-server-metadata-url", "https://github.com/.well-known/oauth-authorization-server"}
	secrets := filepath.Join(home, "secrets")
	if err := os.MkdirAll(secrets, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(secrets, "gh-key"), []byte("pem\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	var out, errOut bytes.Buffer
	if code := run(context.Background(), argv, &out, &errOut); code != 0 {
		t.Fatalf("exit %d: %s %s", code, out.String(), errOut.String())
	}
	doc, err := mcphost.ReadFile(filepath.Join(home, "mcp.json"))
	if err != nil {
		t.Fatal(err)
	}
	s, err := doc.Server("gh")
	if err != nil {
		t.Fatal(err)
	}
	want := &mcphost.OAuth{ClientID: "Ov23li", PrivateKey: "${secret:gh-key}", Scopes: []string{"repo", "read:org"}, Grant: "client_credentials",
		CallbackPort: 8976, ClientMetadataURL: "https://me.example/plexus.json", AuthServerMetadataURL: "https://github.com/.well-known/oauth-authorization-server"}
	if diff := cmp.Diff(want, s.OAuth); diff != "" {
		t.Errorf("oauth (-want +got):\n%s", diff)
	}
}

// cmpEmpty makes a nil and an empty slice equal.
var cmpEmpty = cmp.Comparer(func(a, b []string) bool {
	return len(a) == 0 && len(b) == 0 || cmp.Equal([]string(a), []string(b))
})
