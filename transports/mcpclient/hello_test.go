package mcpclient_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/plexus-gw/plexus/transports/mcpclient"
)

// post is one message a client POSTed, as the server saw it.
type post struct {
	version   string // the MCP-Protocol-Version header
	mcpMethod string // the Mcp-Method header
	method    string // the body's method
	meta      map[string]json.RawMessage
}

func (p post) String() string {
	return fmt.Sprintf("%s [MCP-Protocol-Version %q, Mcp-Method %q, dressed %v]", p.method, p.version, p.mcpMethod, p.dressed())
}

// dressed reports whether p carries the 2026-07-28 request _meta.
func (p post) dressed() bool { return p.meta["io.modelcontextprotocol/protocolVersion"] != nil }

// wire records every POST to the handler it wraps.
type wire struct {
	mu    sync.Mutex
	posts []post
}

func (w *wire) wrap(h http.Handler) http.Handler {
	return http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost {
			body, err := io.ReadAll(r.Body)
			if err != nil {
				http.Error(rw, err.Error(), http.StatusBadRequest)
				return
			}
			r.Body = io.NopCloser(bytes.NewReader(body))
			var msg struct {
				Method string `json:"method"`
				Params struct {
					Meta map[string]json.RawMessage `json:"_meta"`
				} `json:"params"`
			}
			if json.Unmarshal(body, &msg) == nil {
				w.mu.Lock()
				w.posts = append(w.posts, post{r.Header.Get("Mcp-Protocol-Version"), r.Header.Get("Mcp-Method"), msg.Method, msg.Params.Meta})
				w.mu.Unlock()
			}
		}
		h.ServeHTTP(rw, r)
	})
}

// of is the posts of method, in order.
func (w *wire) of(method string) []post {
	w.mu.Lock()
	defer w.mu.Unlock()
	var out []post
	for _, p := range w.posts {
		if p.method == method {
			out = append(out, p)
		}
	}
	return out
}

func (w *wire) all() []post {
	w.mu.Lock()
	defer w.mu.Unlock()
	return slices.Clone(w.posts)
}

// checkDressed fails unless the first initialize went out dressed for
// 2025-11-25 (headers and _meta), the notifications/initialized after it
// (when the server took it: accepted) with Mcp-Method and no _meta, and
// nothing after the handshake at 2025-11-25 dressed: only the handshake is
// touched.
func checkDressed(t *testing.T, w *wire, accepted bool) {
	t.Helper()
	inits := w.of("initialize")
	if len(inits) == 0 {
		t.Fatalf("no initialize; posts %v", w.all())
	}
	p := inits[0]
	if p.version != "2025-11-25" || p.mcpMethod != "initialize" {
		t.Errorf("initialize headers: MCP-Protocol-Version %q, Mcp-Method %q", p.version, p.mcpMethod)
	}
	var caps map[string]map[string]any
	var info struct{ Name string }
	if err := json.Unmarshal(p.meta["io.modelcontextprotocol/clientCapabilities"], &caps); err != nil {
		t.Errorf("initialize _meta clientCapabilities: %v (%s)", err, p.meta["io.modelcontextprotocol/clientCapabilities"])
	}
	for _, c := range []string{"sampling", "elicitation", "roots"} {
		if caps[c] == nil {
			t.Errorf("initialize _meta clientCapabilities has no %s object: %v", c, caps)
		}
	}
	if err := json.Unmarshal(p.meta["io.modelcontextprotocol/clientInfo"], &info); err != nil || info.Name != "plexus" {
		t.Errorf("initialize _meta clientInfo %s", p.meta["io.modelcontextprotocol/clientInfo"])
	}
	if v := string(p.meta["io.modelcontextprotocol/protocolVersion"]); v != `"2025-11-25"` {
		t.Errorf("initialize _meta protocolVersion %s", v)
	}
	if n := w.of("notifications/initialized"); accepted && (len(n) == 0 || n[0].mcpMethod != "notifications/initialized" || n[0].meta != nil) {
		t.Errorf("notifications/initialized %v, want Mcp-Method and no _meta", n)
	}
	for _, q := range w.all() {
		if q.method != "initialize" && q.version == "2025-11-25" && q.dressed() {
			t.Errorf("%s at 2025-11-25 carries the 2026-07-28 _meta: %v", q.method, q.meta)
		}
	}
}

