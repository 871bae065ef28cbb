package e2e

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io/fs"
	"log/slog"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/plexus-gw/plexus"
	"github.com/plexus-gw/plexus/daemon"
	"github.com/plexus-gw/plexus/ipchost"
	"github.com/plexus-gw/plexus/journal"
	"github.com/plexus-gw/plexus/transports/ipc"
)

// buildGoProvider builds examples/ipc/goprovider into a temp folder.
func buildGoProvider(t *testing.T) string {
	t.Helper()
	out := filepath.Join(t.TempDir(), "goprovider")
	cmd := exec.Command("go", "build", "-o", out, "./examples/ipc/goprovider")
	cmd.Dir = ".."
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("build examples/ipc/goprovider: %v\n%s", err, b)
	}
	return out
}

// startIPCDaemon is a daemon whose providers heartbeat and restart quickly,
// logging at debug level into logs.
func startIPCDaemon(t *testing.T) (*testDaemon, *cliEnv, *syncBuffer) {
	t.Helper()
	logs := &syncBuffer{}
	td := startTestDaemon(t, daemon.Options{
		Logger: slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
		IPC: ipc.HubOptions{HeartbeatInterval: time.Second, MinBackoff: 20 * time.Millisecond,
			MaxBackoff: 200 * time.Millisecond, StopGrace: 500 * time.Millisecond},
	})
	e := &cliEnv{t: t, home: td.Home().Dir, addr: td.Addr(), agentHome: filepath.Join(t.TempDir(), "agent")}
	return td, e, logs
}

// sseFrame is one frame of a streamed /invoke.
type sseFrame struct {
	Type string
	Data string
}

