package ipc_test

import (
	"context"
	"crypto/subtle"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/plexus-gw/plexus/internal/plexustest"
	"github.com/plexus-gw/plexus/transports/ipc"
)

// canaryToken must never show up in anything the server reports.
const canaryToken = "tok-CANARY-5e3f9a"

const agentID = "com.example.agent"

// tokenAuth accepts the tokens it maps to providers.
type tokenAuth map[string]string

func (a tokenAuth) Authenticate(token string) (string, bool) {
	for t, p := range a {
		if subtle.ConstantTimeCompare([]byte(t), []byte(token)) == 1 {
			return p, true
		}
	}
	return "", false
}

type refusal struct {
	Reason string
	Detail map[string]any
}

type refusals struct {
	mu   sync.Mutex
	list []refusal
}

func (r *refusals) record(reason string, detail map[string]any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.list = append(r.list, refusal{reason, detail})
}

// wait returns the refusals once there is at least one, or fails.
func (r *refusals) wait(tb testing.TB) []refusal {
	tb.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) {
		r.mu.Lock()
		if len(r.list) > 0 {
			out := append([]refusal(nil), r.list...)
			r.mu.Unlock()
			return out
		}
		r.mu.Unlock()
		time.Sleep(5 * time.Millisecond)
	}
	tb.Fatal("no refusal reported")
	return nil
}

var t0 = time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC)

type testServer struct {
	srv     *ipc.Server
	path    string
	clock   *plexustest.Clock
	refused *refusals
	served  chan error
}

// shortDir is a temp folder with a path short enough for a unix socket
// (t.TempDir's can pass the ~108-byte limit).
func shortDir(tb testing.TB) string {
	tb.Helper()
	dir, err := os.MkdirTemp("", "ipc")
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { os.RemoveAll(dir) })
	return dir
}

// startServer listens on <short dir>/run/s.sock and serves until the test
// ends.
func startServer(tb testing.TB, edit func(*ipc.ServerOptions)) *testServer {
	tb.Helper()
	ts := &testServer{
		path:    filepath.Join(shortDir(tb), "run", "s.sock"),
		clock:   plexustest.NewClock(t0),
		refused: &refusals{},
		served:  make(chan error, 1),
	}
	opts := ipc.ServerOptions{
		SocketPath:  ts.path,
		Auth:        tokenAuth{canaryToken: agentID, "tok-other": "com.example.other"},
		Clock:       ts.clock.Now,
		OnRefused:   ts.refused.record,
		CoreVersion: "0.1.0",
		InstanceID:  "inst-1",
	}
	if edit != nil {
		edit(&opts)
	}
	srv, err := ipc.NewServer(opts)
	if err != nil {
		tb.Fatal(err)
	}
	if err := srv.Listen(); err != nil {
		tb.Fatal(err)
	}
	ts.srv = srv
	go func() { ts.served <- srv.Serve(context.Background()) }()
	tb.Cleanup(func() {
		srv.Close()
		// ErrServerClosed: Close came before Serve had started.
		if err := <-ts.served; err != nil && !errors.Is(err, ipc.ErrServerClosed) {
			tb.Errorf("Serve = %v", err)
		}
	})
	return ts
}

func dial(tb testing.TB, path string) net.Conn {
	tb.Helper()
	c, err := net.Dial("unix", path)
	if err != nil {
		tb.Fatal(err)
	}
	c.SetDeadline(time.Now().Add(5 * time.Second))
	tb.Cleanup(func() { c.Close() })
	return c
}

var msgSeq atomic.Int64

func send(tb testing.TB, c net.Conn, typ string, payload any) ipc.Envelope {
	tb.Helper()
	p, err := json.Marshal(payload)
	if err != nil {
		tb.Fatal(err)
	}
	env := ipc.Envelope{V: 1, Type: typ, ID: fmt.Sprintf("m-%d", msgSeq.Add(1)), TS: t0, Payload: p}
	b, err := ipc.EncodeEnvelope(env)
	if err != nil {
		tb.Fatal(err)
	}
	if err := ipc.WriteFrame(c, b, 0); err != nil {
		tb.Fatal(err)
	}
	return env
}