// TestHelloDressed: Plexus asks a url server for 2025-11-25 with the
// initialize dressed as 2026-07-28 has every request dressed (SEP-2575's
// _meta and MCP-Protocol-Version, SEP-2243's Mcp-Method). A server that
// takes it keeps 2025-11-25; one that refuses the dress (the SDK's
// stateful server refuses any _meta naming a version; an older SDK server
// refuses a version header it does not know, initialize included) is
// asked again plain and still connects; one whose refusal says it speaks
// only 2026-07-28 is connected at 2026-07-28 with no plain initialize.
func TestHelloDressed(t *testing.T) {
	for _, tc := range []struct {
		name      string
		versions  []string // the server's; all when nil
		stateless bool
		only0728  bool // a net/http front answers a 2025-11-25 initialize as the suite's request-metadata server does
		want      string
		inits     int // initialize requests sent
		retried   bool
	}{
		{name: "GoStateless", stateless: true, want: "2025-11-25", inits: 1},
		{name: "GoStateful", want: "2025-11-25", inits: 2, retried: true},
		{name: "Go20250618", versions: []string{"2025-06-18", "2025-03-26"}, want: "2025-06-18", inits: 2, retried: true},
		{name: "RefusalNames0728", versions: []string{"2026-07-28"}, stateless: true, only0728: true, want: "2026-07-28", inits: 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			failOnLeakedGoroutines(t)
			srv := greetServer(tc.versions)
			var h http.Handler = mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, &mcp.StreamableHTTPOptions{Stateless: tc.stateless})
			if tc.only0728 {
				h = refuse0728(h)
			}
			w := &wire{}
			ts := httptest.NewServer(w.wrap(h))
			t.Cleanup(ts.Close)
			c := startClient(t, "v", mcpclient.ServerConfig{URL: ts.URL}, mcpclient.Options{})
			c.waitReady(t)
			if pv := c.entry(t, "mcp.v.greet").MCP.ProtocolVersion; pv != tc.want {
				t.Errorf("protocol version %s, want %s", pv, tc.want)
			}
			if got := c.ok(t, "mcp.v.greet", map[string]any{"name": "Ada"}); !strings.Contains(firstText(t, got), "hello Ada") {
				t.Errorf("result %v", got)
			}
			checkDressed(t, w, tc.inits == 1 && !tc.only0728)
			inits := w.of("initialize")
			if len(inits) != tc.inits {
				t.Errorf("%d initialize requests, want %d: %v", len(inits), tc.inits, inits)
			}
			if tc.retried && (len(inits) < 2 || inits[1].dressed() || inits[1].version != "") {
				t.Errorf("the second initialize is not plain: %v", inits)
			}
			if d := w.of("server/discover"); tc.want != "2026-07-28" && len(d) > 0 {
				t.Errorf("a %s server was asked server/discover: %v", tc.want, d)
			}
			if logged := strings.Contains(c.logs.String(), "refused the initialize dressed"); logged != tc.retried {
				t.Errorf("retry logged %v, want %v:\n%s", logged, tc.retried, c.logs)
			}
		})
	}
}