// streamInvoke posts req to /invoke asking for a stream (Accept:
// text/event-stream) and hands each frame to each until it returns false
// (then the request is abandoned, as a caller that goes away) or the stream
// ends. It returns the Content-Type of the answer.
func streamInvoke(t *testing.T, td *testDaemon, tok string, req plexus.InvokeRequest, each func(sseFrame) bool) string {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	hreq, _ := http.NewRequestWithContext(ctx, http.MethodPost, td.BaseURL()+"/invoke", bytes.NewReader(mustJSON(t, req)))
	hreq.Header.Set("Content-Type", "application/json")
	hreq.Header.Set("Accept", "text/event-stream")
	hreq.Header.Set("Authorization", "Bearer "+tok)
	resp, err := http.DefaultClient.Do(hreq)
	if err != nil {
		t.Fatalf("streamed invoke: %v", err)
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	var f sseFrame
	for sc.Scan() {
		line := sc.Text()
		switch {
		case line == "":
			if f.Type != "" && !each(f) {
				return resp.Header.Get("Content-Type")
			}
			f = sseFrame{}
		case strings.HasPrefix(line, "event: "):
			f.Type = strings.TrimPrefix(line, "event: ")
		case strings.HasPrefix(line, "data: "):
			f.Data += strings.TrimPrefix(line, "data: ")
		}
	}
	return resp.Header.Get("Content-Type")
}

// ipcActivity returns the journal rows of action (a prefix when it ends in '.').
func ipcActivity(t *testing.T, td *testDaemon, action string, match func(plexus.Activity) bool) []plexus.Activity {
	t.Helper()
	var out []plexus.Activity
	for _, r := range td.activity(t, journal.Filter{Type: action}) {
		if match == nil || match(r) {
			out = append(out, r)
		}
	}
	return out
}

// waitRow waits for a journal row of action that match accepts.
func waitRow(t *testing.T, td *testDaemon, action string, match func(plexus.Activity) bool) plexus.Activity {
	t.Helper()
	var got plexus.Activity
	waitFor(t, 10*time.Second, "a "+action+" row", holds(func() bool {
		rows := ipcActivity(t, td, action, match)
		if len(rows) > 0 {
			got = rows[0]
		}
		return len(rows) > 0
	}))
	return got
}

func providerStatus(t *testing.T, e *cliEnv, id string) ipchost.Row {
	t.Helper()
	var rows []ipchost.Row
	e.jsonOut(&rows, "providers", "list", "--json")
	for _, r := range rows {
		if r.ID == id {
			return r
		}
	}
	t.Fatalf("no provider %s in providers list: %+v", id, rows)
	return ipchost.Row{}
}

// TestIPCProviders is issue #6 end to end against the real daemon: the
// owner declares the Go example provider with plexus providers add, the
// daemon launches it and it connects back over PLEXUS_HOME/run/ipc.sock;
// its tools are entries an agent is granted and invokes — streamed, with
// the chunks on the SSE answer and on the session's /events; a write tool
// pends for the owner; a caller that disconnects cancels the call in the
// provider; a provider killed is restarted; removal drops its tools. The
// journal holds each step, and the session token is nowhere.
func TestIPCProviders(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the example provider")
	}
	bin := buildGoProvider(t)
	notes := t.TempDir()
	td, e, logs := startIPCDaemon(t)

	r := e.ok("providers", "add", "demo", "--env", "NOTES_DIR="+notes, "--", bin)
	for _, want := range []string{"Plexus started: demo", "Provider demo connected", "ipc.demo.count", "ipc.demo.note.append"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("providers add: no %q in\n%s", want, r)
		}
	}
	if fi, err := os.Stat(filepath.Join(td.Home().Dir, "providers.json")); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("providers.json: %v %v, want mode 0600", fi, err)
	}
	st := providerStatus(t, e, "demo")
	if !st.Running || st.State != plexus.ProviderConnected || len(st.Tools) != 3 || st.Health.Status != plexus.HealthOK ||
		len(st.EnvNames) != 1 || st.EnvNames[0] != "NOTES_DIR" {
		t.Errorf("providers list = %+v", st)
	}
	if fi, err := os.Stat(filepath.Join(td.Home().Dir, "run", "ipc.sock")); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("socket: %v %v, want mode 0600", fi, err)
	}
	if fi, err := os.Stat(filepath.Join(td.Home().Dir, "run")); err != nil || fi.Mode().Perm() != 0o700 {
		t.Errorf("run/: %v %v, want mode 0700", fi, err)
	}
	added := waitRow(t, td, "manifest.changed", func(a plexus.Activity) bool {
		return strings.Contains(mustString(t, a.Payload), "ipc.demo.count")
	})
	_ = added
	for _, action := range []string{"provider.added", "provider.started", "provider.connected", "provider.tools_registered"} {
		waitRow(t, td, action, func(a plexus.Activity) bool { return a.Target == "demo" })
	}

	_, sid := enrolledAgent(t, td, "claude")
	events := td.openEvents(t, sid, "")
	var man plexus.ManifestResponse
	td.call(t, "GET", "/manifest", session(sid), nil, &man)
	mb := mustString(t, man)
	if !strings.Contains(mb, `"ipc.demo.note.append"`) || strings.Contains(mb, `"provider":"demo","tool"`) {
		t.Errorf("manifest: %s", mb)
	}

	t.Run("StreamedInvoke", func(t *testing.T) {
		tok := grantOK(t, td, sid, map[string]any{"ipc.demo.count": "allow"})
		var progress []plexus.InvokeProgressEvent
		var result plexus.InvokeResponse
		ct := streamInvoke(t, td, tok.Token, plexus.InvokeRequest{ID: "ipc.demo.count", Input: map[string]any{"n": 5, "interval_ms": 10}}, func(f sseFrame) bool {
			switch f.Type {
			case plexus.EventInvokeProgress:
				var p plexus.InvokeProgressEvent
				if err := json.Unmarshal([]byte(f.Data), &p); err != nil {
					t.Fatal(err)
				}
				progress = append(progress, p)
			case "result":
				if err := json.Unmarshal([]byte(f.Data), &result); err != nil {
					t.Fatal(err)
				}
			}
			return true
		})
		if !strings.HasPrefix(ct, "text/event-stream") {
			t.Errorf("Content-Type %q, want a stream", ct)
		}
		if len(progress) != 5 {
			t.Fatalf("%d progress frames, want 5: %+v", len(progress), progress)
		}
		for i, p := range progress {
			data, _ := json.Marshal(p.Data)
			if p.Seq != i+1 || p.ID != "ipc.demo.count" || p.Channel != "stdout" || string(data) != `{"text":"line `+strconv.Itoa(i+1)+`"}` || p.Done != (i == 4) {
				t.Errorf("progress %d = %+v data %s", i, p, data)
			}
		}
		if !result.OK || mustString(t, result.Output) != `{"count":5}` {
			t.Fatalf("result frame = %+v", result)
		}
		row, ok := td.auditRow(t, result.AuditID)
		if !ok || row.ActionType != "invoke.ok" || row.Target != "ipc.demo.count" || row.TraceID == "" {
			t.Errorf("audit row = %+v", row)
		}
		if strings.Contains(mustString(t, row.Payload), "line 1") {
			t.Errorf("the journal holds call output: %+v", row)
		}
		// The same chunks went live to the session's /events, with the trace.
		for i := 1; i <= 5; i++ {
			ev := eventWhere(t, events, plexus.EventInvokeProgress, func(p plexus.InvokeProgressEvent) bool { return p.Seq == i })
			if ev.TraceID != row.TraceID || ev.ID != "ipc.demo.count" {
				t.Errorf("/events progress %d = %+v", i, ev)
			}
		}

		t.Run("CallerDisconnects", func(t *testing.T) {
			frames := 0
			streamInvoke(t, td, tok.Token, plexus.InvokeRequest{ID: "ipc.demo.count", Input: map[string]any{"n": 1000, "interval_ms": 20}}, func(f sseFrame) bool {
				frames++
				return false // go away after the first chunk
			})
			if frames != 1 {
				t.Fatalf("%d frames before going away", frames)
			}
			c := waitRow(t, td, "ipc.call_canceled", func(a plexus.Activity) bool { return a.TraceID == row.TraceID })
			if c.Payload["reason"] != "caller_gone" || c.Target != "demo" {
				t.Errorf("ipc.call_canceled = %+v", c)
			}
			failed := waitRow(t, td, "invoke.failed", func(a plexus.Activity) bool {
				return a.TraceID == row.TraceID && a.Target == "ipc.demo.count"
			})
			if failed.Payload["errorCode"] != string(plexus.CodeTransportError) {
				t.Errorf("invoke.failed = %+v", failed)
			}
			waitFor(t, 5*time.Second, "the provider to drop the call", holds(func() bool { return providerStatus(t, e, "demo").Inflight == 0 }))
		})
	})

	t.Run("WriteToolPends", func(t *testing.T) {
		p := grantPending(t, td, sid, map[string]any{"ipc.demo.note.append": map[string]any{"decision": "allow", "verbs": []string{"write"}}})
		approve(t, td, p.PendingID, plexus.DecideRequest{})
		tok := approvedToken(t, td, sid, p.PendingID)
		st, resp, raw := td.invoke(t, tok.Token, plexus.InvokeRequest{ID: "ipc.demo.note.append", Input: map[string]any{"text": "buy bread"}})
		if st != http.StatusOK || !resp.OK {
			t.Fatalf("note.append: %d %s", st, raw)
		}
		if b, _ := os.ReadFile(filepath.Join(notes, "notes.md")); string(b) != "buy bread\n" {
			t.Errorf("notes.md = %q", b)
		}
		// A schema violation never reaches the provider.
		st, resp, _ = td.invoke(t, tok.Token, plexus.InvokeRequest{ID: "ipc.demo.note.append", Input: map[string]any{"txt": "x"}})
		if resp.OK || resp.Error == nil || resp.Error.Code != plexus.CodeSchemaValidationFailed {
			t.Errorf("bad input: %d %+v", st, resp.Error)
		}
	})

	t.Run("CrashAndRestart", func(t *testing.T) {
		pid := providerStatus(t, e, "demo").PID
		if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		exited := waitRow(t, td, "provider.exited", func(a plexus.Activity) bool { return a.Payload["exit"] == "signal: killed" })
		if exited.Target != "demo" {
			t.Errorf("provider.exited = %+v", exited)
		}
		waitRow(t, td, "provider.restarting", func(a plexus.Activity) bool { return a.Target == "demo" })
		down := eventWhere(t, events, plexus.EventSourceStatus, func(s plexus.SourceStatusEvent) bool { return s.Source == "ipc:demo" && !s.Available })
		if down.Reason == "" {
			t.Errorf("source_status down = %+v", down)
		}
		eventWhere(t, events, plexus.EventSourceStatus, func(s plexus.SourceStatusEvent) bool { return s.Source == "ipc:demo" && s.Available })
		waitFor(t, 10*time.Second, "the relaunch", holds(func() bool {
			s := providerStatus(t, e, "demo")
			return s.State == plexus.ProviderConnected && s.Restarts == 1 && s.PID != pid
		}))
		tok := grantOK(t, td, sid, map[string]any{"ipc.demo.echo": "allow"})
		waitFor(t, 10*time.Second, "a call after the restart", holds(func() bool {
			_, resp, _ := td.invoke(t, tok.Token, plexus.InvokeRequest{ID: "ipc.demo.echo", Input: map[string]any{"a": 1}})
			return resp.OK
		}))
	})

	t.Run("BadInputChangesNothing", func(t *testing.T) {
		path := filepath.Join(td.Home().Dir, "providers.json")
		before := mustRead(t, path)
		for _, args := range [][]string{
			{"providers", "add", "Bad", "--", "x"},
			{"providers", "add", "ok", "--restart", "sometimes", "--", "x"},
			{"providers", "add", "ok", "--env", "PLEXUS_SESSION_TOKEN=x", "--", "x"},
			{"providers", "add", "demo", "--", "x"}, // taken, no --replace
			{"providers", "remove", "nope"},
		} {
			if r := e.run(args...); r.code != exitError {
				t.Errorf("%s: exit %d, want %d", r, r.code, exitError)
			}
		}
		if after := mustRead(t, path); !bytes.Equal(before, after) {
			t.Errorf("providers.json changed:\n%s", after)
		}
		// A hand edit that breaks a rule: reload refuses, nothing stops.
		if err := os.WriteFile(path, []byte(`{"providers": {"demo": {"command": "x", "colour": "red"}}}`), 0o600); err != nil {
			t.Fatal(err)
		}
		if r := e.run("providers", "reload"); r.code != exitError || !strings.Contains(r.stderr, "colour") {
			t.Errorf("reload of a bad file: %s", r)
		}
		if s := providerStatus(t, e, "demo"); !s.Running || s.State != plexus.ProviderConnected {
			t.Errorf("demo after a refused reload = %+v", s)
		}
		if err := os.WriteFile(path, before, 0o600); err != nil {
			t.Fatal(err)
		}
		if r := e.ok("providers", "reload"); !strings.Contains(r.stdout, "already runs") {
			t.Errorf("reload of the good file: %s", r)
		}
	})

	t.Run("TokenNeverLeaks", func(t *testing.T) {
		dir := t.TempDir()
		script := filepath.Join(dir, "leak.sh")
		tokFile := filepath.Join(dir, "token")
		if err := os.WriteFile(script, []byte("#!/bin/sh\necho \"$PLEXUS_SESSION_TOKEN\" > "+tokFile+"\necho \"token $PLEXUS_SESSION_TOKEN\" >&2\nexit 1\n"), 0o700); err != nil {
			t.Fatal(err)
		}
		e.run("providers", "add", "leak", "--restart", "never", "--wait", "2s", "--", script)
		waitRow(t, td, "provider.exited", func(a plexus.Activity) bool { return a.Target == "leak" })
		tok := strings.TrimSpace(string(mustRead(t, tokFile)))
		if len(tok) < 40 {
			t.Fatalf("token %q", tok)
		}
		r := e.ok("providers", "list", "--json")
		if strings.Contains(r.stdout, tok) || strings.Contains(logs.String(), tok) {
			t.Error("the session token is in the list or the log")
		}
		e.ok("providers", "remove", "leak")
		td.stop()
		err := filepath.WalkDir(td.Home().Dir, func(p string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() {
				return err
			}
			if b, _ := os.ReadFile(p); bytes.Contains(b, []byte(tok)) {
				t.Errorf("%s holds the session token", p)
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	})
}

// TestIPCProviderRemove: removing a provider drops its entries
// (manifest_changed), stops its process, and a call is then
// unknown_capability.
func TestIPCProviderRemove(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the example provider")
	}
	bin := buildGoProvider(t)
	td, e, _ := startIPCDaemon(t)
	e.ok("providers", "add", "gone", "--", bin)
	_, sid := enrolledAgent(t, td, "claude")
	events := td.openEvents(t, sid, "")
	tok := grantOK(t, td, sid, map[string]any{"ipc.gone.echo": "allow"})
	if _, resp, raw := td.invoke(t, tok.Token, plexus.InvokeRequest{ID: "ipc.gone.echo", Input: map[string]any{}}); !resp.OK {
		t.Fatalf("echo: %s", raw)
	}
	pid := providerStatus(t, e, "gone").PID
	r := e.ok("providers", "remove", "gone")
	if !strings.Contains(r.stdout, "Plexus stopped: gone") {
		t.Errorf("%s", r)
	}
	mc := eventWhere(t, events, plexus.EventManifestChanged, func(m plexus.ManifestChangedEvent) bool {
		return m.Changed != nil && len(m.Changed.Removed) == 3
	})
	if mc.Changed.Removed[0] != "ipc.gone.count" {
		t.Errorf("manifest_changed = %+v", mc.Changed)
	}
	if err := syscall.Kill(pid, 0); err == nil {
		t.Errorf("the provider's process %d is still there", pid)
	}
	st, resp, _ := td.invoke(t, tok.Token, plexus.InvokeRequest{ID: "ipc.gone.echo", Input: map[string]any{}})
	if st != http.StatusNotFound || resp.Error == nil || resp.Error.Code != plexus.CodeUnknownCapability {
		t.Errorf("after remove: %d %+v", st, resp.Error)
	}
	waitRow(t, td, "provider.removed", func(a plexus.Activity) bool { return a.Target == "gone" })
	if r := e.ok("providers", "list"); !strings.Contains(r.stdout, "No providers") {
		t.Errorf("%s", r)
	}
}

func mustString(t *testing.T, v any) string {
	t.Helper()
	return string(mustJSON(t, v))
}

// TestIPCUnavailable: a PLEXUS_HOME too deep for a unix socket path leaves
// ipc off, not the daemon: it serves, journals ipc.unavailable, and the
// providers commands say why.
func TestIPCUnavailable(t *testing.T) {
	home := filepath.Join(t.TempDir(), strings.Repeat("h", 100))
	td := startTestDaemon(t, daemon.Options{Home: home})
	row := waitRow(t, td, "ipc.unavailable", nil)
	if !strings.Contains(mustString(t, row.Payload), "ipc") {
		t.Errorf("ipc.unavailable = %+v", row)
	}
	if st, _ := td.raw(t, http.MethodGet, "/.well-known/plexus", nil, nil); st != http.StatusOK {
		t.Errorf("the daemon does not serve: %d", st)
	}
	e := &cliEnv{t: t, home: home, addr: td.Addr(), agentHome: t.TempDir()}
	r := e.run("providers", "add", "p", "--", "/bin/true")
	if r.code != exitError || !strings.Contains(r.stderr, "not served") {
		t.Errorf("%s", r)
	}
	r = e.run("providers", "list")
	if r.code != exitOK || !strings.Contains(r.stderr, "not served") || !strings.Contains(r.stdout, "p ") {
		t.Errorf("%s", r)
	}
}