func recv(tb testing.TB, c net.Conn) ipc.Envelope {
	tb.Helper()
	b, err := ipc.ReadFrame(c, 0)
	if err != nil {
		tb.Fatalf("read: %v", err)
	}
	env, err := ipc.DecodeEnvelope(b)
	if err != nil {
		tb.Fatal(err)
	}
	return env
}

// expectClosed reads until the server closes the connection.
func expectClosed(tb testing.TB, c net.Conn) {
	tb.Helper()
	b, err := ipc.ReadFrame(c, 0)
	if err == nil {
		tb.Fatalf("read a frame %s, want the connection closed", b)
	}
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		tb.Fatal("connection still open")
	}
}

func hello(token, agent string, versions ...int) ipc.Hello {
	return ipc.Hello{
		SessionToken: token,
		AgentID:      agent,
		AgentVersion: "1.2.3",
		Protocol:     ipc.HelloProtocol{SupportedVersions: versions, Capabilities: []string{"tools"}},
	}
}

// handshake connects and is welcomed, returning the connection and the
// welcome.
func handshake(tb testing.TB, ts *testServer) (net.Conn, ipc.Welcome) {
	tb.Helper()
	c := dial(tb, ts.path)
	send(tb, c, ipc.TypeAgentHello, hello(canaryToken, agentID, 1))
	env := recv(tb, c)
	if env.Type != ipc.TypeCoreWelcome || env.Error != nil {
		tb.Fatalf("got %s error %+v, want core.welcome", env.Type, env.Error)
	}
	w, err := ipc.DecodePayload[ipc.Welcome](env)
	if err != nil {
		tb.Fatal(err)
	}
	return c, w
}

func TestServerWelcome(t *testing.T) {
	ts := startServer(t, func(o *ipc.ServerOptions) {
		o.HeartbeatInterval = 2 * time.Second
		o.MaxFrameBytes = 1 << 20
	})
	c := dial(t, ts.path)
	h := send(t, c, ipc.TypeAgentHello, hello(canaryToken, agentID, 1, 7))
	env := recv(t, c)
	if env.Type != ipc.TypeCoreWelcome || env.InReplyTo != h.ID || env.Error != nil {
		t.Fatalf("envelope = %+v, want core.welcome in reply to %s", env, h.ID)
	}
	if env.ID == "" || env.ID == h.ID || !env.TS.Equal(t0) {
		t.Errorf("id %q ts %v, want a fresh id and the clock's %v", env.ID, env.TS, t0)
	}
	got, err := ipc.DecodePayload[ipc.Welcome](env)
	if err != nil {
		t.Fatal(err)
	}
	if len(got.SessionID) < 20 {
		t.Errorf("session_id %q: too short to be unpredictable", got.SessionID)
	}
	want := ipc.Welcome{
		AcceptedVersion:     1,
		SessionID:           got.SessionID,
		HeartbeatIntervalMS: 2000,
		MaxFrameBytes:       1 << 20,
		Server:              ipc.ServerInfo{CoreVersion: "0.1.0", InstanceID: "inst-1"},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("welcome (-want +got):\n%s", diff)
	}
	wantSessions := []ipc.SessionInfo{{
		ID: got.SessionID, ProviderID: agentID, AgentID: agentID, AgentVersion: "1.2.3", Since: t0,
	}}
	if diff := cmp.Diff(wantSessions, ts.srv.Sessions()); diff != "" {
		t.Errorf("Sessions (-want +got):\n%s", diff)
	}
	_, w2 := handshake(t, ts)
	if w2.SessionID == got.SessionID {
		t.Error("two sessions share an id")
	}
}

