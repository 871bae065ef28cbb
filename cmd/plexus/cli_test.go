package main

import (
	"bytes"
	"context"
	"encoding/json"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/plexus-gw/plexus"
)

// result is what one run of the command line left behind.
type result struct {
	code           int
	stdout, stderr string
}

// runCLI runs the root command with args (after "plexus") and a temp home
// holding a connection-key, against addr.
func runCLI(t *testing.T, addr string, args ...string) result {
	t.Helper()
	home := t.TempDir()
	if err := os.WriteFile(filepath.Join(home, connectionKeyFile), []byte("plx_live_test\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	argv := append([]string{"plexus", "--home", home, "--addr", addr, "--agent-home", filepath.Join(home, "agent")}, args...)
	var out, errOut bytes.Buffer
	code := run(context.Background(), argv, &out, &errOut)
	return result{code, out.String(), errOut.String()}
}

// recorder is an httptest gateway that answers each "METHOD /path" with a
// canned status and body and records the requests it got.
type recorder struct {
	srv    *httptest.Server
	routes map[string]func(w http.ResponseWriter, r *http.Request)
	bodies map[string][]byte
	auth   map[string]string
}

func newRecorder(t *testing.T) *recorder {
	t.Helper()
	rec := &recorder{routes: map[string]func(http.ResponseWriter, *http.Request){}, bodies: map[string][]byte{}, auth: map[string]string{}}
	rec.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		route := r.Method + " " + r.URL.Path
		var buf bytes.Buffer
		_, _ = buf.ReadFrom(r.Body)
		rec.bodies[route], rec.auth[route] = buf.Bytes(), r.Header.Get("Authorization")
		h, ok := rec.routes[route]
		if !ok || r.Host != rec.addr() {
			w.WriteHeader(http.StatusNotFound)
			_, _ = w.Write([]byte(`{"error":{"code":"not_found","message":"no route"}}`))
			return
		}
		h(w, r)
	}))
	t.Cleanup(rec.srv.Close)
	return rec
}

func (rec *recorder) addr() string { return rec.srv.Listener.Addr().String() }

func (rec *recorder) reply(route string, status int, body any) {
	rec.routes[route] = func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		_ = json.NewEncoder(w).Encode(body)
	}
}

func TestAgentsConnect(t *testing.T) {
	rec := newRecorder(t)
	rec.reply("POST /admin/api/agents/connect", 200, plexus.ConnectResponse{
		AgentID: "claude", Code: "plx_enroll_abc", ExpiresAt: time.Now().Add(15 * time.Minute),
	})
	res := runCLI(t, rec.addr(), "agents", "connect", "claude", "--label", "Claude Code",
		"--grant", "portal.notes.read", "--grant", "portal.notes.write=read,write", "--window", "7d")
	if res.code != exitOK {
		t.Fatalf("exit %d, stderr %s", res.code, res.stderr)
	}
	var got plexus.ConnectRequest
	if err := json.Unmarshal(rec.bodies["POST /admin/api/agents/connect"], &got); err != nil {
		t.Fatal(err)
	}
	week := &plexus.TrustWindow{Kind: plexus.Window7d}
	want := plexus.ConnectRequest{AgentID: "claude", Label: "Claude Code", Grants: []plexus.ConnectGrant{
		{CapabilityID: "portal.notes.read", TrustWindow: week},
		{CapabilityID: "portal.notes.write", Verbs: []plexus.Verb{plexus.VerbRead, plexus.VerbWrite}, TrustWindow: week},
	}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("request body (-want +got):\n%s", diff)
	}
	if a := rec.auth["POST /admin/api/agents/connect"]; a != "Bearer plx_live_test" {
		t.Errorf("Authorization = %q", a)
	}
	for _, s := range []string{"plx_enroll_abc", "plexus agent enroll plx_enroll_abc --addr " + rec.addr()} {
		if !strings.Contains(res.stdout, s) {
			t.Errorf("stdout lacks %q:\n%s", s, res.stdout)
		}
	}
}