// refuse0728 answers an initialize asking 2025-11-25 as the conformance
// suite's request-metadata server does (a 400 with SEP-2575's
// UnsupportedProtocolVersion, supported only 2026-07-28) and hands every
// other request to next.
func refuse0728(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(r.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		var msg struct {
			ID     json.RawMessage `json:"id"`
			Method string          `json:"method"`
		}
		if json.Unmarshal(body, &msg) == nil && msg.Method == "initialize" {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusBadRequest)
			fmt.Fprintf(w, `{"jsonrpc":"2.0","id":%s,"error":{"code":-32022,"message":"Unsupported protocol version","data":{"supported":["2026-07-28"],"requested":"2025-11-25"}}}`, msg.ID)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// TestHelloPlainAfterRefusal: once a server refused the dressed
// initialize, the client's reconnects ask it plain at once.
func TestHelloPlainAfterRefusal(t *testing.T) {
	failOnLeakedGoroutines(t)
	srv := greetServer(nil)
	w := &wire{}
	var mu sync.Mutex
	var sid string
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil)
	ts := httptest.NewServer(w.wrap(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		if id := r.Header.Get("Mcp-Session-Id"); id != "" {
			mu.Lock()
			sid = id
			mu.Unlock()
		}
		h.ServeHTTP(rw, r)
	})))
	t.Cleanup(ts.Close)
	c := startClient(t, "v", mcpclient.ServerConfig{URL: ts.URL}, mcpclient.Options{})
	c.waitReady(t)
	c.ok(t, "mcp.v.greet", map[string]any{"name": "Ada"})

	mu.Lock()
	req, err := http.NewRequest(http.MethodDelete, ts.URL, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Mcp-Session-Id", sid)
	mu.Unlock()
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	http.DefaultClient.CloseIdleConnections()
	eventually(t, 20*time.Second, "reconnected", func() bool { return c.c.Health(context.Background()).Restarts == 1 })
	c.ok(t, "mcp.v.greet", map[string]any{"name": "Ada"})

	inits := w.of("initialize")
	if len(inits) != 3 || !inits[0].dressed() || inits[1].dressed() || inits[2].dressed() {
		t.Errorf("initialize requests %v, want dressed, plain, then plain again", inits)
	}
}

// TestHelloDressedTypeScript: the reference server-everything over
// Streamable HTTP (the TypeScript SDK's server) takes the dressed
// initialize at 2025-11-25.
func TestHelloDressedTypeScript(t *testing.T) {
	failOnLeakedGoroutines(t)
	target := startEverythingHTTP(t)
	w := &wire{}
	proxy := httputil.NewSingleHostReverseProxy(target)
	proxy.FlushInterval = -1
	ts := httptest.NewServer(w.wrap(proxy))
	t.Cleanup(ts.Close)
	c := startClient(t, "everything", mcpclient.ServerConfig{URL: ts.URL + "/mcp"}, mcpclient.Options{})
	c.waitReady(t)
	if pv := c.entry(t, "mcp.everything.echo").MCP.ProtocolVersion; pv != "2025-11-25" {
		t.Errorf("protocol version %s, want 2025-11-25", pv)
	}
	if text := firstText(t, c.ok(t, "mcp.everything.echo", map[string]any{"message": "hi"})); text != "Echo: hi" {
		t.Errorf("echo %q", text)
	}
	checkDressed(t, w, true)
	if n := len(w.of("initialize")); n != 1 {
		t.Errorf("%d initialize requests, want 1: %v", n, w.of("initialize"))
	}
}

// startEverythingHTTP runs server-everything's Streamable HTTP server on a
// free loopback port until the test ends and returns its URL.
func startEverythingHTTP(t *testing.T) *url.URL {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	_, port, err := net.SplitHostPort(addr)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(npmServer(t, "mcp-server-everything"), "streamableHttp")
	cmd.Env = append(cmd.Environ(), "PORT="+port)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := cmd.Process.Kill(); err != nil {
			t.Errorf("stop server-everything: %v", err)
		}
		if err := cmd.Wait(); err != nil && !strings.Contains(err.Error(), "killed") {
			t.Errorf("server-everything: %v", err)
		}
	})
	eventually(t, 30*time.Second, "server-everything listens", func() bool {
		conn, err := net.Dial("tcp", addr)
		if err != nil {
			return false
		}
		return conn.Close() == nil
	})
	return &url.URL{Scheme: "http", Host: addr}
}