func TestServerRefusesHello(t *testing.T) {
	tests := []struct {
		name       string
		hello      ipc.Hello
		wantCode   string
		wantReason string
	}{
		{"BadToken", hello("tok-wrong", agentID, 1), ipc.CodeUnauthorized, ipc.RefusedUnauthorized},
		{"NoToken", hello("", agentID, 1), ipc.CodeUnauthorized, ipc.RefusedUnauthorized},
		{"AgentIDMismatch", hello("tok-other", agentID, 1), ipc.CodeUnauthorized, ipc.RefusedUnauthorized},
		{"CanaryForAnotherAgent", hello(canaryToken, "com.example.other", 1), ipc.CodeUnauthorized, ipc.RefusedUnauthorized},
		{"NoCommonVersion", hello(canaryToken, agentID, 2, 3), ipc.CodeUnsupportedVersion, ipc.RefusedVersion},
		{"NoVersions", hello(canaryToken, agentID), ipc.CodeUnsupportedVersion, ipc.RefusedVersion},
		{"NoAgentID", hello(canaryToken, "", 1), ipc.CodeInvalidEnvelope, ipc.RefusedEnvelope},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ts := startServer(t, nil)
			c := dial(t, ts.path)
			h := send(t, c, ipc.TypeAgentHello, tt.hello)
			env := recv(t, c)
			if env.Type != ipc.TypeCoreWelcome || env.InReplyTo != h.ID {
				t.Errorf("got %s in reply to %q, want core.welcome in reply to %q", env.Type, env.InReplyTo, h.ID)
			}
			if env.Error == nil || env.Error.Code != tt.wantCode {
				t.Fatalf("error = %+v, want code %s", env.Error, tt.wantCode)
			}
			if w, _ := ipc.DecodePayload[ipc.Welcome](env); w.SessionID != "" {
				t.Errorf("refused welcome carries session_id %q", w.SessionID)
			}
			expectClosed(t, c)
			got := ts.refused.wait(t)
			if len(got) != 1 || got[0].Reason != tt.wantReason {
				t.Fatalf("refusals = %+v, want one %q", got, tt.wantReason)
			}
			if s := fmt.Sprintf("%v %+v", got, env); strings.Contains(s, canaryToken) || strings.Contains(s, "tok-") {
				t.Errorf("a token leaked into the refusal or reply: %s", s)
			}
			if n := len(ts.srv.Sessions()); n != 0 {
				t.Errorf("%d sessions, want none", n)
			}
		})
	}
}

func TestServerHelloTimeout(t *testing.T) {
	ts := startServer(t, func(o *ipc.ServerOptions) { o.HelloTimeout = 100 * time.Millisecond })
	c := dial(t, ts.path)
	start := time.Now()
	expectClosed(t, c)
	if d := time.Since(start); d < 80*time.Millisecond {
		t.Errorf("closed after %v, before the hello timeout", d)
	}
	if got := ts.refused.wait(t); got[0].Reason != ipc.RefusedHelloTimeout {
		t.Errorf("refusals = %+v, want %s", got, ipc.RefusedHelloTimeout)
	}
}

func TestServerFirstMessageNotHello(t *testing.T) {
	ts := startServer(t, nil)
	c := dial(t, ts.path)
	m := send(t, c, ipc.TypeAgentHeartbeat, ipc.Heartbeat{SessionID: "x", Status: "ok"})
	env := recv(t, c)
	if env.Type != ipc.TypeCoreError || env.InReplyTo != m.ID || env.Error == nil || env.Error.Code != ipc.CodeUnexpectedType {
		t.Fatalf("reply = %+v error %+v, want core.error %s", env, env.Error, ipc.CodeUnexpectedType)
	}
	expectClosed(t, c)
	if got := ts.refused.wait(t); got[0].Reason != ipc.RefusedNoHello || got[0].Detail["type"] != ipc.TypeAgentHeartbeat {
		t.Errorf("refusals = %+v", got)
	}
}