func TestAgentCallPending(t *testing.T) {
	rec := newRecorder(t)
	exp := time.Now().Add(time.Hour)
	rec.reply("POST /link/handshake", 200, plexus.HandshakeResponse{SessionID: "sess_1", ExpiresAt: exp, Manifest: plexus.Manifest{
		SessionID: "sess_1", ExpiresAt: exp, Entries: []plexus.Entry{{ID: "notes.write", Grants: []plexus.Verb{plexus.VerbWrite}}},
	}})
	rec.reply("PUT /grants", 202, plexus.GrantPendingResponse{Status: plexus.CodeGrantPendingUser, PendingID: "pend_7",
		Pending: []string{"notes.write"}, PendingNarration: []plexus.PendingNarration{{ID: "notes.write", Summary: "agent-1 asks to write your notes"}}})

	t.Setenv("PLEXUS_ADDR", "")
	os.Unsetenv("PLEXUS_ADDR") // the agent must dial the gateway it enrolled with
	home := t.TempDir()
	agentHome := filepath.Join(home, "agent")
	if err := os.MkdirAll(agentHome, 0o700); err != nil {
		t.Fatal(err)
	}
	creds := `{"baseUrl":"http://` + rec.addr() + `","agentId":"agent-1","pat":"plx_agent_x"}`
	if err := os.WriteFile(filepath.Join(agentHome, "credentials.json"), []byte(creds), 0o600); err != nil {
		t.Fatal(err)
	}
	var out, errOut bytes.Buffer
	code := run(context.Background(), []string{"plexus", "--agent-home", agentHome, "agent", "call", "notes.write", "path=a.md", "--purpose", "save"}, &out, &errOut)
	if code != exitPending {
		t.Fatalf("exit %d, want %d; stderr %s", code, exitPending, errOut.String())
	}
	for _, s := range []string{"agent-1 asks to write your notes", "pend_7", "plexus approve pend_7"} {
		if !strings.Contains(errOut.String(), s) {
			t.Errorf("stderr lacks %q:\n%s", s, errOut.String())
		}
	}
	var gr plexus.GrantRequest
	if err := json.Unmarshal(rec.bodies["PUT /grants"], &gr); err != nil {
		t.Fatal(err)
	}
	if d := gr.Grants["notes.write"]; d.Purpose != "save" || gr.SessionID != "sess_1" {
		t.Errorf("grant request = %+v", gr)
	}
	if strings.Contains(out.String()+errOut.String(), "plx_agent_x") {
		t.Errorf("the PAT was printed")
	}
}

func TestExitStatus(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	down := l.Addr().String()
	l.Close()
	t.Run("NotRunning", func(t *testing.T) {
		res := runCLI(t, down, "status")
		want := "Plexus is not running at " + down + "; start it with: plexus serve"
		if res.code != exitError || !strings.Contains(res.stderr, want) {
			t.Errorf("exit %d, stderr %q", res.code, res.stderr)
		}
	})
	for _, args := range [][]string{
		{"bogus"},
		{"agents", "connect"},
		{"agents", "connect", "a", "--grant", "x=admin"},
		{"reject", "pend_1"},
		{"agent", "call", "x", "novalue"},
		{"status", "--nope"},
	} {
		t.Run(strings.Join(args, "_"), func(t *testing.T) {
			if res := runCLI(t, down, args...); res.code != exitUsage {
				t.Errorf("exit %d, want %d; stderr %q", res.code, exitUsage, res.stderr)
			}
		})
	}
	t.Run("ErrEnvelope", func(t *testing.T) {
		rec := newRecorder(t)
		rec.reply("GET /admin/api/pending/pend_1", 409, plexus.ErrorResponse{Error: &plexus.ErrorBody{Code: plexus.CodeConflict, Message: "already decided"}})
		res := runCLI(t, rec.addr(), "show", "pend_1")
		if res.code != exitError || !strings.Contains(res.stderr, "conflict: already decided") {
			t.Errorf("exit %d, stderr %q", res.code, res.stderr)
		}
	})
}

// `plexus pending` shows each capability's window beside it, in the order
// the gateway lists the decisions (oldest first).
func TestPendingTable(t *testing.T) {
	rec := newRecorder(t)
	exp := time.Now().Add(time.Hour)
	rec.reply("GET /admin/api/pending", 200, plexus.PendingListResponse{Pending: []plexus.Pending{
		{ID: "pend_1", Kind: plexus.PendingGrant, AgentID: "claude", State: plexus.StatePending, ExpiresAt: exp, Items: []plexus.PendingItem{
			{CapabilityID: "portal.notes.read", Verbs: []plexus.Verb{plexus.VerbRead}, TrustWindow: plexus.TrustWindow{Kind: plexus.Window7d}},
			{CapabilityID: "portal.notes.write", Verbs: []plexus.Verb{plexus.VerbWrite}, TrustWindow: plexus.TrustWindow{Kind: plexus.Window1d},
				Sensitivity: plexus.SensitivityElevated},
		}},
		{ID: "pend_2", Kind: plexus.PendingGrant, AgentID: "codex", State: plexus.StatePending, ExpiresAt: exp, Items: []plexus.PendingItem{
			{CapabilityID: "shell.run", Verbs: []plexus.Verb{plexus.VerbExecute}, TrustWindow: plexus.TrustWindow{Kind: plexus.WindowOnce}},
		}},
	}})
	res := runCLI(t, rec.addr(), "pending")
	if res.code != exitOK {
		t.Fatalf("exit %d, stderr %s", res.code, res.stderr)
	}
	lines := strings.Split(res.stdout, "\n")
	if len(lines) < 3 || !strings.HasPrefix(lines[0], "ID") {
		t.Fatalf("stdout:\n%s", res.stdout)
	}
	for i, want := range []string{
		`^pend_1\s+claude\s+portal\.notes\.read \(read\), portal\.notes\.write \(write\)\s+7d, 1d\s+elevated\s`,
		`^pend_2\s+codex\s+shell\.run \(execute\)\s+once\s`,
	} {
		if !regexp.MustCompile(want).MatchString(lines[i+1]) {
			t.Errorf("line %d = %q, want %s", i+1, lines[i+1], want)
		}
	}
}