func TestServerOversizeFrame(t *testing.T) {
	for _, stage := range []string{"hello", "session"} {
		t.Run(stage, func(t *testing.T) {
			ts := startServer(t, func(o *ipc.ServerOptions) { o.MaxFrameBytes = 1024 })
			var c net.Conn
			if stage == "hello" {
				c = dial(t, ts.path)
			} else {
				c, _ = handshake(t, ts)
			}
			var hdr [4]byte
			binary.BigEndian.PutUint32(hdr[:], 1025)
			if _, err := c.Write(hdr[:]); err != nil {
				t.Fatal(err)
			}
			expectClosed(t, c)
			got := ts.refused.wait(t)
			want := map[string]any{"kind": "oversize", "declared": uint64(1025), "max": 1024, "stage": stage}
			if got[0].Reason != ipc.RefusedFrame {
				t.Fatalf("refusals = %+v", got)
			}
			for k, v := range want {
				if got[0].Detail[k] != v {
					t.Errorf("detail[%s] = %v, want %v", k, got[0].Detail[k], v)
				}
			}
		})
	}
}

func TestServerSession(t *testing.T) {
	ts := startServer(t, nil)
	c, w := handshake(t, ts)

	t.Run("Heartbeat", func(t *testing.T) {
		t1 := t0.Add(3 * time.Second)
		ts.clock.Set(t1)
		send(t, c, ipc.TypeAgentHeartbeat, ipc.Heartbeat{SessionID: w.SessionID, UptimeMS: 10, Status: ipc.HealthDegraded})
		// The reply to a later message proves the heartbeat was handled.
		send(t, c, "agent.frobnicate", map[string]any{})
		if env := recv(t, c); env.Error == nil || env.Error.Code != ipc.CodeUnknownType {
			t.Fatalf("reply error = %+v, want %s", env.Error, ipc.CodeUnknownType)
		}
		s := ts.srv.Sessions()
		if len(s) != 1 || !s[0].LastHeartbeat.Equal(t1) || s[0].Status != ipc.HealthDegraded || !s[0].Since.Equal(t0) {
			t.Errorf("Sessions = %+v, want LastHeartbeat %v status degraded", s, t1)
		}
	})

	replies := []struct {
		name, typ, wantCode string
		payload             any
	}{
		{"WrongSession", ipc.TypeAgentHeartbeat, ipc.CodeInvalidSession, ipc.Heartbeat{SessionID: "nope", Status: "ok"}},
		{"NotHandledYet", ipc.TypeAgentToolsRegister, ipc.CodeUnsupported, ipc.ToolsRegister{}},
		{"UnknownType", "agent.frobnicate", ipc.CodeUnknownType, map[string]any{}},
		{"SecondHello", ipc.TypeAgentHello, ipc.CodeUnexpectedType, hello(canaryToken, agentID, 1)},
		{"CoreTypeFromAgent", ipc.TypeCoreToolCall, ipc.CodeUnexpectedType, ipc.ToolCall{}},
	}
	for _, tt := range replies {
		t.Run(tt.name, func(t *testing.T) {
			m := send(t, c, tt.typ, tt.payload)
			env := recv(t, c)
			if env.Type != ipc.TypeCoreError || env.InReplyTo != m.ID || env.Error == nil || env.Error.Code != tt.wantCode {
				t.Fatalf("reply %s in reply to %q error %+v, want core.error %s to %s", env.Type, env.InReplyTo, env.Error, tt.wantCode, m.ID)
			}
		})
	}
	if n := len(ts.srv.Sessions()); n != 1 {
		t.Errorf("%d sessions after error replies, want the session kept", n)
	}
}

func TestServerSocketPermissions(t *testing.T) {
	ts := startServer(t, nil)
	fi, err := os.Stat(ts.path)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Type() != os.ModeSocket || fi.Mode().Perm() != 0o600 {
		t.Errorf("socket mode %v, want a socket 0600", fi.Mode())
	}
	di, err := os.Stat(filepath.Dir(ts.path))
	if err != nil {
		t.Fatal(err)
	}
	if di.Mode().Perm() != 0o700 {
		t.Errorf("folder mode %v, want 0700", di.Mode().Perm())
	}
}

func TestServerListen(t *testing.T) {
	t.Run("ErrOpenFolder", func(t *testing.T) {
		dir := filepath.Join(shortDir(t), "run")
		if err := os.Mkdir(dir, 0o750); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(dir, 0o750); err != nil {
			t.Fatal(err)
		}
		srv, err := ipc.NewServer(ipc.ServerOptions{SocketPath: filepath.Join(dir, "s.sock"), Auth: tokenAuth{}})
		if err != nil {
			t.Fatal(err)
		}
		if err := srv.Listen(); err == nil {
			srv.Close()
			t.Fatal("Listen in a 0750 folder succeeded")
		}
	})
	t.Run("ErrLiveSocket", func(t *testing.T) {
		ts := startServer(t, nil)
		srv, err := ipc.NewServer(ipc.ServerOptions{SocketPath: ts.path, Auth: tokenAuth{}})
		if err != nil {
			t.Fatal(err)
		}
		if err := srv.Listen(); err == nil || !strings.Contains(err.Error(), "in use") {
			srv.Close()
			t.Fatalf("second Listen = %v, want in use", err)
		}
		handshake(t, ts) // the first server is untouched
	})
	t.Run("ErrNotASocket", func(t *testing.T) {
		dir := shortDir(t)
		path := filepath.Join(dir, "s.sock")
		if err := os.WriteFile(path, []byte("keep"), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(dir, 0o700); err != nil {
			t.Fatal(err)
		}
		srv, _ := ipc.NewServer(ipc.ServerOptions{SocketPath: path, Auth: tokenAuth{}})
		if err := srv.Listen(); err == nil {
			srv.Close()
			t.Fatal("Listen over a regular file succeeded")
		}
		if b, _ := os.ReadFile(path); string(b) != "keep" {
			t.Error("the regular file was touched")
		}
	})
	t.Run("StaleSocket", func(t *testing.T) {
		dir := shortDir(t)
		if err := os.Chmod(dir, 0o700); err != nil {
			t.Fatal(err)
		}
		path := filepath.Join(dir, "s.sock")
		// A server that died: its socket file stays, nobody answers.
		dead, err := net.ListenUnix("unix", &net.UnixAddr{Name: path, Net: "unix"})
		if err != nil {
			t.Fatal(err)
		}
		dead.SetUnlinkOnClose(false)
		dead.Close()
		if _, err := os.Stat(path); err != nil {
			t.Fatalf("stale socket not left behind: %v", err)
		}
		ts := startServer(t, func(o *ipc.ServerOptions) { o.SocketPath = path })
		ts.path = path
		handshake(t, ts)
	})
}

func TestServerCloseSendsGoodbye(t *testing.T) {
	before := runtime.NumGoroutine()
	dir := shortDir(t)
	path := filepath.Join(dir, "run", "s.sock")
	srv, err := ipc.NewServer(ipc.ServerOptions{SocketPath: path, Auth: tokenAuth{canaryToken: agentID}})
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.Listen(); err != nil {
		t.Fatal(err)
	}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(context.Background()) }()
	ts := &testServer{srv: srv, path: path}

	welcomed := make([]net.Conn, 2)
	for i := range welcomed {
		welcomed[i], _ = handshake(t, ts)
	}
	pending := dial(t, path) // connected, no hello yet
	_ = pending

	if err := srv.Close(); err != nil {
		t.Fatal(err)
	}
	if err := <-served; err != nil {
		t.Errorf("Serve = %v, want nil after Close", err)
	}
	for _, c := range welcomed {
		env := recv(t, c)
		if env.Type != ipc.TypeCoreGoodbye {
			t.Fatalf("got %s, want core.goodbye", env.Type)
		}
		g, err := ipc.DecodePayload[ipc.Goodbye](env)
		if err != nil || g.Reason != ipc.GoodbyeShutdown {
			t.Errorf("goodbye = %+v, %v", g, err)
		}
		expectClosed(t, c)
	}
	expectClosed(t, pending)
	if _, err := os.Stat(path); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("socket file after Close: %v, want removed", err)
	}
	if n := len(srv.Sessions()); n != 0 {
		t.Errorf("%d sessions after Close", n)
	}
	if err := srv.Close(); err != nil {
		t.Errorf("second Close = %v", err)
	}
	for _, c := range append(welcomed, pending) {
		c.Close()
	}
	deadline := time.Now().Add(5 * time.Second)
	for runtime.NumGoroutine() > before {
		if time.Now().After(deadline) {
			buf := make([]byte, 1<<16)
			t.Fatalf("goroutines: %d before, %d after\n%s", before, runtime.NumGoroutine(), buf[:runtime.Stack(buf, true)])
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestServerContextEnd(t *testing.T) {
	path := filepath.Join(shortDir(t), "run", "s.sock")
	srv, err := ipc.NewServer(ipc.ServerOptions{SocketPath: path, Auth: tokenAuth{canaryToken: agentID}})
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.Listen(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ctx) }()
	c, _ := handshake(t, &testServer{srv: srv, path: path})
	cancel()
	if env := recv(t, c); env.Type != ipc.TypeCoreGoodbye {
		t.Errorf("got %s, want core.goodbye", env.Type)
	}
	if err := <-served; err != nil {
		t.Errorf("Serve = %v", err)
	}
	if err := srv.Serve(context.Background()); !errors.Is(err, ipc.ErrServerClosed) {
		t.Errorf("Serve after stop = %v, want ErrServerClosed", err)
	}
}

func TestNewServerErrors(t *testing.T) {
	for name, opts := range map[string]ipc.ServerOptions{
		"NoSocketPath": {Auth: tokenAuth{}},
		"NoAuth":       {SocketPath: "/tmp/x.sock"},
		"Negative":     {SocketPath: "/tmp/x.sock", Auth: tokenAuth{}, HelloTimeout: -1},
	} {
		if _, err := ipc.NewServer(opts); err == nil {
			t.Errorf("%s: NewServer succeeded", name)
		}
	}
}

func TestServerInvalidFirstEnvelope(t *testing.T) {
	ts := startServer(t, nil)
	c := dial(t, ts.path)
	if err := ipc.WriteFrame(c, []byte(`{"v":1,"type":"agent.hello","ts":"2026-11-23T12:00:00Z","payload":{}}`), 0); err != nil {
		t.Fatal(err)
	}
	env := recv(t, c)
	if env.Type != ipc.TypeCoreError || env.Error == nil || env.Error.Code != ipc.CodeInvalidEnvelope {
		t.Fatalf("reply %s error %+v, want core.error %s", env.Type, env.Error, ipc.CodeInvalidEnvelope)
	}
	expectClosed(t, c)
	got := ts.refused.wait(t)
	if got[0].Reason != ipc.RefusedEnvelope || got[0].Detail["field"] != "id" {
		t.Errorf("refusals = %+v, want envelope field id", got)
	}
}

func TestServerRefusalClipsAgentID(t *testing.T) {
	ts := startServer(t, nil)
	c := dial(t, ts.path)
	long := strings.Repeat("a", 10000)
	send(t, c, ipc.TypeAgentHello, hello("tok-wrong", long, 1))
	if env := recv(t, c); env.Error == nil || env.Error.Code != ipc.CodeUnauthorized {
		t.Fatalf("error = %+v", env.Error)
	}
	got := ts.refused.wait(t)
	if id, _ := got[0].Detail["agent_id"].(string); len(id) > 200 || !strings.HasPrefix(id, "aaaa") {
		t.Errorf("detail agent_id is %d bytes, want it clipped", len(id))
	}
}
